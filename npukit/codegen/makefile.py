"""The Makefile of an exported C project.

``makefile(target_name, sources)`` writes a Makefile where

- ``make`` builds ``./model`` with ``$(CC)`` (default ``cc``) and ``-std=c11 -Wall -Wextra -Werror -O2``
  (then the user's ``CPPFLAGS`` / ``CFLAGS`` / ``LDFLAGS``), so ``make CC=aarch64-linux-gnu-gcc
  LDFLAGS=-static`` cross-builds the same program;
- ``make run IN="in0.npy in1.npy" OUT=outdir`` runs it (creating ``outdir``);
- ``make target`` builds for the profile's target (``model.elf`` firmware, ``model-aarch64-linux``, ...)
  with ``$(TARGET_CC)`` and the target's flags and extra files; ``make run-target IN=... OUT=...``
  runs that under its emulator;
- ``make clean`` removes what was built.

What a build writes into the project -- ``./model``, the target's program and the stamp file
``.build`` (``BUILD_STAMP``), which every ``make`` rewrites when the compiler or flags change -- is
what ``codegen.project.build_outputs`` lists (an export over the project replaces it).

Each program is compiled and linked by one compiler command (no object files), so host and target
builds never mix objects.  The text depends only on the arguments (deterministic).
"""

from __future__ import annotations

import posixpath
import re
import textwrap
from collections.abc import Sequence

from npukit.codegen.targets import Target, get_target

NPK_CFLAGS = "-std=c11 -Wall -Wextra -Werror -O2"
BUILD_STAMP = ".build"  # every make writes the compiler and flags of the last build there
_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]+")


def _check_path(kind: str, path: str) -> str:
    if not _SAFE_PATH.fullmatch(path) or path.startswith("/") or ".." in path.split("/"):
        raise ValueError(f"makefile: {kind} {path!r} must be a relative path of letters, digits and _ . / + -")
    return path


def _target_section(t: Target, program: str, dflag: str = "") -> list[str]:
    if not t.program_suffix:
        return [
            f"# The profile's target is {t.name} ({t.description}): the host build itself.",
            "target: $(PROGRAM)",
            "",
            "run-target: run",
            "",
        ]
    make_run = []
    for part in t.run:
        if part == "{args}":
            make_run.append("$(IN) $(OUT)")
        elif "{semihosting_args}" in part:
            make_run.append(part.replace("{semihosting_args}", "$(SEMIHOSTING_ARGS)"))
        else:
            make_run.append(part.replace("{program}", "./$(TARGET_PROGRAM)"))
    lines = textwrap.wrap(f"The profile's target: {t.name} -- {t.description}. Needs the Debian packages "
                          f"{', '.join(t.packages)}.", 96, initial_indent="# ", subsequent_indent="# ")
    if "{semihosting_args}" in "".join(t.run):
        lines += [
            "# The firmware's argv is the semihosting command line (arg=PROGRAM,arg=IN...,arg=OUT): paths",
            "# relative to this directory, without spaces or commas; its files are opened on this machine",
            "# through semihosting and its exit status becomes QEMU's.",
        ]
    lines += [
        f"TARGET_CC = {t.cc}",
        f"TARGET_CFLAGS = {' '.join(t.cflags)}".rstrip(),
        f"TARGET_LDFLAGS = {' '.join(t.ldflags)}".rstrip(),
        f"TARGET_SRCS = {' '.join(t.extra_sources)}".rstrip(),
        f"TARGET_DEPS = {' '.join(f for f in t.extra_files if f not in t.extra_sources)}".rstrip(),
        f"TARGET_PROGRAM = {t.program_name(program)}",
    ]
    if "{semihosting_args}" in "".join(t.run):
        lines += [
            "empty :=",
            "space := $(empty) $(empty)",
            "comma := ,",
            "SEMIHOSTING_ARGS = $(subst $(space),,$(foreach a,$(TARGET_PROGRAM) $(IN) $(OUT),$(comma)arg=$(a)))",
        ]
    lines += [
        "",
        "target: $(TARGET_PROGRAM)",
        "",
        "$(TARGET_PROGRAM): $(SRCS) $(TARGET_SRCS) $(TARGET_DEPS) $(HEADERS) Makefile",
        f"\t$(TARGET_CC) $(NPK_CFLAGS) {dflag}$(INCLUDES) $(TARGET_CFLAGS) -o $@ $(SRCS) $(TARGET_SRCS) "
        "$(TARGET_LDFLAGS) $(LDLIBS)",
        "",
        "run-target: $(TARGET_PROGRAM) check-io",
        "\t@mkdir -p $(OUT)",
        "\t" + " ".join(make_run),
        "",
    ]
    return lines


