"""The cost policy held to each accelerator's ``max_partitions`` (a runtime that takes at most that
many offloaded partitions: VeriSilicon's NBG holds one graph).

A plan that gives an accelerator more partitions than its runtime takes is one the chip refuses.  The
placement search does not know the limit, so the cost policy holds each plan it compares (the cost
model's choice, first-fit, all on the host) to it after BYOC has formed the partitions: of the
accelerator's partitions it keeps the ones whose plan is fastest (every choice of the pinned ones
plus the rest, up to ``TRIES`` of them, the most MACs first), and its other ops are refused to it
with the limit's words, so that BYOC gives them to the next processor that takes them (the host,
under the cost model's choice).  A plan whose pins alone break a limit cannot be held: it stays
flagged (``plan.partition_limits``), as every first-fit plan over a limit is, since first-fit is
what TVM's own passes would give."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

from ..plan import over_limits
from ..rules import Verdict, fail
from ..soc import SocProfile

TRIES = 8  # choices of the partitions to keep, evaluated by their plan's latency, per accelerator over
ROUNDS = 4  # holding one accelerator can split another's partition: held again at most this often


def limited(soc: SocProfile) -> bool:
    """Does any accelerator of the profile limit its partitions?"""
    return any(p.max_partitions is not None and not p.host for p in soc.processors)


def _span(ops) -> str:
    return f"#{ops[0]}" if len(ops) == 1 else f"#{ops[0]}..#{ops[-1]}"


def _refusal(proc: str, lim: int, kept: list, macs: Callable[[tuple[int, ...]], int]) -> Verdict:
    keep = ", ".join(f"{_span(pt.ops)} ({macs(pt.ops):,} MACs)" for pt in kept) or "only its pinned ops"
    return Verdict(proc, False, (fail("limit", f"its runtime takes at most {lim} partition{'s' if lim > 1 else ''} "
                                      f"(processors.{proc}.max_partitions = {lim}): {proc} keeps ops {keep}",
                                      max_partitions=lim),))  # fmt: skip


def hold(part, vs: Mapping, soc: SocProfile, pinned: set[int], byoc: Callable, latency: Callable,
         macs: Callable[[tuple[int, ...]], int]):  # fmt: skip
    """``part`` (a Partitioned made under verdicts ``vs``) held to every accelerator's
    ``max_partitions``: (the held Partitioned, its latency), or None when the pins alone break a
    limit, or when holding does not converge."""
    for _ in range(ROUNDS):
        excess = over_limits(part.plan, soc)
        if not excess:
            return part, latency(part)
        proc, lim, parts = excess[0]
        fixed = [pt for pt in parts if any(i in pinned for i in pt.ops)]  # a pin always holds
        if len(fixed) > lim:
            return None
        free = sorted((pt for pt in parts if pt not in fixed), key=lambda pt: (-macs(pt.ops), pt.pid))
        need = lim - len(fixed)
        choices = itertools.islice(itertools.combinations(free, need), TRIES)
        best = None
        for n, keep in enumerate(choices):
            kept = sorted([*fixed, *keep], key=lambda pt: pt.pid)
            refusal = _refusal(proc, lim, kept, macs)
            drop = [i for pt in parts if pt not in kept for i in pt.ops]
            held = dict(vs)
            for i in drop:
                held[(i, proc)] = refusal
            cand = byoc(held)
            lat = latency(cand)
            if best is None or (lat, n) < best[0]:
                best = ((lat, n), cand, held)
        _, part, vs = best
    return (part, latency(part)) if not over_limits(part.plan, soc) else None
