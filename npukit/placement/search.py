"""The decision: the search over assignments (exhaustive, or DP + moves), the baselines it is held
against, and every op's reason."""

from __future__ import annotations

import hashlib
import itertools
from array import array
from collections.abc import Mapping, Sequence

from ..cost import Tables
from ..graph import OpGraph
from ..rules import Verdict
from ..soc import SocProfile
from .additive import Additive
from .dp import dp, moves
from .groups import Accepts, Choice, groups_of
from .virtual import Evaluator

EXHAUSTIVE = 2048
EXHAUSTIVE_WORK = 8192  # assignments x ops: a virtual plan costs ~4 us per op, so an exhaustive search stays < ~40 ms
MOVE_BUDGET = 200
VIRTUAL_MOVES_MAX_OPS = 400  # larger models stop after the additive moves (each virtual evaluation costs O(ops))
EXACT_REASONS_MAX_OPS = 64  # up to here every alternative in a reason is its own virtual plan
PROMISING = 0.02  # a virtual move is tried when the additive model says it costs < 2% of the latency


def decide(g: OpGraph, soc: SocProfile, t: Tables, vs: Mapping[tuple[int, str], Verdict], bits_of,
           first_fit: Sequence[str], runs=lambda i, p: True, cm=None, memo=None, shared=None) -> Choice:  # fmt: skip
    """The cost policy's processor for every op (the method: ``npukit.placement``).  ``bits_of(op, proc)``
    is the bit-width an op would run at on a processor; ``first_fit`` the processor per op the
    profile's preference order gives (the baseline that is always evaluated).  ``memo``: a mapping
    kept across calls for one model and profile (the pipeline's): a virtual plan's latency depends
    only on the groups, their processors and the ops' bit-widths, so an edit that leaves most of the
    assignment alone re-uses the evaluations of the previous decision; ``shared`` (also kept per model
    and profile) the additive model's kernel and boundary figures (see ``Additive``)."""
    acc = Accepts(soc, vs, runs, range(len(g.ops)))
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
    ev = Evaluator(g, soc, t, bits_of, groups, cm, table, (None, cols))

    def memo_key(a) -> bytes:
        used = b"".join([cols[p] if p in a else bytes(8) for p in soc.names])
        return hashlib.blake2b(gkey + used + bytes([code[p] for p in a]), digest_size=16).digest()

    plan_keys: dict[tuple[str, ...], bytes] = {}  # assignment -> _plan_key (worked out once per decision)

    def pkey(a) -> bytes:
        k = plan_keys.get(a)
        if k is None:
            k = plan_keys[a] = _plan_key(groups, a, host, code, cols, ev.ordered)
        return k

    def recall(key: bytes, a, prefix: bytes = b""):
        """The memo's figure of ``a`` under ``key``, else under the key of its virtual plan alone
        (``_plan_key``: another grouping can give the same plan -- a pin splits a group, and the
        all-host baseline is the same plan whatever the groups); found there, kept under ``key``."""
        v = memo.get(prefix + key)
        if v is None:
            v = memo.get(prefix + pkey(a))
            if v is not None:
                memo.put(prefix + key, v)
        return v

    def keep(key: bytes, a, v, prefix: bytes = b""):
        memo.put(prefix + pkey(a), v)
        return memo.put(prefix + key, v)

    def score(a) -> tuple[float, float]:
        a = tuple(a)
        s = scored.get(a)
        if s is None:
            if memo is None:
                s = ev.latency(a)
            else:
                key = memo_key(a)
                s = recall(key, a)
                if s is None:
                    s = keep(key, a, ev.latency(a))
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
            s = recall(key, a)
            if s is not None:
                scored[a] = s
                return False
            lb = recall(key, a, b"bound")  # kept too: an edit and its undo bound the same moves
            if lb is None:
                lb = keep(key, a, ev.bound(a), b"bound")
        return lb > than * (1 + 1e-9) + 1e-9

    add, deltas, at = None, None, None
    if space <= EXHAUSTIVE and space * len(g.ops) <= EXHAUSTIVE_WORK:
        method = "exhaustive"
        best = min(itertools.product(*cands), key=lambda a: (*score(a), a != tuple(ff)))
    else:
        method = "dp+local"
        add = Additive(ev, shared, gkey)
        best = dp(add, cands)
        best, deltas = moves(add, cands, best)
        at = tuple(best)  # the assignment ``deltas`` start from
        if len(g.ops) <= VIRTUAL_MOVES_MAX_OPS:
            best = _moves_virtual(score, cands, best, add, exhaustive=len(g.ops) <= EXACT_REASONS_MAX_OPS, slower=slower)
    options = [(score(best), 0, method, tuple(best))]
    baselines = [(ff, -1, "first-fit"), (all_host, 1, "host")]
    # and per accelerator, every group it takes on it (first-fit's choice for the others): the search
    # moves one group (or one run) at a time, so a plan that needs many moves at once to pay -- a
    # transformer all on the vector DSP rather than split with the matrix unit -- was out of its reach
    for n, acc in enumerate(soc.accelerators):
        on = [acc if acc in c else f for c, f in zip(cands, ff)]
        if on != ff and tuple(on) != tuple(best):
            baselines.append((on, 2 + n, f"all on {acc}"))
    for a, order, name in baselines:
        if not slower(a, options[0][0][0]):  # (a baseline certainly slower than the search's best cannot win)
            options.append((score(a), order, name, tuple(a)))
    (lat, _e), _, method, chosen = min(options, key=lambda o: (o[0][0], o[0][1], o[1]))
    if (method in ("first-fit", "host") or method.startswith("all on ")) and add is not None and chosen != tuple(best):
        # a baseline beat the search's local optimum: it lies in another basin, so the same moves
        # run from it too (else its reasons could show a single move that is faster).  (A baseline
        # that is the search's own result, kept for the tie, is that local optimum already.)
        b, _d = moves(add, cands, list(chosen))
        if len(g.ops) <= VIRTUAL_MOVES_MAX_OPS:
            b = _moves_virtual(score, cands, b, add, exhaustive=len(g.ops) <= EXACT_REASONS_MAX_OPS, slower=slower)
        if score(b) < score(chosen):
            (lat, _e), method, chosen = score(b), f"{method}+local", tuple(b)
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



