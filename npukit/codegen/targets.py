"""Build targets of exported C projects, as data: compiler, flags, extra files, how to run, what to install.

One frozen :class:`Target` per name:

- ``host``: the machine's own ``cc``, run directly;
- ``aarch64-linux``: ``aarch64-linux-gnu-gcc -static``, run by ``qemu-aarch64`` (user mode);
- ``riscv64-linux``: ``riscv64-linux-gnu-gcc -static``, run by ``qemu-riscv64`` (user mode);
- ``cortex-m7-mps2``: Cortex-M7 firmware (``arm-none-eabi-gcc``, newlib with rdimon semihosting, the
  startup file and linker script in ``runtime/cortex_m7/``), run by ``qemu-system-arm -M mps2-an500``.
  The program's arguments travel on the semihosting command line (``-semihosting-config
  arg=...``), its files are opened on the host through semihosting, and its exit status becomes
  QEMU's.  Paths must not contain spaces or commas there.

A SoC profile names its target; :func:`target_names` is the list to validate that name against.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from npukit.errors import ConfigError, NpukitError, unknown

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
# runtime files every project gets, at the project's top level
COMMON_RUNTIME = ("npk_npy.c", "npk_npy.h")


@dataclass(frozen=True)
class Requirement:
    """Something a target needs on the build machine: a program on PATH, or a file the target's
    compiler must find (``cc -print-file-name=NAME``, e.g. the C library), and its Debian package."""

    kind: str  # "program" or "file"
    name: str
    package: str


@dataclass(frozen=True)
class Target:
    """How to build and run an exported project for one instruction set / board.

    ``run`` is an argv template: ``{program}`` is the built program's path, an element that is
    exactly ``{args}`` expands to the program's arguments, and ``{semihosting_args}`` inside an
    element becomes ``,arg=PROGRAM,arg=ARG1,...`` (QEMU's semihosting command line).
    """

    name: str
    description: str
    cc: str
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    extra_files: tuple[str, ...]  # runtime files (paths relative to runtime/ and to the project)
    program_suffix: str  # `make target` builds PROGRAM + suffix ("" = the host build itself)
    run: tuple[str, ...]
    size_tool: str
    requires: tuple[Requirement, ...]
    flash_bytes: int | None = None  # the board's code/const memory, for fit_report (bare metal)
    sram_bytes: int | None = None  # the board's data RAM
    emulator: str | None = None

    @property
    def packages(self) -> tuple[str, ...]:
        """The Debian packages that provide this target's tools, sorted."""
        return tuple(sorted({r.package for r in self.requires}))

    @property
    def extra_sources(self) -> tuple[str, ...]:
        """The extra files that are compiled (the rest, like a linker script, are inputs of flags)."""
        return tuple(f for f in self.extra_files if f.endswith(".c"))

    @property
    def bare_metal(self) -> bool:
        return self.flash_bytes is not None

    def program_name(self, program: str = "model") -> str:
        return program + self.program_suffix

    def run_argv(self, program: str, args: Sequence[str]) -> list[str]:
        """The command that runs ``program`` (a path) with ``args`` on this target."""
        args = [str(a) for a in args]
        argv: list[str] = []
        for part in self.run:
            if part == "{args}":
                argv.extend(args)
            elif "{semihosting_args}" in part:
                for a in [program, *args]:
                    if not a or any(c.isspace() for c in a):
                        raise ConfigError(
                            f"target {self.name}: argument {a!r} cannot pass the semihosting command line "
                            "(empty or containing whitespace)"
                        )
                shargs = "".join(",arg=" + a.replace(",", ",,") for a in [program, *args])
                argv.append(part.replace("{semihosting_args}", shargs).replace("{program}", program))
            else:
                argv.append(part.replace("{program}", program))
        return argv


def _linux_cross(name: str, triple: str, qemu: str, libc_pkg: str, description: str) -> Target:
    return Target(
        name=name,
        description=description,
        cc=f"{triple}-gcc",
        cflags=(),
        ldflags=("-static",),
        extra_files=(),
        program_suffix=f"-{name}",
        run=(qemu, "{program}", "{args}"),
        size_tool=f"{triple}-size",
        requires=(
            Requirement("program", f"{triple}-gcc", f"gcc-{triple}"),
            Requirement("file", "libc.a", libc_pkg),
            Requirement("program", f"{triple}-size", f"binutils-{triple}"),
            Requirement("program", qemu, "qemu-user"),
        ),
        emulator=qemu,
    )


M7_CFLAGS = ("-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard", "-ffunction-sections",
             "-fdata-sections")

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            name="host",
            description="this machine, with its own C compiler",
            cc="cc",
            cflags=(),
            ldflags=(),
            extra_files=(),
            program_suffix="",
            run=("{program}", "{args}"),
            size_tool="size",
            requires=(Requirement("program", "cc", "gcc"), Requirement("program", "size", "binutils")),
        ),
        _linux_cross("aarch64-linux", "aarch64-linux-gnu", "qemu-aarch64", "libc6-dev-arm64-cross",
                     "64-bit Arm Linux (static), run under qemu-aarch64"),
        _linux_cross("riscv64-linux", "riscv64-linux-gnu", "qemu-riscv64", "libc6-dev-riscv64-cross",
                     "64-bit RISC-V Linux (static), run under qemu-riscv64"),
        Target(
            name="cortex-m7-mps2",
            description="Cortex-M7 firmware for the Arm MPS2 AN500 board (newlib, semihosting), "
            "run under qemu-system-arm -M mps2-an500",
            cc="arm-none-eabi-gcc",
            cflags=M7_CFLAGS,
            ldflags=("--specs=rdimon.specs", "-T", "cortex_m7/mps2_an500.ld", "-Wl,--gc-sections"),
            extra_files=("cortex_m7/startup_cm7.c", "cortex_m7/mps2_an500.ld"),
            program_suffix=".elf",
            run=("qemu-system-arm", "-M", "mps2-an500", "-nographic",
                 "-semihosting-config", "enable=on,target=native{semihosting_args}", "-kernel", "{program}"),
            size_tool="arm-none-eabi-size",
            requires=(
                Requirement("program", "arm-none-eabi-gcc", "gcc-arm-none-eabi"),
                Requirement("file", "rdimon.specs", "libnewlib-arm-none-eabi"),
                Requirement("program", "arm-none-eabi-size", "binutils-arm-none-eabi"),
                Requirement("program", "qemu-system-arm", "qemu-system-arm"),
            ),
            flash_bytes=4 * 1024 * 1024,
            sram_bytes=4 * 1024 * 1024,
            emulator="qemu-system-arm",
        ),
    )
}


