"""Cost-aware placement (no tvm): among the processors whose rules accept an op (or a fusable
chain), npukit's cost model chooses where it runs, and whether an offload pays for its call
overhead, its boundary transfers and conversions.  The choice becomes verdicts -- every other
accelerator refuses with a ``cost`` reason carrying the figures -- that the real BYOC partition
(FuseOpsByPattern + MergeCompositeFunctions) then obeys; the Plan is still TVM's (edits use the
passes' exact replay, ``npukit.byocsim``, checked against TVM's own run when the module is built).

The unit of choice is a *group*: a fusable chain (``[dequantize] root [add] [activation]
[quantize] [clip]``, as the pattern tables fuse it) when one accelerator accepts all of it, else
each op alone.  A group's candidates are the host and every accelerator that accepts all its ops.

Objective: the estimated latency of the whole model, in a *virtual plan* built from the choice
(partitions = the runs of one processor along the topological order, composites = the groups) and
costed by the cost model and the list schedule exactly as a real plan is.  Method:

* exhaustive over every assignment when the rules allow at most ``EXHAUSTIVE`` of them and
  their number times the model's ops is at most ``EXHAUSTIVE_WORK`` (small models: the optimum
  under the virtual plan, in tens of milliseconds; a larger space took up to a second per edit);
* otherwise: dynamic programming over the groups in topological order with the processor of the
  previous group as the state (exact for a chain under an additive model: each group's kernel cost,
  the boundary transfer + conversion of every tensor crossing from the previous group, the call
  overhead of every partition entered), then passes of single-group moves under the additive model
  with every edge counted, then (models of at most ``VIRTUAL_MOVES_MAX_OPS`` ops) single-group moves
  judged by the virtual plan's latency while they improve it (a stated heuristic, deterministic,
  bounded by ``MOVE_BUDGET`` evaluations; above ``EXACT_REASONS_MAX_OPS`` ops only the moves the
  additive model prices under ``PROMISING`` of the latency; a move whose lower bound -- the longest
  chain of kernel times, conversions and transfers along the graph's edges -- is above the current
  latency cannot pay and is not costed, though it counts against the budget);
* the profile's first-fit choice and the all-host choice are always considered too, and the best
  virtual latency wins (ties: lower energy, then the first-fit choice); one whose lower bound is
  above the best's latency cannot win and is not costed.

Every op's reason compares its processor with each other candidate: the whole model's latency with
only its group moved, split into the kernel's own time and the rest.  Up to
``EXACT_REASONS_MAX_OPS`` ops that latency comes from the moved virtual plan itself; above, from
the chosen plan's latency plus the additive model's change of the terms the group touches, and the
reason says it is estimated term by term (a virtual plan costs ~0.4 ms at MobileNet size and ~10 ms
for the 1,161-op transformer, and an edit would need one per group and alternative).

Virtual plans share most of their partitions with the plans costed before them, so the kernels'
keys and memory contexts are kept across plans and edits (``Evaluator.keys``: an offloaded
partition group by group, the host's kernel by kernel, each keyed by which neighbours share its
partition; the same kernels are kept by content for the real plans, ``grouping.kernel_by_kernel``);
what is left per plan is the plan itself, its boundaries and the one pass of its schedule that
gives its makespan (``timeline.makespan``).  The additive model's kernel and boundary times and
each single move's change (keyed by the processors of the groups it reads) are kept across edits
too, per grouping and bit-widths, so the move passes after an edit recompute only what it touched.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from .cost import CostModel, OpContext, Tables, boundary_cost, input_bits, kernel_cost
from .cost.grouping import PlanKeys, bound_keys, kept_kernel, partition_kernels, run_keys
from .graph import OpGraph
from .patterns import chains
from .plan import Boundary, Partition, Plan, boundaries
from .rules import Verdict, fail
from .soc import SocProfile
from .timeline import makespan

EXHAUSTIVE = 2048
EXHAUSTIVE_WORK = 8192  # assignments x ops: a virtual plan costs ~4 us per op, so an exhaustive search stays < ~40 ms
MOVE_BUDGET = 200
VIRTUAL_MOVES_MAX_OPS = 400  # larger models stop after the additive moves (each virtual evaluation costs O(ops))
EXACT_REASONS_MAX_OPS = 64  # up to here every alternative in a reason is its own virtual plan
EDGES_KEPT = 8  # groupings whose edges the additive model keeps per model and profile
KEPT_WIDTHS = 2  # bit-width settings whose additive figures a grouping's edges keep
DELTAS_KEPT = 50_000  # move changes kept per grouping and bit-widths (emptied past it)
CROSSINGS_KEPT = 200_000  # crossing times kept per model and profile (emptied past it)
PROMISING = 0.02  # a virtual move is tried when the additive model says it costs < 2% of the latency


@dataclass(frozen=True)
class Choice:
    """The cost policy's decision: the processor of every op, and for every op the figures behind it."""

    processor: tuple[str, ...]  # per op id
    why: tuple[str, ...]  # per op id: the cost comparison in words
    method: str  # "exhaustive" | "dp+local" | "first-fit" | "host"
    latency_us: float  # of the virtual plan
    lone: frozenset[int] = frozenset()  # ops that are a group alone (an accelerator taking them only fused cannot)


