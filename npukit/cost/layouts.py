"""Which activations are images (batch, channels, spatial dims) and in which order the model holds
them, so a vector unit's lanes are filled along the dimension the processor's own layout puts
innermost, whatever the file's order (no tvm).

A tensor's layout is seeded by the ops that name one (a convolution's ``data_layout`` /
``out_layout``, a pool's or resize's ``layout``) and carried through the ops that keep a tensor's
axes where they are: elementwise ops, quantize / dequantize, softmax, norms, reductions that keep
their rank, pad, concat, split, slices and resizes (each joins its inputs and outputs of the
output's rank).  A view, a transpose or a matmul carries nothing.  A tensor that no such op
reaches -- an attention's [batch, heads, seq, dim] -- or that two ops name differently has no
layout: its last dim is its innermost on every processor.

Innermost on a processor: channels (``C``) for an ``NHWC`` or ``tiled`` processor (a tiled layout
blocks channels innermost), the last spatial dim (``W``) for an ``NCHW`` one; a dim of one element
takes no place, so the innermost is the last one of more than one.

How a buffer lays a rank-4 tensor out (``memory_order``), which the boundary conversions and the
generated code read: every rank-4 image activation is held in the processor's layout (its axis
order in the model from the ops that name one: ``model_layouts``); a rank-4 tensor that is not an
image is held row-major in the model's order everywhere, and never converted.  Two layouts
hold the same memory order when they put every element at the same offset: after dropping the dims
of one element, the same dims in the same order (NCHW and NHWC of a tensor with C = 1, or with
H = W = 1).  A tiled layout (N, ceil(C/B), H, W, B) pads channels to a whole number of B-channel
tiles: padded, it is its own; unpadded, it is NHWC with C split in two (C = B is NHWC).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..graph import OpGraph
from ..opset import KINDS

if TYPE_CHECKING:
    from ..soc import Processor

KEEPS_ROLES = frozenset({"elementwise", "quantize", "softmax", "norm", "reduce", "pool"})
KEEPS_COPIES = frozenset({"pad", "concat", "split", "strided_slice", "dynamic_strided_slice", "resize2d", "resize3d"})
LAYOUT_ATTRS = (("data_layout", "out_layout"), ("layout", "out_layout"))


def _image_layout(text, rank: int) -> str | None:
    """``text`` as an image layout of ``rank`` letters (N, C and spatial letters, each once), else None."""
    s = str(text or "")
    if len(s) != rank or not s.isalpha() or not s.isupper() or len(set(s)) != rank or "N" not in s or "C" not in s:
        return None
    return s


def image_layouts(g: OpGraph) -> dict[str, str]:
    """tensor id -> its layout letters (``"NCHW"``, ``"NHWC"``, ``"NCW"`` ...), for every activation
    that is an image (see the module docstring); other tensors are absent."""
    tensors = g.tensors
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    seeds: list[tuple[str, str]] = []
    for op in g.ops:
        k = KINDS.get(op.kind)
        for data_attr, out_attr in LAYOUT_ATTRS:
            if data_attr in op.attrs:
                if op.inputs:
                    t0 = tensors[op.inputs[0]]
                    lay = _image_layout(op.attrs.get(data_attr), len(t0.shape))
                    if lay and t0.kind != "const":
                        seeds.append((op.inputs[0], lay))
                for o in op.outputs:
                    lay = _image_layout(op.attrs.get(out_attr) or op.attrs.get(data_attr), len(tensors[o].shape))
                    if lay:
                        seeds.append((o, lay))
                break
        if k is None or not op.outputs or (k.role not in KEEPS_ROLES and op.kind not in KEEPS_COPIES):
            continue
        rank = len(tensors[op.outputs[0]].shape)
        if rank < 3:
            continue
        same = [t for t in (*op.inputs, *op.outputs) if tensors[t].kind != "const" and len(tensors[t].shape) == rank]
        for t in same[1:]:
            a, b = find(same[0]), find(t)
            if a != b:
                parent[b] = a
    by_set: dict[str, str | None] = {}
    for tid, lay in seeds:
        r = find(tid)
        have = by_set.get(r, lay)
        by_set[r] = lay if have == lay else None  # two ops naming it differently: no layout
    out = {}
    for tid, t in tensors.items():
        if t.kind == "const":
            continue
        lay = by_set.get(find(tid))
        if lay is not None and len(lay) == len(t.shape):
            out[tid] = lay
    return out


def innermost(layout: str | None, shape: tuple[int, ...], processor_layout: str) -> tuple[int, str]:
    """(size, letter) of the dim a processor of ``processor_layout`` holds innermost, for a tensor of
    ``shape`` held by the model in ``layout`` (None: not an image; letter "" then, its dims in the
    model's order).  Dims of size 1 take no place, so the innermost is the last dim of more than
    one element (an image's ``[N, C, 1, 1]`` is contiguous along C in any layout)."""
    if layout is None:
        order = [(n, "") for n in shape]
    else:
        dims = dict(zip(layout, shape))
        spatial = [c for c in layout if c not in "NC"]
        letters = ["N", "C", *spatial] if processor_layout == "NCHW" else ["N", *spatial, "C"]
        order = [(dims[c], c) for c in letters]
    for n, letter in reversed(order):
        if n > 1:
            return n, letter
    return 1, ""


def image_layouts_of(g: OpGraph) -> dict[str, str]:
    """``image_layouts(g)``, worked out once per graph (kept on the graph, which is immutable)."""
    got = g.__dict__.get("_npk_image_layouts")
    if got is None:
        got = image_layouts(g)
        object.__setattr__(g, "_npk_image_layouts", got)
    return got


def memory_axes(layout: str | None, rank: int, processor_layout: str) -> list[int]:
    """The model's axes of a tensor of ``rank`` in the order a processor of ``processor_layout``
    holds them, outermost first: an image's (``layout``, its letters in the model's order) with
    channels innermost on an NHWC or tiled processor and after the batch on an NCHW one, as
    ``innermost``; any other tensor's in the model's order (row-major on every processor)."""
    if layout is None or len(layout) != rank:
        return list(range(rank))
    spatial = [c for c in layout if c not in "NC"]
    letters = ["N", "C", *spatial] if processor_layout == "NCHW" else ["N", *spatial, "C"]
    return [layout.index(c) for c in letters]


# -- memory order of a rank-4 buffer (boundaries, generated code) ---------------------------------


def model_layouts(g: OpGraph) -> dict[str, str]:
    """The axis order (``"NCHW"`` / ``"NHWC"``) of every rank-4 image activation in the model
    (``image_layouts``: seeded by the ops that name a layout, carried through the ops that keep a
    tensor's axes).  A rank-4 tensor that is not an image -- an attention's [batch, heads, seq,
    seq] -- has none: every processor holds it row-major in the model's order, so it crosses
    processors without a layout conversion (TVM's ConvertLayout, likewise, only moves the tensors
    of ops that have a layout)."""
    return {tid: lay for tid, lay in image_layouts_of(g).items() if lay in ("NCHW", "NHWC")}


def semantic(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """(N, C, H, W) of a rank-4 shape in the model's layout."""
    if layout == "NHWC":
        n, h, w, c = shape
        return (n, c, h, w)
    return tuple(shape)


def tile_block(p: Processor) -> int:
    """The channel block of a tiled processor: its MAC array's output-channel lanes (at least 4)."""
    return max(4, int(p.mac_array.get("channels_out", 1)))


def memory_order(layout: str, nchw: tuple[int, ...], block: int = 1) -> tuple[tuple[str, int, int], ...] | None:
    """How a buffer of ``layout`` (NCHW / ROW, NHWC, tiled / TILED with channel ``block``) holds a
    rank-4 tensor of (N, C, H, W) ``nchw``: (dim, step along the dim, extent) of each piece of more
    than one element, outermost first, a dim's pieces merged where they run on contiguously (a
    tiled layout's channel tiles, (C / B, step B) then (B, step 1)).  None: padded (a tiled layout
    whose C is not a whole number of tiles)."""
    n, c, h, w = nchw
    lay = layout.upper()
    if lay == "TILED":
        if c % block:
            return None
        pieces = [("N", 1, n), ("C", block, c // block), ("H", 1, h), ("W", 1, w), ("C", 1, block)]
    elif lay == "NHWC":
        pieces = [("N", 1, n), ("H", 1, h), ("W", 1, w), ("C", 1, c)]
    else:
        pieces = [("N", 1, n), ("C", 1, c), ("H", 1, h), ("W", 1, w)]
    out: list[tuple[str, int, int]] = []
    for dim, step, ext in pieces:
        if ext == 1:
            continue
        if out and out[-1][0] == dim and out[-1][1] == step * ext:
            out[-1] = (dim, step, out[-1][2] * ext)
        else:
            out.append((dim, step, ext))
    return tuple(out)


def same_memory(nchw: tuple[int, ...], a: str, b: str, block_a: int = 1, block_b: int = 1) -> str:
    """Why buffers of layouts ``a`` and ``b`` hold a rank-4 tensor of (N, C, H, W) ``nchw`` in the
    same memory order (every element at the same offset: converting one to the other moves no
    byte), in words: ``"same memory order: C = 1"``; "" when they do not."""
    ma, mb = memory_order(a, nchw, block_a), memory_order(b, nchw, block_b)
    if ma is None or mb is None or ma != mb:
        return ""
    ones = [d for d, size in zip("CHW", nchw[1:]) if size == 1]
    why = [" = ".join(ones) + " = 1"] if ones else []
    c = nchw[1]
    for blk in sorted({k for x, k in ((a, block_a), (b, block_b)) if x.upper() == "TILED"}):
        why.append(f"C = {c}: {c // blk} whole {blk}-channel tile{'s' * (c // blk != 1)}, no padding")
    return "same memory order: " + "; ".join(why or ["the same dims in the same order"])
