"""Canonical-form rules for data movement (see ``canon`` and ``canon_rules``): roll, chunk, identity
views, chained views, flattened linear layers and batched matmuls.  Each rewrite moves the same
values: exact."""

from __future__ import annotations

import math

import numpy as np

from .canon import Match, Pass, _axes, _operands, _prim


def _static_index(p: Pass, x, depth: int = 0) -> np.ndarray | None:
    """The value of an integer index computed from constants (``arange``, ``add``, ``subtract``,
    ``multiply``, ``mod``, ``floor_mod``), else None."""
    c = p.const(x)
    if c is not None:
        return c if c.dtype.kind in "iu" else None
    call = p.call(x)
    if call is None or depth > 8:
        return None
    name = call.op.name.rsplit(".", 1)[-1]
    if name == "arange":
        start, end, step = (int(_prim(a)) for a in call.args[:3])
        return np.arange(start, end, step, dtype=np.int64)
    ops = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "mod": np.mod, "floor_mod": np.mod}
    if name not in ops or len(call.args) != 2:
        return None
    a, b = (_static_index(p, y, depth + 1) for y in call.args)
    return None if a is None or b is None else ops[name](a, b)


def _slice(p: Pass, x, axis: int, begin: int, end: int, like):
    return p.emit(p.relax.op.strided_slice(x, [axis], [begin], [end], [1]), like=like)


def roll_as_slices(p: Pass, var, v):
    """``take(x, (arange(n) + k) mod n, axis)`` (torch.export's ``roll``; any index computed from
    constants that rotates the axis) -> ``concat(x[k:], x[:k], axis)``, what the ONNX exporter
    writes: two slices and a concat, plain data movement.  An index that is ``arange(n)`` is no op."""
    x, idx = v.args
    shape = p.shape(x)
    index = _static_index(p, idx)
    if shape is None or index is None or index.ndim != 1:
        return None
    axis = int(p.attr(v, "axis", 0)) % len(shape)
    n = shape[axis]
    if len(index) != n or n == 0:
        return None
    k = int(index[0]) % n
    if not np.array_equal(index % n, (np.arange(n) + k) % n) or (index < 0).any() or (index >= n).any():
        return None
    if k == 0:
        return Match(p.m(x), (), "an identity gather removed at import")
    a = _slice(p, p.m(x), axis, k, n, like=var)
    b = _slice(p, p.m(x), axis, 0, k, like=var)
    out = p.emit(p.relax.op.concat([a, b], axis), like=var)
    return Match(out, (), "roll written as slices and a concat at import")


def negative_index(p: Pass, var, v):
    """``take(x, k, axis)`` with a constant index counting from the end (``k < 0``: torch.export's
    ``x[:, -1]`` is ``select(-1)`` read as ``take(x, -1)``) -> the same index counted from the start,
    ``k + n``, as the ONNX importer writes a Gather's negative index.  TVM's ``take`` in its "fast"
    mode reads a negative index before the tensor: the generated code and the simulation read memory
    that is not the tensor's."""
    x, idx = v.args
    shape = p.shape(x)
    index = p.const(idx)
    if shape is None or index is None or index.dtype.kind != "i" or not (index < 0).any():
        return None
    n = shape[int(p.attr(v, "axis", 0)) % len(shape)]
    if n is None or not ((index >= -n) & (index < n)).all():
        return None  # (out of range either way: left as the model wrote it)
    fixed = p.relax.const(np.where(index < 0, index + n, index).astype(index.dtype), str(index.dtype))
    out = p.new_call(v, [p.m(x), fixed], like=var)
    return Match(out, (), "a negative index counted from the start at import")


def chunk_as_slices(p: Pass, var, v):
    """The ``split`` of a ``torch.chunk`` -> one ``strided_slice`` per piece, how torch's ONNX
    exporter writes ``chunk`` (one Slice node per chunk); the pieces' readers take the slices.
    Other splits stay ``split`` in every format (torch.split and ONNX Split are a split both ways)."""
    if not p.src_op(var).startswith("aten.chunk"):
        return None
    shape = p.shape(v.args[0])
    fields = getattr(var.ty, "fields", None)
    if shape is None or fields is None:
        return None
    axis = int(p.attr(v, "axis", 0)) % len(shape)
    begin, parts = 0, []
    for f in fields:
        size = int(f.shape[axis])
        parts.append(_slice(p, p.m(v.args[0]), axis, begin, begin + size, like=var))
        begin += size
    return Match(p.relax.Tuple(parts), (), "split written as slices at import")


