"""The canonical-form rules (see ``canon``).  Each rule reads one root binding of the old function
and returns a ``Match`` or None; its docstring says what it matches and what it makes.

Every rule keeps the model's values: data movement is rearranged exactly; arithmetic rules change
the result by fp32 rounding at most (stated where that is so); the one rule that drops a guard
(``safe_softmax``) says when the values could differ.
"""

from __future__ import annotations

import math

import numpy as np

from .canon import Match, Pass, _operands, _prim
from .canon_clamps import clamp_as_clip, compact_bound, flat_prelu, merge_clips, prelu_as_where, unbounded_clip
from .canon_moves import (
    batched_matmul,
    chunk_as_slices,
    coerced_softmax,
    identity,
    linear_unflattened,
    negative_index,
    pad_as_take,
    pad_chain,
    pad_into_conv,
    permute_chain,
    reshape_chain,
    roll_as_slices,
    transpose_after_softmax,
    transposed_softmax,
    unbind_as_split,
)
from .canon_norms import (
    group_norm_grouped,
    instance_norm_arithmetic,
    instance_norm_batch_axis,
    instance_norm_batched,
    layer_norm_arithmetic,
    norm_affine,
    norm_epsilon,
)
from .canon_reduce import (
    adaptive_pool_as_pool,
    l2_norm,
    pool_1d,
    squeezed_reduce,
    topk_as_max,
    unit_axis_dropped,
    unit_axis_reduce,
)

# ---------------------------------------------------------------------------------------------
# helpers


def _close(x: float | None, want: float, rel: float = 1e-6) -> bool:
    return x is not None and abs(x - want) <= rel * abs(want)


def _const(p: Pass, value, dtype: str):
    return p.relax.const(np.asarray(value, dtype=dtype), dtype)


# ---------------------------------------------------------------------------------------------
# BatchNorm in inference form after a convolution or a matmul


_BN_PRODUCERS = ("relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv3d", "relax.matmul")


def fold_batch_norm(p: Pass, var, v):
    """``batch_norm(conv(x, W) [+ b])[0]`` (inference form, constant statistics, the conv read only by
    the BN) -> ``conv(x, W * s) + b'`` with ``s = gamma / sqrt(var + eps)`` per output channel and
    ``b' = (b - mean) * s + beta``: what torch's ONNX exporter does.  The conv may be a grouped or
    depthwise conv (NCHW data, OIHW weights, BN on axis 1) or a matmul with a constant 2-D weight
    (BN on the last axis).  Computed in float64, rounded once to the weights' dtype."""
    if v.index != 0 or not p.single(v.tuple_value):
        return None
    bn = p.call(v.tuple_value, "relax.nn.batch_norm")
    if bn is None or p.attr(bn, "training", False):
        return None
    data, gamma, beta, mean, variance = bn.args
    stats = [p.const(a) for a in (gamma, beta, mean, variance)]
    if any(s is None for s in stats) or not p.single(data):
        return None
    gamma, beta, mean, variance = (s.astype(np.float64).reshape(-1) for s in stats)
    eps = float(p.attr(bn, "epsilon", 1e-5))
    y, bias, bias_var = data, None, None
    add = p.call(data, "relax.add")
    if add is not None:
        y, c = _operands(p, add)
        if y is None or not p.single(y):
            return None
        bias, bias_var = p.const(c), data
    prod = p.call(y, *_BN_PRODUCERS)
    if prod is None:
        return None
    x, w = prod.args
    weight = p.const(w)
    out_shape = p.shape(y)
    if weight is None or out_shape is None:
        return None
    rank, axis = len(out_shape), int(p.attr(bn, "axis", 1)) % len(out_shape)
    channels = out_shape[axis]
    if prod.op.name == "relax.matmul":
        if weight.ndim != 2 or axis != rank - 1:
            return None
        w_shape, b_shape = (1, channels), (channels,)
    else:
        layout = str(p.attr(prod, "data_layout", ""))
        if axis != 1 or not layout.startswith("NC") or str(p.attr(prod, "kernel_layout", "")) != "OI" + layout[2:] \
                or str(p.attr(prod, "out_layout", layout)) != layout:  # fmt: skip
            return None
        w_shape, b_shape = (channels,) + (1,) * (weight.ndim - 1), (1, channels) + (1,) * (rank - 2)
    if weight.shape[0 if prod.op.name != "relax.matmul" else 1] != channels or len(gamma) != channels:
        return None
    if bias is not None and bias.size != channels:
        return None
    s = (gamma if p.attr(bn, "scale", True) else np.ones(channels)) / np.sqrt(variance + eps)
    shift = (beta if p.attr(bn, "center", True) else np.zeros(channels)) - mean * s
    if bias is not None:
        shift = shift + bias.astype(np.float64).reshape(-1) * s
    wdt, bdt = str(weight.dtype), p.dtype(var)
    new_w = (weight.astype(np.float64) * s.reshape(w_shape)).astype(wdt)
    conv = p.new_call(prod, [p.m(x), p.derive(_const(p, new_w, wdt), w)], like=y)
    shifted = p.derive(_const(p, shift.reshape(b_shape), bdt), c if bias is not None else bn.args[2])
    out = p.emit(p.relax.op.add(conv, shifted), like=y)
    p.outputs_of(y, var)  # what the model's readers read is the batch_norm's output
    consumed = (v.tuple_value, data) + ((bias_var,) if bias_var is not None else ())
    return Match(out, consumed, f"batch normalization folded into the weights and bias of {p.src_name(y)!r} at "
                                "import (inference form)")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# hardsigmoid, hardswish


