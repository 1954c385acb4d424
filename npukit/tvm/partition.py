"""Partition the tagged Relax module with TVM's BYOC machinery and read the result back as a Plan.

The pattern table is plain data from ``npukit.patterns`` (one table per accelerator, in the style
of TVM's backend pattern tables): a root op (conv, matmul) with its fused variants (dequantized
input, bias add, activation, requantize, clamp) plus one single-op pattern per supported op.
Here it becomes ``FusionPattern`` objects, passed in priority order to ``FuseOpsByPattern(
annotate_codegen=False)``; ``MergeCompositeFunctions`` then groups neighbouring composites of one
processor into one partition function with ``Codegen = <processor>``.  (With
``annotate_codegen=True`` every composite is wrapped on its own and nothing merges.)

A pattern check receives only the match; it looks up each matched call's op id (from the span the
importer attached) in the verdicts passed to ``partition()`` -- the check closes over an
immutable acceptance table built for that call, so nothing is kept between calls and the
partition obeys exactly the verdicts the user sees.  The Plan is then read from the module
itself, never from what we asked for.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from .. import patterns as pt
from ..graph import OpGraph
from ..opset import full
from ..plan import Plan, build_plan
from ..rules import Verdict
from ..soc import SocProfile
from . import load as _load_tvm
from .spans import op_id_of_span

OPS_ATTR = "npukit.ops"


class LazyModule:
    """The partitioned module, built by ``build()`` the first time it is asked for (thread-safe)."""

    def __init__(self, build):
        self._build = build
        self._mod = None
        self._lock = threading.Lock()

    def get(self):
        with self._lock:
            if self._mod is None:
                self._mod = self._build()
                self._build = None
            return self._mod

    @property
    def built(self) -> bool:
        return self._mod is not None


@dataclass(frozen=True)
class Partitioned:
    module: object  # the partitioned tvm.IRModule, or a LazyModule that builds it
    plan: Plan
    verdicts: Mapping[tuple[int, str], Verdict]  # the verdicts it obeyed (after pruning)
    notes: Mapping[int, str] = field(default_factory=dict)  # per op: why the placement policy chose this

    @property
    def mod(self):
        """The partitioned tvm.IRModule (FuseOpsByPattern + MergeCompositeFunctions on the whole
        tagged module)."""
        m = self.module
        return m.get() if isinstance(m, LazyModule) else m


def arities(mod) -> dict[str, tuple[int, ...]]:
    """Argument counts of each op kind's calls in the tagged module (patterns match arity)."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    ar: dict[str, set[int]] = {}
    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
                ar.setdefault(v.op.name.rsplit(".", 1)[1], set()).add(len(v.args))
    return {k: tuple(sorted(v)) for k, v in ar.items()}


@lru_cache(maxsize=4096)
def _dataflow_patterns(chain: tuple[str, ...], arity: tuple[tuple[int, ...], ...]):
    """One DFPattern (with its role annotations) per arity combination of the chain's ops; pure, so
    shared by every call."""
    _load_tvm()
    from tvm.relax.dpl import is_op, wildcard  # noqa: PLC0415

    variants = []
    for combo in itertools.product(*arity):
        cur = None
        annotations = {}
        for j, (kind, n) in enumerate(zip(chain, combo, strict=True)):
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
    return tuple(variants)


def _check(g: OpGraph, proc: str, single: bool, ok: frozenset[int], only_fused: frozenset[int]):
    """A FusionPattern check: every matched op accepted by ``proc`` (alone, for a single-op pattern),
    and no intermediate value read outside the match."""

    def check(ctx) -> bool:
        ids = []
        for val in ctx.matched_bindings.values():
            i = op_id_of_span(getattr(val, "span", None))
            if i is None or i not in ok or (single and i in only_fused):
                return False
            ids.append(i)
        return len(ids) < 2 or not pt.internal_outputs_escape(g, ids)

    return check


def fusion_patterns(mod, g: OpGraph, specs, vs: Mapping[tuple[int, str], Verdict], ar=None) -> list:
    """``FusionPattern`` objects for ``specs`` whose checks obey ``vs``."""
    _load_tvm()
    from tvm.relax.transform import FusionPattern  # noqa: PLC0415

    ar = arities(mod) if ar is None else ar
    ok: dict[str, set[int]] = {}
    fused: dict[str, set[int]] = {}
    for (i, proc), v in vs.items():
        if v.ok and not v.host:
            ok.setdefault(proc, set()).add(i)
            if v.fused_only:
                fused.setdefault(proc, set()).add(i)
    frozen = {p: (frozenset(s), frozenset(fused.get(p, ()))) for p, s in ok.items()}
    out = []
    for s in specs:
        acc, only = frozen.get(s.processor, (frozenset(), frozenset()))
        check = _check(g, s.processor, len(s.chain) == 1, acc, only)
        arity = tuple(ar.get(k, (1,)) for k in s.chain)
        out += [FusionPattern(s.name, pat, ann, check, _ops_attr) for pat, ann in _dataflow_patterns(s.chain, arity)]
    return out


