"""Partition the tagged Relax module with TVM's BYOC machinery and read the result back as a Plan.

Patterns are generated from the SoC profile, one table per accelerator, in the style of TVM's
backend pattern tables (``tvm/relax/backend/*/patterns``): a root op (conv, matmul) with its fused
variants (dequantized input, bias add, activation, requantize, clamp) plus one single-op pattern
per supported op.  They are passed, in priority order, to ``FuseOpsByPattern(annotate_codegen=
False)``; ``MergeCompositeFunctions`` then groups neighbouring composites of one processor into one
partition function with ``Codegen = <processor>``.  (With ``annotate_codegen=True`` every
composite is wrapped on its own and nothing merges.)

A pattern check receives only the match; it looks up each matched call's op id (from the span the
importer attached) in the current verdict table, so the partition obeys exactly the verdicts the
user sees.  The Plan is then read from the module itself, never from what we asked for.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from ..graph import VIEW_OPS, OpGraph
from ..ops import full
from ..plan import Plan, build_plan
from ..rules import ROOT_KINDS, Verdict
from ..soc import SocProfile
from . import load as _load_tvm
from .importers import op_id_of_span

ACTIVATIONS = ("relu", "clip", "sigmoid", "gelu", "gelu_tanh", "silu", "tanh", "leakyrelu", "hardswish")


@dataclass(frozen=True)
class PatternSpec:
    """A pattern as plain data: processor, chain of op kinds, index of the root in the chain."""

    processor: str
    chain: tuple[str, ...]  # e.g. ("dequantize", "conv2d", "add", "quantize", "clip")
    root: int

    @property
    def name(self) -> str:
        return f"{self.processor}.{'_'.join(self.chain)}"


# the epilogue grammar after a root op: [add] [activation] [quantize] [clip]
_TAIL_SLOTS = (("add",), ACTIVATIONS, ("quantize",), ("clip",))


def chain_shapes(g: OpGraph) -> set[tuple[tuple[str, ...], int]]:
    """The fusable chains that occur in the graph: ((kinds...), index of the root).

    A chain is an optional ``dequantize`` feeding a root op (conv / matmul), then the root's
    single-consumer epilogue in the order bias ``add``, activation, ``quantize``, ``clip``.
    """
    shapes = set()
    for op in g.ops:
        if op.kind not in ROOT_KINDS:
            continue
        chain = [op.kind]
        root = 0
        first = g.tensors[op.inputs[0]]
        if first.kind == "act" and g.ops[first.producer].kind == "dequantize":
            chain.insert(0, "dequantize")
            root = 1
        cur = op
        slot = 0
        while slot < len(_TAIL_SLOTS) and len(cur.outputs) == 1:
            cons = g.consumers(cur.outputs[0])
            if len(cons) != 1:
                break
            nxt = g.ops[cons[0]]
            while slot < len(_TAIL_SLOTS) and nxt.kind not in _TAIL_SLOTS[slot]:
                slot += 1
            if slot == len(_TAIL_SLOTS):
                break
            chain.append(nxt.kind)
            cur = nxt
            slot += 1
        shapes.add((tuple(chain), root))
    return shapes


def pattern_specs(g: OpGraph, soc: SocProfile, accepted: Mapping[str, set[str]],
                  shapes: set[tuple[tuple[str, ...], int]] | None = None,
                  singles: Mapping[str, set[str]] | None = None) -> list[PatternSpec]:  # fmt: skip
    """The pattern table, highest priority first.

    Per accelerator: every contiguous sub-chain (holding the root) of the fusable chains that
    occur in the graph, longest first, then one single-op pattern per supported op kind.
    ``accepted[proc]`` holds the op kinds with at least one op that processor currently accepts;
    patterns that could never match are left out, which keeps FuseOpsByPattern fast.  Across
    processors the order follows the profile's preference for the root op.
    """
    shapes = chain_shapes(g) if shapes is None else shapes
    present = {op.kind for op in g.ops}
    specs: dict[PatternSpec, tuple] = {}
    for proc in soc.accelerators:
        ok = accepted.get(proc, set()) & present
        for chain, root in shapes:
            if chain[root] not in ok:
                continue
            rank = soc.preference(chain[root]).index(proc)
            for lo in range(root + 1):
                for hi in range(root + 1, len(chain) + 1):
                    sub = chain[lo:hi]
                    if len(sub) > 1 and all(k in ok for k in sub):
                        spec = PatternSpec(proc, sub, root - lo)
                        specs[spec] = (rank, -len(sub), sub[root - lo], proc, sub)
        for kind in ok if singles is None else singles.get(proc, set()) & present:
            spec = PatternSpec(proc, (kind,), 0)
            specs[spec] = (soc.preference(kind).index(proc), -1, kind, proc, (kind,))
    return sorted(specs, key=specs.__getitem__)


@dataclass
class Partitioned:
    mod: object  # the partitioned tvm.IRModule
    plan: Plan
    verdicts: Mapping[tuple[int, str], Verdict]  # the verdicts it obeyed (after pruning)


class Partitioner:
    """Holds the tagged module and the pattern objects; ``run(verdicts)`` partitions it."""

    def __init__(self, mod, g: OpGraph, soc: SocProfile):
        self.mod = mod
        self.g = g
        self.soc = soc
        self._vs: Mapping[tuple[int, str], Verdict] = {}
        self._fusion: dict[PatternSpec, object] = {}
        self._shapes = chain_shapes(g)

    # -- patterns ------------------------------------------------------------------------------
    def _arities(self) -> dict[str, set[int]]:
        """Argument counts of each op kind's calls in the tagged module (patterns match arity)."""
        if not hasattr(self, "_real_arity"):
            tvm = _load_tvm()
            from tvm import relax  # noqa: PLC0415

            ar: dict[str, set[int]] = {}
            for blk in self.mod["main"].body.blocks:
                for b in blk.bindings:
                    v = b.value
                    if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
                        ar.setdefault(v.op.name.rsplit(".", 1)[1], set()).add(len(v.args))
            self._real_arity = ar
        return self._real_arity

    def _fusion_pattern(self, spec: PatternSpec):
        fp = self._fusion.get(spec)
        if fp is not None:
            return fp
        _load_tvm()
        from tvm.relax.dpl import is_op, wildcard  # noqa: PLC0415
        from tvm.relax.transform import FusionPattern  # noqa: PLC0415

        ar = self._arities()
        variants = []
        # one DFPattern per arity combination of the ops in the chain
        arities = [sorted(ar.get(k, {1})) for k in spec.chain]
        for combo in itertools.product(*arities):
            cur = None
            annotations = {}
            for j, (kind, n) in enumerate(zip(spec.chain, combo, strict=True)):
                args = [wildcard() for _ in range(n)]
                if cur is not None:
                    if n == 0:
                        cur = None
                        break
                    args[0] = cur
                cur = is_op(full(kind))(*args)
                annotations[f"{j}_{kind}"] = cur
            if cur is not None:
                variants.append((cur, annotations))
        proc = spec.processor
        check = self._make_check(proc, spec)
        fps = [FusionPattern(spec.name, pat, ann, check, _ops_attr) for pat, ann in variants]
        self._fusion[spec] = fps
        return fps

    def _make_check(self, proc: str, spec: PatternSpec):
        g = self.g
        single = len(spec.chain) == 1

        def check(ctx) -> bool:
            ids = []
            for val in ctx.matched_bindings.values():
                i = op_id_of_span(getattr(val, "span", None))
                if i is None:
                    return False
                ids.append(i)
            vs = self._vs
            for i in ids:
                v = vs.get((i, proc))
                if v is None or not v.ok or (single and v.fused_only):
                    return False
            if len(ids) > 1:  # intermediates must not be read outside the composite
                idset = set(ids)
                last = max(ids)
                for i in ids:
                    if i == last:
                        continue
                    for t in g.ops[i].outputs:
                        if t in g.outputs or any(c not in idset for c in g.consumers(t)):
                            return False
            return True

        return check

    # -- partition ------------------------------------------------------------------------------
    def run(self, vs: Mapping[tuple[int, str], Verdict]) -> Partitioned:
        """Partition under verdicts ``vs``.

        An offloaded partition holding only view ops (reshape, squeeze ...) does no work but
        costs a call and two transfers, so it is pruned the way TVM's TensorRT integration prunes
        subgraphs without compute: those verdicts turn into refusals and the partition re-runs once.
        """
        vs = self._prune_lone_views(vs)
        res = self._run_once(vs)
        pruned: dict[tuple[int, str], Verdict] = {}
        for part in res.plan.partitions:
            kinds = {self.g.ops[i].kind for i in part.ops}
            if part.processor != self.soc.host and kinds <= VIEW_OPS:
                why = f"pruned: a partition holding only {', '.join(sorted(kinds))} is not worth an offload call"
                for i in part.ops:
                    if not self._pinned(vs, i):
                        pruned[(i, part.processor)] = Verdict(part.processor, False, (why,))
        if pruned:
            res = self._run_once({**vs, **pruned})
        return res

    def _pinned(self, vs: Mapping[tuple[int, str], Verdict], i: int) -> bool:
        """Only a user's pin makes the host refuse an op; a pin beats the pruning of view ops."""
        v = vs.get((i, self.soc.host))
        return v is not None and not v.ok

    def _prune_lone_views(self, vs: Mapping[tuple[int, str], Verdict]) -> Mapping[tuple[int, str], Verdict]:
        """Refuse up front the view ops no neighbour could join on the same processor (the common
        case of the pruning rule in ``run``), which saves a second partition run."""
        g = self.g
        out = None
        for op in g.ops:
            if op.kind not in VIEW_OPS or self._pinned(vs, op.op_id):
                continue
            nbrs = list(g.producers(op)) + [c for t in op.outputs for c in g.consumers(t)]
            for proc in self.soc.accelerators:
                v = vs.get((op.op_id, proc))
                if v is None or not v.ok or any(vs[(n, proc)].ok for n in nbrs):
                    continue
                if out is None:
                    out = dict(vs)
                out[(op.op_id, proc)] = Verdict(proc, False, (f"pruned: a partition holding only {op.kind} is not worth an offload call",))
        return vs if out is None else out

    def steps(self, vs: Mapping[tuple[int, str], Verdict]) -> dict:
        """The partition one step at a time, for teaching: the pattern table (plain data), the
        module after FuseOpsByPattern (composite functions) and after MergeCompositeFunctions."""
        _load_tvm()
        from tvm import relax  # noqa: PLC0415

        vs = self._prune_lone_views(vs)
        specs, patterns = self._patterns(vs)
        fused = relax.transform.FuseOpsByPattern(patterns, bind_constants=True, annotate_codegen=False)(self.mod)
        merged = relax.transform.MergeCompositeFunctions()(fused)
        return {"patterns": specs, "tagged": self.mod, "fused": fused, "merged": merged}

    def _patterns(self, vs) -> tuple[list[PatternSpec], list]:
        """The pattern table for verdicts ``vs`` and its FusionPattern objects (checks read ``vs``)."""
        self._vs = vs
        accepted: dict[str, set[str]] = {}
        singles: dict[str, set[str]] = {}
        for (i, proc), v in vs.items():
            if v.ok and not v.host:
                kind = self.g.ops[i].kind
                accepted.setdefault(proc, set()).add(kind)
                if not v.fused_only:
                    singles.setdefault(proc, set()).add(kind)
        specs = pattern_specs(self.g, self.soc, accepted, self._shapes, singles)
        return specs, [fp for s in specs for fp in self._fusion_pattern(s)]

    def _run_once(self, vs: Mapping[tuple[int, str], Verdict]) -> Partitioned:
        _load_tvm()
        from tvm import relax  # noqa: PLC0415

        _specs, patterns = self._patterns(vs)
        mod = self.mod
        if patterns:
            mod = relax.transform.FuseOpsByPattern(patterns, bind_constants=True, annotate_codegen=False)(mod)
            mod = relax.transform.MergeCompositeFunctions()(mod)
        return Partitioned(mod, read_plan(mod, self.g, self.soc.host), vs)