def groups_of(g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict]) -> list[tuple[int, ...]]:
    """Fusable chains one accelerator accepts whole, and every other op alone, in topological order."""
    n = len(g.ops)
    oks = [[vs[(i, a)].ok for i in range(n)] for a in soc.accelerators]  # looked up once per op
    taken: set[int] = set()
    out: list[tuple[int, ...]] = []
    for ids, _root in chains(g):
        if any(i in taken for i in ids):
            continue
        if any(all(ok[i] for i in ids) for ok in oks):
            out.append(ids)
            taken.update(ids)
    out += [(op.op_id,) for op in g.ops if op.op_id not in taken]
    out.sort(key=lambda k: k[0])
    return out


def candidates(grp: tuple[int, ...], soc: SocProfile, vs, runs=lambda i, p: True) -> list[str]:
    """The host (unless a pin forbids it) and every accelerator that accepts all of the group (an op
    accepted only fused after a conv/matmul needs its root in the group) and can run its bit-widths
    (``runs(op, processor)``)."""
    return _Accepts(soc, vs, runs, grp).candidates(grp)


class _Accepts:
    """Per processor, per op: accepted there and runnable at its bit-width; per accelerator, per op:
    accepted only fused (looked up once per decision, not once per group and processor); and each
    op's candidates alone (most groups are one op: 10,000 of them at the generated model's size)."""

    def __init__(self, soc: SocProfile, vs, runs, ids: Sequence[int]):
        n = max(ids, default=-1) + 1
        self.host, self.accels = soc.host, soc.accelerators
        names = soc.names
        self.ok = {p: [vs[(i, p)].ok for i in range(n)] for p in names}
        layered = getattr(runs, "layered", None)  # the only ops ``runs`` can refuse, when it says so
        for p, col in self.ok.items():
            for i in range(n) if layered is None else sorted(i for i in layered if i < n):
                col[i] = col[i] and runs(i, p)
        self.only = {a: [vs[(i, a)].fused_only for i in range(n)] for a in self.accels}
        alone: dict[tuple[bool, ...], list[str]] = {}
        self.alone: list[list[str]] = []
        for key in zip(*[self.ok[p] for p in names], *[self.only[a] for a in self.accels]):
            c = alone.get(key)
            if c is None:
                ok = dict(zip(names, key))
                only = dict(zip(self.accels, key[len(names):]))
                c = alone[key] = self._of([p for p in self.accels if ok[p] and not only[p]], ok[self.host])
            self.alone.append(c)

    def _of(self, accels: list[str], host_ok: bool) -> list[str]:
        return ([self.host] if host_ok or not accels else []) + accels

    def candidates(self, grp: tuple[int, ...]) -> list[str]:
        if len(grp) == 1:
            return self.alone[grp[0]]
        ok = self.ok
        return self._of([a for a in self.accels if all(ok[a][i] for i in grp)], all(ok[self.host][i] for i in grp))


