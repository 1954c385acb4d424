"""Canonical-form rules for reductions (see ``canon`` and ``canon_rules``): torch.export's
``max(dim)`` (a top-1 whose indices nobody reads) and ``linalg_vector_norm`` (abs, power 2, sum,
power 0.5) as the ONNX exporter writes them (ReduceMax; ReduceL2: multiply, sum, sqrt)."""

from __future__ import annotations

from .canon import Match, Pass, _prim

_REDUCES = ("relax.max", "relax.min", "relax.sum", "relax.mean", "relax.prod")


def topk_as_max(p: Pass, var, v):
    """``topk(x, k=1, axis, largest)[0]`` with the indices read by nobody (torch.export's
    ``x.max(dim, keepdim=True)[0]``) -> ``max(x, axis, keepdims=True)`` (``min`` for the smallest),
    the one op ONNX's ReduceMax is.  Exact: the same element is picked."""
    t = v.tuple_value
    topk = p.call(t, "relax.topk")
    if topk is None or v.index != 0 or int(p.attr(topk, "k", 0)) != 1:
        return None
    readers = [d for k, d in p.defs.items() if isinstance(d, p.relax.TupleGetItem) and d.tuple_value.same_as(t)
               and p.uses.get(k, 0) > 0]  # (the live ones: torch.export binds the unused indices too)
    if any(d.index != 0 for d in readers) or len(readers) != p.uses.get(t, -1):
        return None
    shape = p.shape(topk.args[0])
    if shape is None or str(p.attr(topk, "ret_type", "both")) not in ("both", "values"):
        return None
    axis = int(p.attr(topk, "axis", -1)) % len(shape)
    reduce = p.relax.op.max if bool(p.attr(topk, "largest", True)) else p.relax.op.min
    out = p.emit(reduce(p.m(topk.args[0]), axis=[axis], keepdims=True), like=t)
    return Match(out, (t,), "a top-1 whose indices nobody reads written as a max at import")


def squeezed_reduce(p: Pass, var, v):
    """``squeeze(reduce(x, axes, keepdims=True), axes)`` (the reduction read once; torch.export's
    ``x.max(dim)[0]``) -> ``reduce(x, axes, keepdims=False)``, one op as ONNX's ReduceMax with
    keepdims=0.  Exact."""
    inner = p.call(v.args[0], *_REDUCES)
    if inner is None or not p.single(v.args[0]) or not bool(p.attr(inner, "keepdims", False)):
        return None
    shape = p.shape(inner.args[0])
    axes = p.attr(inner, "axis", None)
    squeezed = p.attr(v, "axis", None)
    if shape is None or axes is None or squeezed is None:
        return None
    rank = len(shape)
    if sorted(int(a) % rank for a in axes) != sorted(int(a) % rank for a in squeezed):
        return None
    name = inner.op.name.rsplit(".", 1)[-1]
    out = p.emit(getattr(p.relax.op, name)(p.m(inner.args[0]), axis=[int(a) % rank for a in axes], keepdims=False),
                 like=v.args[0])  # fmt: skip
    return Match(out, (v.args[0],), "a reduction and the squeeze of its kept axes written as one at import")


def l2_norm(p: Pass, var, v):
    """``power(sum(power(abs(x), 2), axes), 0.5)`` (torch.export's ``linalg_vector_norm``, ``norm``,
    ``F.normalize``) -> ``sqrt(sum(x * x, axes))``, ONNX's ReduceL2 as TVM imports it.  Equal to
    within fp32 rounding (``powf(y, 0.5)`` and ``sqrtf(y)``)."""
    half = p.scalar(v.args[1])
    s = p.call(v.args[0], "relax.sum")
    if half != 0.5 or s is None or not p.single(v.args[0]):
        return None
    sq = p.call(s.args[0], "relax.power")
    if sq is None or not p.single(s.args[0]) or p.scalar(sq.args[1]) != 2.0:
        return None
    x, gone = sq.args[0], [v.args[0], s.args[0]]
    a = p.call(x, "relax.abs")
    if a is not None and p.single(x):
        gone.append(x)
        x = a.args[0]
    if not p.dtype(x).startswith("float"):
        return None
    xx = p.emit(p.relax.op.multiply(p.m(x), p.m(x)), like=s.args[0])
    axes = p.attr(s, "axis", None)
    total = p.emit(p.relax.op.sum(xx, axis=None if axes is None else [int(_prim(i)) for i in axes],
                                  keepdims=bool(p.attr(s, "keepdims", False))), like=v.args[0])  # fmt: skip
    out = p.emit(p.relax.op.sqrt(total), like=var)
    return Match(out, tuple(gone), "an L2 norm written as ONNX's ReduceL2 (multiply, sum, sqrt) at import")