def target_names() -> tuple[str, ...]:
    """The valid target names, sorted (what a profile's target field is checked against)."""
    return tuple(sorted(TARGETS))


def get_target(name: str | Target) -> Target:
    """The Target called ``name``; an unknown name raises ConfigError listing the valid ones."""
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except (KeyError, TypeError):
        raise unknown("target", name, TARGETS) from None


def _compiler_finds(target: Target, filename: str) -> bool:
    """Whether the target's compiler (with its flags, hence its multilib) finds ``filename``."""
    try:
        out = subprocess.run([target.cc, *target.cflags, f"-print-file-name={filename}"],
                             capture_output=True, text=True, timeout=30, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return out != filename and Path(out).is_file()


def available(target: str | Target) -> tuple[bool, str]:
    """``(True, "")`` when every tool and library the target needs is installed, else ``(False,
    reason)`` naming each missing one and its Debian package."""
    t = get_target(target)
    missing = []
    for req in t.requires:
        if req.kind == "program":
            ok = shutil.which(req.name) is not None
        else:
            ok = shutil.which(t.cc) is not None and _compiler_finds(t, req.name)
        if not ok:
            what = req.name if req.kind == "program" else f"{req.name} for {t.cc}"
            missing.append(f"{what} (Debian package {req.package})")
    if missing:
        return False, f"target {t.name}: missing " + ", ".join(missing)
    return True, ""


def runtime_files(target: str | Target) -> dict[str, str]:
    """The runtime files a project for ``target`` needs: project-relative path -> text, sorted."""
    t = get_target(target)
    paths = sorted({*COMMON_RUNTIME, *t.extra_files})
    return {p: (RUNTIME_DIR / p).read_text(encoding="utf-8") for p in paths}


def check_target(name: object, where: str = "target", error: type[NpukitError] = ConfigError) -> str:
    """Validate a target name from a profile or config: returns it, or raises ``error`` (e.g.
    ProfileError) naming ``where`` (e.g. ``"soc.toml: target"``) and the valid names."""
    if not isinstance(name, str) or name not in TARGETS:
        raise error(f"{where}: unknown target {name!r}; valid targets: {', '.join(target_names())}")
    return name
