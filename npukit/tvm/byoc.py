"""The accelerators' code through TVM's BYOC codegen hook: a Python codegen registered as
``relax.ext.<processor>`` and run by ``relax.transform.RunCodegen`` on the partitioned module.

For every offloaded partition function TVM hands over, the codegen asks npukit's emitter (passed
to ``partition_sources`` for the duration of the call, never kept) for the wrapper's C text and
returns it as a C source module, as an out-of-tree TVM backend would.  The texts are then read back
from the module's ``external_mods``: what the export contains is what went through TVM's hook.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable

from . import load as _load_tvm

_EMIT: contextvars.ContextVar = contextvars.ContextVar("npukit_byoc_emit", default=None)
_registered: set[str] = set()
_lock = threading.Lock()


def _codegen(functions, options, constant_names):
    tvm = _load_tvm()
    emit = _EMIT.get()
    if emit is None:  # registered by npukit, called by someone else's RunCodegen
        raise RuntimeError("npukit's BYOC codegen was called outside npukit.codegen")
    create = tvm.get_global_func("runtime.CSourceModuleCreate")
    out = []
    for f in functions:
        name = str(f.attrs["global_symbol"])
        symbol, text = emit(name)
        out.append(create(text, "c", [symbol], []))
    return out


def _register(target: str) -> None:
    with _lock:
        if target in _registered:
            return
        import tvm_ffi  # noqa: PLC0415

        tvm_ffi.register_global_func(f"relax.ext.{target}", _codegen, override=True)
        _registered.add(target)


def partition_sources(partitioned_mod, emit: Callable[[str], tuple[str, str]]) -> dict[str, str]:
    """Run ``RunCodegen`` on ``partitioned_mod``; ``emit(function name) -> (C symbol, C text)``
    gives each offloaded function's wrapper.  Returns {C symbol: text read back from TVM's
    external modules}."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    targets = sorted({str(fn.attrs["Codegen"]) for _, fn in partitioned_mod.functions.items()
                      if isinstance(fn, relax.Function) and fn.attrs is not None and "Codegen" in fn.attrs})  # fmt: skip
    if not targets:
        return {}
    for t in targets:
        _register(t)
    symbols: list[str] = []

    def recording(name: str):
        sym, text = emit(name)
        symbols.append(sym)
        return sym, text

    token = _EMIT.set(recording)
    try:
        out = relax.transform.RunCodegen()(partitioned_mod)
    finally:
        _EMIT.reset(token)
    texts = [m.inspect_source() for m in out.attrs["external_mods"]] if out.attrs and "external_mods" in out.attrs else []
    got: dict[str, str] = {}
    for m_text in texts:
        for sym in symbols:
            if f" {sym}(" in m_text and sym not in got:
                got[sym] = m_text
                break
    missing = [s for s in symbols if s not in got]
    if missing:
        raise RuntimeError(f"RunCodegen returned no module for {missing}")
    _ = tvm
    return got
