"""The C sources of the kernel libraries as ``relative path -> text`` (no tvm, deterministic).

* :func:`core_files`: npukit's reference implementation (``npk_ref.h`` + ``npk_ref_*.c``), the
  same for every vendor prefix; an export with two libraries writes them once.
* :func:`library_files`: the core plus ``<prefix>.h`` / ``<prefix>.c``, the vendor-style API a
  profile's ``kernel_library = "<prefix>"`` names: ``nvdla_tensor``, ``nvdla_conv2d_params``,
  ``nvdla_conv2d(...)``, ``NVDLA_S8`` ... as typedefs, macros and thin wrappers over ``npk_*``.
* :func:`cmsis_nn_files`: ``arm_nn_types.h`` / ``arm_nnfunctions.h`` (public CMSIS-NN names) and
  npukit's reference ``npk_cmsis_nn.c``, so a project can link Arm's CMSIS-NN instead.

The prefixed API is generated from ``npk_ref.h`` itself (its one-line declarations), so it can
never fall out of step with the core.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from ...errors import NpukitError


class KernelLibraryError(NpukitError, ValueError):
    """A kernel library prefix (a profile's ``kernel_library``) that cannot name a C library."""


HERE = Path(__file__).resolve().parent

CORE_FILES = (
    "npk_ref.h",
    "npk_ref_internal.h",
    "npk_ref_core.c",
    "npk_ref_convert.c",
    "npk_ref_conv.c",
    "npk_ref_matmul.c",
    "npk_ref_elementwise.c",
    "npk_ref_pool.c",
    "npk_ref_norm.c",
    "npk_ref_move.c",
    "npk_ref_sort.c",
)
CMSIS_FILES = ("arm_nn_types.h", "arm_nnfunctions.h", "npk_cmsis_nn.c")

_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# names a prefix must not take: the core's own, CMSIS-NN's headers, and the C standard headers
# (an exported "math.h" would shadow <math.h> on the project's include path)
_RESERVED = frozenset(
    "npk arm_nnfunctions arm_nn_types arm_nn_math_types assert complex ctype errno fenv float inttypes iso646 "
    "limits locale math setjmp signal stdalign stdarg stdatomic stdbool stddef stdint stdio stdlib stdnoreturn "
    "string tgmath threads time uchar wchar wctype".split()
)


def _read(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def core_files() -> dict[str, str]:
    """npukit's reference kernel core: header and sources under stable names."""
    return {name: _read(name) for name in CORE_FILES}


def cmsis_nn_files() -> dict[str, str]:
    """The CMSIS-NN compatible API: Arm's public header names plus npukit's implementation."""
    return {name: _read(name) for name in CMSIS_FILES}


# ---------------------------------------------------------------------------------------------
# parsing npk_ref.h


_FUNC = re.compile(
    r"^(?P<ret>[A-Za-z_][A-Za-z0-9_ ]*?[ *]+)(?P<name>npk_[a-z0-9_]+)\((?P<args>[^;]*)\);\s*(?:/\*.*\*/)?$"
)
_TYPE = re.compile(r"^\} (npk_[a-z0-9_]+);$")
_CONST = re.compile(r"\b(NPK_[A-Z0-9_]+)\s*=|^#define (NPK_[A-Z0-9_]+)\b")


@lru_cache(maxsize=1)
def api() -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str, str], ...]]:
    """``(constants, types, functions)`` declared by npk_ref.h, in header order; functions are
    ``(return type, name, argument list)``."""
    consts: list[str] = []
    types: list[str] = []
    funcs: list[tuple[str, str, str]] = []
    for line in _read("npk_ref.h").splitlines():
        m = _FUNC.match(line)
        if m:
            funcs.append((m["ret"].strip(), m["name"], m["args"]))
            continue
        m = _TYPE.match(line)
        if m:
            types.append(m[1])
            continue
        for a, b in _CONST.findall(line):
            name = a or b
            if name != "NPK_REF_H" and name not in consts:
                consts.append(name)
    return tuple(consts), tuple(types), tuple(funcs)


