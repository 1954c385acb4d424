"""Host C's results as plain data (no tvm import here): ``HostParam`` (one parameter of a host
kernel's plain C wrapper), ``HostKernel`` (one group's C entry) and ``HostC`` (everything an export
needs for the host kernels).  ``hostc.host_kernels`` makes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .hostc_emit import c_type


@dataclass(frozen=True)
class HostParam:
    """One parameter of a host kernel's plain C wrapper."""

    role: str  # "input" | "const" | "output"
    tid: str  # the graph's tensor id
    shape: tuple[int, ...]
    dtype: str  # "float32", "int8", "int32", "int64", "bool", ...
    name: str  # the C parameter name: in0.., w0.., out0..

    @property
    def ctype(self) -> str:
        """The C declaration of the parameter, e.g. ``const float* in0``."""
        base = c_type(self.dtype)
        return f"{base}* {self.name}" if self.role == "output" else f"const {base}* {self.name}"


@dataclass(frozen=True)
class HostKernel:
    """One group's C entry: ``int32_t <symbol>(<params>)`` returning 0 on success."""

    index: int  # the group's position in ``groups``
    ops: tuple[int, ...]
    symbol: str  # "<prefix>_<index>"
    params: tuple[HostParam, ...]
    inlined: tuple[str, ...]  # const tensor ids folded into the C (0-d scalars)
    tvm_functions: tuple[str, ...]  # TVM's packed functions the wrapper calls, in order
    workspace_bytes: int  # pool bytes this kernel needs at its peak (64-byte aligned blocks)

    @property
    def signature(self) -> str:
        return f"int32_t {self.symbol}({', '.join(p.ctype for p in self.params)})"


@dataclass(frozen=True)
class HostC:
    """Everything the export needs for the host kernels.  ``files`` maps a path relative to the
    export directory to its text; ``include_dirs`` are the ``-I`` directories (same base)."""

    prefix: str
    kernels: tuple[HostKernel | None, ...]  # one per group; None where the group is unsupported
    unsupported: Mapping[int, str]  # op id -> why TVM cannot lower it to plain C
    source: str  # TVM's C for every supported group, with the generated-file header
    wrappers: str  # the plain C wrappers (<prefix>.c)
    header: str  # their declarations (<prefix>.h)
    runtime: str  # workspace pool and error setter (<prefix>_runtime.c)
    files: Mapping[str, str] = field(repr=False)
    include_dirs: tuple[str, ...] = ("include",)
    workspace_bytes: int = 0  # the static pool's size
    runtime_symbols: tuple[str, ...] = ()  # external symbols TVM's code calls (all in runtime)
    libs: tuple[str, ...] = ("m",)  # link with -lm: TVM's C calls expf, erff, nearbyintf, ...

    @property
    def c_files(self) -> tuple[str, ...]:
        """The translation units to compile (relative paths)."""
        return tuple(sorted(p for p in self.files if p.endswith(".c")))