def _shifted_clip(p: Pass, x, d: float):
    """``clip(add(y, k), 0, d)`` -> (y, k) (each read once), else None."""
    clip = p.call(x, "relax.clip")
    if clip is None or _prim(clip.args[1]) != 0.0 or not _close(_prim(clip.args[2]), d):
        return None
    add = p.call(clip.args[0], "relax.add")
    if add is None or not p.single(clip.args[0]):
        return None
    y, k = _operands(p, add)
    k = None if k is None else p.scalar(k)
    return None if y is None or k is None else (y, k)


def hardsigmoid(p: Pass, var, v):
    """``clip(x + k, 0, d) / d`` (torch's hardsigmoid, ONNX HardSwish's inner part) ->
    ``clip(x * (1/d) + k/d, 0, 1)`` (ONNX HardSigmoid's form; equal to within fp32 rounding)."""
    d = p.scalar(v.args[1])
    if d is None or d <= 0 or p.const(v.args[0]) is not None or not p.single(v.args[0]):
        return None
    found = _shifted_clip(p, v.args[0], d)
    if found is None:
        return None
    y, k = found
    dt = p.dtype(var)
    scaled = p.emit(p.relax.op.multiply(p.m(y), _const(p, np.float32(1) / np.float32(d), dt)), like=var)
    shifted = p.emit(p.relax.op.add(scaled, _const(p, np.float32(k) / np.float32(d), dt)), like=var)
    out = p.emit(p.relax.op.clip(shifted, 0.0, 1.0), like=var)
    return Match(out, (v.args[0], p.call(v.args[0]).args[0]), "hardsigmoid written in one canonical form at import")


def hardswish_order(p: Pass, var, v):
    """``(x * clip(x + k, 0, d)) / d`` (torch's hardswish) -> ``x * (clip(x + k, 0, d) / d)`` (ONNX
    HardSwish's order), whose right side the ``hardsigmoid`` rule then rewrites."""
    d = p.scalar(v.args[1])
    mul = p.call(v.args[0], "relax.multiply")
    if d is None or d <= 0 or mul is None or not p.single(v.args[0]):
        return None
    for x, c in (mul.args, mul.args[::-1]):
        found = _shifted_clip(p, c, d)
        if found is not None and found[0].same_as(x):
            gate = p.emit(p.relax.op.divide(p.m(c), _const(p, d, p.dtype(var))), like=var)
            out = p.emit(p.relax.op.multiply(p.m(x), gate), like=var)
            return Match(out, (v.args[0],), "hardswish written in one canonical order at import")
    return None


