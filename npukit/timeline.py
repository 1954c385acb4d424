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

Every lane serves its items in program order, an in-order queue as the generated AOT entry point
issues them one after another: an item never starts before one issued earlier on its lane, even
when it is ready first (no later item fills an idle gap).  So two files that differ only in the
order they list independent branches can give the same placement different latencies (a transfer
of the branch listed first waits for its slower producer, and the other branch's transfer behind
it) -- as the two generated programs, which run in those orders, would.

Which items exist, in which order, on which lane and after which others depends only on the plan and
on which conversions each boundary needs (not on any duration), so it is worked out once per plan
and boundary shape (``Program``); the items are then one pass over that program with the
durations of one estimate: ``start = max(end of what it waits for, its lane free)``, made only when
someone reads them (the timeline).  What the totals read -- the makespan, each lane's busy time and
conversion time -- comes from the same steps taken in one pass without a program (``schedule``; a
plan only compared by its latency, the placement search's virtual plans and the cost policy's
candidates, takes ``makespan``, the same pass without the lanes' sums): an edit's new plan is
estimated without building its program, which costs ~25 ms at 10,000 ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .cost import BoundaryCost, OpCost, Tables
from .cost.grouping import per_plan
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


class Program:
    """The shape of one plan's schedule: its steps in order, each with the resource it holds, the
    lane it is drawn in, the earlier steps it waits for and where its duration comes from.

    Only the first op of an offloaded call waits for what the call reads from outside: the others
    follow it on the same processor, which is free no earlier than that."""

    __slots__ = ("n_res", "steps", "lane", "lanes", "refs", "conv", "_g", "_bounds")

    def __init__(self, tables: Tables, plan: Plan, soc: SocProfile, bounds: Sequence[BoundaryCost]):
        g = tables.g
        tensors = g.tensors
        n_ops, nb = len(g.ops), len(bounds)
        self._g = g
        self._bounds = [(b.tensor, b.src, b.dst, b.quantize_kind) for b in bounds]  # for the labels
        res_ix: dict[str, int] = {}
        lane_ix: dict[str, int] = {}
        res: list[int] = []
        lane: list[int] = []
        deps: list[tuple[int, ...]] = []
        # where each step's duration is in ``run``'s vector: op latencies, then the boundaries'
        # layout, quantize and transfer times
        src: list[int] = []
        refs: list[tuple[str, int]] = []  # (kind, op id or boundary index): the item's label, made when read
        conv: list[int] = []  # steps that are conversions (layout / quantize)
        ready: dict[tuple[str, str], int] = {}  # (tensor, processor) -> step that makes it available

        def step(lane_name: str, after: tuple[int, ...], where: int, kind: str, ref: int, resource: str = "") -> int:
            k = len(res)
            r = res_ix.get(resource or lane_name)
            if r is None:
                r = res_ix[resource or lane_name] = len(res_ix)
            ln = lane_ix.get(lane_name)
            if ln is None:
                ln = lane_ix[lane_name] = len(lane_ix)
            res.append(r)
            lane.append(ln)
            deps.append(after)
            src.append(where)
            refs.append((kind, ref))
            return k

        by_tensor: dict[str, list[int]] = {}
        for j, b in enumerate(bounds):
            by_tensor.setdefault(b.tensor, []).append(j)

        routes: dict[tuple[str, str, int], tuple[str, str]] = {}  # (src, dst, id of the link) -> (lane, resource)

        def ship(j: int, after: tuple[int, ...]) -> None:
            b = bounds[j]
            t = after
            lay, qua, xfer = n_ops + j, n_ops + nb + j, n_ops + 2 * nb + j
            bsrc, lc, qc = b.src, b.layout, b.quantize  # (b.layout_us is lc.us, b.layout_on lc.on)
            lc = lc if lc and lc.us else None
            qc = qc if qc and qc.us else None
            if lc and lc.on == bsrc:
                conv.append(len(res))
                t = (step(lc.on, t, lay, "layout", j),)
            if qc and qc.on == bsrc:
                conv.append(len(res))
                t = (step(qc.on, t, qua, "quantize", j),)
            rk = (bsrc, b.dst, id(b.link))
            route = routes.get(rk)
            if route is None:
                route = routes[rk] = (f"{bsrc} -> {b.dst}", b.lane)
            t = (step(route[0], t, xfer, "transfer", j, route[1]),)
            if lc and lc.on != bsrc:
                conv.append(len(res))
                t = (step(lc.on, t, lay, "layout", j),)
            if qc and qc.on != bsrc:
                conv.append(len(res))
                t = (step(qc.on, t, qua, "quantize", j),)
            ready[(b.tensor, b.dst)] = t[0]

        for tid in g.inputs:  # boundaries of model inputs leave at time 0
            for j in by_tensor.get(tid, ()):
                ship(j, ())
        act_inputs = tables.act_inputs
        partition = plan.partition
        host = soc.host
        ops = g.ops
        ready_get = ready.get
        for part in plan.partitions:
            call: list[int] = []
            proc = part.processor
            if proc != host:  # one call: wait for everything it reads from outside
                pid = part.pid
                for i in part.ops:
                    for t in act_inputs[i]:
                        p = tensors[t].producer
                        if p is None or partition[p] != pid:
                            k = ready_get((t, proc))
                            if k is not None:
                                call.append(k)
            # every op of a partition runs on its processor: its resource and lane, looked up once
            r = res_ix.get(proc)
            if r is None:
                r = res_ix[proc] = len(res_ix)
            ln = lane_ix.get(proc)
            if ln is None:
                ln = lane_ix[proc] = len(lane_ix)
            for i in part.ops:
                after = call
                call = []
                for t in act_inputs[i]:
                    k = ready_get((t, proc))
                    if k is not None:
                        after.append(k)
                k = len(res)
                res.append(r)
                lane.append(ln)
                deps.append(tuple(after))
                src.append(i)
                refs.append(("op", i))
                for t in ops[i].outputs:
                    ready[(t, proc)] = k
                    js = by_tensor.get(t)
                    if js:
                        for j in js:
                            ship(j, (k,))
        self.n_res = len(res_ix)
        self.steps = tuple(zip(res, deps, src))
        self.lane = tuple(lane)
        self.lanes = tuple(lane_ix)  # lane names in the order of first use
        self.refs = tuple(refs)
        self.conv = tuple(conv)

    def label(self, kind: str, ref: int) -> tuple[str, int, str]:
        """(item text, op id, tensor id) of a step."""
        if kind == "op":
            return self._g.ops[ref].name, ref, ""
        tid, a, b, qkind = self._bounds[ref]
        name = self._g.tensor_label(tid)  # (as the boundaries table and explain() name it)
        if kind == "transfer":
            return f"transfer {name} {a}->{b}", -1, tid
        return (f"layout {name}" if kind == "layout" else f"{qkind} {name}"), -1, tid

    def run(self, ops: Sequence[OpCost], bounds: Sequence[BoundaryCost]) -> Schedule:
        dur = [c.latency_us for c in ops]
        dur += [b.layout_us for b in bounds]
        dur += [b.quantize_us for b in bounds]
        dur += [b.transfer_us for b in bounds]
        free = [0.0] * self.n_res
        busy = [0.0] * len(self.lanes)
        starts: list[float] = []
        ends: list[float] = []
        lane = self.lane
        for k, (r, after, w) in enumerate(self.steps):
            at = 0.0
            for d in after:
                e = ends[d]
                if e > at:
                    at = e
            s = free[r]
            if at > s:
                s = at
            d = dur[w]
            e = s + d
            free[r] = e
            busy[lane[k]] += d
            starts.append(s)
            ends.append(e)
        conv: dict[str, float] = {}
        for k in self.conv:
            ln = self.lanes[self.lane[k]]
            conv[ln] = conv.get(ln, 0.0) + (ends[k] - starts[k])
        return Schedule(max(ends, default=0.0), dict(zip(self.lanes, busy)), conv, lambda: _items(self, starts, ends))


class Schedule:
    """One estimate's schedule: ``makespan_us``, ``busy_us`` (lane -> busy time, lanes in the order
    first used), ``conv_us`` (lane -> time spent converting: layout and quantize), and ``items``
    (made when read: the totals need only the three figures, which one pass gives, ``schedule``)."""

    __slots__ = ("_make", "_items", "makespan_us", "busy_us", "conv_us")

    def __init__(self, makespan_us: float, busy_us: dict[str, float], conv_us: dict[str, float], make_items):
        self.makespan_us, self.busy_us, self.conv_us = makespan_us, busy_us, conv_us
        self._make, self._items = make_items, None

    @property
    def items(self) -> tuple[Item, ...]:
        if self._items is None:
            self._items = self._make()
            self._make = None
        return self._items


def _items(p: Program, starts: list[float], ends: list[float]) -> tuple[Item, ...]:
    items = []
    for ln, (kind, ref), s, e in zip(p.lane, p.refs, starts, ends):
        text, op_id, tensor = p.label(kind, ref)
        items.append(Item(p.lanes[ln], text, kind, s, e, op_id, tensor))
    return tuple(items)


def makespan(tables: Tables, plan: Plan, soc: SocProfile, ops: Sequence[OpCost], bounds: Sequence[BoundaryCost]) -> float:
    """The schedule's makespan in one pass, without a ``Program``: the same steps in the same order,
    each started at ``max(end of what it waits for, its resource free)``, with the same floating-point
    operations, so it equals ``schedule(...).makespan_us`` bit for bit
    (``tests/test_timeline.py`` holds them equal).  For plans only compared by their latency (the
    placement search's virtual plans, the cost policy's candidates): building the program is ~60%
    of a schedule and is thrown away with them."""
    return _one_pass(tables, plan, soc, ops, bounds, None, None)


def _one_pass(tables: Tables, plan: Plan, soc: SocProfile, ops: Sequence[OpCost], bounds: Sequence[BoundaryCost],
              busy: dict[str, float] | None, conv: dict[str, float] | None) -> float:  # fmt: skip
    """``makespan``; given ``busy`` and ``conv``, each lane's busy time and conversion time are added
    to them too, step by step in the program's order (so with the same sums as ``Program.run``)."""
    g = tables.g
    tensors = g.tensors
    free: dict[str, float] = {}  # resource -> when it is free
    ready: dict[str, dict[str, float]] = {p.name: {} for p in soc.processors}  # processor -> tensor -> when there
    end = 0.0  # the latest end so far
    by_tensor: dict[str, list[BoundaryCost]] = {}
    for b in bounds:
        by_tensor.setdefault(b.tensor, []).append(b)

    def step(r: str, at: float, d: float, lane: str = "", is_conv: bool = False) -> float:
        s = free.get(r, 0.0)
        if at > s:
            s = at
        e = s + d
        free[r] = e
        if busy is not None:  # (``lane``: where the step is drawn; a conversion's is its processor)
            ln = lane or r
            busy[ln] = busy.get(ln, 0.0) + d
            if is_conv:
                conv[ln] = conv.get(ln, 0.0) + (e - s)  # type: ignore[index]
        return e

    def ship(b: BoundaryCost, at: float) -> float:
        """The conversions and the transfer of one boundary from ``at``: when the tensor is there."""
        src = b.src
        lc, qc = b.layout, b.quantize
        lc = lc if lc and lc.us else None
        qc = qc if qc and qc.us else None
        if lc and lc.on == src:
            at = step(src, at, b.layout_us, "", True)
        if qc and qc.on == src:
            at = step(src, at, b.quantize_us, "", True)
        at = step(b.lane, at, b.transfer_us, f"{src} -> {b.dst}" if busy is not None else "")
        if lc and lc.on != src:
            at = step(lc.on, at, b.layout_us, "", True)
        if qc and qc.on != src:
            at = step(qc.on, at, b.quantize_us, "", True)
        ready[b.dst][b.tensor] = at
        return at

    for tid in g.inputs:  # boundaries of model inputs leave at time 0
        for b in by_tensor.get(tid, ()):
            e = ship(b, 0.0)
            if e > end:
                end = e
    act_inputs = tables.act_inputs
    partition = plan.partition
    host = soc.host
    g_ops = g.ops
    for part in plan.partitions:
        proc = part.processor
        mine = ready[proc]  # what has arrived on this processor (or was made here)
        here = mine.get
        call = 0.0
        if proc != host:  # one call: its first op waits for everything it reads from outside
            pid = part.pid
            for i in part.ops:
                for t in act_inputs[i]:
                    p = tensors[t].producer
                    if p is None or partition[p] != pid:
                        e = here(t)
                        if e is not None and e > call:
                            call = e
        r = free.get(proc, 0.0)
        for i in part.ops:
            at = call
            call = 0.0
            for t in act_inputs[i]:
                e = here(t)
                if e is not None and e > at:
                    at = e
            if at > r:
                r = at
            d = ops[i].latency_us
            r += d
            free[proc] = r
            if busy is not None:
                busy[proc] = busy.get(proc, 0.0) + d
            if r > end:
                end = r
            done = r  # every output is there when the op ends; its boundaries leave from then
            for t in g_ops[i].outputs:
                mine[t] = done
                bs = by_tensor.get(t)
                if bs:
                    for b in bs:
                        e = ship(b, done)
                        if e > end:
                            end = e
            r = free[proc]  # (a conversion on this processor holds it too)
    return end


def _shape(bounds: Sequence[BoundaryCost]) -> tuple:
    """What of the boundaries a ``Program`` reads: which conversions each needs, where, and its lane."""
    return tuple((bool(b.layout_us), bool(b.quantize_us), b.layout_on, b.quantize_on, b.lane,
                  b.quantize_kind if b.quantize_us else "") for b in bounds)  # fmt: skip


def program(tables: Tables, plan: Plan, soc: SocProfile, bounds: Sequence[BoundaryCost], shape: tuple | None = None) -> Program:
    """The plan's ``Program`` for boundaries of this shape (memoized per plan on the tables)."""
    shape = _shape(bounds) if shape is None else shape
    return per_plan(tables, ("schedule", id(plan), soc.host, shape), plan, lambda: Program(tables, plan, soc, bounds))


def schedule(tables: Tables, plan: Plan, soc: SocProfile, ops: Sequence[OpCost], bounds: Sequence[BoundaryCost]) -> Schedule:
    """The schedule of one estimate: its makespan and each lane's busy and conversion time from one
    pass (``_one_pass``: what the totals read), its items from the plan's ``Program`` when first read
    (the timeline): the same figures as ``program(...).run(...)``, bit for bit
    (``tests/test_timeline.py``), without building the program for an estimate whose timeline no one
    draws.  A plan estimated a second time (at other bit-widths: a sweep's configurations) is run on
    its program, built then and kept: one pass over it is the faster."""
    shape = _shape(bounds)
    seen = per_plan(tables, ("estimated", id(plan), soc.host, shape), plan, lambda: [0])
    seen[0] += 1
    if seen[0] > 1:  # a plan estimated again at other widths (a sweep's): its program, kept, runs fastest
        return program(tables, plan, soc, bounds, shape).run(ops, bounds)
    busy: dict[str, float] = {}
    conv: dict[str, float] = {}
    end = _one_pass(tables, plan, soc, ops, bounds, busy, conv)
    return Schedule(end, busy, conv, lambda: program(tables, plan, soc, bounds, shape).run(ops, bounds).items)
