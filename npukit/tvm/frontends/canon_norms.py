"""Canonical-form rules for normalisations (see ``canon`` and ``canon_rules``): a LayerNorm,
InstanceNorm or GroupNorm written as elementary ops is the one norm op a .pt2 of the same model
gives, its gamma and beta under the model's names.

Where the forms come from:

* LayerNorm before opset 17: torch's ONNX exporter writes ``ReduceMean, Sub, Pow, ReduceMean, Add,
  Sqrt, Div, Mul, Add`` over the last axis.
* InstanceNormalization: TVM's ONNX importer writes ``mean, subtract, variance, add, sqrt, divide,
  multiply, add`` over the spatial axes.
* GroupNorm: torch's ONNX exporter (every opset) writes ``Reshape(x, [N, G, -1])``, an
  InstanceNormalization of the groups with scale 1 and bias 0, ``Reshape`` back, ``Mul`` by gamma
  and ``Add`` beta; ONNX GroupNormalization-21 imports as a group_norm without its affine
  (scale=False, center=False) followed by ``multiply`` and ``add``.
* torch.export's instance norm goes through batch_norm on ``x`` viewed as ``[1, N*C, ...]``:
  TVM's importer writes an instance_norm over axes ``[0, 2, ...]`` between two reshapes, gamma and
  beta repeated N times.

The rules rebuild the norm in steps (each pass's output is read by the next pass): the arithmetic
becomes an instance_norm, the reshapes around an instance_norm of the groups a group_norm, and the
``multiply``/``add`` after a norm without affine the norm's gamma and beta.  Only float32 tensors
are rewritten (fp16 models keep their arithmetic).  Values change by fp32 rounding at most: TVM's
norm ops compute the same mean and biased variance.
"""

from __future__ import annotations

import math

import numpy as np

from .canon import Match, Pass, _operands


def _const(p: Pass, value, dtype: str):
    return p.relax.const(np.asarray(value, dtype=dtype), dtype)


def _kept_axes(p: Pass, call, rank: int) -> tuple[int, ...] | None:
    """The sorted axes of a reduction that keeps them (``keepdims``), else None."""
    axis = p.attr(call, "axis")
    if axis is None or not bool(p.attr(call, "keepdims", False)):
        return None
    return tuple(sorted(int(a) % rank for a in axis))


def _eps(value: float) -> float:
    """An epsilon read from a float32 constant, as the model's author wrote it (1e-05, not
    9.99999974e-06): the shortest decimal that gives the same float32, which is what a .pt2 holds."""
    return float(str(np.float32(value)))


def _standardized(p: Pass, nrm):
    """``(x - mean(x)) / sqrt(var(x) + eps)`` bound to ``nrm``, the variance written as
    ``variance(x)`` (TVM's InstanceNormalization) or ``mean((x - mean(x))^2)`` (torch's exporter),
    every reduction over the same axes keeping them, every intermediate read only inside it ->
    (x, axes, eps, intermediates), else None."""
    div = p.call(nrm, "relax.divide") if p.single(nrm) else None
    if div is None:
        return None
    d, s = div.args
    sq = p.call(s, "relax.sqrt") if p.single(s) else None
    ve = p.call(sq.args[0], "relax.add") if sq is not None and p.single(sq.args[0]) else None
    var_, eps_c = _operands(p, ve) if ve is not None else (None, None)
    eps = p.scalar(eps_c) if var_ is not None else None
    sub = p.call(d, "relax.subtract")
    if eps is None or sub is None or not p.single(var_):
        return None
    x, mu = sub.args
    mm = p.call(mu, "relax.mean") if p.single(mu) else None
    shape = p.shape(x)
    if mm is None or not mm.args[0].same_as(x) or shape is None:
        return None
    axes = _kept_axes(p, mm, len(shape))
    vc = p.call(var_, "relax.variance", "relax.mean")
    if axes is None or vc is None or _kept_axes(p, vc, len(shape)) != axes:
        return None
    inner = [nrm, s, sq.args[0], var_, d, mu]
    if vc.op.name == "relax.variance":
        if not vc.args[0].same_as(x) or not p.single(d):
            return None
    else:
        pw = p.call(vc.args[0], "relax.power") if p.single(vc.args[0]) else None
        if pw is None or not pw.args[0].same_as(d) or p.uses.get(d, 0) != 2 or p.scalar(pw.args[1]) != 2.0:
            return None
        inner.append(vc.args[0])
    return x, axes, _eps(eps), inner


