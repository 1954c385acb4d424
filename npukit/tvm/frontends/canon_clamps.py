"""Canonical-form rules for clamps (see ``canon`` and ``canon_rules``): a clamp is one ``clip``
whichever way the model wrote it (ONNX Clip or ``Max(x, 0)``, ``torch.clamp``, ``torch.maximum``
with a number), and a tensor bound is stored at its own size; a PReLU is one ``prelu``."""

from __future__ import annotations

import math

import numpy as np

from .canon import Match, Pass, _operands, _prim


def merge_clips(p: Pass, var, v):
    """``clip(clip(x, a, b), c, d)`` (the inner clip read once) -> ``clip(x, max(a, c), min(b, d))``:
    torch writes ``hardtanh``-like bounds as two one-sided clips."""
    x = v.args[0]
    inner = p.call(x, "relax.clip")
    if inner is None or not p.single(x):
        return None
    lo = max(_prim(inner.args[1]), _prim(v.args[1]))
    hi = min(_prim(inner.args[2]), _prim(v.args[2]))
    out = p.emit(p.relax.op.clip(p.m(inner.args[0]), lo, hi), like=var)
    return Match(out, (x,), "two clips merged into one at import")


def unbounded_clip(p: Pass, var, v):
    """``clip(x, -inf, inf)`` -> ``x``: no op (TVM's import of ``torch.clamp`` with tensor bounds
    writes a maximum, a minimum and then this clip; the ONNX export of it is the Max and the Min)."""
    if _prim(v.args[1]) != -math.inf or _prim(v.args[2]) != math.inf:
        return None
    return Match(p.m(v.args[0]), (), "no computation of its own: a clip without bounds removed at import")


def clamp_as_clip(p: Pass, var, v):
    """``maximum(x, c)`` / ``minimum(x, c)`` with ``c`` one float number (ONNX ``Max(x, 0)``,
    ``torch.maximum(x, torch.tensor(0.))``) -> ``clip(x, c, inf)`` / ``clip(x, -inf, c)``: the clamp
    ``torch.clamp`` and ONNX Clip give, so that a clamp is one kind of op whichever way the model
    wrote it (and ``merge_clips`` makes a Max then a Min one clip).  The same value for every
    number; a NaN gives what TVM's clip makes of it (inf above a lower bound; its maximum gave the
    bound, onnxruntime and torch give NaN)."""
    x, c = _operands(p, v)
    k = p.scalar(c) if x is not None else None
    dt = p.dtype(var)
    if k is None or not dt.startswith("float") or p.dtype(x) != dt or p.shape(x) is None or p.shape(x) != p.shape(var):
        return None
    lo, hi = (k, math.inf) if v.op.name == "relax.maximum" else (-math.inf, k)
    out = p.emit(p.relax.op.clip(p.m(x), lo, hi), like=var)
    return Match(out)


def compact_bound(p: Pass, var, v):
    """``maximum(x, c)`` / ``minimum(x, c)`` with a constant ``c`` whose values repeat along an axis
    -> the same with ``c`` kept once along each such axis: TVM's import of ``torch.clamp(x, min=t)``
    broadcasts ``t`` to x's whole shape first, where the ONNX export (``Max(x, t)``) stores ``t`` at
    its own size.  The same values; the constant keeps its name."""
    x, c = _operands(p, v)
    a = p.const(c) if x is not None else None
    shape, out_shape = p.shape(x), p.shape(var)
    if a is None or a.size <= 1 or shape is None or out_shape is None:
        return None
    small = a
    for ax in range(a.ndim):
        first = np.take(small, [0], axis=ax)
        if small.shape[ax] > 1 and np.array_equal(small, np.broadcast_to(first, small.shape)):
            small = first
    if small.size == a.size or np.broadcast_shapes(shape, small.shape) != out_shape:
        return None
    new = p.derive(p.relax.const(np.ascontiguousarray(small), str(a.dtype)), c)
    out = p.new_call(v, [new if arg.same_as(c) else p.m(arg) for arg in v.args], like=var)
    return Match(out)


def prelu_as_where(p: Pass, var, v):
    """``where(x > 0, x, x * alpha)`` with a constant ``alpha`` (TVM's import of torch.export's
    ``prelu``: three ops) -> ``prelu(x, alpha, axis)``, the one op TVM's ONNX import makes of the
    same layer's ``PRelu``, with the slope as it writes it: one slope per channel of the one axis
    ``alpha`` varies along, or a single slope (on the last axis).  Exact: at ``x = 0`` both give 0."""
    cond, x, neg = v.args
    gt = p.call(cond, "relax.greater")
    mul = p.call(neg, "relax.multiply")
    if gt is None or mul is None or not (p.single(cond) and p.single(neg)) or not gt.args[0].same_as(x):
        return None
    if p.scalar(gt.args[1]) != 0.0 or p.dtype(x) != p.dtype(var) or not p.dtype(x).startswith("float"):
        return None
    y, alpha = _operands(p, mul)
    shape, slope = p.shape(x), None if y is None or not y.same_as(x) else p.const(alpha)
    if shape is None or slope is None or slope.ndim > len(shape):
        return None
    varying = [i for i, n in enumerate(slope.shape) if n != 1]
    if len(varying) > 1:
        return None
    axis = len(shape) - slope.ndim + varying[0] if varying else len(shape) - 1
    if varying and slope.shape[varying[0]] != shape[axis]:
        return None
    flat = p.derive(p.relax.const(slope.reshape(-1).astype(slope.dtype), str(slope.dtype)), alpha)
    out = p.emit(p.relax.op.nn.prelu(p.m(x), flat, axis), like=var)
    return Match(out, (cond, neg), "prelu written as one op at import")


def flat_prelu(p: Pass, var, v):
    """``reshape(prelu(reshape(x, [n]), a, axis=0), shape(x))`` with ``a`` holding a slope for every
    element (TVM's import of TFLite's PRELU broadcasts the slope over the whole tensor and flattens
    both) -> ``prelu(x, slope, axis)`` with the slope as ``prelu_as_where`` writes it: one per channel
    of the one axis it varies along, or a single slope.  Exact: the same slope meets every element."""
    pr = p.call(v.args[0], "relax.nn.prelu")
    if pr is None or not p.single(v.args[0]) or int(p.attr(pr, "axis", 0)) != 0:
        return None
    flat = p.call(pr.args[0], "relax.reshape")
    slope = p.const(pr.args[1])
    if flat is None or slope is None or not p.single(pr.args[0]):
        return None
    x = flat.args[0]
    shape = p.shape(x)
    if shape is None or p.shape(var) != shape or slope.size != math.prod(shape) or len(shape) < 1:
        return None
    full = slope.reshape(shape)
    for axis in [len(shape) - 1] + list(range(len(shape) - 1)):
        idx = tuple(slice(None) if i == axis else slice(0, 1) for i in range(len(shape)))
        if np.array_equal(full, np.broadcast_to(full[idx], shape)):
            break
    else:
        return None
    per = full[idx].reshape(-1)
    if (per == per[0]).all():
        per, axis = per[:1], len(shape) - 1
    c = p.derive(p.relax.const(np.ascontiguousarray(per), str(slope.dtype)), pr.args[1])
    out = p.emit(p.relax.op.nn.prelu(p.m(x), c, axis), like=v.args[0])
    return Match(out, (v.args[0], pr.args[0]), "prelu written on its tensor, with a slope per channel, at import")