def run_once(mod, g: OpGraph, soc: SocProfile, vs, shapes, ar) -> Partitioned:
    """One FuseOpsByPattern + MergeCompositeFunctions run under exactly ``vs`` (no pruning)."""
    _load_tvm()
    from tvm import relax  # noqa: PLC0415

    specs = pt.table(g, soc, vs, shapes)
    fps = fusion_patterns(mod, g, specs, vs, ar)
    out = mod
    if fps:
        out = relax.transform.FuseOpsByPattern(fps, bind_constants=True, annotate_codegen=False)(mod)
        out = relax.transform.MergeCompositeFunctions()(out)
    return Partitioned(out, read_plan(out, g, soc.host), vs)


def partition(mod, g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict], *,
              shapes=None, ar=None) -> Partitioned:  # fmt: skip
    """Partition the tagged module ``mod`` under verdicts ``vs`` (nothing is kept between calls).

    An offloaded partition holding only view ops (reshape, squeeze ...) does no work but costs a
    call and two transfers, so it is pruned: those verdicts turn into refusals and the partition
    re-runs once.  ``shapes`` / ``ar``: the graph's chain shapes and the module's op arities, when
    the caller has them already.
    """
    shapes = pt.chain_shapes(g) if shapes is None else shapes
    ar = arities(mod) if ar is None else ar
    vs = pt.prune_lone_views(g, soc, vs)
    res = run_once(mod, g, soc, vs, shapes, ar)
    extra = pt.prune_view_partitions(g, soc, vs, res.plan.partitions)
    if extra:
        res = run_once(mod, g, soc, {**vs, **extra}, shapes, ar)
    return res


def steps(mod, g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict]) -> dict:
    """The partition one step at a time, for teaching: the pattern table (plain data), the module
    after FuseOpsByPattern (composite functions) and after MergeCompositeFunctions."""
    _load_tvm()
    from tvm import relax  # noqa: PLC0415

    vs = pt.prune_lone_views(g, soc, vs)
    specs = pt.table(g, soc, vs)
    fused = relax.transform.FuseOpsByPattern(fusion_patterns(mod, g, specs, vs), bind_constants=True,
                                             annotate_codegen=False)(mod)  # fmt: skip
    merged = relax.transform.MergeCompositeFunctions()(fused)
    return {"patterns": specs, "tagged": mod, "fused": fused, "merged": merged}


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


def skeleton(mod):
    """``main`` of the tagged module as plain data for ``npukit.byocsim`` (its bindings in order:
    op, op id, arguments), or None when main holds anything the replay does not model (then the
    real passes run on every edit)."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    from ..byocsim import Binding, Skeleton  # noqa: PLC0415

    fn = mod["main"]
    body = fn.body
    if not isinstance(body, relax.SeqExpr) or len(body.blocks) != 1 or not isinstance(body.blocks[0], relax.DataflowBlock):
        return None
    if len(mod.functions) != 1:
        return None
    index: dict = {}
    out = []

    def arg(a):
        if isinstance(a, relax.Tuple):
            return tuple(arg(x) for x in a.fields)
        if isinstance(a, relax.Var):
            for var, k in index.get(hash(a), ()):  # (Var's == builds an expression: compare by identity)
                if var.same_as(a):
                    return k
            return None  # a parameter
        return None

    for b in body.blocks[0].bindings:
        if not isinstance(b, relax.VarBinding):
            return None
        v = b.value
        t = b.var.ty
        flat = isinstance(t, relax.TupleType) and len(t.fields) > 0 and all(isinstance(f, relax.TensorType) for f in t.fields)
        if isinstance(v, relax.Call):
            if not isinstance(v.op, tvm.ir.Op):
                return None
            out.append(Binding("call", v.op.name, op_id_of_span(v.span), tuple(arg(a) for a in v.args), flat))
        elif isinstance(v, relax.TupleGetItem):
            out.append(Binding("tgi", args=(arg(v.tuple_value),), flat=flat))
        elif isinstance(v, relax.Tuple):
            out.append(Binding("tuple", args=tuple(arg(x) for x in v.fields), flat=flat))
        elif isinstance(v, relax.Var):
            out.append(Binding("var", args=(arg(v),), flat=flat))
        else:
            return None
        index.setdefault(hash(b.var), []).append((b.var, len(out) - 1))
    ret = body.body
    outs = arg(ret) if isinstance(ret, (relax.Var, relax.Tuple)) else None
    outs = outs if isinstance(outs, tuple) else (outs,)
    return Skeleton(tuple(out), tuple(k for k in _flat(outs) if k is not None))


def _flat(a):
    for x in a:
        if isinstance(x, tuple):
            yield from _flat(x)
        else:
            yield x
