"""Constant folding of an imported ``main`` without compiling a kernel per constant subgraph.

TVM's ``FoldConstant`` legalizes every call whose tensor arguments are all constants and compiles
the resulting PrimFunc with LLVM to run it once: a torch-exported transformer has hundreds of such
calls (weight transposes, relative-position-bias gathers) and spends most of its import compiling.
This pass keeps FoldConstant's rules (what folds and what does not) and its results, byte for
byte, but evaluates the common ops with numpy (``npeval``): data movement, exact elementwise
arithmetic, casts, comparisons, dequantize.  Any other op is folded as FoldConstant would, by
legalizing it and running the kernel, with kernels cached by structure across calls and imports
(``fold_kernels``).
Two rules go beyond FoldConstant: an integer ``arange`` folds (FoldConstant keeps the call, because
LegalizeOps makes it a constant by itself; left as an op it has nothing to run in generated code,
and torch's reflect pad reads one), and so does a field of a tuple of constants (FoldConstant keeps
``parts = split(w); parts[0]`` as bindings, so what reads a part stayed an op: the transposes of a
``MultiheadAttention``'s in-projection weight, which torch.export splits into q / k / v, ran as ops
where ONNX's exporter wrote the transposed weights).

The folded function is rebuilt with the raw function's own parameters; ``origin`` maps each of its
binding vars back to the raw binding it came from, so nothing downstream has to trust a name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import load as _load_tvm
from . import npeval
from .fold_kernels import _kernel_fold, _static_outputs

_MAX_FOLD_BYTES = 1 << 30  # a folded constant larger than this stays an op (refused later as too big)


@dataclass
class Folded:
    func: Any  # relax.Function: one dataflow block, constants folded, unused bindings removed
    origin: dict  # var of ``func`` -> the raw binding's var it came from
    counts: dict  # "numpy" / "kernel" / "kept" -> number of calls
    derived: dict = None  # constant made of one other (a transposed weight) -> the constant it came from


def fold(raw, progress=None) -> Folded:
    """Fold ``raw`` (a Relax function) the way ``relax.transform.FoldConstant`` does."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    bindings = [b for blk in raw.body.blocks for b in blk.bindings]
    consts: dict = {}  # raw var -> Constant / ShapeExpr it was folded to
    tuples: dict = {}  # raw var -> the tuple of constants it was folded to (kept as a binding)
    derived: dict = {}  # folded constant -> the one tensor constant it was computed from
    counts = {"numpy": 0, "kernel": 0, "kept": 0}
    scratch = relax.BlockBuilder()

    def sub(x, in_call: bool):
        if isinstance(x, relax.Var):
            c = consts.get(x)
            if c is None:
                return x
            if isinstance(c, relax.ShapeExpr) and not in_call:
                return x
            return c
        if isinstance(x, relax.Tuple):
            return relax.Tuple([sub(y, in_call) for y in x.fields])
        return x

    # pass 1: what folds (FoldConstant's rules), in binding order
    values: list = []
    for k, b in enumerate(bindings):
        if progress is not None:
            progress(k)
        v = b.value
        if isinstance(b, relax.MatchCast):
            values.append(("match_cast", sub(v, False), b.ty))
            continue
        if isinstance(v, relax.Var):
            target = consts.get(v)
            if target is not None and not isinstance(target, relax.ShapeExpr):
                consts[b.var] = target
            if v in tuples:
                tuples[b.var] = tuples[v]
            values.append(("expr", sub(v, False)))
            continue
        if isinstance(v, relax.TupleGetItem) and isinstance(v.tuple_value, relax.Var) and v.tuple_value in tuples:
            part = tuples[v.tuple_value].fields[v.index]
            if isinstance(part, tvm.ir.GenericConst):  # (beyond FoldConstant: see the docstring)
                consts[b.var] = part
                values.append(("expr", part))
                continue
        if isinstance(v, tvm.ir.GenericConst):
            consts[b.var] = v
            values.append(("expr", v))
            continue
        if isinstance(v, relax.ShapeExpr):
            consts[b.var] = v
            values.append(("expr", v))
            continue
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
            call = relax.Call(v.op, [sub(a, True) for a in v.args], v.attrs, v.ty_args, v.span)
            try:
                c = _fold_call(relax, tvm, scratch, call, counts)
            except Exception:  # noqa: BLE001 - what cannot be evaluated stays a call (and is judged later)
                c = None
            if isinstance(c, relax.Tuple):  # a tuple of constants stays a binding, as in FoldConstant
                values.append(("expr", c))
                tuples[b.var] = c
                srcs = [a for a in call.args if isinstance(a, tvm.ir.GenericConst) and isinstance(a.ty, relax.TensorType)]
                if len(srcs) == 1:  # the parts of one weight (a MultiheadAttention's in_proj_weight split)
                    for part in c.fields:
                        if isinstance(part, tvm.ir.GenericConst):
                            derived[part] = derived.get(srcs[0], srcs[0])
                continue
            if c is not None:
                consts[b.var] = c
                values.append(("expr", c))
                src = _source_constant(relax, tvm, call)
                if src is not None and isinstance(c, tvm.ir.GenericConst):
                    derived[c] = derived.get(src, src)
                continue
            values.append(("expr", call))
            continue
        values.append(("expr", sub(v, False)))

    # pass 2: liveness from the output (FoldConstant ends with RemoveAllUnused)
    out = sub(raw.body.body, False)
    index = {b.var: k for k, b in enumerate(bindings)}
    live = [False] * len(bindings)
    work = _free(relax, out)
    while work:
        var = work.pop()
        k = index.get(var)
        if k is None or live[k]:
            continue
        live[k] = True
        if consts.get(var) is not None and not isinstance(consts[var], relax.ShapeExpr):
            continue  # uses see the constant
        work.extend(_free(relax, values[k][1]))

    # pass 3: rebuild with the raw params, one dataflow block
    bb = relax.BlockBuilder()
    mapping: dict = {}
    origin: dict = {}

    def m(x):
        if isinstance(x, relax.Var):
            return mapping.get(x, x)
        if isinstance(x, relax.Tuple):
            return relax.Tuple([m(y) for y in x.fields])
        if isinstance(x, relax.Call):
            return relax.Call(x.op, [m(a) for a in x.args], x.attrs, x.ty_args, x.span)
        if isinstance(x, relax.TupleGetItem):
            return relax.TupleGetItem(m(x.tuple_value), x.index)
        return x

    with bb.function("main", list(raw.params)):
        with bb.dataflow():
            for k, b in enumerate(bindings):
                if not live[k]:
                    continue
                c = consts.get(b.var)
                if c is not None and not isinstance(c, relax.ShapeExpr):
                    mapping[b.var] = c
                    continue
                val = values[k]
                if val[0] == "match_cast":  # the normaliser binds a nested call first, as FoldConstant's does
                    inner = m(val[1])
                    if isinstance(inner, (relax.Call, relax.Tuple, relax.TupleGetItem)):
                        inner = bb.emit(inner)
                    nv = bb.match_cast(inner, val[2])
                elif isinstance(val[1], relax.Var):
                    mapping[b.var] = m(val[1])
                    continue
                elif isinstance(b.var, relax.DataflowVar):
                    nv = bb.emit(m(val[1]))
                else:  # the function's output, as the raw function had it
                    nv = bb.emit_output(m(val[1]))
                mapping[b.var] = nv
                origin[nv] = b.var
                if isinstance(val[1], relax.Call):
                    counts["kept"] += 1
            result = m(out)
            if any(isinstance(v, relax.DataflowVar) for v in _free(relax, result)):
                result = bb.emit_output(result)
        gv = bb.emit_func_output(result)
    func = bb.get()[gv]
    if raw.attrs is not None:
        for key, value in raw.attrs.items():
            func = func.with_attr(key, value)
    return Folded(func, origin, counts, derived)