def _per_channel(p: Pass, k, c: int, axis: int, rank: int):
    """The constant ``k`` (float32: ``c`` values along ``axis`` of a rank-``rank`` tensor, or one
    value for all) as a (c,) constant under the model's name for ``k``, else None."""
    a = p.const(k)
    if a is None or a.dtype != np.float32 or a.size not in (1, c) or a.ndim > rank:
        return None
    full = (1,) * (rank - a.ndim) + a.shape
    if any(n != 1 for i, n in enumerate(full) if i != axis):
        return None
    return k if a.shape == (c,) else p.derive(_const(p, np.broadcast_to(a.reshape(-1), (c,)), "float32"), k)


def _affine_of(p: Pass, v):
    """``add(multiply(n, gamma), beta)`` at root ``v`` (both constants, each intermediate read once)
    -> (n, gamma, beta, the multiply), else None."""
    m, beta = _operands(p, v)
    mul = p.call(m, "relax.multiply") if m is not None and p.single(m) else None
    n, gamma = _operands(p, mul) if mul is not None else (None, None)
    return None if n is None else (n, gamma, beta, m)


def _arithmetic_norm(p: Pass, v):
    """(x, shape, axes, eps, gamma, beta, intermediates) of an affine norm written as arithmetic."""
    found = _affine_of(p, v)
    std = _standardized(p, found[0]) if found is not None else None
    if std is None or p.dtype(std[0]) != "float32":
        return None
    nrm, gamma, beta, m = found
    x, axes, eps, inner = std
    return x, p.shape(x), axes, eps, gamma, beta, (m, *inner)


def layer_norm_arithmetic(p: Pass, var, v):
    """``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma + beta`` over the last axis,
    gamma and beta along it, every intermediate read only inside it ->
    ``layer_norm(x, gamma, beta, axes=[-1], epsilon=eps)``: how torch's ONNX exporter writes a
    LayerNorm before opset 17 (nine ops), where opset 17 and a .pt2 give one.  The op takes the node
    that made the output (the last add)."""
    found = _arithmetic_norm(p, v)
    if found is None:
        return None
    x, shape, axes, eps, gamma, beta, consumed = found
    rank = len(shape)
    if axes != (rank - 1,):
        return None
    affine = [_per_channel(p, k, shape[-1], rank - 1, rank) for k in (gamma, beta)]
    if None in affine:
        return None
    out = p.emit(p.relax.op.nn.layer_norm(p.m(x), affine[0], affine[1], axes=[-1], epsilon=eps), like=var)
    return Match(out, consumed, f"part of a LayerNorm written as arithmetic: imported as one layer_norm op named "
                                f"after the node that makes its output ({p.src_name(var)!r})")  # fmt: skip


def instance_norm_arithmetic(p: Pass, var, v):
    """The same arithmetic over every axis after the channel axis (1) of an ``[N, C, ...]`` tensor,
    the variance as ``variance(x)`` or as the mean of the squares, gamma and beta along the channel
    axis -> ``instance_norm(x, gamma, beta, channel_axis=1, axes=[2, ...], epsilon=eps)``: TVM's
    import of ONNX InstanceNormalization (eight ops), where a .pt2 gives one instance_norm."""
    found = _arithmetic_norm(p, v)
    if found is None:
        return None
    x, shape, axes, eps, gamma, beta, consumed = found
    rank = len(shape)
    if rank < 3 or axes != tuple(range(2, rank)):
        return None
    affine = [_per_channel(p, k, shape[1], 1, rank) for k in (gamma, beta)]
    if None in affine:
        return None
    out = p.emit(p.relax.op.nn.instance_norm(p.m(x), affine[0], affine[1], channel_axis=1, axes=list(range(2, rank)),
                                             epsilon=eps), like=var)  # fmt: skip
    return Match(out, consumed, f"part of an instance normalization written as arithmetic: imported as one "
                                f"instance_norm op named after the node that makes its output ({p.src_name(var)!r})")  # fmt: skip