def unbind_as_split(p: Pass, var, v):
    """A ``strided_slice`` of a ``torch.unbind`` (torch.export's import writes one slice of width 1 per
    piece) -> that field of one ``split`` of the axis in pieces of 1, how the ONNX exporter writes
    unbind (Split, then one Squeeze per piece): one op for the whole unbind in both formats.  The
    splits of one unbind's slices are one common subexpression at the next pass."""
    if not p.src_op(var).startswith("aten.unbind"):
        return None
    shape = p.shape(v.args[0])
    axes, begin, end, strides = (_ints(a) for a in v.args[1:5])
    if shape is None or None in (axes, begin, end, strides) or len(axes) != 1 or strides != [1]:
        return None
    axis, k = axes[0] % len(shape), begin[0]
    if not 0 <= k < shape[axis] or end[0] != k + 1 or shape[axis] < 2:
        return None
    parts = p.emit(p.relax.op.split(p.m(v.args[0]), shape[axis], axis), like=var)
    return Match(p.emit(p.relax.TupleGetItem(parts, k), like=var), (), "unbind written as one split at import")


def _ints(x) -> list[int] | None:
    """The integers of a constant tuple / shape argument (a strided slice's axes, begin ...), else None."""
    try:
        return [int(_prim(y)) for y in (x.fields if hasattr(x, "fields") else x.values)]
    except (AttributeError, TypeError, ValueError):
        return None


def identity(p: Pass, var, v):
    """``reshape`` / ``broadcast_to`` to the shape the tensor has, ``permute_dims`` by the identity,
    ``astype`` to the dtype it has, ``pad`` by nothing on every side (torch's ONNX export before
    opset 10 writes one before an average pool): no op."""
    x = v.args[0]
    shape, want = p.shape(x), p.shape(var)
    if shape is None or shape != want or p.dtype(x) != p.dtype(var):
        return None
    name = v.op.name.rsplit(".", 1)[-1]
    if name == "permute_dims" and _axes(v, len(shape)) != list(range(len(shape))):
        return None
    if name == "pad" and any(int(w) != 0 for w in p.attr(v, "pad_width", [1])):
        return None
    return Match(p.m(x), (), f"no computation of its own: an identity {name} removed at import")


def reshape_chain(p: Pass, var, v):
    """``reshape(reshape(x))`` (the inner read once) -> one ``reshape``."""
    inner = p.call(v.args[0], "relax.reshape")
    if inner is None or not p.single(v.args[0]):
        return None
    out = p.emit(p.relax.op.reshape(p.m(inner.args[0]), p.shape(var)), like=var)
    return Match(out, (v.args[0],), "two reshapes merged into one at import")


def permute_chain(p: Pass, var, v):
    """``permute_dims(permute_dims(x, a), b)`` (the inner read once) -> ``permute_dims(x, a[b])``."""
    inner = p.call(v.args[0], "relax.permute_dims")
    shape = p.shape(v.args[0])
    if inner is None or shape is None or not p.single(v.args[0]):
        return None
    a, b = _axes(inner, len(shape)), _axes(v, len(shape))
    out = p.emit(p.relax.op.permute_dims(p.m(inner.args[0]), [a[i] for i in b]), like=var)
    return Match(out, (v.args[0],), "two transposes merged into one at import")


_ROW_NORMS = ("relax.nn.softmax", "relax.nn.log_softmax")


