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
  latency cannot pay and is not costed, though it counts against the budget); when no single
  move pays, moves of a whole run of groups on one processor to another that takes all of them
  (a detector's head of 16 ops, whose transfers no single op's move removes);
* the profile's first-fit choice, the all-host choice and, per accelerator, every group it takes on
  it (first-fit's choice for the rest: a plan that needs many moves at once to pay, a transformer
  all on the vector DSP rather than split with the matrix unit) are always considered too, and the
  best virtual latency wins (ties: lower energy, then the first-fit choice); one whose lower bound
  is above the best's latency cannot win and is not costed.  When a baseline wins, the moves run
  from it too.

Every op's reason compares its processor with each other candidate: the whole model's latency with
only its group moved, split into the kernel's own time and the rest.  Up to
``EXACT_REASONS_MAX_OPS`` ops that latency comes from the moved virtual plan itself; above, from
the chosen plan's latency plus the additive model's change of the terms the group touches, and the
reason says it is estimated term by term (a virtual plan costs ~0.4 ms at MobileNet size and ~10 ms
for the 1,161-op transformer, and an edit would need one per group and alternative).

Virtual plans share most of their partitions with the plans costed before them, so the kernels'
keys and memory contexts are kept across plans and edits (``Evaluator.keys``: an offloaded
partition group by group, the host's kernel by kernel, each keyed by its ops and which of the ops
it reads from or feeds share its partition; the same kernels are kept by content for the real plans, ``grouping.kernel_by_kernel``);
what is left per plan is the plan itself, its boundaries and the one pass of its schedule that
gives its makespan (``timeline.makespan``).  The additive model's kernel and boundary times and
each single move's change (keyed by the processors of the groups it reads) are kept across edits
too, per grouping and bit-widths, so the move passes after an edit recompute only what it touched;
and the DP's states step by step, so an edit resumes the DP at the first group whose step reads
otherwise (a pin: its group; an edit undone: past the last group), and stops at the first group
after it where the DP settles as a kept run did with the same steps to come (a settled state's cost
is 0, so what follows it computes the same): the rest is that run's.  A single move's change and a
virtual plan's partitions are kept by content (the groups' ops, not their numbers), so a pin, which
splits a group and renumbers the rest, finds them too; and a crossing's figures by the tensor, the
two processors and their widths, for every plan that holds it.

Kernels and partitions of one structure are worked out once (``npukit.cost.shapes``): a kernel's
figures depend only on what the formula reads of its members (kind, work, geometry, kernel class,
each tensor's kind, dtype, shape and held width, which members share a tensor), their bit-widths
and memory contexts and the processor; a partition's kernels and contexts only on its ops, which of
their producers and readers are in it, its composites and first op, by position, and the widths.
A kernel or partition of a structure met before is not worked out again: the kept result is
re-based onto its own op and tensor ids, and every figure and trace reads as its own would
(``tests/test_shared_costings.py`` holds both equal on every sample and profile).  A model of
repeated blocks holds few structures: on arm-dsp-dla under first-fit, the generated 10,006-op
transformer's 6,901 kernels are of 15 structures and its 2,071 partitions of 10.

The settings named above are constants of the modules that use them: ``npukit.placement.search``
(``EXHAUSTIVE``, ``EXHAUSTIVE_WORK``, ``MOVE_BUDGET``, ``VIRTUAL_MOVES_MAX_OPS``,
``EXACT_REASONS_MAX_OPS``, ``PROMISING``), ``.virtual`` (``BOUND_DIFF_MAX``, ``CROSSINGS_KEPT``)
``.additive`` (what the additive model keeps) and ``.dp`` (``DP_RUNS_KEPT``).
"""

from __future__ import annotations

from .additive import Additive
from .groups import Choice, candidates, constrain, groups_of
from .search import decide, restate
from .virtual import Evaluator

__all__ = ["Additive", "Choice", "Evaluator", "candidates", "constrain", "decide", "groups_of", "restate"]