def check_prefix(prefix: str) -> str:
    """``prefix`` if it can name a kernel library (a C identifier that clashes with nothing the
    export contains), else :class:`KernelLibraryError` (a ValueError) saying why."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise KernelLibraryError(f"kernel library prefix {prefix!r} is not a C identifier (letters, digits, '_', "
                         "starting with a letter)")  # fmt: skip
    if prefix.lower() in _RESERVED or prefix.lower().startswith(("npk_", "npukit")):
        raise KernelLibraryError(f"kernel library prefix {prefix!r} is reserved (it would clash with npukit's core, "
                         "the export's own headers (npukit_*.h), CMSIS-NN or a C standard header)")  # fmt: skip
    return prefix


def _rename(text: str, prefix: str, types: tuple[str, ...]) -> str:
    for t in types:
        text = re.sub(rf"\b{t}\b", prefix + t[len("npk") :], text)
    return text


def _decl(ret: str, prefix: str, types: tuple[str, ...]) -> str:
    """the return type as it precedes a function name ("int32_t ", "const char *")"""
    ret = _rename(ret, prefix, types)
    return ret if ret.endswith("*") else ret + " "


def _arg_names(args: str) -> list[str]:
    names = []
    for a in args.split(","):
        m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", a.strip())
        if m is None:
            raise ValueError(f"npk_ref.h: cannot read the argument {a!r}")
        names.append(m[1])
    return names


def prefix_header(prefix: str) -> str:
    """``<prefix>.h``: the library's API as names over npk_ref.h."""
    prefix = check_prefix(prefix)
    consts, types, funcs = api()
    up = prefix.upper()
    guard = f"{up}_H"
    out = [
        f"/* {prefix}.h -- the {prefix} kernel library API (generated by npukit; do not edit).",
        " *",
        " * Vendor-style names over npukit's reference implementation npk_ref.h: every",
        f" * {prefix}_X is npk_X, every {up}_X constant is NPK_X.  Conventions and every function:",
        " * docs/kernel-library.md. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        '#include "npk_ref.h"',
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
    ]
    out += [f"#define {up}{c[len('NPK') :]} {c}" for c in consts]
    out.append("")
    out += [f"typedef {t} {prefix}{t[len('npk') :]};" for t in types]
    out.append("")
    for ret, name, args in funcs:
        out.append(f"{_decl(ret, prefix, types)}{prefix}{name[len('npk') :]}({_rename(args, prefix, types)});")
    out += ["", "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(out)


def prefix_source(prefix: str) -> str:
    """``<prefix>.c``: one thin wrapper per function."""
    prefix = check_prefix(prefix)
    _, types, funcs = api()
    out = [
        f"/* {prefix}.c -- the {prefix} kernel library (generated by npukit; do not edit): thin wrappers",
        " * over npukit's reference implementation (npk_ref_*.c). */",
        f'#include "{prefix}.h"',
        "",
    ]
    for ret, name, args in funcs:
        call = f"{name}({', '.join(_arg_names(args))})"
        out.append(f"{_decl(ret, prefix, types)}{prefix}{name[len('npk') :]}({_rename(args, prefix, types)})")
        out.append(f"{{\n    return {call};\n}}\n")
    return "\n".join(out)


@lru_cache(maxsize=16)
def _library_files(prefix: str) -> tuple[tuple[str, str], ...]:
    files = dict(core_files())
    files[f"{prefix}.h"] = prefix_header(prefix)
    files[f"{prefix}.c"] = prefix_source(prefix)
    return tuple(files.items())


def library_files(prefix: str) -> dict[str, str]:
    """Every file of the ``prefix`` kernel library: the core (same names for every prefix) plus
    ``<prefix>.h`` and ``<prefix>.c``.  Raises :class:`KernelLibraryError` (a ValueError and an
    NpukitError) for a prefix that is not a usable C identifier."""
    check_prefix(prefix)
    return dict(_library_files(prefix))