def coerced_softmax(p: Pass, var, v):
    """``reshape(softmax(reshape(x, [m, n]), axis=-1), shape(x))`` with ``n`` the last dimension of
    ``x`` (TVM's import of an ONNX ``Softmax`` / ``LogSoftmax`` before opset 13, which coerces its
    input to 2-D, on the last axis) -> ``softmax(x, axis=-1)``, the one op the same layer is from
    opset 13, from torch.export and from TFLite.  Exact: the rows are the same rows."""
    norm = p.call(v.args[0], *_ROW_NORMS)
    if norm is None or not p.single(v.args[0]):
        return None
    flat = p.call(norm.args[0], "relax.reshape")
    if flat is None or not p.single(norm.args[0]):
        return None
    x = flat.args[0]
    shape, two_d = p.shape(x), p.shape(norm.args[0])
    if shape is None or two_d is None or len(two_d) != 2 or int(p.attr(norm, "axis", -1)) not in (-1, 1):
        return None
    if len(shape) < 2 or two_d != (math.prod(shape[:-1]), shape[-1]) or p.shape(var) != shape:
        return None
    out = p.new_call(norm, [p.m(x)], like=v.args[0])
    return Match(out, (v.args[0], norm.args[0]), "a softmax over the last axis written without its 2-D "
                                                 "reshapes at import (ONNX before opset 13)")  # fmt: skip


def transposed_softmax(p: Pass, var, v):
    """``permute_dims(softmax(permute_dims(x, a), axis=k), b)`` with ``b`` undoing ``a`` (torch's ONNX
    exporter before opset 13 writes a softmax over a dimension other than the last as Transpose,
    Softmax, Transpose) -> ``softmax(x, axis=a[k])``, the one op of opset 13 and of torch.export.
    Exact: the same values, normalised along the same axis."""
    norm = p.call(v.args[0], *_ROW_NORMS)
    if norm is None or not p.single(v.args[0]):
        return None
    inner = p.call(norm.args[0], "relax.permute_dims")
    shape = p.shape(norm.args[0])
    if inner is None or shape is None:  # (a softmax and a log-softmax of one tensor share its transpose)
        return None
    rank = len(shape)
    a, b = _axes(inner, rank), _axes(v, rank)
    if any(a[b[j]] != j for j in range(rank)):
        return None
    axis = a[int(p.attr(norm, "axis", -1)) % rank]
    out = p.emit(getattr(p.relax.op.nn, norm.op.name.rsplit(".", 1)[-1])(p.m(inner.args[0]), axis=axis), like=v.args[0])
    # (the transpose, when others read it too, goes when its last reader was rewritten: a pass later)
    return Match(out, (v.args[0], norm.args[0]), "a softmax over one axis written without the transposes "
                                                 "around it at import (ONNX before opset 13)")  # fmt: skip


def transpose_after_softmax(p: Pass, var, v):
    """``permute_dims(softmax(x, axis=k), b)`` (the softmax read once) -> ``softmax(permute_dims(x, b),
    axis=b.index(k))``: a transpose is written before the softmax it commutes with.  torch's ONNX
    exporter before opset 13 cancels the transpose it puts before a softmax over a dimension other
    than the last against the model's own transpose there (``softmax(x.transpose(1, 2), dim=1)``
    became Softmax(x, axis=2), Transpose), where opset 13 and torch.export keep the model's order;
    a model transpose others read too is then computed once (common subexpression).  Exact."""
    norm = p.call(v.args[0], *_ROW_NORMS)
    if norm is None or not p.single(v.args[0]):
        return None
    shape = p.shape(norm.args[0])
    if shape is None:
        return None
    rank = len(shape)
    b = _axes(v, rank)
    axis = b.index(int(p.attr(norm, "axis", -1)) % rank)
    moved = p.emit(p.relax.op.permute_dims(p.m(norm.args[0]), b), like=var)
    out = p.emit(getattr(p.relax.op.nn, norm.op.name.rsplit(".", 1)[-1])(moved, axis=axis), like=v.args[0])
    return Match(out, (v.args[0],))


def _flat_matmul(p: Pass, mm):
    """``matmul(reshape(x, [prod(lead), k]), W)`` with a constant 2-D ``W``: (x, W) else None."""
    call = p.call(mm, "relax.matmul")
    if call is None or not p.single(mm):
        return None
    r, w = call.args
    flat = p.call(r, "relax.reshape")
    weight = p.const(w)
    if flat is None or weight is None or weight.ndim != 2 or not p.single(r):
        return None
    x = flat.args[0]
    shape = p.shape(x)
    if shape is None or len(shape) < 2 or p.shape(r) != (math.prod(shape[:-1]), shape[-1]):
        return None
    return call, x, r


