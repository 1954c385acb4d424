"""The cost model over a plan: per-op rows and per-boundary figures, with a bounded memo of kernels
(only kernels whose inputs to the formula changed -- members, processor, bits, memory contexts --
are recomputed after an edit)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from ..plan import Plan
from ..soc import SocProfile
from ..soc.profile import _dumps
from .boundary import BoundaryCost, boundary_cost, boundary_trace
from .grouping import PlanKeys, plan_keys
from .kernel import KernelCost, UtilMemo
from .shapes import shapes_of
from .tables import Tables
from .trace import Trace, kernel_trace, member_trace


class OpCost:
    """One op's row: the kernel's figures on its anchor op, zeros (and the anchor's id) on the
    other members.  ``compute``, ``memory`` and ``overhead`` cycles add up as the formula says:
    ``cycles = max(compute_cycles, memory_cycles) + overhead_cycles``."""

    __slots__ = ("op_id", "processor", "bits", "kernel", "role", "k", "_t", "_anchor", "macs", "latency_us", "energy_uj")

    def __init__(self, op_id: int, k: KernelCost, t: Tables, role: str):
        self.op_id = op_id
        self.processor = k.p.name
        self.bits = k.bits[k.ids.index(op_id)]
        self.kernel = k.anchor  # op_id of the anchor of the kernel this op was costed in
        self.role = role
        self.k = k
        self._t = t
        self._anchor = a = op_id == k.anchor
        # the figures every schedule and total reads, as plain attributes (sweeps read them often)
        self.macs = k.macs if a else 0
        self.latency_us = k.latency_us if a else 0
        self.energy_uj = k.energy_uj if a else 0

    def _f(self, name: str):
        return getattr(self.k, name) if self._anchor else 0

    vector_ops = property(lambda s: s._f("vector_ops"))
    bytes = property(lambda s: s.k.bytes if s._anchor else 0.0)
    dram_bytes = property(lambda s: s.k.act_dram + s.k.weights if s._anchor else 0.0)
    onchip_bytes = property(lambda s: s._f("onchip"))
    weight_bytes = property(lambda s: s._f("weights"))
    compute_cycles = property(lambda s: s._f("compute_cycles"))
    memory_cycles = property(lambda s: s._f("memory_cycles"))
    overhead_cycles = property(lambda s: s._f("overhead_cycles"))
    cycles = property(lambda s: s._f("cycles"))

    @property
    def trace(self) -> tuple[Trace, ...]:
        return kernel_trace(self.k, self._t) if self._anchor else member_trace(self.k, self.op_id, self._t)

    def __repr__(self) -> str:
        return (f"OpCost(op {self.op_id} on {self.processor} at {self.bits}: {self.cycles:,.1f} cycles, "
                f"{self.latency_us:.3f} us, kernel {self.kernel})")  # fmt: skip


def processor_key(soc: SocProfile, name: str) -> tuple[str, str]:
    """(name, digest of the processor's table in the profile): what a kernel's cost depends on of
    the profile, beside the memory contexts."""
    doc = _dumps(soc.raw["processors"][name]).encode()
    return name, hashlib.sha256(doc).hexdigest()[:16]


class CostModel:
    """Per-kernel and per-boundary costs of one (graph, profile) with bounded memos."""

    MEMO = 65536

    def __init__(self, tables: Tables, soc: SocProfile, memo: OrderedDict | None = None):
        self.t = tables
        self.g = tables.g
        self.soc = soc
        # costed kernels, keyed by the content of their processor: cost models given one ``memo``
        # (the pipeline passes the graph's) share the kernels of profiles that differ elsewhere --
        # in another processor, a link -- as a sweep's do
        self._kernels: OrderedDict[tuple, list[OpCost]] = OrderedDict() if memo is None else memo
        self._pkey = {p.name: processor_key(soc, p.name) for p in soc.processors}
        self._bounds: OrderedDict[tuple, BoundaryCost] = OrderedDict()
        self._procs = {p.name: p for p in soc.processors}
        self._links: dict[tuple[str, str], object] = {}
        self._util = UtilMemo()
        self._shapes = shapes_of(tables)
        self.recomputed = 0  # ops recomputed by the last evaluate()
        # a tensor's transfer + conversions from one processor and width to another (the placement
        # search's figure: placement.Evaluator.crossing_us), kept for every decision on this profile
        self.crossings: dict[tuple[str, str, str, str, str], float] = {}

    def evaluate(self, plan: Plan, bits: Mapping[int, str] | Sequence[str], memo: bool = True,
                 keys: PlanKeys | None = None) -> tuple[list[OpCost], list[BoundaryCost]]:  # fmt: skip
        """Every op's and boundary's cost under ``plan``.  ``memo=False``: a plan evaluated once (a
        virtual plan of the placement search) leaves nothing in the per-plan memos (the kernels'
        costs are still memoized by content).  ``keys``: the plan's ``PlanKeys``, when the caller
        assembled them (the placement search, from the partitions its plans share)."""
        g, t = self.g, self.t
        bits_l = list(bits) if isinstance(bits, (tuple, list)) else [bits[i] for i in range(len(g.ops))]
        if keys is None:
            keys = plan_keys(plan, self.soc, t, bits_l, memo)
        ctxs = keys.contexts
        out: list[OpCost | None] = [None] * len(g.ops)
        memo = self._kernels
        pkey = self._pkey
        n = 0
        for ids, proc, sig in keys.kernels:
            cs = memo.get((sig, pkey[proc]))
            if cs is None:
                cs = self.kernel_rows(ids, proc, sig, bits_l, ctxs)
                n += len(ids)
            for c in cs:
                out[c.op_id] = c
        self.recomputed = n
        bout = []
        bmemo = self._bounds
        for b, sb, db, sig in keys.bounds:
            c = bmemo.get(sig)
            if c is None:
                c = boundary_cost(b, t, self.soc, sb, db, self._procs, self.link(b.src, b.dst))
                bmemo[sig] = c
                if len(bmemo) > self.MEMO:
                    bmemo.popitem(last=False)
            bout.append(c)
        return out, bout  # type: ignore[return-value]

    def kernel_rows(self, ids, proc: str, sig: int, bits: Sequence[str], ctxs) -> list[OpCost]:
        """The rows of one kernel (its key from ``plan_keys``), from the memo or costed and kept;
        ``bits`` and ``ctxs`` indexed by op id."""
        key = (sig, self._pkey[proc])
        cs = self._kernels.get(key)
        if cs is None:
            k = self.kernel(tuple(ids), proc, bits, ctxs)
            cs = [OpCost(i, k, self.t, r) for i, r in zip(k.ids, k.roles)]
            self._kernels[key] = cs
            if len(self._kernels) > self.MEMO:
                self._kernels.popitem(last=False)
        return cs

    def kernel(self, ids: tuple[int, ...], proc: str, bits: Sequence[str], ctxs) -> KernelCost:
        """``kernel_cost`` of ``ids`` on ``proc`` (``bits`` and ``ctxs`` indexed by op id), from a
        kernel of the same structure when one was costed (``shapes``)."""
        return self._shapes.cost(ids, self._procs[proc], self._pkey[proc], bits, ctxs, self._util)

    def link(self, a: str, b: str):
        ln = self._links.get((a, b))
        if ln is None:
            ln = self._links[(a, b)] = self.soc.link(a, b)
        return ln

    def boundary_trace(self, c: BoundaryCost) -> tuple[Trace, ...]:
        return boundary_trace(c, self.t)
