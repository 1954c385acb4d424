"""The DP over the groups in order, under the additive model (``Additive``), and the passes of
single-group moves it prices; the DP's runs are kept step by step, so an edit resumes it where its
steps first read otherwise (``dp``)."""

from __future__ import annotations

from .additive import Additive

DP_RUNS_KEPT = 4  # runs of the DP whose states are kept per bit-width setting (``dp``)


def dp(add: Additive, cands) -> list[str]:
    """Dynamic programming over the groups in order, the state the previous group's processor.  A
    path is kept as a linked list (processor, the path before it), so extending it costs nothing;
    the processor of an earlier group is found by walking back, unless it is settled: once a step
    keeps a single state (a group with one candidate, often), every later path passes through it,
    so the processors of the groups up to it are the same on all of them (``settled``).

    The states after each step are kept (``_DpRun``, in the additive model's shared mapping, per
    bit-width setting): a step reads only its group, its candidates, the tensors it reads and how
    many groups back each one's producer is, and the figures of those (which depend on the groups'
    ops, the processors and the bit-widths alone), so where the steps up to group ``k`` read the
    same as a kept run's, the states after ``k`` are that run's.  An edit (a pin splits one group)
    changes the steps from its group on: the DP resumes there, and an edit undone resumes at the
    end.  A settled state's cost is set to 0 (all paths pass through it: the choice among them is the
    same), so the steps after it compute the same floats whatever came before; where the steps from
    the end read as a kept run's do, the DP stops at the first group both settle on the same
    processor with every later step reading the same settled processors, and takes the kept run's
    rest (``_Tail``): a pin at the start of a transformer runs the DP over a layer, not the model.
    The result is the same as running every step (``tests/test_placement.py``)."""
    ev = add.ev
    host = ev.soc.host
    tensors = ev.g.tensors
    reader = add._edges.reader
    ins_all = add.ins
    steps = list(zip(add._edges.dp_steps(), cands))
    kept = add.dp_runs()
    start, best, settled, states, n_set = 0, {None: (0.0, None)}, [], [], []
    run = _DpRun.longest(kept, steps)
    if run is not None:
        start, prev = run
        best, settled = prev.states[start - 1], prev.settled[: prev.n_settled[start - 1]]
        states, n_set = prev.states[:start], prev.n_settled[:start]
    tail = _Tail.of(kept, steps) if start < len(steps) else None
    kc, bc = add._kc, add._bc  # (the figures looked up where they are kept)
    calls = {p: (add.call_us(p) if p != host else 0.0) for p in ev.soc.names}
    for k in range(start, len(cands)):
        c = cands[k]
        nxt: dict[str | None, tuple[float, tuple | None]] = {}
        ins = ins_all[k]
        readers = [reader[(tid, k)] for tid, _pk in ins]  # each tensor's first reader in the group
        n_settled = len(settled)
        for p in c:
            base = kc.get((k, p))
            if base is None:
                base = add.kernel_us(k, p)
            call = calls[p]
            dbs = [add.dst_bits(tid, p, r) for (tid, _pk), r in zip(ins, readers)]
            top = None
            for q, (cost, path) in best.items():
                x = cost + base
                if q != p:
                    x += call
                for (tid, pk), r, db in zip(ins, readers, dbs):
                    if pk < 0 or pk >= k:  # a model input, or a group later in the order
                        src = host
                    elif pk == k - 1:
                        src = q
                    elif pk < n_settled:
                        src = settled[pk]
                    else:
                        node, at = path, k - 1
                        while at > pk:
                            node, at = node[1], at - 1
                        src = node[0]
                    if src != p:
                        v = bc.get((tid, src, p, db))
                        x += add.boundary_us(tid, src, p, tensors[tid].producer, r) if v is None else v
                if top is None or x < top[0] or (x == top[0] and str(q) < str(top[2])):
                    top = (x, path, q)
            nxt[p] = (top[0], (p, top[1]))
        best = nxt
        if len(best) == 1:  # every later path passes through this state: it is settled, and what
            # comes after it is measured from it (cost 0), so the steps after it compute the same
            # whatever came before, bit for bit
            (p, (_x, node)), = best.items()
            best = {p: (0.0, node)}
            fill = []
            for _ in range(k + 1 - n_settled):
                fill.append(node[0])
                node = node[1]
            settled = settled + fill[::-1]  # (a new list: a kept run's stays as it was)
            kk = tail.join(k, p, settled) if tail is not None else None
            if kk is not None:  # the kept run's steps from here on (its step kk is this one): its states and choice
                other, shift = tail.run, tail.shift  # type: ignore[union-attr]
                states = [*states, best, *other.states[kk + 1 :]]
                n_set = [*n_set, len(settled), *(x - shift for x in other.n_settled[kk + 1 :])]
                settled = settled + other.settled[kk + 1 :]
                best = states[-1]
                break
        states.append(best)
        n_set.append(len(settled))
    if kept is not None:
        _DpRun.keep(kept, _DpRun(steps, states, n_set, settled))
    _x, path = min(best.values(), key=lambda v: v[0])
    out: list[str] = []
    for _ in range(len(cands) - len(settled)):  # the groups after the last settled one
        out.append(path[0])
        path = path[1]
    return settled + out[::-1]


