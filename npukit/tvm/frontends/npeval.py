"""numpy evaluation of the Relax ops constant folding meets most, bit-identical to TVM's kernels.

Only ops whose result is exact in IEEE arithmetic are here (data movement, + - * / max min on
floats, integer + - * max min, casts, comparisons, sqrt, dequantize to float32): an LLVM kernel and
numpy give the same bits for them.  ``tests/test_fold.py`` checks every evaluator against TVM's own
FoldConstant.  ``evaluate`` returns None for anything else (the caller then builds TVM's kernel),
and for inputs whose result TVM leaves undefined (out-of-range indices or casts).
"""

from __future__ import annotations

import numpy as np

_FLOATS = ("float32", "float64")
_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _prim(x):
    """A static scalar argument (IntImm, FloatImm, PrimValue) as a Python number, else None."""
    v = getattr(x, "value", None)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    inner = getattr(v, "value", None)
    if isinstance(inner, (int, float)) and not isinstance(inner, bool):
        return inner
    return None


def _ints(t) -> list[int] | None:
    try:
        out = [_prim(x) if _prim(x) is not None else int(x) for x in t]
    except (TypeError, ValueError):
        return None
    return [int(v) for v in out]


def _attr(call, name, default=None):
    a = call.attrs
    if a is None:
        return default
    try:
        return getattr(a, name)
    except AttributeError:
        return default


def evaluate(name: str, call, shape: tuple, dtype: str, array, relax, tvm):
    """The value of ``call`` (constant arguments) as a numpy array of ``shape``/``dtype``, or None."""
    fn = _EVAL.get(name)
    if fn is None:
        return None
    args = []
    for a in call.args:
        if isinstance(a, tvm.ir.GenericConst):
            args.append(array(a))
        elif isinstance(a, relax.Tuple):
            args.append([array(y) if isinstance(y, tvm.ir.GenericConst) else y for y in a.fields])
        elif isinstance(a, relax.ShapeExpr):
            args.append(tuple(int(v) for v in a.values))
        else:
            args.append(a)
    try:
        out = fn(call, args, shape, dtype)
    except (ValueError, TypeError, IndexError, OverflowError, FloatingPointError):
        return None
    if out is None:
        return None
    out = np.asarray(out)
    if tuple(out.shape) != tuple(shape) and out.size == int(np.prod(shape, dtype=np.int64)):
        out = out.reshape(shape)
    if tuple(out.shape) != tuple(shape) or str(out.dtype) != dtype:
        return None
    return out


def _same_layout(call, args, shape, dtype):
    x = args[0]
    if str(x.dtype) != dtype:
        return None
    return x.reshape(shape)


def _permute(call, args, shape, dtype):
    axes = _attr(call, "axes")
    return np.transpose(args[0], None if axes is None else [int(a) for a in axes])


def _concat(call, args, shape, dtype):
    parts = args[0]
    if not all(isinstance(p, np.ndarray) for p in parts):
        return None
    axis = _attr(call, "axis")
    return np.concatenate(parts, axis=0 if axis is None else int(axis))


def _strided_slice(call, args, shape, dtype):
    x, axes, begin, end = args[0], _ints(args[1]), _ints(args[2]), _ints(args[3])
    strides = _ints(args[4]) if len(args) > 4 and args[4] is not None else [1] * len(axes or ())
    if axes is None or begin is None or end is None or strides is None or 0 in strides:
        return None
    idx = [slice(None)] * x.ndim
    for a, b, e, s in zip(axes, begin, end, strides, strict=False):
        idx[a] = slice(b, e, s)
    return x[tuple(idx)]


def _take(call, args, shape, dtype):
    x, ind = args[0], args[1]
    axis = _attr(call, "axis")
    mode = str(_attr(call, "mode", "fast"))
    if not np.issubdtype(ind.dtype, np.integer):
        return None
    n = x.size if axis is None else x.shape[int(axis)]
    if mode != "wrap" and (ind.size and (ind.min() < 0 or ind.max() >= n)):
        return None  # "fast" leaves these undefined; "clip" handles negatives in its own way
    return np.take(x, ind, axis=None if axis is None else int(axis), mode="wrap" if mode == "wrap" else "raise")


def _broadcast_to(call, args, shape, dtype):
    return np.broadcast_to(args[0], args[1]).copy()


def _tile(call, args, shape, dtype):
    return np.tile(args[0], [int(r) for r in _attr(call, "repeats")])


def _flip(call, args, shape, dtype):
    return np.flip(args[0], int(_attr(call, "axis"))).copy()


def _repeat(call, args, shape, dtype):
    axis = _attr(call, "axis")
    return np.repeat(args[0], int(_attr(call, "repeats")), axis=None if axis is None else int(axis))


def _has_nan(*xs) -> bool:
    return any(np.issubdtype(x.dtype, np.floating) and np.isnan(x).any() for x in xs)


def _binary(fn, kinds, nan_ok=True):
    def run(call, args, shape, dtype):
        a, b = args[0], args[1]
        if str(a.dtype) != str(b.dtype) or str(a.dtype) not in kinds:
            return None
        if not nan_ok and _has_nan(a, b):  # max/min of NaN: LLVM's select and numpy disagree
            return None
        with np.errstate(all="ignore"):
            return fn(a, b).astype(dtype, copy=False)

    return run


def _unary(fn, kinds):
    def run(call, args, shape, dtype):
        a = args[0]
        if str(a.dtype) not in kinds:
            return None
        with np.errstate(all="ignore"):
            return fn(a)

    return run


