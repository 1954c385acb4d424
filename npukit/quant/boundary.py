"""What crosses a partition boundary numerically (no tvm): a tensor read on another processor is a
copy converted to the format its first consumer there holds it at (the cost model's boundary rule,
``cost.grouping.bound_keys``: the consumer's bit-width, or the tensor's own dtype when the consumer
is the model's input quantize reading its float input -- the quantize does that conversion itself).
Converting to a different, non-fp32 format rounds the values; the simulation and the generated
code both do it, at the same places."""

from __future__ import annotations

from collections.abc import Sequence

from ..cost import held_width, input_bits
from ..graph import OpGraph
from ..plan import Plan


def copy_bits(g: OpGraph, plan: Plan, bits: Sequence[str], b) -> tuple[str, str]:
    """(source bits, copy bits) of boundary ``b``: the width its producer holds it at (its bit-width,
    or its own dtype for a dequantize's float output; a model input's own dtype) and the width of
    the copy on the destination (its first consumer's, likewise)."""
    t = g.tensors[b.tensor]
    src = held_width(g, t.producer, b.tensor, bits[t.producer]) if t.kind == "act" else input_bits(t)
    dst = held_width(g, b.consumers[0], b.tensor, bits[b.consumers[0]]) if b.consumers else input_bits(t)
    return src, dst


def rounds(src: str, dst: str) -> bool:
    """Does converting a tensor stored at ``src`` into ``dst`` change its values?  Any change of
    format but to fp32 (a dequantize, or fp16 -> fp32, is exact)."""
    return src != dst and dst != "fp32"


def edge_bits(g: OpGraph, plan: Plan, bits: Sequence[str]) -> dict[tuple[int, str], str]:
    """(consumer op, tensor) -> the bit-width that input arrives rounded to, for every consumer of a
    boundary copy whose conversion rounds."""
    out: dict[tuple[int, str], str] = {}
    for b in plan.boundaries:
        if "float" not in g.tensors[b.tensor].dtype:
            continue
        src, dst = copy_bits(g, plan, bits, b)
        if rounds(src, dst):
            for c in b.consumers:
                out[(c, b.tensor)] = dst
    return out