class Evaluator:
    """Latency of an assignment (group -> processor) through a virtual plan."""

    def __init__(self, g: OpGraph, soc: SocProfile, t: Tables, bits_of, groups: list[tuple[int, ...]], cm=None,
                 table: Mapping[str, Sequence[str]] | None = None, runs: tuple[dict, bytes, Mapping] | None = None):  # fmt: skip
        """``table``: processor -> every op's bit-width there (``bits_of`` looked up, not called).
        ``runs``: (a mapping kept across decisions or None, the groups' digest, processor -> a
        digest of its column of ``table``): each partition's kernel keys and memory contexts are
        kept there (``grouping.run_keys``), so a virtual plan works out only the partitions no
        earlier plan of the same groups and bit-widths held.  The keys are numbers of the cost
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
            runs = (self.t.run_memo(soc), runs[1], runs[2])
        self.runs = runs if table is not None else None
        self._nbs: dict[int, tuple[int, ...]] = {}
        self._crossing = self.cm.crossings  # (they depend on the profile alone: kept across decisions)
        self._pattern_names: dict[tuple[int, str], str] = {}  # (group, processor) -> composite name

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
        mapping: an offloaded partition group by group, each group's composite keyed by which
        groups it reads from or feeds are in the same partition (a MobileNet on an NPU is one
        partition of ~140 ops, which every single-group move splits); a host partition (a run of
        host groups) whole, else kernel by kernel (``_host_run``: the host fuses epilogues across
        groups)."""
        ctxs, ks = self._keys(assign)
        return PlanKeys(ctxs, ks, bound_keys(plan, self.t, bits))

    def _keys(self, assign: Sequence[str]) -> tuple[list, list]:
        """(contexts, kernel keys) of the virtual plan of ``assign`` (see ``keys``)."""
        kept, gkey, cols = self.runs  # type: ignore[misc]
        groups, host = self.groups, self.soc.host
        ctxs: list = [None] * len(self.g.ops)
        ks: list = []
        k, n = 0, len(assign)
        while k < n:
            p = assign[k]
            end = k + 1
            while end < n and assign[end] == p:
                end += 1
            if p == host:
                key = ("run", gkey, k, end, p, cols[p])
                hits = [kept.get(key)]
                if hits[0] is None:
                    hits[0] = kept[key] = self._host_run(k, end)
            else:
                first = min(self.mins[k:end])
                gof = self.group_of
                hits = []
                for j in range(k, end):
                    nb = self.neighbours(j)
                    lead = self.mins[j] == first  # the group holding the partition's first op
                    key = ("group", gkey, j, p, cols[p], tuple([k <= x < end for x in nb]), lead)
                    hit = kept.get(key)
                    if hit is None:  # the group's composite in this run, kept by content too
                        kern = tuple(sorted(groups[j]))
                        near = tuple([x for x in self.t.adjacent(kern) if k <= gof[x] < end])
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
        kept, gkey, cols = self.runs  # type: ignore[misc]
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
            key = ("host kernel", gkey, kern, cols[host], flags)
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
    def mins(self) -> list[int]:
        """Each group's first op."""
        return [min(grp) for grp in self.groups]

    def bound(self, assign: Sequence[str]) -> float:
        """A lower bound of the virtual plan's latency that needs no plan: the longest chain along
        the graph's edges of kernel times and, where an edge crosses processors, the tensor's
        conversions and transfer (every op ends no earlier than what it reads has arrived, plus its
        own time; lanes, overheads of model inputs and outputs can only add)."""
        g, t = self.g, self.t
        if not self.ordered:
            return 0.0
        ctxs, ks = self._keys(assign)
        n = len(g.ops)
        lat = [0.0] * n
        rows = self.cm.kernel_rows
        table = self.table
        for ids, proc, sig in ks:
            for c in rows(ids, proc, sig, table[proc], ctxs):  # type: ignore[index]
                lat[c.op_id] = c.latency_us
        where = [""] * n
        for grp, p in zip(self.groups, assign):
            for i in grp:
                where[i] = p
        tensors, consumers, host = g.tensors, g.consumers, self.soc.host
        end = [0.0] * n
        for i in range(n):
            at = 0.0
            here = where[i]
            for tid in t.act_inputs[i]:
                p = tensors[tid].producer
                src = host if p is None else where[p]
                e = 0.0 if p is None else end[p]
                if src != here:
                    first = min(c for c in consumers(tid) if where[c] == here)
                    sb = input_bits(tensors[tid]) if p is None else table[src][p]  # type: ignore[index]
                    e += self.crossing_us(tid, src, here, sb, table[here][first])  # type: ignore[index]
                if e > at:
                    at = e
            end[i] = at + lat[i]
        last = max(end, default=0.0)
        for tid in g.outputs:  # an output made off the host travels back to it
            tt = tensors[tid]
            p = tt.producer
            if tt.kind == "act" and where[p] != host:
                on_host = [c for c in consumers(tid) if where[c] == host]
                db = table[host][min(on_host)] if on_host else input_bits(tt)  # type: ignore[index]
                last = max(last, end[p] + self.crossing_us(tid, where[p], host, table[where[p]][p], db))  # type: ignore[index]
        return last

    @cached_property
    def ordered(self) -> bool:
        """Does every op's producer come before it in every virtual plan's schedule (an earlier
        op id, in an earlier group or earlier in the same one)?  ``bound`` and ``_host_run`` assume
        it."""
        pos = {}
        for k, grp in enumerate(self.groups):
            for j, i in enumerate(grp):
                pos[i] = (k, j)
        tensors = self.g.tensors
        return all(tensors[tid].producer is None or (tensors[tid].producer < i and pos[tensors[tid].producer] < pos[i])
                   for i in range(len(self.g.ops)) for tid in self.t.act_inputs[i])  # fmt: skip

    def crossing_us(self, tid: str, src: str, dst: str, sb: str, db: str) -> float:
        """Transfer + conversions of a tensor from ``src`` at ``sb`` to ``dst`` at ``db``
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


class Additive:
    """The additive estimate DP and the move passes use (see the module docstring)."""

    def __init__(self, ev: Evaluator, shared: dict | None = None, gkey: bytes | None = None):
        """``shared``: a mapping kept across decisions for one model and profile (the pipeline's):
        a group's kernel time depends only on its ops, processor and bit-widths, a tensor's boundary
        cost only on the tensor, the two processors and their bit-widths, so an edit re-uses every
        figure the previous decisions computed.  ``gkey`` (a digest of the groups) keys the groups'
        edges there too: most edits leave the groups alone."""
        self.ev = ev
        self._kc: dict[tuple[int, str], float] = {}
        self._bc: dict[tuple[str, str, str, str], float] = {}
        self._shared: dict = {} if shared is None else shared
        kept = self._shared.setdefault("edges", OrderedDict()) if gkey is not None else {}
        edges = kept.get(gkey)
        if edges is None:
            edges = _Edges(ev)
            if gkey is not None:
                kept[gkey] = edges
                if len(kept) > EDGES_KEPT:
                    kept.popitem(last=False)
        self._edges = edges
        self.group_of, self.ins = edges.group_of, edges.ins
        # the kernel and boundary times and each move's change (which depends only on the
        # processors of the groups its terms read): kept per grouping and bit-widths, across decisions
        runs = ev.runs
        if gkey is not None and runs is not None:
            self._deltas, self._kc, self._bc = edges.kept(b"".join([runs[2][p] for p in ev.soc.names]))
        else:
            self._deltas = None

    def kernel_us(self, k: int, p: str) -> float:
        key = (k, p)
        v = self._kc.get(key)
        if v is None:
            ev = self.ev
            grp = ev.groups[k]
            tab = ev.table[p] if ev.table is not None else None
            gbits = tuple([tab[i] for i in grp]) if tab is not None else tuple(ev.bits_of(i, p) for i in grp)
            skey = ("kernel", grp, p, gbits)
            v = self._shared.get(skey)
            if v is None:
                bits = [""] * len(ev.g.ops)
                ctxs: list = [None] * len(ev.g.ops)
                inside = set(grp)
                for i, b in zip(grp, gbits):
                    bits[i] = b
                    op = ev.g.ops[i]
                    fin = tuple(ev.g.tensors[x].producer in inside for x in op.inputs)
                    fout = all(c in inside for c in ev.t.consumers[i]) and bool(ev.t.consumers[i]) and not ev.t.graph_out[i]
                    ctxs[i] = OpContext(fin, (False,) * len(fin), fout, False, i == grp[0], False)
                v = self._shared[skey] = kernel_cost(grp, ev.t, ev.procs[p], bits, ctxs).latency_us
            self._kc[key] = v
        return v

    def boundary_us(self, tid: str, src: str, dst: str, src_op: int | None, dst_op: int) -> float:
        ev = self.ev
        db = ev.bits_of(dst_op, dst)  # (consumers of one tensor on one processor may differ in width)
        key = (tid, src, dst, db)
        v = self._bc.get(key)
        if v is None:
            sb = ev.bits_of(src_op, src) if src_op is not None else "fp32"
            skey = ("boundary", tid, src, dst, sb, db)
            v = self._shared.get(skey)
            if v is None:
                v = self._shared[skey] = ev.crossing_us(tid, src, dst, sb, db)
            self._bc[key] = v
        return v

    def call_us(self, p: str) -> float:
        pr = self.ev.procs[p]
        return pr.call_overhead_cycles / pr.clock_mhz

    def _outs(self) -> list[list[tuple[str, tuple[int, ...], bool]]]:
        """Per group: (tensor, consumer groups, is a model output) of every tensor it produces that
        leaves it."""
        return self._edges.outs[0]

    def _term(self, tid: str, src: str, cons, is_out: bool, assign) -> float:
        """Boundary cost of one tensor: one copy per processor that reads it, other than its own."""
        ev = self.ev
        host = ev.soc.host
        dsts = {assign[c] for c in cons}
        if is_out:
            dsts.add(host)
        dsts.discard(src)
        prod = ev.g.tensors[tid].producer
        tot = 0.0
        for d in sorted(dsts):
            first = min((ev.groups[c][0] for c in cons if assign[c] == d), default=prod if prod is not None else 0)
            tot += self.boundary_us(tid, src, d, prod, first)
        return tot

    def total(self, assign: Sequence[str]) -> float:
        ev = self.ev
        host = ev.soc.host
        outs = self._outs()
        tot = 0.0
        for k, p in enumerate(assign):
            tot += self.kernel_us(k, p) + self._call(assign, k)
            for tid, cons, is_out in outs[k]:
                tot += self._term(tid, p, cons, is_out, assign)
        for tid, cons, is_out in self._edges.outs[1]:
            tot += self._term(tid, host, cons, is_out, assign)
        return tot

    def _call(self, assign, k: int) -> float:
        p = assign[k]
        if p == self.ev.soc.host or (k > 0 and assign[k - 1] == p):
            return 0.0
        return self.call_us(p)

    def _terms(self, k: int) -> list[tuple[str, int, tuple[int, ...], bool]]:
        """The boundary terms group ``k`` touches: (tensor, producer group or -1, consumer groups, is
        a model output) of what it produces and what it reads from outside."""
        return self._edges.terms(k)

    def delta(self, assign: list[str], k: int, q: str) -> float:
        """total(assign with group k on q) - total(assign), from the terms group k touches (kept by
        the processors of the groups they read: ``_Edges.deps``)."""
        memo = self._deltas
        if memo is not None:
            key = (k, q, tuple([assign[x] for x in self._edges.deps(k)]))
            d = memo.get(key)
            if d is None:
                if len(memo) >= DELTAS_KEPT:
                    memo.clear()
                d = memo[key] = self._delta(assign, k, q)
            return d
        return self._delta(assign, k, q)

    def _delta(self, assign: list[str], k: int, q: str) -> float:
        host = self.ev.soc.host
        terms = self._terms(k)

        def local(a) -> float:
            x = self.kernel_us(k, a[k]) + self._call(a, k) + (self._call(a, k + 1) if k + 1 < len(a) else 0.0)
            for tid, pk, cons, o in terms:
                x += self._term(tid, a[pk] if pk >= 0 else host, cons, o, a)
            return x

        old = local(assign)
        saved = assign[k]
        assign[k] = q
        new = local(assign)
        assign[k] = saved
        return new - old


class _Edges:
    """Where the groups' tensors go (no figures, no processors): the same for every decision on
    the same groups of one model, so kept in the additive model's shared mapping."""

    def __init__(self, ev: Evaluator):
        g, t = ev.g, ev.t
        self.groups = ev.groups
        self.group_of = ev.group_of
        # the tensors entering each group from outside, with their producer group (-1: model input)
        self.ins: list[list[tuple[str, int]]] = []
        for grp in ev.groups:
            seen, lst = set(), []
            for i in grp:
                for tid in t.act_inputs[i]:
                    p = g.tensors[tid].producer
                    k = self.group_of.get(p, -1) if p is not None else -1
                    if (p is None or p not in grp) and tid not in seen:
                        seen.add(tid)
                        lst.append((tid, k))
            self.ins.append(lst)
        # per group: (tensor, consumer groups, is a model output) of every tensor it produces that
        # leaves it; and the same for the model's inputs
        outs: list[list] = [[] for _ in ev.groups]
        outset = set(g.outputs)
        for k, grp in enumerate(ev.groups):
            for i in grp:
                for tid in g.ops[i].outputs:
                    cons = tuple(sorted({self.group_of[c] for c in g.consumers(tid)} - {k}))
                    if cons or tid in outset:
                        outs[k].append((tid, cons, tid in outset))
        inputs = []
        for tid in g.inputs:
            cons = tuple(sorted({self.group_of[c] for c in g.consumers(tid)}))
            inputs.append((tid, cons, tid in outset))
        self.outs = (outs, inputs)
        self._terms: dict[int, list] = {}
        self._deps: dict[int, tuple[int, ...]] = {}
        self._kept: OrderedDict = OrderedDict()  # bit-width columns -> figures (``kept``)

    def deps(self, k: int) -> tuple[int, ...]:
        """The groups whose processors ``Additive.delta`` of group ``k`` reads: itself and its
        neighbours in the order (call overheads), and the producers and consumers of its terms."""
        d = self._deps.get(k)
        if d is None:
            s = {k}
            if k > 0:
                s.add(k - 1)
            if k + 1 < len(self.groups):
                s.add(k + 1)
            for _tid, pk, cons, _o in self.terms(k):
                if pk >= 0:
                    s.add(pk)
                s.update(cons)
            d = self._deps[k] = tuple(sorted(s))
        return d

    def kept(self, bits: bytes) -> tuple[dict, dict, dict]:
        """The additive model's figures kept for these groups at the bit-widths ``bits`` (a digest
        of every processor's column): single moves' changes, groups' kernel times, boundary times."""
        m = self._kept.get(bits)
        if m is None:
            m = self._kept[bits] = ({}, {}, {})
            if len(self._kept) > KEPT_WIDTHS:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(bits)
        return m

    def terms(self, k: int) -> list[tuple[str, int, tuple[int, ...], bool]]:
        terms = self._terms.get(k)
        if terms is None:
            outs, inputs = self.outs
            terms = [(tid, k, cons, o) for tid, cons, o in outs[k]]
            for tid, pk in self.ins[k]:
                src = outs[pk] if pk >= 0 else inputs
                terms += [(tid, pk, cons, o) for t2, cons, o in src if t2 == tid]
            self._terms[k] = terms
        return terms


def decide(g: OpGraph, soc: SocProfile, t: Tables, vs: Mapping[tuple[int, str], Verdict], bits_of,
           first_fit: Sequence[str], runs=lambda i, p: True, cm=None, memo=None, shared=None) -> Choice:  # fmt: skip
    """The cost policy's processor for every op (see the module docstring).  ``bits_of(op, proc)``
    is the bit-width an op would run at on a processor; ``first_fit`` the processor per op the
    profile's preference order gives (the baseline that is always evaluated).  ``memo``: a mapping
    kept across calls for one model and profile (the pipeline's): a virtual plan's latency depends
    only on the groups, their processors and the ops' bit-widths, so an edit that leaves most of the
    assignment alone re-uses the evaluations of the previous decision; ``shared`` (also kept per model
    and profile) the additive model's kernel and boundary figures (see ``Additive``)."""
    acc = _Accepts(soc, vs, runs, range(len(g.ops)))
    groups = groups_of(g, soc, vs)
    cands = [acc.candidates(grp) for grp in groups]
    table = getattr(bits_of, "table", None)  # looked up, not recomputed
    if table is None:
        table = {p: [bits_of(i, p) for i in range(len(g.ops))] for p in soc.names}

    def bits_of(i, p, slow=bits_of):
        return table[p][i] if i is not None else slow(i, p)

    host = soc.host
    ff = [first_fit[grp[0]] if first_fit[grp[0]] in c else c[0] for grp, c in zip(groups, cands)]
    all_host = [host if host in c else c[0] for c in cands]
    space = 1
    for c in cands:
        space *= len(c)
        if space > EXHAUSTIVE:
            break
    scored: dict[tuple[str, ...], tuple[float, float]] = {}

    # the memo's key is a 16-byte digest of (groups, processors, bit-widths): the tuples themselves
    # would hold a few KB per entry at transformer size, hundreds of MB for a full memo.  The
    # bit-widths enter as a digest of each used processor's column of the table (an edit of one
    # processor's width leaves the plans that do not use it valid)
    gkey = hashlib.blake2b(repr([tuple(grp) for grp in groups]).encode(), digest_size=16).digest()
    code = {p: k for k, p in enumerate(soc.names)}  # the same on every call (the memo outlives it)
    cols = {p: hashlib.blake2b("\0".join(table[p]).encode(), digest_size=8).digest() for p in soc.names}
    ev = Evaluator(g, soc, t, bits_of, groups, cm, table, (None, gkey, cols))

    def memo_key(a) -> bytes:
        used = b"".join([cols[p] if p in a else bytes(8) for p in soc.names])
        return hashlib.blake2b(gkey + used + bytes([code[p] for p in a]), digest_size=16).digest()

    def score(a) -> tuple[float, float]:
        a = tuple(a)
        s = scored.get(a)
        if s is None:
            if memo is None:
                s = ev.latency(a)
            else:
                key = memo_key(a)
                s = memo.get(key)
                if s is None:
                    s = memo.put(key, ev.latency(a))
            scored[a] = s
        return s

    def slower(a, than: float) -> bool:
        """Is the virtual plan of ``a`` certainly slower than ``than``: its lower bound (``bound``)
        above it, beyond rounding?  Plans already costed are not bounded (their score is at hand)."""
        a = tuple(a)
        if a in scored:
            return False
        if memo is None:
            lb = ev.bound(a)
        else:
            key = memo_key(a)
            s = memo.get(key)
            if s is not None:
                scored[a] = s
                return False
            lb = memo.get(b"bound" + key)  # kept too: an edit and its undo bound the same moves
            if lb is None:
                lb = memo.put(b"bound" + key, ev.bound(a))
        return lb > than * (1 + 1e-9) + 1e-9

    add, deltas, at = None, None, None
    if space <= EXHAUSTIVE and space * len(g.ops) <= EXHAUSTIVE_WORK:
        method = "exhaustive"
        best = min(itertools.product(*cands), key=lambda a: (*score(a), a != tuple(ff)))
    else:
        method = "dp+local"
        add = Additive(ev, shared, gkey)
        best = _dp(add, cands)
        best, deltas = _moves_additive(add, cands, best)
        at = tuple(best)  # the assignment ``deltas`` start from
        if len(g.ops) <= VIRTUAL_MOVES_MAX_OPS:
            best = _moves_virtual(score, cands, best, add, exhaustive=len(g.ops) <= EXACT_REASONS_MAX_OPS, slower=slower)
    options = [(score(best), 0, method, tuple(best))]
    for a, order, name in ((ff, -1, "first-fit"), (all_host, 1, "host")):
        if not slower(a, options[0][0][0]):  # (a baseline certainly slower than the search's best cannot win)
            options.append((score(a), order, name, tuple(a)))
    (lat, _e), _, method, chosen = min(options, key=lambda o: (o[0][0], o[0][1], o[1]))
    proc = [host] * len(g.ops)
    for grp, p in zip(groups, chosen):
        for i in grp:
            proc[i] = p
    exact = len(g.ops) <= EXACT_REASONS_MAX_OPS
    if add is None:
        add = Additive(ev, shared, gkey)
    if exact or chosen != at:
        deltas = None
    why = _reasons(add, cands, chosen, score, exact, deltas)
    lone = frozenset(grp[0] for grp in groups if len(grp) == 1)
    return Choice(tuple(proc), why, method, lat, lone)


def _dp(add: Additive, cands) -> list[str]:
    """Dynamic programming over the groups in order, the state the previous group's processor.  A
    path is kept as a linked list (processor, the path before it), so extending it costs nothing;
    the processor of an earlier group is found by walking back, unless it is settled: once a step
    keeps a single state (a group with one candidate, often), every later path passes through it,
    so the processors of the groups up to it are the same on all of them (``settled``)."""
    ev = add.ev
    host = ev.soc.host
    tensors = ev.g.tensors
    best: dict[str | None, tuple[float, tuple | None]] = {None: (0.0, None)}
    settled: list[str] = []  # processor per group, the same on every path kept
    for k, c in enumerate(cands):
        nxt: dict[str | None, tuple[float, tuple | None]] = {}
        first = ev.groups[k][0]
        ins = add.ins[k]
        n_settled = len(settled)
        for p in c:
            base = add.kernel_us(k, p)
            call = add.call_us(p) if p != host else 0.0
            top = None
            for q, (cost, path) in best.items():
                x = cost + base
                if q != p:
                    x += call
                for tid, pk in ins:
                    if pk < 0 or pk >= k:  # a model input, or a group later in the order
                        src = host
                    elif pk == k - 1:
                        src = q
                    elif pk < n_settled:
                        src = settled[pk]
                    else:
                        node, at = path, k - 1
                        while at > pk:
                            node, at = node[1], at - 1
                        src = node[0]
                    if src != p:
                        x += add.boundary_us(tid, src, p, tensors[tid].producer, first)
                if top is None or x < top[0] or (x == top[0] and str(q) < str(top[2])):
                    top = (x, path, q)
            nxt[p] = (top[0], (p, top[1]))
        best = nxt
        if len(best) == 1:  # every later path passes through this state
            (_x, node), = best.values()
            fill = []
            for _ in range(k + 1 - n_settled):
                fill.append(node[0])
                node = node[1]
            settled += fill[::-1]
    _x, path = min(best.values(), key=lambda v: v[0])
    out: list[str] = []
    while path is not None:
        out.append(path[0])
        path = path[1]
    return out[::-1]


def _moves_additive(add: Additive, cands, a: list[str]) -> tuple[list[str], dict | None]:
    """Passes of improving single-group moves under the additive model.  Also returns every move's
    change from the final assignment when the last pass computed them all without moving (else
    None): the reasons quote the same figures."""
    a = list(a)
    deltas = None
    for _ in range(4):
        improved = False
        seen = {}
        for k, c in enumerate(cands):
            for p in c:
                if p != a[k]:
                    d = seen[(k, p)] = add.delta(a, k, p)
                    if d < -1e-9:
                        a[k] = p
                        improved = True
        if not improved:
            deltas = seen
            break
    return a, deltas


def _moves_virtual(score, cands, a: list[str], add: Additive, exhaustive: bool = True, slower=None) -> list[str]:
    """Single-group moves judged by the virtual plan while they improve it.  Unless ``exhaustive``,
    only the moves the additive model finds promising (costing less than ``PROMISING`` of the
    current latency: it cannot see overlap between lanes, so a move it prices slightly positive may
    still pay) are evaluated.  ``slower(b, latency)``: the move certainly does not pay (a lower bound
    of its latency is above the current one), so it is not costed; it still counts against the
    budget, so the moves made are the same as if it had been."""
    a = tuple(a)
    cur = score(a)
    budget = MOVE_BUDGET
    improved = True
    while improved and budget > 0:
        improved = False
        for k, c in enumerate(cands):
            for p in c:
                if p == a[k] or budget <= 0:
                    continue
                if not exhaustive and add.delta(list(a), k, p) >= PROMISING * cur[0]:
                    continue
                b = a[:k] + (p,) + a[k + 1 :]
                budget -= 1
                if slower is not None and slower(b, cur[0]):
                    continue
                v = score(b)
                if v < cur:
                    a, cur, improved = b, v, True
    return list(a)


def _reasons(add: Additive, cands, chosen, score, exact: bool = True, deltas: dict | None = None) -> tuple[str, ...]:
    """Per op: the chosen processor against every other candidate, the whole model re-estimated with
    only this group moved, split into the kernel's own time and the rest (call overheads, transfers,
    conversions, lost overlap).  ``exact``: each alternative's latency from its own virtual plan
    (the moves evaluated most of them already); otherwise (large models, where one virtual plan
    costs tens of ms) the chosen plan's latency plus the additive model's change of the terms the
    group touches (its kernel, call overheads, the transfers and conversions of its edges), said so.
    ``deltas``: those changes, already worked out from ``chosen`` by the additive moves."""
    ev = add.ev
    groups = ev.groups
    base = score(chosen)[0]
    cur = list(chosen)
    host = ev.soc.host
    why = [""] * len(ev.g.ops)
    alone: dict[str, str] = {}  # processor -> the text of a group no other processor accepts
    for k, (grp, c) in enumerate(zip(groups, cands)):
        p = chosen[k]
        if len(c) == 1 and p in alone:
            text = alone[p]
            for i in grp:
                why[i] = text
            continue
        mine = add.kernel_us(k, p)
        alts = []
        for q in c[:4]:
            if q == p:
                continue
            if exact:
                lat = score(tuple(chosen[:k]) + (q,) + tuple(chosen[k + 1 :]))[0]
            else:
                d = deltas.get((k, q)) if deltas is not None else None
                lat = base + (add.delta(cur, k, q) if d is None else d)
            kern = add.kernel_us(k, q) - mine
            rest = (lat - base) - kern
            what = "saves" if kern < 0 else "costs"
            total = f"{lat:,.1f} us in all" if exact else f"about {lat:,.1f} us in all, estimated term by term"
            alts.append(f"on {q} its kernel {what} {abs(kern):,.1f} us but overheads and transfers "
                        f"{'add' if rest >= 0 else 'save'} {abs(rest):,.1f} us ({total})")  # fmt: skip
        verb = "kept on" if p == host else "on"
        head = f"{verb} {p} by cost: the model takes {base:,.1f} us"
        text = head + ("; " + "; ".join(alts) if alts else "; no other processor accepts it")
        if len(c) == 1:
            alone[p] = text
        for i in grp:
            why[i] = text
    return tuple(why)


def constrain(vs: Mapping[tuple[int, str], Verdict], soc: SocProfile, choice: Choice) -> dict[tuple[int, str], Verdict]:
    """The verdicts the BYOC partition obeys under the cost policy: an accelerator that accepts an op
    the cost model gives to another processor refuses it with the figures; one that takes an op only
    fused after a conv/matmul refuses it when the op stands alone, with that rule."""
    out = dict(vs)
    accels = soc.accelerators
    for i, p in enumerate(choice.processor):
        for a in accels:
            v = vs[(i, a)]
            if a != p and v.ok:
                if v.fused_only and i in choice.lone:  # never a candidate: the rule, not the cost, keeps it off
                    out[(i, a)] = Verdict(a, False, (FUSED_ALONE,))
                else:
                    out[(i, a)] = Verdict(a, False, (fail("cost", f"{choice.why[i]} (placed on {p})", chosen=p),))
    return out


FUSED_ALONE = fail("fused_only", "accepted only fused after a conv/matmul; not fused here")