OPS_ATTR = "npukit.ops"


def _ops_attr(annotated) -> dict[str, str]:
    """Composite attribute listing the op ids it holds.

    FuseOpsByPattern shares one function between structurally equal matches (spans do not count
    for equality), so spans inside a composite name only one of its call sites.  This attribute
    makes every composite distinct and names its own ops.
    """
    ids = sorted({i for e in annotated.values() if (i := op_id_of_span(getattr(e, "span", None))) is not None})
    return {OPS_ATTR: ",".join(map(str, ids))}


def read_plan(mod, g: OpGraph, host: str) -> Plan:
    """Read the placement back from a partitioned module (spans name the ops)."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    offloaded = []
    for gv, fn in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
        attrs = fn.attrs
        if not isinstance(fn, relax.Function) or attrs is None or "Codegen" not in attrs:
            continue
        comps = []
        for blk in fn.body.blocks:
            for b in blk.bindings:
                if isinstance(b.value, relax.Function) and b.value.attrs is not None and "Composite" in b.value.attrs:
                    ids = [int(x) for x in str(b.value.attrs[OPS_ATTR]).split(",") if x]
                    comps.append((str(b.value.attrs["Composite"]), ids))
        offloaded.append((gv.name_hint, str(attrs["Codegen"]), comps))
    order = []
    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            v = b.value
            if isinstance(v, relax.Call):
                if isinstance(v.op, relax.GlobalVar):
                    order.append(("call", v.op.name_hint))
                elif isinstance(v.op, tvm.ir.Op):
                    i = op_id_of_span(v.span)
                    if i is not None:
                        order.append(("op", i))
    return build_plan(g, host, offloaded, order)
