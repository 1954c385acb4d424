"""The pure half of BYOC partitioning (no tvm): which fusable chains occur in a graph, the pattern
table per accelerator as plain data (``PatternSpec``), its priority order, and the verdict edits the
partitioner makes before and after running TVM (pruning offloads of view ops alone).

``npukit.tvm.partition`` turns the table into TVM ``FusionPattern`` objects and runs
``FuseOpsByPattern`` + ``MergeCompositeFunctions``; everything decided here is testable without TVM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .graph import OpGraph
from .opset import ACTIVATIONS, is_mac, is_view
from .rules import Verdict, pruned
from .soc import SocProfile

Verdicts = Mapping[tuple[int, str], Verdict]


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
TAIL_SLOTS = (("add",), ACTIVATIONS, ("quantize",), ("clip",))
QUANT_MOVES = frozenset({"dequantize", "quantize", "astype"})  # never the root of a quantized op's chain


def chains(g: OpGraph) -> list[tuple[tuple[int, ...], int]]:
    """The fusable chains of the graph as op ids: ((ids...), index of the root).

    A chain is an optional ``dequantize`` feeding a root op (a MAC op: conv, matmul, ...), then the
    root's single-consumer epilogue in the order bias ``add``, activation, ``quantize``, ``clip``; or
    a quantized op of another kind -- a ``dequantize`` feeding its first input: a pool, softmax,
    elementwise op ... -- with its activation, ``quantize`` and ``clip`` after it (an accelerator's
    int8 softmax or pool reads and writes int8: its dequantize and quantize are its own).
    Worked out once per graph (every edit's placement reads them).
    """
    kept = g.__dict__.get("_chains")
    if kept is None:
        kept = tuple(_chains(g))
        object.__setattr__(g, "_chains", kept)
    return list(kept)


def _chains(g: OpGraph) -> list[tuple[tuple[int, ...], int]]:
    out = []
    for op in g.ops:
        if not op.inputs:
            continue
        first = g.tensors[op.inputs[0]]
        dq = first.kind == "act" and g.ops[first.producer].kind == "dequantize"
        if is_mac(op.kind):
            slot = 0
        elif dq and op.kind not in QUANT_MOVES and not is_view(op.kind):
            slot = 1  # a quantized op of another kind (pool, softmax, add ...): no bias add after it
        else:
            continue
        ids = [op.op_id]
        root = 0
        if dq:
            ids.insert(0, first.producer)
            root = 1
        cur = op
        while slot < len(TAIL_SLOTS) and len(cur.outputs) == 1:
            cons = g.consumers(cur.outputs[0])
            if len(cons) != 1:
                break
            nxt = g.ops[cons[0]]
            while slot < len(TAIL_SLOTS) and nxt.kind not in TAIL_SLOTS[slot]:
                slot += 1
            if slot == len(TAIL_SLOTS):
                break
            ids.append(nxt.op_id)
            cur = nxt
            slot += 1
        out.append((tuple(ids), root))
    return out


def chain_shapes(g: OpGraph) -> frozenset[tuple[tuple[str, ...], int]]:
    """The kinds of the fusable chains that occur in the graph: ((kinds...), index of the root)."""
    return frozenset((tuple(g.ops[i].kind for i in ids), root) for ids, root in chains(g))


class Accepted:
    """What verdicts accept, per accelerator, from one scan: the ops (``ok``), those accepted only
    fused into a kernel (``fused_only``), the op kinds with an accepted op (``kinds``) and
    those accepted alone (``singles``)."""

    def __init__(self, g: OpGraph, vs: Verdicts):
        self.ok: dict[str, set[int]] = {}
        self.fused_only: dict[str, set[int]] = {}
        self.kinds: dict[str, set[str]] = {}
        self.singles: dict[str, set[str]] = {}
        ops = g.ops
        for (i, proc), v in vs.items():
            if v.ok and not v.host:
                self.ok.setdefault(proc, set()).add(i)
                kind = ops[i].kind
                self.kinds.setdefault(proc, set()).add(kind)
                if v.fused_only:
                    self.fused_only.setdefault(proc, set()).add(i)
                else:
                    self.singles.setdefault(proc, set()).add(kind)


def accepted_kinds(g: OpGraph, vs: Verdicts) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per accelerator: the op kinds with at least one accepted op, and those accepted alone
    (not only fused into a kernel)."""
    a = Accepted(g, vs)
    return a.kinds, a.singles


def pattern_specs(g: OpGraph, soc: SocProfile, accepted: Mapping[str, set[str]],
                  shapes: frozenset[tuple[tuple[str, ...], int]] | None = None,
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


def table(g: OpGraph, soc: SocProfile, vs: Verdicts, shapes=None) -> list[PatternSpec]:
    """The pattern table for verdicts ``vs``."""
    accepted, singles = accepted_kinds(g, vs)
    return pattern_specs(g, soc, accepted, shapes, singles)


def is_pinned(vs: Verdicts, i: int, host: str) -> bool:
    """Only a user's pin makes the host refuse an op; a pin beats the pruning of view ops."""
    v = vs.get((i, host))
    return v is not None and v.failed("pinned")


def prune_lone_views(g: OpGraph, soc: SocProfile, vs: Verdicts) -> Verdicts:
    """Refuse up front the ops that move or convert data (views, quantize, dequantize, astype) which
    could only ever land in a partition of their own on a processor: no op that computes, joined to
    them through such ops, is accepted there (the common case of ``prune_view_partitions``, which
    saves a second partition run)."""
    out = None
    movers = _movers(g)
    host = soc.host
    for proc in soc.accelerators:
        done: set[int] = set()
        for i in movers:
            if i in done or is_pinned(vs, i, host):
                continue
            v = vs.get((i, proc))
            if v is None or not v.ok:
                continue
            island, joined, todo = [], False, [i]  # the movers proc accepts joined to op i
            done.add(i)
            while todo:
                k = todo.pop()
                island.append(k)
                for n in movers[k]:
                    ok = vs[(n, proc)].ok
                    if n not in movers:
                        joined = joined or ok
                    elif ok and n not in done:
                        done.add(n)
                        todo.append(n)
            if joined or any(is_pinned(vs, k, host) for k in island):  # (a pin always holds)
                continue
            kinds = ", ".join(sorted({g.ops[k].kind for k in island}))
            if out is None:
                out = dict(vs)
            for k in island:
                out[(k, proc)] = pruned(proc, kinds)
    return vs if out is None else out


def _movers(g: OpGraph) -> dict[int, tuple[int, ...]]:
    """The graph's ops that move or convert data (views, quantize, dequantize, astype), each with the
    ops it reads from then the ops reading it: worked out once per graph (every partition prunes them)."""
    movers = g.__dict__.get("_movers")
    if movers is None:
        movers = {op.op_id: (*g.producers(op), *(c for t in op.outputs for c in g.consumers(t)))
                  for op in g.ops if is_view(op.kind) or op.kind in QUANT_MOVES}  # fmt: skip
        object.__setattr__(g, "_movers", movers)
    return movers


def prune_view_partitions(g: OpGraph, soc: SocProfile, vs: Verdicts, partitions) -> dict[tuple[int, str], Verdict]:
    """Refusals for the ops of offloaded partitions that hold only view ops and conversions (quantize,
    dequantize, astype): such a partition computes nothing but costs a call and two transfers (a
    model output's quantize sent back to the DLA after a DSP softmax), so it is pruned the way TVM's
    TensorRT integration prunes subgraphs without compute.  Empty when there is nothing to prune."""
    out: dict[tuple[int, str], Verdict] = {}
    host = soc.host
    for part in partitions:
        if part.processor == host:
            continue
        kinds = {g.ops[i].kind for i in part.ops}
        if all(is_view(k) or k in QUANT_MOVES for k in kinds):  # moves or converts data, computes nothing
            for i in part.ops:
                if not is_pinned(vs, i, soc.host):
                    out[(i, part.processor)] = pruned(part.processor, ", ".join(sorted(kinds)))
    return out


def internal_outputs_escape(g: OpGraph, ids: list[int]) -> bool:
    """Does any op of a fused match but its last have an output read outside the match (or a model
    output)?  Such a match cannot be one composite."""
    idset = set(ids)
    last = max(ids)
    for i in ids:
        if i == last:
            continue
        for t in g.ops[i].outputs:
            if t in g.outputs or any(c not in idset for c in g.consumers(t)):
                return True
    return False