def _compare(fn, nan_ok=True):
    def run(call, args, shape, dtype):
        a, b = args[0], args[1]
        if str(a.dtype) != str(b.dtype) or not nan_ok and _has_nan(a, b):
            return None
        return fn(a, b)

    return run


def _astype(call, args, shape, dtype):
    x = args[0]
    src = str(x.dtype)
    if dtype == "bool":
        return x != 0
    if src == "bool" or src in _INTS and (dtype in _INTS or dtype in ("float32", "float64")):
        return x.astype(dtype)
    if src in ("float16", "float32", "float64") and dtype in ("float16", "float32", "float64"):
        return x.astype(dtype)
    if src in _FLOATS and dtype in _INTS:  # truncation; out of range or NaN is undefined: leave it to TVM
        info = np.iinfo(dtype)
        if not np.all(np.isfinite(x)) or x.size and (x.min() <= info.min - 1 or x.max() >= info.max + 1):
            return None
        return x.astype(dtype)
    return None


def _where(call, args, shape, dtype):
    c, a, b = args
    if str(c.dtype) != "bool" or str(a.dtype) != str(b.dtype):
        return None
    return np.where(c, a, b)


def _dequantize(call, args, shape, dtype):
    x, scale, zp = args
    if dtype != "float32" or str(x.dtype) not in _INTS or str(scale.dtype) != "float32":
        return None
    if str(zp.dtype) not in _INTS:
        return None
    axis = int(_attr(call, "axis", -1))
    axis = axis % x.ndim if x.ndim else 0
    if scale.size > 1 or zp.size > 1:
        bshape = [1] * x.ndim
        bshape[axis] = -1
        scale = scale.reshape(bshape) if scale.size > 1 else scale.reshape(())
        zp = zp.reshape(bshape) if zp.size > 1 else zp.reshape(())
    else:
        scale, zp = scale.reshape(()), zp.reshape(())
    sub = x.astype(np.int32) - zp.astype(np.int32)
    return sub.astype(np.float32) * scale.astype(np.float32)


def _full(value_index):
    def run(call, args, shape, dtype):
        if value_index is None:
            return None
        v = args[value_index]
        if not isinstance(v, np.ndarray) or v.size != 1:
            return None
        return np.full(shape, v.reshape(()).astype(dtype))

    return run


def _const_fill(value):
    def run(call, args, shape, dtype):
        return np.full(shape, value, dtype=dtype)

    return run


def _clip(call, args, shape, dtype):
    x = args[0]
    lo, hi = _prim(args[1]), _prim(args[2])
    if lo is None or hi is None or str(x.dtype) not in _FLOATS or _has_nan(x):
        return None
    lo_c, hi_c = np.asarray(lo, dtype=x.dtype), np.asarray(hi, dtype=x.dtype)
    if float(lo_c) != float(lo) or float(hi_c) != float(hi):
        return None
    return np.minimum(np.maximum(x, lo_c), hi_c)


def _arange(call, args, shape, dtype):
    """``arange`` of integers (exact in numpy); float ranges are left to the kernel."""
    if not dtype.startswith(("int", "uint")):
        return None
    vals = [getattr(a, "value", None) for a in args[:3]]
    if len(vals) != 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return None
    return np.arange(vals[0], vals[1], vals[2], dtype=dtype)


_ARITH = _FLOATS + _INTS
_EVAL = {
    "relax.arange": _arange,
    "relax.reshape": _same_layout,
    "relax.expand_dims": _same_layout,
    "relax.squeeze": _same_layout,
    "relax.flatten": _same_layout,
    "relax.permute_dims": _permute,
    "relax.concat": _concat,
    "relax.strided_slice": _strided_slice,
    "relax.take": _take,
    "relax.broadcast_to": _broadcast_to,
    "relax.tile": _tile,
    "relax.flip": _flip,
    "relax.repeat": _repeat,
    "relax.add": _binary(np.add, _ARITH),
    "relax.subtract": _binary(np.subtract, _ARITH),
    "relax.multiply": _binary(np.multiply, _ARITH),
    "relax.divide": _binary(np.divide, _FLOATS),
    "relax.maximum": _binary(np.maximum, _ARITH, nan_ok=False),
    "relax.minimum": _binary(np.minimum, _ARITH, nan_ok=False),
    "relax.negative": _unary(np.negative, _FLOATS + ("int8", "int16", "int32", "int64")),
    "relax.abs": _unary(np.abs, _FLOATS + ("int8", "int16", "int32", "int64")),
    "relax.sqrt": _unary(np.sqrt, _FLOATS),
    "relax.equal": _compare(np.equal),
    "relax.not_equal": _compare(np.not_equal, nan_ok=False),
    "relax.less": _compare(np.less),
    "relax.less_equal": _compare(np.less_equal),
    "relax.greater": _compare(np.greater),
    "relax.greater_equal": _compare(np.greater_equal),
    "relax.logical_not": lambda call, args, shape, dtype: np.logical_not(args[0]) if args[0].dtype == bool else None,
    "relax.where": _where,
    "relax.astype": _astype,
    "relax.dequantize": _dequantize,
    "relax.zeros": _const_fill(0),
    "relax.ones": _const_fill(1),
    "relax.full": _full(1),
    "relax.zeros_like": _const_fill(0),
    "relax.ones_like": _const_fill(1),
    "relax.full_like": _full(1),
    "relax.clip": _clip,
}