def adaptive_pool_as_pool(p: Pass, var, v):
    """``adaptive_avg_pool{1,2,3}d(x, output_size)`` whose every output size divides its input size
    (torch.export keeps ``AdaptiveAvgPool2d(4)`` of 8 x 8 as the adaptive op) -> ``avg_pool`` with
    kernel = stride = input / output, as torch's ONNX exporter writes it (AveragePool; it cannot write
    another adaptive pool) and TFLite holds it (AVERAGE_POOL_2D); an output of one pixel -> ``mean``
    over the spatial axes, as ONNX's GlobalAveragePool imports.  Exact: the same windows."""
    shape = p.shape(v.args[0])
    layout = str(p.attr(v, "layout", "") or "")
    out_layout = str(p.attr(v, "out_layout", "") or layout)
    size = p.attr(v, "output_size", None)
    if shape is None or not layout or out_layout != layout or len(layout) != len(shape):
        return None
    spatial = [k for k, c in enumerate(layout) if c in "DHW"]
    sizes = [shape[k] for k in spatial]
    outs = sizes if size is None else [int(_prim(s)) for s in size]
    if len(outs) == 1 and len(spatial) > 1:
        outs = outs * len(spatial)
    if len(outs) != len(spatial) or any(o <= 0 or i % o for i, o in zip(sizes, outs, strict=True)):
        return None
    if all(o == 1 for o in outs):
        out = p.emit(p.relax.op.mean(p.m(v.args[0]), axis=spatial, keepdims=True), like=var)
        return Match(out, (), "")
    k = [i // o for i, o in zip(sizes, outs, strict=True)]
    pool = getattr(p.relax.op.nn, f"avg_pool{len(spatial)}d")
    out = p.emit(pool(p.m(v.args[0]), pool_size=k, strides=k, padding=[0] * (2 * len(k)), layout=layout,
                      out_layout=layout), like=var)  # fmt: skip
    return Match(out, (), "")


def unit_axis_reduce(p: Pass, var, v):
    """``squeeze(reduce(expand_dims(x, E), A, keepdims=True), E)`` with the inserted unit axes ``E``
    among the reduced ``A`` (torch.export's ``AdaptiveAvgPool1d(1)`` and other 1-D pools, run as
    their 2-D form on an unsqueezed input) -> ``reduce(x, A - E, keepdims=True)``, the one op ONNX's
    GlobalAveragePool / ReduceMean is.  Exact: reducing an axis of one element changes nothing."""
    r = p.call(v.args[0], *_REDUCES)
    if r is None or not p.single(v.args[0]) or not bool(p.attr(r, "keepdims", False)):
        return None
    e = p.call(r.args[0], "relax.expand_dims")
    if e is None or not p.single(r.args[0]):
        return None
    x_shape, shape = p.shape(e.args[0]), p.shape(r.args[0])
    axes, inserted, squeezed = p.attr(r, "axis", None), p.attr(e, "axis", None), p.attr(v, "axis", None)
    if x_shape is None or shape is None or axes is None or inserted is None or squeezed is None:
        return None
    n = len(shape)
    ins = sorted({int(a) % n for a in inserted})
    red = {int(a) % n for a in axes}
    if sorted({int(a) % n for a in squeezed}) != ins or not set(ins) <= red or len(ins) + len(x_shape) != n:
        return None
    kept = [k for k in range(n) if k not in ins]  # x's axis j stands at kept[j]
    left = [j for j, k in enumerate(kept) if k in red]
    if not left:  # (only the unit axes reduced: nothing to compute)
        return None
    name = r.op.name.rsplit(".", 1)[-1]
    out = p.emit(getattr(p.relax.op, name)(p.m(e.args[0]), axis=left, keepdims=True), like=v.args[0])
    return Match(out, (v.args[0], r.args[0]), "a reduction over an inserted axis of one element written as one at import")


def unit_axis_dropped(p: Pass, var, v):
    """``reduce(expand_dims(x, E), A, keepdims=False)`` with the inserted unit axes ``E`` among the
    reduced ``A`` -> ``reduce(x, A - E, keepdims=False)`` (see ``unit_axis_reduce``).  Exact."""
    if bool(p.attr(v, "keepdims", False)):
        return None
    e = p.call(v.args[0], "relax.expand_dims")
    if e is None or not p.single(v.args[0]):
        return None
    x_shape, shape = p.shape(e.args[0]), p.shape(v.args[0])
    axes, inserted = p.attr(v, "axis", None), p.attr(e, "axis", None)
    if x_shape is None or shape is None or axes is None or inserted is None:
        return None
    n = len(shape)
    ins = {int(a) % n for a in inserted}
    red = {int(a) % n for a in axes}
    kept = [k for k in range(n) if k not in ins]
    left = [j for j, k in enumerate(kept) if k in red]
    if not ins <= red or len(ins) + len(x_shape) != n or not left:
        return None
    name = v.op.name.rsplit(".", 1)[-1]
    out = p.emit(getattr(p.relax.op, name)(p.m(e.args[0]), axis=left, keepdims=False), like=var)
    return Match(out, (v.args[0],), "a reduction over an inserted axis of one element written as one at import")


_POOLS_2D = {"relax.nn.max_pool2d": "max_pool1d", "relax.nn.avg_pool2d": "avg_pool1d"}


def pool_1d(p: Pass, var, v):
    """``squeeze(pool2d(expand_dims(x, H), (1, k)), H)`` over an NCW input (torch.export's
    ``max_pool1d`` / ``avg_pool1d``, run as the 2-D pool on an unsqueezed input) -> ``pool1d(x, k)``
    with the same strides, padding, dilation and rounding, the one op ONNX's MaxPool / AveragePool
    of a 1-D input is.  Exact: the window over the unit axis holds its one element."""
    pool = p.call(v.args[0], *_POOLS_2D)
    if pool is None or not p.single(v.args[0]):
        return None
    e = p.call(pool.args[0], "relax.expand_dims")
    if e is None:
        return None
    x_shape = p.shape(e.args[0])
    if x_shape is None or len(x_shape) != 3:
        return None
    ins, sq = p.attr(e, "axis", None), p.attr(v, "axis", None)
    if ins is None or sq is None or [int(a) % 4 for a in ins] != [2] or [int(a) % 4 for a in sq] != [2]:
        return None
    if str(p.attr(pool, "layout", "")) != "NCHW" or str(p.attr(pool, "out_layout", "") or "NCHW") != "NCHW":
        return None
    size, strides, dilation, padding = ([int(_prim(a)) for a in p.attr(pool, k, ())] for k in
                                        ("pool_size", "strides", "dilation", "padding"))  # fmt: skip
    if len(size) != 2 or size[0] != 1 or len(padding) != 4 or padding[0] or padding[2] or len(strides) != 2:
        return None
    op = getattr(p.relax.op.nn, _POOLS_2D[pool.op.name])
    out = p.emit(op(p.m(e.args[0]), pool_size=[size[1]], strides=[strides[1]], padding=[padding[1], padding[3]],
                    dilation=[dilation[1] if len(dilation) == 2 else 1], ceil_mode=bool(p.attr(pool, "ceil_mode", False)),
                    count_include_pad=bool(p.attr(pool, "count_include_pad", False)), layout="NCW", out_layout="NCW"),
                 like=v.args[0])  # fmt: skip
    gone = (v.args[0], pool.args[0]) if p.single(pool.args[0]) else (v.args[0],)
    return Match(out, gone, "a 1-D pool run as a 2-D pool on an unsqueezed input written as one at import")