def _norm_between_reshapes(p: Pass, v):
    """``reshape(instance_norm(reshape(x)), shape(x))``, the inner values read once ->
    (x, its shape, the instance_norm call, the inner reshape's shape, consumed), else None."""
    inner = v.args[0]
    norm = p.call(inner, "relax.nn.instance_norm") if p.single(inner) else None
    y = norm.args[0] if norm is not None else None
    r = p.call(y, "relax.reshape") if y is not None and p.single(y) else None
    if r is None:
        return None
    x = r.args[0]
    shape = p.shape(x)
    if shape is None or len(shape) < 3 or p.shape(y) is None:
        return None
    if int(p.attr(norm, "channel_axis", 1)) != 1 or p.dtype(x) != "float32":
        return None
    return x, shape, norm, p.shape(y), (inner, y)


def _norm_affine(p: Pass, norm, c: int):
    """(gamma, beta) of a norm call as numpy arrays of ``c`` values (1 / 0 where it has none), else None."""
    g, b = p.const(norm.args[1]), p.const(norm.args[2])
    if g is None or b is None or g.size != c or b.size != c:
        return None
    g = g.reshape(c) if p.attr(norm, "scale", True) else np.ones(c, np.float32)
    b = b.reshape(c) if p.attr(norm, "center", True) else np.zeros(c, np.float32)
    return g.astype(np.float32), b.astype(np.float32)


