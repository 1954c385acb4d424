"""The schedule: a list schedule of ops, transfers and conversions over lanes (no tvm).

Lanes: one per processor and one per route (``dla -> arm``); every route of one link waits for that
link, so transfers sharing a link (a shared bus: every route) never overlap.  Partitions are taken in the order the partitioned
``main`` calls them (a topological order).  An offloaded partition is one call: it starts when every
tensor it reads from outside has arrived (MergeCompositeFunctions may merge ops that are not
neighbours in program order into one call), then runs its ops one after another; the host runs its
ops one by one as their inputs arrive.  Every item also waits for its lane, so a processor runs one
thing at a time while independent branches on other processors overlap.  A tensor that
crosses processors is converted on the source side first when the profile says so (``src``),
travels on its link lane, and is converted on the destination (or host) side before its consumer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .cost import BoundaryCost, OpCost, Tables
from .plan import Plan
from .soc import SocProfile


class Item(NamedTuple):
    lane: str
    item: str  # op name, "transfer <tensor> <src>-><dst>", "layout <tensor>", "quantize <tensor>"
    kind: str  # "op" | "transfer" | "layout" | "quantize"
    start_us: float
    end_us: float
    op_id: int = -1
    tensor: str = ""


@dataclass(frozen=True)
class Schedule:
    items: tuple[Item, ...]
    makespan_us: float
    busy_us: dict  # lane -> busy time


def schedule(tables: Tables, plan: Plan, soc: SocProfile, ops: Sequence[OpCost], bounds: Sequence[BoundaryCost]) -> Schedule:
    g = tables.g
    free: dict[str, float] = {}
    busy: dict[str, float] = {}
    items: list[Item] = []
    add = items.append
    # when each tensor is available on each processor
    ready: dict[tuple[str, str], float] = {}
    for tid in g.inputs:
        ready[(tid, soc.host)] = 0.0
    by_tensor: dict[str, list[BoundaryCost]] = {}
    for b in bounds:
        by_tensor.setdefault(b.tensor, []).append(b)
    tensors = g.tensors

    def run(lane: str, at: float, dur: float, label: str, kind: str, op_id: int = -1, tensor: str = "",
            resource: str = "") -> float:  # fmt: skip
        """Schedule an item on ``lane`` (the row it is drawn in); it waits for ``resource`` (the lane
        itself unless given: a link carries every route between its processors, one at a time)."""
        res = resource or lane
        start = free.get(res, 0.0)
        if at > start:
            start = at
        end = start + dur
        free[res] = end
        busy[lane] = busy.get(lane, 0.0) + dur
        add(Item(lane, label, kind, start, end, op_id, tensor))
        return end

    def ship(b: BoundaryCost, at: float) -> None:
        t = at
        name = tensors[b.tensor].name or b.tensor
        qlabel = f"{b.quantize_kind} {name}" if b.quantize_us else ""
        if b.layout_us and b.layout_on == b.src:
            t = run(b.layout_on, t, b.layout_us, f"layout {name}", "layout", tensor=b.tensor)
        if b.quantize_us and b.quantize_on == b.src:
            t = run(b.quantize_on, t, b.quantize_us, qlabel, "quantize", tensor=b.tensor)
        t = run(f"{b.src} -> {b.dst}", t, b.transfer_us, f"transfer {name} {b.src}->{b.dst}", "transfer", tensor=b.tensor,
                resource=b.lane)  # fmt: skip
        if b.layout_us and b.layout_on != b.src:
            t = run(b.layout_on, t, b.layout_us, f"layout {name}", "layout", tensor=b.tensor)
        if b.quantize_us and b.quantize_on != b.src:
            t = run(b.quantize_on, t, b.quantize_us, qlabel, "quantize", tensor=b.tensor)
        ready[(b.tensor, b.dst)] = t

    # boundaries of model inputs leave at time 0
    for tid in g.inputs:
        for b in by_tensor.get(tid, ()):
            ship(b, 0.0)
    act_inputs = tables.act_inputs
    processor = plan.processor
    partition = plan.partition
    all_ops = g.ops
    for part in plan.partitions:
        call_ready = 0.0
        if part.processor != soc.host:  # one call: wait for everything it reads from outside
            for i in part.ops:
                for t in act_inputs[i]:
                    p = tensors[t].producer
                    if p is None or partition[p] != part.pid:
                        r = ready.get((t, part.processor), 0.0)
                        if r > call_ready:
                            call_ready = r
        for i in part.ops:
            op, c = all_ops[i], ops[i]
            proc = processor[i]
            at = call_ready
            for t in act_inputs[i]:
                r = ready.get((t, proc), 0.0)
                if r > at:
                    at = r
            start = free.get(proc, 0.0)
            if at > start:
                start = at
            dur = c.latency_us
            end = start + dur
            free[proc] = end
            busy[proc] = busy.get(proc, 0.0) + dur
            add(Item(proc, op.name, "op", start, end, i, ""))
            for t in op.outputs:
                ready[(t, proc)] = end
                bl = by_tensor.get(t)
                if bl:
                    for b in bl:
                        ship(b, end)
    makespan = max((it.end_us for it in items), default=0.0)
    return Schedule(tuple(items), makespan, busy)