# ---------------------------------------------------------------------------------------------
# GELU written as erf arithmetic


def gelu_erf(p: Pass, var, v):
    """``x * 0.5 * (1 + erf(x / sqrt(2)))`` with its products in any order and grouping, the division
    written as ``x * (1/sqrt(2))`` or not, every intermediate read once -> ``gelu(x)``.  The gelu op
    takes the node that made the output (the last multiply); the other nodes are listed as elided."""
    leaves, inner = [], []

    def walk(x, top):
        call = p.call(x, "relax.multiply") if top or p.single(x) else None
        if call is None:
            leaves.append(x)
            return
        if not top:
            inner.append(x)
        for a in call.args:
            walk(a, False)

    walk(var, True)
    scale, rest = 1.0, []
    for leaf in leaves:
        s = p.scalar(leaf)
        if s is not None:
            scale *= s
        else:
            rest.append(leaf)
    if len(rest) != 2 or not _close(scale, 0.5, 1e-6):
        return None
    for x, a in (rest, rest[::-1]):
        add = p.call(a, "relax.add")
        if add is None or not p.single(a):
            continue
        e, one = _operands(p, add)
        erf = p.call(e, "relax.erf") if e is not None and p.single(e) else None
        if erf is None or not _close(p.scalar(one), 1.0):
            continue
        t = erf.args[0]
        div = p.call(t, "relax.divide", "relax.multiply") if p.single(t) else None
        if div is None:
            continue
        y, k = _operands(p, div) if div.op.name == "relax.multiply" else div.args
        if y is None or not y.same_as(x):
            continue
        k = p.scalar(k)
        want = math.sqrt(2.0) if div.op.name == "relax.divide" else 1 / math.sqrt(2.0)
        if not _close(k, want, 1e-6):
            continue
        out = p.emit(p.relax.op.nn.gelu(p.m(x)), like=var)
        return Match(out, (*inner, a, e, t), f"part of a GELU written as erf arithmetic: imported as one gelu op "
                                             f"named after the node that makes its output ({p.src_name(var)!r})")  # fmt: skip
    return None


def softplus_stable(p: Pass, var, v):
    """``where(x > t, x, log(exp(x) + 1))`` (torch.export's ``softplus`` at beta 1, threshold ``t`` >= 15;
    a Mish's first half) -> ``max(x, 0) + log(exp(-|x|) + 1)``, the stable form TVM imports ONNX's
    Softplus as.  Equal to within fp32 rounding: above ``t`` the two differ by ``log(1 + exp(-x))``,
    under ``exp(-15)`` of ``x``."""
    cond, x, soft = v.args
    gt = p.call(cond, "relax.greater")
    t = p.scalar(gt.args[1]) if gt is not None else None
    if t is None or t < 15 or not gt.args[0].same_as(x) or not p.single(cond) or not p.dtype(x).startswith("float"):
        return None
    log = p.call(soft, "relax.log")
    if log is None or not p.single(soft):
        return None
    add = p.call(log.args[0], "relax.add")
    if add is None or not p.single(log.args[0]):
        return None
    e, one = _operands(p, add)
    ex = p.call(e, "relax.exp") if e is not None and p.single(e) else None
    if ex is None or not ex.args[0].same_as(x) or not _close(p.scalar(one), 1.0):
        return None
    dt = p.dtype(x)
    pos = p.emit(p.relax.op.clip(p.m(x), 0.0, float("inf")), like=var)
    neg = p.emit(p.relax.op.negative(p.emit(p.relax.op.abs(p.m(x)), like=var)), like=var)
    tail = p.emit(p.relax.op.log(p.emit(p.relax.op.add(p.emit(p.relax.op.exp(neg), like=var), _const(p, 1.0, dt)),
                                         like=var)), like=var)  # fmt: skip
    out = p.emit(p.relax.op.add(pos, tail), like=var)
    return Match(out, (cond, soft, log.args[0], e), "part of a softplus written as ONNX's stable form at import")


