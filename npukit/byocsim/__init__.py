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

__all__ = ["Binding", "NameSupply", "Skeleton", "fuse", "merge", "partition", "partition_plan"]


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
