"""The ``axis = "last"`` support rule (no tvm): which axis a processor holds innermost in its memory.

A hardware architect who writes ``axis = "last"`` means that the unit reduces along the innermost
axis of the memory it holds -- the vector lanes' axis (``vector_lanes``: "over the innermost dim in
the processor's layout"), which the cost model fills along (``cost.layouts.innermost``).  So the
rule reads the op's axis where the processor holds it: an image (a rank-4 activation whose layout a
conv, pool or resize names, and what keeps its axes from it: ``cost.layouts.image_layouts``) in the
processor's ``layout`` -- channels innermost on an NHWC or tiled processor (a tiled layout blocks
channels innermost), the last spatial dim on an NCHW one --, any other tensor in the model's own
axis order (row-major on every processor).  A dim of one element takes no place: the axis is
innermost when every dim after it in that order holds one element (C of [1, 10, 1, 1] on an NCHW
processor).  Softmax over model axis 1 (C) of an NCHW image is innermost on an NHWC processor;
over axis 3 (W) it is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .cost.layouts import image_layouts_of, memory_axes

if TYPE_CHECKING:
    from .graph import Op, OpGraph
    from .rules import Failure
    from .soc import OpRule, Processor

NORM_AXES = ("layer_norm", "rms_norm")  # norms whose ``axes`` the axis rule reads


def _axes(op: Op) -> tuple:
    axis = op.attrs.get("axes", -1) if op.kind in NORM_AXES else op.attrs.get("axis", -1)
    return axis if isinstance(axis, tuple) else (axis,)


def held_order(op: Op, g: OpGraph, proc: Processor | None) -> tuple[list[int], str, str]:
    """(the model's axes of the op's first input outermost first, as ``proc`` holds them in memory;
    the image layout in the model's order or "" for a tensor that is not an image; the order in
    words: "dsp's NHWC layout" / "the model's axis order")."""
    tid = op.inputs[0]
    rank = len(g.tensors[tid].shape)
    lay = image_layouts_of(g).get(tid) if proc is not None else None
    if lay is None:
        return list(range(rank)), "", "the model's axis order"
    return memory_axes(lay, rank, proc.layout), lay, f"{proc.name}'s {proc.layout} layout"


def _name(a: int, lay: str) -> str:
    return f"axis {a} ({lay[a]} of the model's {lay})" if lay else f"axis {a}"


def axis_read(op: Op, g: OpGraph, r: OpRule, proc: Processor | None = None) -> tuple[Failure | None, str]:
    """(the failure of ``rule_axis``, or None; for an accepted image, what it read in words, which
    its verdict says: "softmax over axis 1 (C of the model's NCHW), innermost in dsp's NHWC layout";
    "" for any other op: the model's order, as plain as it reads)."""
    from .rules import fail  # noqa: PLC0415

    if r.axis != "last" or not op.inputs or not g.tensors[op.inputs[0]].shape:
        return None, ""
    shape = g.tensors[op.inputs[0]].shape
    rank = len(shape)
    order, lay, where = held_order(op, g, proc)
    read = []
    for a in _axes(op):
        if a is None:
            continue
        ax = int(a) % rank
        if any(shape[d] > 1 for d in order[order.index(ax) + 1:]):
            inner = next((d for d in reversed(order) if shape[d] > 1), order[-1])
            return fail("axis", f"{_name(int(a), lay)} is not the innermost axis in {where} (innermost: "
                                f"{_name(inner, lay)})", axis=int(a), rank=rank, innermost=inner, order=tuple(order)), ""  # fmt: skip
        read.append(_name(ax, lay))
    return None, f"{op.kind} over {', '.join(read)}, innermost in {where}" if read and lay else ""