def linear_unflattened(p: Pass, var, v):
    """``reshape(matmul(reshape(x, [m, k]), W) [+ b], lead + [n])`` (torch.export's ``linear`` on an
    N-D input) -> ``matmul(x, W) [+ b]`` on the N-D input, as ONNX's MatMul writes it."""
    y = v.args[0]
    add, bias = p.call(y, "relax.add"), None
    mm = y
    if add is not None and p.single(y):
        mm, bias = _operands(p, add)
        if mm is None or p.const(bias).ndim > 1:
            return None
    found = _flat_matmul(p, mm)
    if found is None:
        return None
    call, x, r = found
    shape = p.shape(x)
    if p.shape(var) != shape[:-1] + (p.shape(mm)[-1],):
        return None
    out = p.new_call(call, [p.m(x), call.args[1]], like=mm)
    if bias is not None:
        out = p.emit(p.relax.op.add(out, bias), like=y)
    return Match(out, (mm, r) + ((y,) if bias is not None else ()), "a flattened linear layer written on its "
                                                                     "N-D input at import")  # fmt: skip


def batched_matmul(p: Pass, var, v):
    """``reshape(matmul(reshape(a, [B, m, k]), reshape(b, [B, k, n])), lead + [m, n])`` with
    ``prod(lead) = B`` and no broadcasting (torch's bmm decomposition) -> ``matmul(a, b)``."""
    call = p.call(v.args[0], "relax.matmul")
    if call is None or not p.single(v.args[0]):
        return None
    ins = []
    for r in call.args:
        flat = p.call(r, "relax.reshape")
        if flat is None or not p.single(r):
            return None
        ins.append((r, flat.args[0]))
    (ra, a), (rb, b) = ins
    sa, sb, out_shape = p.shape(a), p.shape(b), p.shape(var)
    if None in (sa, sb, out_shape) or len(sa) < 3 or sa[:-2] != sb[:-2] or out_shape != sa[:-1] + sb[-1:]:
        return None
    batch = math.prod(sa[:-2])
    if p.shape(ra) != (batch,) + sa[-2:] or p.shape(rb) != (batch,) + sb[-2:]:
        return None
    out = p.new_call(call, [p.m(a), p.m(b)], like=v.args[0])
    return Match(out, (v.args[0], ra, rb), "a batched matmul written on its N-D inputs at import")


def _pad_of_index(index: np.ndarray, n: int) -> tuple[str, int, int] | None:
    """``(mode, before, after)`` when ``take(x, index)`` along an axis of ``n`` is a pad of that axis
    (``replicate``, ``reflect`` or ``circular``, Relax's names), else None: ``index`` is
    ``arange(n)`` with ``before`` / ``after`` entries either side, each the edge element, its mirror
    image without the edge, or the other end of the axis."""
    m = len(index)
    if n <= 0 or m <= n:
        return None
    for before in range(m - n + 1):
        after = m - n - before
        if not np.array_equal(index[before:before + n], np.arange(n)):
            continue
        head, tail = index[:before], index[before + n:]
        i, j = np.arange(before), np.arange(after)
        if (head == 0).all() and (tail == n - 1).all():
            return "replicate", before, after
        if before < n and after < n and np.array_equal(head, before - i) and np.array_equal(tail, n - 2 - j):
            return "reflect", before, after
        if before <= n and after <= n and np.array_equal(head, (i - before) % n) and np.array_equal(tail, j % n):
            return "circular", before, after
    return None


