"""Virtual plans: an assignment of the groups to processors built into a Plan and costed as a real
plan is (the cost model, then the schedule's makespan in one pass), the kernels' keys kept across
plans; and a lower bound of its latency that needs no plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property

from ..cost import CostModel, Tables, boundary_cost, input_bits
from ..cost.grouping import PlanKeys, bound_keys, kept_kernel, partition_kernels, run_keys
from ..graph import OpGraph
from ..plan import Boundary, Partition, Plan, boundaries
from ..soc import SocProfile
from ..timeline import makespan

BOUND_DIFF_MAX = 8  # an assignment this close to the last one bounded is bounded from it
CROSSINGS_KEPT = 200_000  # crossing times kept per model and profile (emptied past it)


class Evaluator:
    """Latency of an assignment (group -> processor) through a virtual plan."""

    def __init__(self, g: OpGraph, soc: SocProfile, t: Tables, bits_of, groups: list[tuple[int, ...]], cm=None,
                 table: Mapping[str, Sequence[str]] | None = None, runs: tuple[dict | None, Mapping] | None = None):  # fmt: skip
        """``table``: processor -> every op's bit-width there (``bits_of`` looked up, not called).
        ``runs``: (a mapping kept across decisions or None, processor -> a digest of its column of
        ``table``): each partition's kernel keys and memory contexts are
        kept there (``grouping.run_keys``), so a virtual plan works out only the partitions no
        earlier plan held at the same bit-widths.  The keys are numbers of the cost
        model's tables (``Tables.sig``): None keeps them with those tables (``Tables.run_memo``); a
        mapping given must not outlive them."""
        self.g, self.soc, self.bits_of, self.groups = g, soc, bits_of, groups
        self.table = table
        self.cm = CostModel(t, soc) if cm is None else cm  # the pipeline's: kernels costed once per content
        # the cost model's own tables: the kernel keys this evaluator makes are numbers
        # (``Tables.sig``) the cost model's memo must have made too (two studies of one in-memory
        # model hold equal graphs whose tables number alike contents apart)
        self.t = self.cm.t
        self.procs = {p.name: p for p in soc.processors}
        if runs is not None and runs[0] is None:
            runs = (self.t.run_memo(soc), runs[1])
        self.runs = runs if table is not None else None
        self._nbs: dict[int, tuple[int, ...]] = {}
        self._crossing = self.cm.crossings  # (they depend on the profile alone: kept across decisions)
        self._pattern_names: dict[tuple[int, str], str] = {}  # (group, processor) -> composite name
        self._chain: tuple | None = None  # the last assignment bounded: (assign, times, processors, ends)

    def plan(self, assign: Sequence[str]) -> Plan:
        """The virtual plan of ``assign``: each run of consecutive groups on one accelerator is one
        call ``v<n>_<processor>`` with a composite per group (``<processor>.<op kinds>``), each run of
        host groups one host partition; built directly (``build_plan`` of the same calls and order
        gives the same Plan: ``tests/test_placement.py``)."""
        g, host, groups = self.g, self.soc.host, self.groups
        n = len(g.ops)
        processor, partition, pattern = [host] * n, [-1] * n, [""] * n
        parts: list[Partition] = []
        names = self._pattern_names
        k, n_groups, calls = 0, len(assign), 0
        while k < n_groups:
            p = assign[k]
            end = k + 1
            while end < n_groups and assign[end] == p:
                end += 1
            pid = len(parts)
            if p == host:
                ids = [i for j in range(k, end) for i in groups[j]]
                for i in ids:
                    partition[i] = pid
                parts.append(Partition(pid, host, tuple(ids)))
            else:
                comps, ids = [], []
                for j in range(k, end):
                    grp = groups[j]
                    pat = names.get((j, p))
                    if pat is None:
                        pat = names[(j, p)] = f"{p}.{'_'.join(g.ops[i].kind for i in grp)}"
                    for i in grp:
                        processor[i] = p
                        partition[i] = pid
                        pattern[i] = pat
                    comps.append((pat, tuple(grp)))
                    ids += grp
                ids.sort()
                parts.append(Partition(pid, p, tuple(ids), f"v{calls}_{p}", tuple(comps)))
                calls += 1
            k = end
        return Plan(tuple(processor), tuple(partition), tuple(pattern), tuple(parts),
                    boundaries(g, processor, partition, host))  # fmt: skip

    def bits(self, plan: Plan) -> list[str]:
        tab = self.table
        if tab is not None:
            return [tab[p][i] for i, p in enumerate(plan.processor)]
        return [self.bits_of(i, plan.processor[i]) for i in range(len(self.g.ops))]

    def keys(self, assign: Sequence[str], plan: Plan, bits: list[str]) -> PlanKeys:
        """``plan_keys`` of the virtual plan of ``assign``, looked up in (or added to) the kept
        mapping: an offloaded partition group by group, each group's composite keyed by its ops and
        which of the ops it reads from or feeds are in the same partition (a MobileNet on an NPU is
        one partition of ~140 ops, which every single-group move splits); a host partition (a run of
        host groups) whole by its groups, else kernel by kernel (``_host_run``: the host fuses
        epilogues across groups).  Every key is by content, not by the groups' numbers, so another
        grouping of the same ops (a pin splits a group) finds them too."""
        ctxs, ks = self._keys(assign)
        return PlanKeys(ctxs, ks, bound_keys(plan, self.t, bits))

    def _keys(self, assign: Sequence[str], lo: int = 0, hi: int | None = None) -> tuple[list, list]:
        """(contexts, kernel keys) of the virtual plan of ``assign`` (see ``keys``); of its partitions
        from group ``lo`` to ``hi - 1`` alone when given (each end a partition's edge)."""
        kept, cols = self.runs  # type: ignore[misc]
        groups, host = self.groups, self.soc.host
        ctxs: list = [None] * len(self.g.ops)
        ks: list = []
        k, n = lo, len(assign) if hi is None else hi
        while k < n:
            p = assign[k]
            end = k + 1
            while end < n and assign[end] == p:
                end += 1
            if p == host:  # (its ops, and how they are worked out: ``_host_run``)
                key = ("run", tuple(groups[k:end]), self.ordered, p, cols[p])
                hits = [kept.get(key)]
                if hits[0] is None:
                    hits[0] = kept[key] = self._host_run(k, end)
            else:
                first = min(self.mins[k:end])
                gof, adjacent, kerns = self.group_of, self.t.adjacent, self.kernels
                hits = []
                for j in range(k, end):
                    kern = kerns[j]
                    near = tuple([x for x in adjacent(kern) if k <= gof[x] < end])
                    lead = self.mins[j] == first  # the group holding the partition's first op
                    key = ("group", kern, p, cols[p], near, lead)
                    hit = kept.get(key)
                    if hit is None:  # the group's composite in this run
                        hit = kept[key] = kept_kernel(self.t, self.soc, p, kern, near, first if lead else -1,
                                                      self.table[p])  # type: ignore[index]  # fmt: skip
                    hits.append(hit)
            for hit in hits:
                ks += hit[0]
                for i, c in hit[1]:
                    ctxs[i] = c
            k = end
        return ctxs, ks

    def _host_run(self, k: int, end: int):
        """``run_keys`` of the host partition of groups ``k`` to ``end - 1``, kernel by kernel: the
        host's kernels (an op and the epilogue chain it fuses) are worked out for the run, and each
        one's keys and contexts kept by which of the ops it reads from or feeds are in the run (a
        move next to a long host run makes a new run, whose kernels are mostly known)."""
        kept, cols = self.runs  # type: ignore[misc]
        host, t = self.soc.host, self.t
        col = self.table[host]  # type: ignore[index]
        ids = sorted(i for grp in self.groups[k:end] for i in grp)
        if not self.ordered:  # (a chain's ops in id order, as the kernel keys name them)
            return run_keys(t, self.soc, host, ids, [], col)
        gof = self.group_of
        out_k: list = []
        out_c: list = []
        for kern in partition_kernels(t, ids):
            nb = t.adjacent(kern)
            flags = tuple([k <= gof[x] < end for x in nb])
            key = ("host kernel", kern, cols[host], flags)
            hit = kept.get(key)
            if hit is None:  # the kernel as given: inside the run an earlier chain may hold its next op
                near = tuple([x for x, f in zip(nb, flags) if f])
                hit = kept[key] = kept_kernel(t, self.soc, host, kern, near, -1, col)
            out_k += hit[0]
            out_c += hit[1]
        return out_k, out_c

    @cached_property
    def group_of(self) -> dict[int, int]:
        return {i: k for k, grp in enumerate(self.groups) for i in grp}

    @cached_property
    def kernels(self) -> list[tuple[int, ...]]:
        """Each group's ops, ascending (its composite's kernel as ``kept_kernel`` takes it)."""
        return [tuple(sorted(grp)) for grp in self.groups]

    @cached_property
    def mins(self) -> list[int]:
        """Each group's first op."""
        return [min(grp) for grp in self.groups]

    def bound(self, assign: Sequence[str]) -> float:
        """A lower bound of the virtual plan's latency that needs no plan: the longest chain along
        the graph's edges of kernel times and, where an edge crosses processors, the tensor's
        conversions and transfer (every op ends no earlier than what it reads has arrived, plus its
        own time; lanes, overheads of model inputs and outputs can only add).

        The move search bounds many assignments that differ from one another in a group or two, so
        the chain of the last assignment bounded is kept (``_chain``): one that differs from it in
        at most ``BOUND_DIFF_MAX`` groups works out again only the partitions those groups and
        their neighbours are in, and the chain from the first op whose time or processor differs
        (an op's chain depends only on ops before it: ``ordered``).  The figure is the same as
        bounding it in full (``tests/test_placement.py``)."""
        if not self.ordered:
            return 0.0
        base = self._chain
        if base is not None and len(base[0]) == len(assign):
            diff = [k for k, (p, q) in enumerate(zip(base[0], assign)) if p != q]
            if len(diff) <= BOUND_DIFF_MAX:
                return self._bound_near(assign, base, diff)
        return self._bound_full(assign)

    def _bound_full(self, assign: Sequence[str]) -> float:
        n = len(self.g.ops)
        ctxs, ks = self._keys(assign)
        lat = self._times(ks, ctxs, [0.0] * n)
        where = [""] * n
        for grp, p in zip(self.groups, assign):
            for i in grp:
                where[i] = p
        end = self._chain_from(0, lat, where, [0.0] * n)
        self._chain = (tuple(assign), lat, where, end)
        return self._outputs(where, end)

    def _bound_near(self, assign: Sequence[str], base, diff: list[int]) -> float:
        a0, lat0, where0, end0 = base
        if not diff:
            return self._outputs(where0, end0)
        n_groups = len(assign)
        lo, hi = max(diff[0] - 1, 0), min(diff[-1] + 2, n_groups)  # (a move joins or splits its neighbours)
        while lo > 0 and (assign[lo - 1] == assign[lo] or a0[lo - 1] == a0[lo]):
            lo -= 1  # back to where a partition starts in both assignments
        while hi < n_groups and (assign[hi] == assign[hi - 1] or a0[hi] == a0[hi - 1]):
            hi += 1
        ops = [i for grp in self.groups[lo:hi] for i in grp]
        lat = lat0[:]
        for i in ops:
            lat[i] = 0.0
        ctxs, ks = self._keys(assign, lo, hi)
        lat = self._times(ks, ctxs, lat)
        where = where0[:]
        for k in diff:
            for i in self.groups[k]:
                where[i] = assign[k]
        first = min((i for i in ops if lat[i] != lat0[i] or where[i] != where0[i]), default=len(lat))
        end = self._chain_from(first, lat, where, end0[:first] + [0.0] * (len(lat) - first))
        self._chain = (tuple(assign), lat, where, end)  # the moves come group by group: the next is near
        return self._outputs(where, end)

    def _times(self, ks, ctxs, lat: list[float]) -> list[float]:
        """Each op's kernel time under the kernel keys ``ks`` (written into ``lat``)."""
        rows, table = self.cm.kernel_rows, self.table
        for ids, proc, sig in ks:
            for c in rows(ids, proc, sig, table[proc], ctxs):  # type: ignore[index]
                lat[c.op_id] = c.latency_us
        return lat

    def _chain_from(self, first: int, lat: list[float], where: list[str], end: list[float]) -> list[float]:
        """``end[i]``, the longest chain ending with op ``i``, for every op from ``first`` on."""
        g, t, table = self.g, self.t, self.table
        tensors, consumers, host, held = g.tensors, g.consumers, self.soc.host, t.held
        for i in range(first, len(lat)):
            at = 0.0
            here = where[i]
            for tid in t.act_inputs[i]:
                p = tensors[tid].producer
                src = host if p is None else where[p]
                e = 0.0 if p is None else end[p]
                if src != here:  # (the widths the two sides hold it at: ``grouping.bound_keys``)
                    first_c = min(c for c in consumers(tid) if where[c] == here)
                    sb = input_bits(tensors[tid]) if p is None else held(p, tid, table[src][p])  # type: ignore[index]
                    e += self.crossing_us(tid, src, here, sb, held(first_c, tid, table[here][first_c]))  # type: ignore[index]
                if e > at:
                    at = e
            end[i] = at + lat[i]
        return end

    def _outputs(self, where: list[str], end: list[float]) -> float:
        """The longest chain, an output made off the host travelling back to it."""
        g, table, host, held = self.g, self.table, self.soc.host, self.t.held
        tensors, consumers = g.tensors, g.consumers
        last = max(end, default=0.0)
        for tid in g.outputs:
            tt = tensors[tid]
            p = tt.producer
            if tt.kind == "act" and where[p] != host:
                on_host = [c for c in consumers(tid) if where[c] == host]
                c = min(on_host, default=None)
                db = held(c, tid, table[host][c]) if c is not None else input_bits(tt)  # type: ignore[index]
                sb = held(p, tid, table[where[p]][p])  # type: ignore[index]
                last = max(last, end[p] + self.crossing_us(tid, where[p], host, sb, db))
        return last

    @cached_property
    def ordered(self) -> bool:
        """Does every op's producer come before it in every virtual plan's schedule (an earlier
        op id, in an earlier group or earlier in the same one)?  ``bound`` and ``_host_run`` assume
        it."""
        forward, edges = _producer_edges(self.t)
        if not forward:
            return False
        rank = [0] * len(self.g.ops)  # each op's place in the groups' order
        n = 0
        for grp in self.groups:
            for i in grp:
                rank[i] = n
                n += 1
        return all(rank[p] < rank[i] for i, p in edges)

    def crossing_us(self, tid: str, src: str, dst: str, sb: str, db: str) -> float:
        """Transfer + conversions of a tensor from ``src`` at ``sb`` to ``dst`` at ``db``, the widths
        the two sides hold it at (``Tables.held``: a (de)quantize's float side in its own dtype)
        (``boundary_cost``'s figures, which depend on nothing else)."""
        key = (tid, src, dst, sb, db)
        v = self._crossing.get(key)
        if v is None:
            c = boundary_cost(Boundary(tid, src, dst, -1, -1, ()), self.t, self.soc, sb, db, self.procs,
                              self.soc.link(src, dst))  # fmt: skip
            if len(self._crossing) >= CROSSINGS_KEPT:  # (kept for the session: bounded)
                self._crossing.clear()
            v = self._crossing[key] = c.transfer_us + c.layout_us + c.quantize_us
        return v

    def neighbours(self, j: int) -> tuple[int, ...]:
        """The groups whose ops group ``j``'s ops read from or feed (ascending)."""
        nbs = self._nbs.get(j)
        if nbs is None:
            gof = self.group_of
            nbs = self._nbs[j] = tuple(sorted({gof[i] for i in self.t.adjacent(self.groups[j])}))
        return nbs

    def latency(self, assign: Sequence[str]) -> tuple[float, float]:
        plan = self.plan(assign)
        bits = self.bits(plan)
        keys = self.keys(assign, plan, bits) if self.runs is not None else None
        ops, bounds = self.cm.evaluate(plan, bits, memo=False, keys=keys)  # a virtual plan is costed once
        return makespan(self.t, plan, self.soc, ops, bounds), sum(c.energy_uj for c in ops) + sum(b.energy_uj for b in bounds)


def _producer_edges(t: Tables) -> tuple[bool, list[tuple[int, int]]]:
    """(does every op read only ops with a lower id, every (op, producer of an activation it reads)):
    the graph's, worked out once per tables (``Evaluator.ordered`` reads them for every grouping)."""
    got = t.__dict__.get("_producer_edges")
    if got is None:
        tensors = t.g.tensors
        edges = [(i, tensors[tid].producer) for i, ins in enumerate(t.act_inputs) for tid in ins
                 if tensors[tid].producer is not None]  # fmt: skip
        got = t.__dict__["_producer_edges"] = (all(p < i for i, p in edges), edges)
    return got
