"""TVM's BYOC partition passes replayed on a skeleton of the tagged module (no tvm).

``FuseOpsByPattern`` followed by ``MergeCompositeFunctions`` is what places every op; run by TVM
on the whole module it costs tens of milliseconds at 150 ops and most of a second at 1,000 ops
(the merge keeps every group's transitive dependencies, which is quadratic).  An edit must answer
faster than that, so this module replays the two passes step by step, as apache-tvm 0.27 performs
them, on plain data: the ``Skeleton`` of the tagged module's ``main`` (each binding: op, op id,
arguments) read once per model by ``npukit.tvm.partition.skeleton``.

Replayed exactly, because the Plan must be TVM's (``tests/test_incremental.py`` holds the replay
against TVM's own passes over thousands of random edit sequences on every sample, and
``Partitioned.mod`` -- the real passes on the whole module, built when first asked for -- checks
its read-back against the replay every time it is built):

* FuseOpsByPattern: one pass per pattern (highest priority first, every arity variant on its own);
  the calls of the pattern's root op are visited in ``main``'s current binding order; the match
  walks back through each call's first argument; the check (every op accepted by the pattern's
  processor, no intermediate value read outside the match) is npukit's own; each match becomes a
  composite function, and ``main`` is re-emitted in the topological order of the pass's groups
  (TVM's ``TopoSortByGroupDep``), each function named by a fresh name supply that skips names the
  module already holds.
* MergeCompositeFunctions: one group per call; a composite call joins the groups of its arguments
  that are composites for the same codegen unless another argument's group depends on them, with
  dependency sets kept as TVM keeps them (snapshots, renamed on merge; here as bitsets, so the
  quadratic part runs at C speed); ``main`` is re-emitted in the groups' topological order and each
  group becomes a function ``fused_<its composites>`` + ``_<codegen>``.

The package: ``skeleton`` (main as plain data), ``fuse`` (FuseOpsByPattern), ``merge``
(MergeCompositeFunctions); ``partition`` here runs them as ``npukit.tvm.partition`` would.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import patterns as pt
from ..graph import OpGraph
from ..plan import Plan, build_plan
from ..rules import Verdict
from ..soc import SocProfile
from .fuse import NameSupply, fuse
from .merge import merge
from .skeleton import Binding, Skeleton

__all__ = ["Binding", "NameSupply", "Skeleton", "fuse", "merge", "obeyed_alike", "partition", "partition_plan"]


def partition_plan(sk: Skeleton, g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict], shapes, ar) -> Plan:
    """The Plan TVM's FuseOpsByPattern + MergeCompositeFunctions give under verdicts ``vs`` (the
    verdicts after npukit's pruning, as ``npukit.tvm.partition`` passes them)."""
    acc = pt.Accepted(g, vs)
    specs = pt.pattern_specs(g, soc, acc.kinds, shapes, acc.singles)  # (pt.table, from the same scan)
    st = fuse(sk, g, soc, specs, acc, ar)
    if not st.comp_args:
        offloaded, order = [], [("op", b.op_id) for b in sk.bindings if b.kind == "call" and b.op_id is not None]
    else:
        offloaded, order = merge(st)
    return build_plan(g, soc.host, offloaded, order)


def partition(sk: Skeleton, g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict], shapes, ar):
    """``npukit.tvm.partition.partition`` replayed: (Plan, the verdicts it obeyed after pruning)."""
    vs = pt.prune_lone_views(g, soc, vs)
    plan = partition_plan(sk, g, soc, vs, shapes, ar)
    extra = pt.prune_view_partitions(g, soc, vs, plan.partitions)
    if extra:
        vs = {**vs, **extra}
        plan = partition_plan(sk, g, soc, vs, shapes, ar)
    return plan, vs



def obeyed_alike(g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict], done) -> Mapping | None:
    """The verdicts a replay under ``vs`` would obey, when it certainly gives the Plan of ``done``
    (a partition already made: its ``plan`` and the verdicts it obeyed), else None.  The cost
    policy's verdicts when the cost model chose first-fit's placement are the case: no replay then.

    Certain when, after ``vs``'s view pruning, they accept no op on a processor that ``done``'s
    verdicts refuse it on (with the same fused-only words), and accept every offloaded op where the
    Plan put it.  By induction over the passes: each visit of a pattern's root finds the same state,
    so the same match; a match the Plan took ends where the Plan puts it, so ``vs`` accept it; one it
    refused ``vs`` refuse too, as they accept less; a pattern left out of ``vs``'s table (none of
    its kinds accepted) matched nothing.  The merge then sees the same composites.  And the second
    pruning (partitions that compute nothing) must find nothing to prune."""
    plan, before = done.plan, done.verdicts
    obeyed = pt.prune_lone_views(g, soc, vs)
    for (i, p), v in obeyed.items():
        if v.host:
            if v.failed("pinned") != before[(i, p)].failed("pinned"):
                return None
        elif v.ok:
            w = before[(i, p)]
            if not w.ok or w.fused_only != v.fused_only:
                return None
    host = soc.host
    for i, p in enumerate(plan.processor):
        if p != host and not obeyed[(i, p)].ok:
            return None
    if pt.prune_view_partitions(g, soc, obeyed, plan.partitions):
        return None
    return obeyed