def pad_as_take(p: Pass, var, v):
    """``take(x, index, axis)`` with a constant index that repeats the edge, mirrors it or wraps
    around (torch.export's ``reflection_pad`` / ``replication_pad`` / ``circular_pad``, which TVM's
    import writes as a gather of a computed index per axis) -> ``nn.pad`` of that axis, as the ONNX
    importer writes torch's ``F.pad``: the same ops and the pad kernel, not a gather."""
    x, idx = v.args
    shape = p.shape(x)
    index = p.const(idx)
    if shape is None or index is None or index.ndim != 1 or index.dtype.kind not in "iu":
        return None
    axis = int(p.attr(v, "axis", 0)) % len(shape)
    found = _pad_of_index(index.astype(np.int64), shape[axis])
    if found is None:
        return None
    mode, before, after = found
    width = [0] * (2 * len(shape))
    width[2 * axis], width[2 * axis + 1] = before, after
    out = p.emit(p.relax.op.nn.pad(p.m(x), width, mode), like=var)
    return Match(out, (), f"a gather that pads ({mode}) written as a pad at import")


def pad_chain(p: Pass, var, v):
    """``pad(pad(x))`` of one mode (and value) on different axes (the inner read once; torch.export's
    2-D reflect pad is one gather per axis) -> one ``pad``: a pad of each axis in turn is the pad of
    both, in every mode."""
    inner = p.call(v.args[0], "relax.nn.pad")
    if inner is None or not p.single(v.args[0]):
        return None
    keys = ("pad_mode", "pad_value")
    if any(str(p.attr(inner, k, "")) != str(p.attr(v, k, "")) for k in keys):
        return None
    a = [int(w) for w in p.attr(inner, "pad_width", [])]
    b = [int(w) for w in p.attr(v, "pad_width", [])]
    if len(a) != len(b) or any(a[k] or a[k + 1] for k in range(0, len(a), 2) if b[k] or b[k + 1]):
        return None
    out = p.emit(p.relax.op.nn.pad(p.m(inner.args[0]), [x + y for x, y in zip(a, b, strict=True)],
                                   str(p.attr(v, "pad_mode", "constant")), float(p.attr(v, "pad_value", 0.0))),
                 like=var)  # fmt: skip
    return Match(out, (v.args[0],), "two pads of different axes merged into one at import")


def pad_into_conv(p: Pass, var, v):
    """``conv2d(pad(x, zeros on the spatial axes only), w)`` (the pad read once) -> ``conv2d(x, w)``
    with the pad added to the conv's own padding: a TFLite conv pads only as SAME or VALID, so a
    converter writes PAD + CONV_2D for a conv padded otherwise (torch's ``padding=1`` at stride 2),
    where ONNX and torch.export hold one conv.  Exact: the conv reads the same zeros."""
    pad = p.call(v.args[0], "relax.nn.pad")
    if pad is None or not p.single(v.args[0]) or not p.dtype(var).startswith("float"):
        return None
    if str(p.attr(pad, "pad_mode", "constant")) != "constant" or float(p.attr(pad, "pad_value", 0.0)) != 0.0:
        return None
    layout = str(p.attr(v, "data_layout", "NCHW"))
    widths = [int(w) for w in p.attr(pad, "pad_width", [])]
    if len(widths) != 2 * len(layout) or min(widths, default=0) < 0:  # (a negative width crops: no padding)
        return None
    spatial = [k for k, c in enumerate(layout) if c in "HW"]
    if len(spatial) != 2 or any(widths[2 * k] or widths[2 * k + 1] for k in range(len(layout)) if k not in spatial):
        return None
    (h, w) = spatial if layout.index("H") < layout.index("W") else spatial[::-1]
    top, left, bottom, right = (int(x) for x in p.attr(v, "padding", (0, 0, 0, 0)))
    padding = [top + widths[2 * h], left + widths[2 * w], bottom + widths[2 * h + 1], right + widths[2 * w + 1]]
    a = v.attrs
    out = p.emit(p.relax.op.nn.conv2d(p.m(pad.args[0]), p.m(v.args[1]), strides=a.strides, padding=padding,
                                      dilation=a.dilation, groups=a.groups, data_layout=a.data_layout,
                                      kernel_layout=a.kernel_layout, out_layout=a.out_layout,
                                      out_dtype=a.out_dtype), like=var)  # fmt: skip
    return Match(out, (v.args[0],), "a zero pad written into the convolution's own padding at import")