class _Tail:
    """A kept run whose last steps read as this run's do (``of``).  Where this run settles on the
    processor that run settled on at the same step from the end, and every step after it reads the
    same of what came before (``join``), the rest of this run is that run's: the DP after a pin runs
    from the pin's group to the first settled group where the two agree, not to the end."""

    __slots__ = ("run", "same", "shift", "steps", "_far", "tries")

    TRIES = 8  # settled groups in the shared tail tried before the DP runs on to the end

    def __init__(self, run: _DpRun, same: int, steps: list):
        self.run, self.same, self.steps = run, same, steps
        self.shift = len(run.steps) - len(steps)  # a step's index there less its index here, in the tail
        self._far: list[tuple[int, int]] | None = None
        self.tries = self.TRIES

    @staticmethod
    def of(kept: list | None, steps: list) -> _Tail | None:
        """The kept run sharing the longest tail of steps with ``steps`` (None: none shares the last)."""
        top = None
        for run in kept or ():
            old = run.steps
            n, same = min(len(old), len(steps)), 0
            while same < n and old[-1 - same] == steps[-1 - same]:
                same += 1
            if same and (top is None or same > top[1]):
                top = (run, same)
        return None if top is None else _Tail(top[0], top[1], steps)

    @property
    def far(self) -> list[tuple[int, int]]:
        """(reader, producer) of every read reaching back more than one group."""
        if self._far is None:
            self._far = [(m, m - d) for m, ((_grp, ins), _c) in enumerate(self.steps) for _tid, d in ins if d > 1]
        return self._far

    def join(self, k: int, p: str, settled: list[str]) -> int | None:
        """Does this run, settled at step ``k`` on ``p`` (``settled``: the processors of the groups up
        to it), go on as the kept run does?  Then the kept run's index of that step (its states,
        settled counts and settled processors after it are this run's); else None.

        It does when every step after ``k`` is one of the shared tail, the kept run settled on ``p``
        at the same step, and every group before ``k`` that a later step reads is settled on the
        same processor as the group the kept run's step reads there (the same tensor, as the steps
        are the same: the only thing a step reads of what came before a settled state, whose cost
        is 0, besides that state)."""
        run, shift = self.run, self.shift
        kk = k + shift
        if k + 1 < len(self.steps) - self.same or self.tries <= 0 or kk < 0 or len(run.states[kk]) != 1 \
                or p not in run.states[kk]:  # fmt: skip
            return None
        self.tries -= 1
        for m, pk in self.far:
            if m > k and pk < k and run.settled[pk + shift] != settled[pk]:
                return None
        return kk


class _DpRun:
    """One run of ``dp``: what each step read (``steps``), the states after it, and how many groups
    were settled after it (a prefix of ``settled``)."""

    __slots__ = ("steps", "states", "n_settled", "settled")

    def __init__(self, steps: list, states: list, n_settled: list[int], settled: list[str]):
        self.steps, self.states, self.n_settled, self.settled = steps, states, n_settled, settled

    @staticmethod
    def longest(kept: list | None, steps: list) -> tuple[int, _DpRun] | None:
        """(steps in common, run) of the kept run whose steps begin as ``steps`` do for longest
        (None: none shares the first)."""
        top = None
        for run in kept or ():
            old, m, n = run.steps, 0, min(len(run.steps), len(steps))
            while m < n and old[m] == steps[m]:
                m += 1
            if m and (top is None or m > top[0]):
                top = (m, run)
        return top

    @staticmethod
    def keep(kept: list, run: _DpRun) -> None:
        kept.append(run)
        if len(kept) > DP_RUNS_KEPT:
            del kept[0]


def moves(add: Additive, cands, a: list[str]) -> tuple[list[str], dict | None]:
    """Passes of improving single-group moves under the additive model.  Also returns every move's
    change from the final assignment when the last pass computed them all without moving (else
    None): the reasons quote the same figures."""
    a = list(a)
    deltas = None
    for _ in range(4):
        improved = False
        seen = {}
        for k, c in enumerate(cands):
            for p in c:
                if p != a[k]:
                    d = seen[(k, p)] = add.delta(a, k, p)
                    if d < -1e-9:
                        a[k] = p
                        improved = True
        if not improved:
            deltas = seen
            break
    return a, deltas
