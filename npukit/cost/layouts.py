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
"""

from __future__ import annotations

from ..graph import OpGraph
from ..opset import KINDS

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