_GUARD_OPS = {"relax.logical_not", "relax.astype", "relax.max", "relax.min", "relax.equal", "relax.not_equal",
              "relax.isinf", "relax.logical_and", "relax.logical_or"}  # fmt: skip


def safe_softmax(p: Pass, var, v):
    """``where(<every score of the row is -inf>, 0, softmax(s))`` (torch's safe softmax in
    scaled_dot_product_attention; the condition computed from ``s`` alone) -> ``softmax(s)``, as
    the ONNX exporter writes it.  The values differ only on a row whose scores are all -inf (a
    fully masked row), where softmax gives NaN and the guard 0."""
    cond, zero, sm = v.args
    soft = p.call(sm, "relax.nn.softmax")
    z = p.const(zero)
    if soft is None or z is None or z.any():
        return None
    s, seen, work = soft.args[0], [], [cond]
    while work:
        x = work.pop()
        if x.same_as(s) or p.const(x) is not None:
            continue
        call = p.call(x)
        if call is None or call.op.name not in _GUARD_OPS or not p.single(x):
            return None
        seen.append(x)
        work.extend(a for a in call.args if isinstance(a, p.relax.Var) or p.const(a) is not None)
    if not seen:
        return None
    return Match(p.m(sm), tuple(seen), "the guard torch writes around softmax for fully masked rows, dropped at "
                                       "import (as the ONNX exporter writes softmax)")  # fmt: skip


def tuple_field(p: Pass, var, v):
    """``(a, b, c)[k]`` -> the field itself.  TVM's ONNX frontend binds batch_norm's three outputs to
    a tuple and reads the normalized one back from it, so the batch norm was read three times and
    never folded (a Linear + BatchNorm1d gave one op more from ONNX than from torch.export)."""
    d = p.defs.get(v.tuple_value) if isinstance(v.tuple_value, p.relax.Var) else None
    if not isinstance(d, p.relax.Tuple) or not 0 <= v.index < len(d.fields):
        return None
    return Match(p.m(d.fields[v.index]))


# ---------------------------------------------------------------------------------------------
# an integer average pool (TFLite's int8 AVERAGE_POOL_2D)

_AVG_POOLS = ("relax.nn.avg_pool1d", "relax.nn.avg_pool2d", "relax.nn.avg_pool3d")


def int_avg_pool(p: Pass, var, v):
    """``astype(avg_pool(astype(x, int32)), t)`` with ``x`` of the 8-bit type ``t`` (TVM's import of
    TFLite's int8 AVERAGE_POOL_2D, whose input and output share one scale) ->
    ``quantize(avg_pool(dequantize(x, 1, 0)), 1, 0, t)``, the form an ONNX QDQ pool has, so that both
    formats place the pool alike (an accelerator that takes quantized pools took only its middle op,
    with two int32 tensors crossing to it and back).  The average rounds to the nearest integer
    (TFLite's reference kernel rounds half away from zero); TVM's int32 pool truncated toward zero,
    one step off for most windows whose sum the window's size does not divide."""
    out_t = str(v.attrs.dtype) if v.attrs is not None and hasattr(v.attrs, "dtype") else ""
    pool = p.call(v.args[0], *_AVG_POOLS)
    if out_t not in ("int8", "uint8") or pool is None or not p.single(v.args[0]):
        return None
    wide = p.call(pool.args[0], "relax.astype")
    if wide is None or not p.single(pool.args[0]) or p.dtype(pool.args[0]) != "int32":
        return None
    x = wide.args[0]
    if p.dtype(x) != out_t:
        return None
    one, zero = _const(p, 1.0, "float32"), _const(p, 0, out_t)
    deq = p.emit(p.relax.op.dequantize(p.m(x), one, zero, axis=-1, out_dtype="float32"), like=pool.args[0])
    avg = p.new_call(pool, [deq], like=v.args[0])
    out = p.emit(p.relax.op.quantize(avg, one, zero, axis=-1, out_dtype=out_t), like=var)
    return Match(out, (v.args[0], pool.args[0]), "an integer average pool written as a quantized pool at import")