_QUANT_OPS = frozenset({"relax.dequantize", "relax.quantize"})


def _source_constant(relax, tvm, call):
    """The model's constant a folded call was computed from, whose name the result keeps: of a
    (de)quantize, the tensor it converts (its scale and zero point are parameters, one per channel
    for a per-channel weight: an int8 TFLite conv's weight is its int8 constant); of any other call,
    its one tensor constant that is not a scalar, if it has exactly one."""

    def tensor_const(a) -> bool:
        return isinstance(a, tvm.ir.GenericConst) and isinstance(a.ty, relax.TensorType)

    if call.op.name in _QUANT_OPS:
        return call.args[0] if call.args and tensor_const(call.args[0]) else None
    srcs = [a for a in call.args if tensor_const(a) and a.ty.ndim != 0]
    return srcs[0] if len(srcs) == 1 else None


def _free(relax, e) -> list:
    """The relax Vars an expression reads (not descending into struct info)."""
    out: list = []
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, relax.Var):
            out.append(x)
        elif isinstance(x, relax.Tuple):
            stack.extend(x.fields)
        elif isinstance(x, relax.Call):
            stack.extend(x.args)
        elif isinstance(x, relax.TupleGetItem):
            stack.append(x.tuple_value)
    return out


def _fold_call(relax, tvm, scratch, call, counts):
    """The constant ``call`` folds to, or None when FoldConstant would keep the call."""
    name = call.op.name
    if name == "relax.shape_of":  # the normaliser knows a static shape: a ShapeExpr, as TVM sees it
        ty = getattr(call.args[0], "ty", None)
        dims = getattr(ty, "shape", None)
        if isinstance(ty, relax.TensorType) and isinstance(dims, relax.ShapeExpr):
            try:
                return relax.ShapeExpr([int(x) for x in dims.values])
            except (TypeError, ValueError):
                return None
        return None
    if name == "relax.tensor_to_shape":
        a = call.args[0]
        if isinstance(a, tvm.ir.GenericConst):
            arr = _array(a)
            if arr.ndim == 1 and arr.dtype == np.int64:
                return relax.ShapeExpr([int(x) for x in arr])
        return None
    if name == "relax.shape_to_tensor":
        a = call.args[0]
        if isinstance(a, relax.ShapeExpr):
            try:
                vals = [int(x) for x in a.values]
            except (TypeError, ValueError):
                return None
            if all(str(getattr(x, "dtype", None) or getattr(x.ty, "dtype", "")) == "int64" for x in a.values):
                counts["numpy"] += 1
                return relax.const(np.asarray(vals, dtype=np.int64), "int64")
        return None
    # every tensor argument must be a constant and every other one static; the *_like ops legalize
    # to a kernel that reads only their first argument's static shape, so FoldConstant folds them anyway
    first = 1 if name in _LIKE else 0
    for a in call.args[first:]:
        if not _static_arg(relax, tvm, a):
            return None
    try:
        norm = scratch.normalize(call)
    except Exception:  # noqa: BLE001 - an ill-typed call is left for the frontend's own error
        return None
    outs = _static_outputs(relax, norm.ty)
    if outs is None or not _foldable(tvm, call.op):
        return None
    if sum(int(np.prod(s, dtype=np.int64)) * _np_dtype(d).itemsize for s, d in outs) > _MAX_FOLD_BYTES:
        return None
    if isinstance(norm.ty, relax.TensorType):
        (shape, dtype), = outs
        arr = npeval.evaluate(name, norm, shape, dtype, _array, relax, tvm)
        if arr is not None:
            counts["numpy"] += 1
            return relax.const(np.ascontiguousarray(arr).reshape(shape), dtype)
    c = _kernel_fold(relax, tvm, norm)
    if c is not None:
        counts["kernel"] += 1
    return c