def group_norm_grouped(p: Pass, var, v):
    """``reshape(instance_norm(reshape(x, [N, G, C/G * H * W ...]), g, b), shape(x))`` (torch's ONNX
    export of GroupNorm: the instance norm of the groups, g and b per group) ->
    ``group_norm(x, repeat(g), repeat(b), num_groups=G, channel_axis=1, axes=[2, ...])``, as a .pt2
    writes GroupNorm; the Mul and Add of gamma and beta after it are the ``norm_affine`` rule's."""
    found = _norm_between_reshapes(p, v)
    if found is None:
        return None
    x, shape, norm, gshape, consumed = found
    n, c = shape[:2]
    if p.shape(var) != shape or len(gshape) != 3 or gshape[0] != n or c % gshape[1]:
        return None
    groups = gshape[1]
    if gshape[2] != c // groups * math.prod(shape[2:]) or _kept(p, norm, 3) != (2,):
        return None
    affine = _norm_affine(p, norm, groups)
    if affine is None:
        return None
    g, b = (p.derive(_const(p, np.repeat(a, c // groups), "float32"), k) for a, k in zip(affine, norm.args[1:3]))
    rank = len(shape)
    out = p.emit(p.relax.op.nn.group_norm(p.m(x), g, b, num_groups=groups, channel_axis=1, axes=list(range(2, rank)),
                                          epsilon=float(p.attr(norm, "epsilon", 1e-5))), like=var)  # fmt: skip
    # (no node named: the gamma and beta after it make the op the Add's, see norm_affine)
    return Match(out, consumed, "part of a GroupNorm written as an instance norm of its groups between two reshapes: "
                                "imported as one group_norm op")  # fmt: skip


def _kept(p: Pass, norm, rank: int) -> tuple[int, ...]:
    """A norm's ``axes``, sorted and counted from the start."""
    return tuple(sorted(int(a) % rank for a in (p.attr(norm, "axes", ()) or ())))


def instance_norm_batched(p: Pass, var, v):
    """``reshape(instance_norm(reshape(x, [1, N*C, ...]), tile(g, N), tile(b, N), axes=[0, 2, ...]),
    shape(x))`` (torch.export's instance norm of a batch of N > 1, through batch_norm) ->
    ``instance_norm(x, g, b, channel_axis=1, axes=[2, ...])``, as ONNX InstanceNormalization gives."""
    found = _norm_between_reshapes(p, v)
    if found is None:
        return None
    x, shape, norm, fshape, consumed = found
    n, c, rank = shape[0], shape[1], len(shape)
    if p.shape(var) != shape or fshape != (1, n * c) + shape[2:]:
        return None
    if set(_kept(p, norm, rank)) - {0} != set(range(2, rank)):
        return None
    affine = _norm_affine(p, norm, n * c)
    if affine is None or any(not np.array_equal(a, np.tile(a[:c], n)) for a in affine):
        return None
    g, b = (p.derive(_const(p, a[:c], "float32"), k) for a, k in zip(affine, norm.args[1:3]))
    out = p.emit(p.relax.op.nn.instance_norm(p.m(x), g, b, channel_axis=1, axes=list(range(2, rank)),
                                             epsilon=float(p.attr(norm, "epsilon", 1e-5))), like=var)  # fmt: skip
    return Match(out, consumed, "part of an instance norm written on the batch viewed as one sample: imported as "
                                "one instance_norm op")  # fmt: skip


_ATTRS = {
    "relax.nn.layer_norm": ("axes", "epsilon", "center", "scale"),
    "relax.nn.group_norm": ("num_groups", "channel_axis", "axes", "epsilon", "center", "scale"),
    "relax.nn.instance_norm": ("channel_axis", "axes", "epsilon", "center", "scale"),
    "relax.nn.rms_norm": ("axes", "epsilon"),
}


def _norm_call(p: Pass, v, args, **over):
    """The norm op of call ``v`` on ``args``, its attributes ``v``'s but ``over``."""
    kw = {}
    for k in _ATTRS[v.op.name]:
        val = over[k] if k in over else p.attr(v, k)
        kw[k] = ([int(a) for a in val] if k == "axes" else float(val) if k == "epsilon"
                 else bool(val) if k in ("center", "scale") else int(val))  # fmt: skip
    return getattr(p.relax.op.nn, v.op.name.rsplit(".", 1)[-1])(*args, **kw)


def norm_epsilon(p: Pass, var, v):
    """A norm whose epsilon is a float32 number (ONNX holds epsilon as float32: LayerNormalization's
    1e-5 imports as 9.99999974e-06) -> the same norm with the shortest decimal of that float32
    (1e-05), as a .pt2 holds it, so that both formats give the same op.  Equal values: the norm
    computes with epsilon in float32."""
    eps = p.attr(v, "epsilon")
    if eps is None or float(eps) != float(np.float32(eps)) or _eps(float(eps)) == float(eps):
        return None
    return Match(p.emit(_norm_call(p, v, [p.m(a) for a in v.args], epsilon=_eps(float(eps))), like=var))


def instance_norm_batch_axis(p: Pass, var, v):
    """``instance_norm(x, ..., axes=[0, 2, ...])`` of a batch of one (torch.export's, through
    batch_norm) -> the same over ``[2, ...]``, as ONNX InstanceNormalization gives (equal: axis 0
    has one element)."""
    shape = p.shape(v.args[0])
    if shape is None or len(shape) < 3 or shape[0] != 1 or int(p.attr(v, "channel_axis", 1)) != 1:
        return None
    axes = _kept(p, v, len(shape))
    if 0 not in axes or set(axes) - {0} != set(range(2, len(shape))):
        return None
    out = p.emit(_norm_call(p, v, [p.m(a) for a in v.args], axes=list(range(2, len(shape)))), like=var)
    return Match(out)


_NORMS = ("relax.nn.group_norm", "relax.nn.instance_norm")


def norm_affine(p: Pass, var, v):
    """``norm(x) * gamma + beta`` with a group or instance norm whose own gamma is 1 and beta 0 (or
    that has none: ``scale``/``center`` false), gamma and beta constants along its channel axis, the
    norm and the product read once -> the norm with that gamma and beta: torch's ONNX export of
    GroupNorm and ONNX GroupNormalization-21 both apply them after the norm.  gamma and beta keep
    the model's names.  The op takes the node that made the output (the add)."""
    found = _affine_of(p, v)
    n = found[0] if found is not None else None
    norm = p.call(n, *_NORMS) if n is not None and p.single(n) else None
    shape = p.shape(n) if norm is not None else None
    if shape is None:
        return None
    rank = len(shape)
    axis = int(p.attr(norm, "channel_axis", 1)) % rank
    own = _norm_affine(p, norm, shape[axis])
    if own is None or not (own[0] == 1).all() or own[1].any():
        return None
    gamma, beta = (_per_channel(p, k, shape[axis], axis, rank) for k in found[1:3])
    if gamma is None or beta is None or p.shape(var) != shape:
        return None
    out = p.emit(_norm_call(p, norm, [p.m(norm.args[0]), gamma, beta], center=True, scale=True), like=var)
    kind = norm.op.name.rsplit(".", 1)[-1]
    return Match(out, (n, found[3]), f"part of a {kind} whose gamma and beta are applied after it: imported as one "
                                     f"{kind} op named after the node that makes its output ({p.src_name(var)!r})")  # fmt: skip