def makefile(target_name: str | Target, sources: Sequence[str], *, program: str = "model",
             include_dirs: Sequence[str] = (), defines: Sequence[str] = ()) -> str:
    """The Makefile text for a project of ``sources`` (project-relative C files) whose profile
    targets ``target_name``.  The target's extra files (startup code, linker script) are expected
    at their ``Target.extra_files`` paths (see ``targets.runtime_files``); ``defines`` are macro
    names every build defines (``DEFINES = -DNAME ...``)."""
    t = get_target(target_name)
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", program):
        raise ValueError(f"makefile: program name {program!r} must be letters, digits and _ . -")
    srcs = [_check_path("source", s) for s in sources]
    if not srcs:
        raise ValueError("makefile: no sources")
    if len(set(srcs)) != len(srcs):
        raise ValueError(f"makefile: repeated sources in {srcs}")
    dirs = sorted({posixpath.dirname(s) or "." for s in srcs} | {"."} | {_check_path("include dir", d) for d in include_dirs})
    built = t.program_name(program)
    dflag = "$(DEFINES) " if defines else ""
    for d in defines:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", d):
            raise ValueError(f"makefile: define {d!r} must be a C identifier")
    lines = [
        "# Generated by npukit: builds and runs the model's runner.",
        "#",
        "#   make                                  build ./" + program + " with $(CC) (default cc)",
        "#   make CC=aarch64-linux-gnu-gcc LDFLAGS=-static   the same for another machine",
        "#   make run IN=\"in0.npy ...\" OUT=outdir   run ./" + program + ": reads each input .npy, writes",
        "#                                         outdir/0.npy, outdir/1.npy, ... (one per output)",
        f"#   make target                           build {built} for the profile's target, {t.name}",
        "#   make run-target IN=\"in0.npy ...\" OUT=outdir   run that build" +
        (f" under {t.emulator}" if t.emulator else ""),
        "#   make clean",
        "#",
        "# Exit status of a run: 0 ok; 1 the model reported an error; 2 bad arguments or files.",
        "",
        f"PROGRAM = {program}",
        f"SRCS = {' '.join(srcs)}",
        f"INCLUDES = {' '.join('-I' + d for d in dirs)}",
        "HEADERS = $(wildcard *.h */*.h)",
        f"NPK_CFLAGS = {NPK_CFLAGS}",
        *([f"DEFINES = {' '.join('-D' + d for d in defines)}"] if defines else []),
        "LDLIBS = -lm",
        "",
        ".PHONY: all run target run-target check-io clean",
        "",
        "all: $(PROGRAM)",
        "",
        f"# {BUILD_STAMP} holds the compiler and flags of the last build: another CC or other flags rebuild the program",
        f"BUILD = $(strip $(CC) $(NPK_CFLAGS) {dflag}$(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(LDLIBS))",
        f"ifneq ($(strip $(shell cat {BUILD_STAMP} 2>/dev/null)),$(BUILD))",
        f"$(shell echo '$(BUILD)' > {BUILD_STAMP})",
        "endif",
        "",
        f"$(PROGRAM): $(SRCS) $(HEADERS) Makefile {BUILD_STAMP}",
        f"\t$(CC) $(NPK_CFLAGS) {dflag}$(INCLUDES) $(CPPFLAGS) $(CFLAGS) -o $@ $(SRCS) $(LDFLAGS) $(LDLIBS)",
        "",
        "run: $(PROGRAM) check-io",
        "\t@mkdir -p $(OUT)",
        "\t./$(PROGRAM) $(IN) $(OUT)",
        "",
        *_target_section(t, program, dflag),
        "check-io:",
        "\t@test -n \"$(IN)\" && test -n \"$(OUT)\" || "
        "{ echo 'usage: make run IN=\"in0.npy ...\" OUT=outdir (or make run-target ...)' >&2; exit 2; }",
        "",
        "clean:",
        f"\trm -f $(PROGRAM) {BUILD_STAMP}" + ("" if not t.program_suffix else " $(TARGET_PROGRAM)"),
        "",
    ]
    return "\n".join(lines)