def _plan_key(groups, a, host: str, code: Mapping[str, int], cols: Mapping[str, bytes], ordered: bool) -> bytes:
    """A digest of the virtual plan of assignment ``a`` (``Evaluator.plan``), whatever grouping
    gave it, with the bit-widths of the processors it uses: what its latency, energy and bound
    depend on.  Each run of host groups is one partition of their ops in group order; each
    accelerator group its own composite (consecutive ones on one accelerator one call).  ``ordered``
    (``Evaluator.ordered``) enters too: it decides how the host's kernels and the bound are worked out."""
    toks = [1 if ordered else 0]
    prev = None
    for grp, p in zip(groups, a):
        if p != host:
            toks.append(-2 - code[p])
        elif prev != host:
            toks.append(-1)
        toks += grp
        prev = p
    used = b"".join([cols[p] if p in a else bytes(8) for p in code])
    return hashlib.blake2b(b"plan" + used + array("q", toks).tobytes(), digest_size=16).digest()


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

    def pays(b):
        """The score of assignment ``b`` when it beats the current one, else None (one evaluation
        of the budget, whether it is costed or bounded)."""
        nonlocal budget
        budget -= 1
        if slower is not None and slower(b, cur[0]):
            return None
        v = score(b)
        return v if v < cur else None

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
                v = pays(b)
                if v is not None:
                    a, cur, improved = b, v, True
        if improved:
            continue
        # no single group's move pays: a whole run of groups on one processor moved together can
        # (its transfers go with it: the detector's head, 16 ops on the HVX, runs faster on the CPU),
        # and so can groups on one processor joined by their tensors whose ops interleave with others
        # (a detector's class head, its conv and sigmoid apart in op order, to the DLA its box head is on)
        for ks, q in (*_run_moves(a, cands), *_linked_moves(a, cands, add.ev.neighbours)):
            if budget <= 0:
                break
            b = list(a)
            for k in ks:
                b[k] = q
            v = pays(tuple(b))
            if v is not None:
                a, cur, improved = tuple(b), v, True
                break
    return list(a)


def _run_moves(a, cands):
    """(groups, processor) of every move of a maximal run of two groups or more on one processor to
    another processor all of them can take, in order."""
    k, n = 0, len(a)
    while k < n:
        end = k + 1
        while end < n and a[end] == a[k]:
            end += 1
        if end - k > 1:
            common = set(cands[k]).intersection(*cands[k + 1 : end])
            for q in cands[k]:
                if q != a[k] and q in common:
                    yield range(k, end), q
        k = end


