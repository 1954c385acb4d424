"""The units of the placement choice: groups (fusable chains one accelerator accepts whole, else
single ops), each group's candidate processors, the decision (``Choice``) and the verdicts it becomes
(``constrain``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..cost.tables import runs_at
from ..graph import OpGraph
from ..patterns import chains
from ..rules import Verdict, fail
from ..soc import SocProfile


@dataclass(frozen=True)
class Choice:
    """The cost policy's decision: the processor of every op, and for every op the figures behind it."""

    processor: tuple[str, ...]  # per op id
    why: tuple[str, ...]  # per op id: the cost comparison in words
    method: str  # "exhaustive" | "dp+local" | "first-fit" | "host" | "all on <accelerator>", or a baseline improved by moves: "host+local" ...
    latency_us: float  # of the virtual plan
    lone: frozenset[int] = frozenset()  # ops that are a group alone (an accelerator taking them only fused cannot)


def groups_of(g: OpGraph, soc: SocProfile, vs: Mapping[tuple[int, str], Verdict]) -> list[tuple[int, ...]]:
    """Of each fusable chain, the longest run holding its root that one accelerator accepts whole (the
    pattern table has one pattern per such run, longest first: a chain whose clip an accelerator
    refuses is still fused without it), and every other op alone, in topological order."""
    n = len(g.ops)
    oks = [[vs[(i, a)].ok for i in range(n)] for a in soc.accelerators]  # looked up once per op
    taken: set[int] = set()
    out: list[tuple[int, ...]] = []
    for ids, root in chains(g):
        runs = sorted(((lo, hi) for lo in range(root + 1) for hi in range(root + 1, len(ids) + 1) if hi - lo > 1),
                      key=lambda r: (r[0] - r[1], r[0]))  # fmt: skip
        for lo, hi in runs:
            run = ids[lo:hi]
            if not any(i in taken for i in run) and any(all(ok[i] for i in run) for ok in oks):
                out.append(run)
                taken.update(run)
                break
    out += [(op.op_id,) for op in g.ops if op.op_id not in taken]
    out.sort(key=lambda k: k[0])
    return out


def candidates(grp: tuple[int, ...], soc: SocProfile, vs, runs=lambda i, p: True) -> list[str]:
    """The host (unless a pin forbids it) and every accelerator that accepts all of the group (an op
    accepted only fused into a kernel needs its chain's root in the group) and can run its bit-widths
    (``runs(op, processor)``)."""
    return Accepts(soc, vs, runs, grp).candidates(grp)


class Accepts:
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



def constrain(vs: Mapping[tuple[int, str], Verdict], soc: SocProfile, choice: Choice) -> dict[tuple[int, str], Verdict]:
    """The verdicts the BYOC partition obeys under the cost policy: an accelerator that accepts an op
    the cost model gives to another processor refuses it with the figures; one that takes an op only
    fused into a kernel refuses it when the op stands alone, with that rule.  (One that cannot run
    the op's layer bit-width already refuses it in ``vs``: ``refuse_widths``.)"""
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


def width_refusal(pr, b: str) -> Verdict:
    """Accelerator ``pr``'s verdict on an op whose layer bit-width ``b`` it cannot run."""
    return Verdict(pr.name, False, (fail("bits", f"cannot run the layer's bit-width {b} (processors.{pr.name}."
                                                 f"macs_per_cycle lists {', '.join(pr.bits)})", bits=b),))  # fmt: skip


def refuse_widths(vs: Mapping[tuple[int, str], Verdict], soc: SocProfile, layered: Mapping[int, str],
                  caps: Sequence[str] = ()) -> Mapping[tuple[int, str], Verdict]:  # fmt: skip
    """The verdicts with every accelerator that cannot run an op's layer bit-width (``layered``: op ->
    the user's width; ``caps``: per op, the width the model holds its values at, ``tables.narrowed``)
    refusing it, as first-fit obeys them: the op goes to the next processor that takes it and runs
    its width, as under the cost policy."""
    out = None
    for i, b in layered.items():
        for a in soc.accelerators:
            pr = soc.processor(a)
            if not (runs_at(caps[i], b, pr) if caps else b in pr.macs_per_cycle) and vs[(i, a)].ok:
                if out is None:
                    out = dict(vs)
                out[(i, a)] = width_refusal(pr, b)
    return vs if out is None else out


FUSED_ALONE = fail("fused_only", "accepted only fused into a kernel; not fused here")
