"""A kernel's members (no tvm): its anchor, and the members that run at the anchor's width."""

from __future__ import annotations

from collections.abc import Sequence

from ..opset import KINDS
from .tables import Tables

_QDQ = frozenset({"quantize", "dequantize", "astype"})


def anchor_of(ids: Sequence[int], t: Tables) -> int:
    """The member with the most MACs, then real (not (de)quantize / view) work, then the most vector
    work; on ties the first."""
    if len(ids) == 1:
        return ids[0]
    key = ("anchor", tuple(ids))  # static per member set: memoized beside the plans
    a = t.plan_memo.get(key)
    if a is None:
        a = t.plan_memo[key] = _anchor(key[1], t)
    return a


def _anchor(ids: tuple[int, ...], t: Tables) -> int:
    ops = t.g.ops

    def key(i: int):
        w = t.work[i]
        k = ops[i].kind
        return (w.macs, k not in _QDQ and not KINDS[k].view, w.vector_ops, -i)

    return max(ids, key=key)


def inner_width(t: Tables, i: int, anchor: int, fused_out: bool) -> bool:
    """Does member ``i`` of a kernel anchored at ``anchor`` run at the anchor's width, whatever its
    own?  Yes when its values never leave the kernel (``fused_out``: every reader is inside it) and
    it owns no weight the simulation and the code quantize at its width: nothing rounds, stores or
    converts its values there (the kernel's accumulators and epilogues stay wide), so a width of
    its own (a layer bit-width) would change nothing -- it runs in the kernel's loop nest, at the
    anchor's width."""
    return fused_out and i != anchor and i not in t.weighted


def inner_members(t: Tables, klist) -> tuple[tuple[int, int], ...]:
    """(member, anchor) of every kernel member that runs at its anchor's width (``inner_width``)."""
    out = []
    consumers, graph_out = t.consumers, t.graph_out
    for ids in klist:
        if len(ids) < 2:
            continue
        a = anchor_of(ids, t)
        inside = set(ids)
        for i in ids:
            cons = consumers[i]
            fused = bool(cons) and not graph_out[i] and all(c in inside for c in cons)
            if inner_width(t, i, a, fused):
                out.append((i, a))
    return tuple(out)
