"""Folding one constant call as TVM's ``FoldConstant`` does it: legalized to one ``call_tir``, the
PrimFunc built with LLVM (kept by its structure across calls and imports) and run once
(``fold`` calls it for the ops ``npeval`` does not evaluate with numpy)."""

from __future__ import annotations

import threading

_KERNELS: dict = {}  # structural hash -> [(PrimFunc, packed function or None)]
_KERNEL_LOCK = threading.Lock()


def _static_outputs(relax, ty) -> list[tuple[tuple[int, ...], str]] | None:
    """(shape, dtype) of each output of a tensor or tuple-of-tensors type with static shapes."""
    tys = ty.fields if isinstance(ty, relax.TupleType) else [ty]
    out = []
    for t in tys:
        if not isinstance(t, relax.TensorType) or t.shape is None:
            return None
        try:
            out.append((tuple(int(d) for d in t.shape.values), str(t.dtype)))
        except (TypeError, ValueError, AttributeError):
            return None
    return out



def _kernel_fold(relax, tvm, call):
    """FoldConstant's own way: legalize to one ``call_tir``, build it with LLVM, run it once.

    Kernels are cached by the PrimFunc's structure, across calls and imports."""
    bb = relax.BlockBuilder()
    with bb.function("main", []):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(call))
        bb.emit_func_output(out)
    try:
        mod = relax.transform.LegalizeOps()(bb.get())
    except Exception:  # noqa: BLE001 - an op that does not legalize stays a call
        return None
    blocks = mod["main"].body.blocks
    calls = [b.value for blk in blocks for b in blk.bindings if isinstance(b.value, relax.Call)]
    if len(calls) != 1 or not isinstance(calls[0].op, tvm.ir.Op) or calls[0].op.name != "relax.call_tir":
        return None
    ct = calls[0]
    gvar, targs = ct.args[0], ct.args[1]
    if len(ct.args) != 2 or not isinstance(targs, relax.Tuple):
        return None
    if not all(isinstance(a, tvm.ir.GenericConst) for a in targs.fields):
        return None
    if len(ct.ty_args) != 1:
        return None
    outs = _static_outputs(relax, ct.ty_args[0])
    if outs is None:
        return None
    fn = _kernel(tvm, mod[gvar])
    if fn is None:
        return None
    import tvm.runtime  # noqa: PLC0415

    args = [a.data if getattr(a, "data", None) is not None else a.value for a in targs.fields]
    rets = [tvm.runtime.empty(shape, dtype, tvm.cpu(0)) for shape, dtype in outs]
    fn(*args, *rets)
    consts = [relax.const(r.numpy(), dtype) for r, (_, dtype) in zip(rets, outs, strict=True)]
    return relax.Tuple(consts) if isinstance(ct.ty_args[0], relax.TupleType) else consts[0]


def _kernel(tvm, pf):
    import tvm_ffi  # noqa: PLC0415 - ships with tvm

    key = tvm_ffi.structural_hash(pf)
    with _KERNEL_LOCK:
        for cached, fn in _KERNELS.get(key, ()):
            if tvm_ffi.structural_equal(cached, pf):
                return fn
    try:
        built = _build(tvm, pf.with_attr("global_symbol", "tir_function"))
        fn = built["tir_function"]
    except Exception:  # noqa: BLE001 - FoldConstant skips what does not build
        fn = None
    with _KERNEL_LOCK:
        _KERNELS.setdefault(key, []).append((pf, fn))
    return fn


def _build(tvm, pf):
    build = getattr(getattr(tvm, "tirx", None), "build", None) or tvm.tir.build
    return build(pf, target="llvm")