def _linked_moves(a, cands, neighbours):
    """(groups, processor) of every move to processor ``q`` of a set of two groups or more on one
    other processor, each of which ``q`` can take, joined by the tensors between them (a connected
    component of those groups), unless it is a maximal run of consecutive groups (``_run_moves``
    tried those); by processor in the profile's candidate order, then by first group.  A detector's
    class head (conv, sigmoid, reshape) on the CPU between a box head and post-processing the DLA
    cannot take: neither a single group nor the CPU's whole run."""
    n = len(a)
    runs = set()
    k = 0
    while k < n:
        end = k + 1
        while end < n and a[end] == a[k]:
            end += 1
        runs.add((k, end))
        k = end
    order = []
    for c in cands:
        order += [q for q in c if q not in order]
    for q in order:
        seen = [False] * n
        for k in range(n):
            if seen[k] or a[k] == q or q not in cands[k]:
                continue
            comp, todo = [], [k]
            seen[k] = True
            while todo:
                j = todo.pop()
                comp.append(j)
                for x in neighbours(j):
                    if not seen[x] and a[x] == a[k] and q in cands[x]:
                        seen[x] = True
                        todo.append(x)
            comp.sort()
            if len(comp) > 1 and not (comp[-1] - comp[0] == len(comp) - 1 and (comp[0], comp[-1] + 1) in runs):
                yield comp, q


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
    heads: dict[str, str] = {}  # processor -> the start of the text of a group on it
    said: dict[float, str] = {}  # a figure -> its words (most figures recur from group to group)

    def us(x: float) -> str:
        t = said.get(x)
        if t is None:
            t = said[x] = f"{x:,.1f}"
        return t

    where = (" us in all, every other op where it is)" if exact
             else " us in all, every other op where it is, estimated term by term)")  # fmt: skip
    about = "(" if exact else "(about "
    kernel_us = add.kernel_us
    for k, (grp, c) in enumerate(zip(groups, cands)):
        p = chosen[k]
        if len(c) == 1 and p in alone:
            text = alone[p]
            for i in grp:
                why[i] = text
            continue
        mine = kernel_us(k, p)
        alts = []
        for q in c:
            if q == p:
                continue
            if exact:
                lat = score(tuple(chosen[:k]) + (q,) + tuple(chosen[k + 1 :]))[0]
            else:
                d = deltas.get((k, q)) if deltas is not None else None
                lat = base + (add.delta(cur, k, q) if d is None else d)
            kern = kernel_us(k, q) - mine
            rest = (lat - base) - kern
            total = about + us(lat) + where
            more = " us less" if kern < 0 else " us more"  # than on the processor it runs on
            r = us(abs(rest))
            if r == "0.0":  # (not "save 0.0 us": what rounds to nothing is said as such)
                alts.append("on " + q + " its kernel takes " + us(abs(kern)) + more
                            + ", its overheads and transfers the same to 0.1 us " + total)  # fmt: skip
            else:
                link = " but overheads and transfers " if (kern < 0) != (rest < 0) else " and overheads and transfers "
                alts.append("on " + q + " its kernel takes " + us(abs(kern)) + more + link
                            + ("add " if rest >= 0 else "save ") + r + " us " + total)  # fmt: skip
        head = heads.get(p)
        if head is None:
            head = heads[p] = f"{'kept on' if p == host else 'on'} {p} by cost: the model takes {base:,.1f} us"
        text = head + ("; " + "; ".join(alts) if alts else "; no other processor accepts it")
        if len(c) == 1:
            alone[p] = text
        for i in grp:
            why[i] = text
    return tuple(why)


def restate(why: Sequence[str], virtual_us: float, real_us: float) -> tuple[str, ...]:
    """The reasons of a decision whose partitioned plan takes ``real_us`` where the search's virtual
    plan of the same choice took ``virtual_us`` (BYOC forms the partitions and composites itself, so
    the two can differ): the model's figure is the plan's, the virtual one said beside it, since the
    alternatives in each reason are estimated against it."""
    old = f"the model takes {virtual_us:,.1f} us"
    if f"{real_us:,.1f}" == f"{virtual_us:,.1f}":
        return tuple(why)
    new = f"the model takes {real_us:,.1f} us ({virtual_us:,.1f} us in the search's virtual plan, which the alternatives are compared with)"
    return tuple(w.replace(old, new, 1) for w in why)