_VIEWS = ("relax.reshape", "relax.permute_dims", "relax.squeeze", "relax.expand_dims")


def quantized_view(p: Pass, var, v):
    """``quantize(view(dequantize(x, s, z)), s, z)`` with one scale and zero point for the tensor and
    the same on both sides (a QDQ model's flatten between two int8 layers) -> ``view(x)``: the int8
    tensor itself moved, as an int8 TFLite model writes it.  Exact: a view changes no value, and
    quantizing a dequantized value with its own scale and zero point gives it back."""
    view = p.call(v.args[0], *_VIEWS)
    if view is None or not p.single(v.args[0]):
        return None
    dq = p.call(view.args[0], "relax.dequantize")
    if dq is None or not p.single(view.args[0]):
        return None
    x = dq.args[0]
    if p.dtype(x) != str(getattr(v.attrs, "out_dtype", "")) or p.const(x) is not None:
        return None
    s_in, z_in, s_out, z_out = (p.scalar(a) for a in (*dq.args[1:3], *v.args[1:3]))
    if None in (s_in, z_in, s_out, z_out) or s_in != s_out or z_in != z_out:
        return None
    out = p.new_call(view, [p.m(x), *[p.m(a) for a in view.args[1:]]], like=v.args[0])
    return Match(out, (v.args[0], view.args[0]),
                 "a dequantize -> view -> quantize of one scale is the view of the integer tensor at import")


RULES = {
    "relax.add": (layer_norm_arithmetic, instance_norm_arithmetic, norm_affine),
    "relax.nn.instance_norm": (instance_norm_batch_axis, norm_epsilon),
    "relax.nn.layer_norm": (norm_epsilon,),
    "relax.nn.group_norm": (norm_epsilon,),
    "relax.nn.rms_norm": (norm_epsilon,),
    "relax.maximum": (compact_bound, clamp_as_clip),
    "relax.minimum": (compact_bound, clamp_as_clip),
    "relax.quantize": (quantized_view,),
    "TupleGetItem": (fold_batch_norm, tuple_field, topk_as_max),
    "relax.squeeze": (squeezed_reduce, unit_axis_reduce, pool_1d),
    **dict.fromkeys(("relax.mean", "relax.sum", "relax.max", "relax.min", "relax.prod"), (unit_axis_dropped,)),
    "relax.nn.adaptive_avg_pool1d": (adaptive_pool_as_pool,),
    "relax.nn.adaptive_avg_pool2d": (adaptive_pool_as_pool,),
    "relax.nn.adaptive_avg_pool3d": (adaptive_pool_as_pool,),
    "relax.power": (l2_norm,),
    "relax.clip": (unbounded_clip, merge_clips),
    "relax.divide": (hardswish_order, hardsigmoid),
    "relax.multiply": (gelu_erf,),
    "relax.take": (negative_index, roll_as_slices, pad_as_take),
    "relax.split": (chunk_as_slices,),
    "relax.strided_slice": (unbind_as_split,),
    "relax.reshape": (identity, coerced_softmax, flat_prelu, batched_matmul, linear_unflattened, group_norm_grouped, instance_norm_batched),
    "relax.broadcast_to": (identity,),
    "relax.nn.pad": (identity, pad_chain),
    "relax.nn.conv2d": (pad_into_conv,),
    "relax.astype": (identity, int_avg_pool),
    "relax.permute_dims": (identity, permute_chain, transposed_softmax, transpose_after_softmax),
    "relax.where": (safe_softmax, prelu_as_where, softplus_stable),
}
# run once RULES match nothing more: merging reshapes earlier would hide the flattened-linear and
# batched-matmul forms their rules look for
LATE_RULES = {"relax.reshape": (identity, reshape_chain)}