def _np_dtype(dtype: str):
    try:
        return np.dtype(dtype)
    except TypeError:
        import ml_dtypes  # noqa: PLC0415, F401 - bfloat16 / float8 names

        try:
            return np.dtype(dtype)
        except TypeError:
            return np.dtype("float32")


def _static_arg(relax, tvm, a) -> bool:
    if isinstance(a, tvm.ir.GenericConst):
        return True
    if isinstance(a, relax.Tuple):
        return all(_static_arg(relax, tvm, y) for y in a.fields)
    if isinstance(a, relax.Var):
        return False
    if isinstance(a, (relax.Call, relax.TupleGetItem)):
        return False
    if isinstance(a, relax.ShapeExpr):
        try:
            [int(x) for x in a.values]
        except (TypeError, ValueError):
            return False
        return True
    value = getattr(a, "value", None)  # IntImm, FloatImm, StringImm, DataTypeImm
    return isinstance(value, (int, float, str)) and not isinstance(value, bool) or isinstance(value, bool)


_LIKE = frozenset({"relax.zeros_like", "relax.ones_like", "relax.full_like"})
_LEGAL: dict[str, bool] = {}


def _foldable(tvm, op) -> bool:
    """FoldConstant folds only ops with a legalization."""
    name = op.name
    if name not in _LEGAL:
        try:
            _LEGAL[name] = op.get_attr("FLegalize") is not None
        except Exception:  # noqa: BLE001
            _LEGAL[name] = False
    return _LEGAL[name]


def _array(c) -> np.ndarray:
    data = getattr(c, "data", None)
    if data is not None and hasattr(data, "numpy"):
        return data.numpy()
    v = c.value
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)
