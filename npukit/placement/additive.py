"""The additive model: a group's kernel time, the call overhead of every partition entered and the
transfer + conversions of every tensor crossing processors, summed.  Its figures are kept across
edits (``_Edges``).  The DP and the move passes it prices: ``npukit.placement.dp``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ..cost import OpContext, input_bits
from .virtual import Evaluator

EDGES_KEPT = 8  # groupings whose edges the additive model keeps per model and profile
KEPT_WIDTHS = 2  # bit-width settings whose additive figures a grouping's edges keep
DELTAS_KEPT = 50_000  # move changes kept per grouping and bit-widths, and by content per bit-widths (each emptied past it)


class Additive:
    """The additive estimate DP and the move passes use (the method: ``npukit.placement``)."""

    def __init__(self, ev: Evaluator, shared: dict | None = None, gkey: bytes | None = None):
        """``shared``: a mapping kept across decisions for one model and profile (the pipeline's):
        a group's kernel time depends only on its ops, processor and bit-widths, a tensor's boundary
        cost only on the tensor, the two processors and their bit-widths, so an edit re-uses every
        figure the previous decisions computed.  ``gkey`` (a digest of the groups) keys the groups'
        edges there too: most edits leave the groups alone."""
        self.ev = ev
        self._kc: dict[tuple[int, str], float] = {}
        self._bc: dict[tuple[str, str, str, str], float] = {}
        self._shared: dict = {} if shared is None else shared
        kept = self._shared.setdefault("edges", OrderedDict()) if gkey is not None else {}
        edges = kept.get(gkey)
        if edges is None:
            edges = _Edges(ev)
            if gkey is not None:
                kept[gkey] = edges
                if len(kept) > EDGES_KEPT:
                    kept.popitem(last=False)
        self._edges = edges
        self.group_of, self.ins = edges.group_of, edges.ins
        # the kernel and boundary times and each move's change (which depends only on the
        # processors of the groups its terms read): kept per grouping and bit-widths, across decisions
        runs = ev.runs
        if gkey is not None and runs is not None:
            bits = b"".join([runs[1][p] for p in ev.soc.names])
            self._deltas, self._kc, self._bc = edges.kept(bits)
            # and each move's change by content, for every grouping: a pin splits one group, and the
            # changes of the moves of the groups away from it are those the old grouping kept
            self._cdeltas = self._shared.setdefault(("deltas", bits), {})
            self._cids = edges.content_ids(self._shared.setdefault("group ids", {}))
        else:
            self._deltas = None

    def dp_runs(self) -> list | None:
        """The DP's kept runs (``dp``) for this profile at these bit-widths, in the shared mapping
        (None: nothing is kept, a decision without one)."""
        runs = self.ev.runs
        if runs is None or self._deltas is None:
            return None
        return self._shared.setdefault(("dp", b"".join([runs[1][p] for p in self.ev.soc.names])), [])

    def kernel_us(self, k: int, p: str) -> float:
        key = (k, p)
        v = self._kc.get(key)
        if v is None:
            ev = self.ev
            grp = ev.groups[k]
            tab = ev.table[p] if ev.table is not None else None
            gbits = tuple([tab[i] for i in grp]) if tab is not None else tuple(ev.bits_of(i, p) for i in grp)
            skey = ("kernel", grp, p, gbits)
            v = self._shared.get(skey)
            if v is None:
                bits = [""] * len(ev.g.ops)
                ctxs: list = [None] * len(ev.g.ops)
                inside = set(grp)
                for i, b in zip(grp, gbits):
                    bits[i] = b
                    op = ev.g.ops[i]
                    fin = tuple(ev.g.tensors[x].producer in inside for x in op.inputs)
                    fout = all(c in inside for c in ev.t.consumers[i]) and bool(ev.t.consumers[i]) and not ev.t.graph_out[i]
                    ctxs[i] = OpContext(fin, (False,) * len(fin), fout, False, i == grp[0], False)
                v = self._shared[skey] = ev.cm.kernel(tuple(grp), p, bits, ctxs).latency_us
            self._kc[key] = v
        return v

    def dst_bits(self, tid: str, dst: str, dst_op: int | None) -> str:
        """The width ``dst_op`` (the first reader of ``tid`` on ``dst``; None: a model output no op
        on the host reads) holds ``tid`` at (``grouping.bound_keys``)."""
        ev = self.ev
        if dst_op is None:
            return input_bits(ev.g.tensors[tid])
        return ev.t.held(dst_op, tid, ev.bits_of(dst_op, dst))

    def boundary_us(self, tid: str, src: str, dst: str, src_op: int | None, dst_op: int | None) -> float:
        """Transfer + conversions of ``tid`` from ``src`` (made by ``src_op``; None: a model input) to
        ``dst``, read first there by ``dst_op`` (None: a model output no op on the host reads)."""
        ev = self.ev
        db = self.dst_bits(tid, dst, dst_op)  # (consumers of one tensor on one processor may differ in width)
        key = (tid, src, dst, db)
        v = self._bc.get(key)
        if v is None:
            sb = ev.t.held(src_op, tid, ev.bits_of(src_op, src)) if src_op is not None else input_bits(ev.g.tensors[tid])
            skey = ("boundary", tid, src, dst, sb, db)
            v = self._shared.get(skey)
            if v is None:
                v = self._shared[skey] = ev.crossing_us(tid, src, dst, sb, db)
            self._bc[key] = v
        return v

    def call_us(self, p: str) -> float:
        pr = self.ev.procs[p]
        return pr.call_overhead_cycles / pr.clock_mhz

    def _outs(self) -> list[list[tuple[str, tuple[int, ...], bool]]]:
        """Per group: (tensor, consumer groups, is a model output) of every tensor it produces that
        leaves it."""
        return self._edges.outs[0]

    def _term(self, tid: str, src: str, cons, is_out: bool, assign) -> float:
        """Boundary cost of one tensor: one copy per processor that reads it, other than its own."""
        ev = self.ev
        host = ev.soc.host
        dsts = {assign[c] for c in cons}
        if is_out:
            dsts.add(host)
        dsts.discard(src)
        prod = ev.g.tensors[tid].producer
        reader = self._edges.reader
        tot = 0.0
        for d in sorted(dsts):
            first = min((reader[(tid, c)] for c in cons if assign[c] == d), default=None)  # (None: an output to the host)
            tot += self.boundary_us(tid, src, d, prod, first)
        return tot

    def total(self, assign: Sequence[str]) -> float:
        ev = self.ev
        host = ev.soc.host
        outs = self._outs()
        tot = 0.0
        for k, p in enumerate(assign):
            tot += self.kernel_us(k, p) + self._call(assign, k)
            for tid, cons, is_out in outs[k]:
                tot += self._term(tid, p, cons, is_out, assign)
        for tid, cons, is_out in self._edges.outs[1]:
            tot += self._term(tid, host, cons, is_out, assign)
        return tot

    def _call(self, assign, k: int) -> float:
        p = assign[k]
        if p == self.ev.soc.host or (k > 0 and assign[k - 1] == p):
            return 0.0
        return self.call_us(p)

    def _terms(self, k: int) -> list[tuple[str, int, tuple[int, ...], bool]]:
        """The boundary terms group ``k`` touches: (tensor, producer group or -1, consumer groups, is
        a model output) of what it produces and what it reads from outside."""
        return self._edges.terms(k)

    def delta(self, assign: list[str], k: int, q: str) -> float:
        """total(assign with group k on q) - total(assign), from the terms group k touches (kept by
        the processors of the groups they read: ``_Edges.deps``)."""
        memo = self._deltas
        if memo is not None:
            procs = tuple([assign[x] for x in self._edges.deps(k)])
            key = (k, q, procs)
            d = memo.get(key)
            if d is None:
                ckey = (self._cids[k], q, self._edges.content(k), procs)
                cmemo = self._cdeltas
                d = cmemo.get(ckey)
                if d is None:
                    if len(cmemo) >= DELTAS_KEPT:
                        cmemo.clear()
                    d = cmemo[ckey] = self._delta(assign, k, q)
                if len(memo) >= DELTAS_KEPT:
                    memo.clear()
                memo[key] = d
            return d
        return self._delta(assign, k, q)

    def _delta(self, assign: list[str], k: int, q: str) -> float:
        host = self.ev.soc.host
        terms = self._terms(k)

        def local(a) -> float:
            x = self.kernel_us(k, a[k]) + self._call(a, k) + (self._call(a, k + 1) if k + 1 < len(a) else 0.0)
            for tid, pk, cons, o in terms:
                x += self._term(tid, a[pk] if pk >= 0 else host, cons, o, a)
            return x

        old = local(assign)
        saved = assign[k]
        assign[k] = q
        new = local(assign)
        assign[k] = saved
        return new - old


class _Edges:
    """Where the groups' tensors go (no figures, no processors): the same for every decision on
    the same groups of one model, so kept in the additive model's shared mapping."""

    def __init__(self, ev: Evaluator):
        g, t = ev.g, ev.t
        self.groups = ev.groups
        self.group_of = ev.group_of
        # the tensors entering each group from outside, with their producer group (-1: model input)
        self.ins: list[list[tuple[str, int]]] = []
        # (tensor, group) -> the group's first op reading the tensor (whose width the boundary converts to)
        self.reader: dict[tuple[str, int], int] = {}
        for j, grp in enumerate(ev.groups):
            seen, lst = set(), []
            for i in grp:
                for tid in t.act_inputs[i]:
                    key = (tid, j)
                    if key not in self.reader or i < self.reader[key]:
                        self.reader[key] = i
                    p = g.tensors[tid].producer
                    k = self.group_of.get(p, -1) if p is not None else -1
                    if (p is None or p not in grp) and tid not in seen:
                        seen.add(tid)
                        lst.append((tid, k))
            self.ins.append(lst)
        # per group: (tensor, consumer groups, is a model output) of every tensor it produces that
        # leaves it; and the same for the model's inputs
        outs: list[list] = [[] for _ in ev.groups]
        outset = set(g.outputs)
        for k, grp in enumerate(ev.groups):
            for i in grp:
                for tid in g.ops[i].outputs:
                    cons = tuple(sorted({self.group_of[c] for c in g.consumers(tid)} - {k}))
                    if cons or tid in outset:
                        outs[k].append((tid, cons, tid in outset))
        inputs = []
        for tid in g.inputs:
            cons = tuple(sorted({self.group_of[c] for c in g.consumers(tid)}))
            inputs.append((tid, cons, tid in outset))
        self.outs = (outs, inputs)
        self._terms: dict[int, list] = {}
        self._deps: dict[int, tuple[int, ...]] = {}
        self._kept: OrderedDict = OrderedDict()  # bit-width columns -> figures (``kept``)
        self._dp_steps: list | None = None
        self._cids: tuple[list[int], dict] | None = None  # (numbers, the table they are from): ``content_ids``
        self._dcontent: dict[int, tuple] = {}

    def content_ids(self, ids: dict) -> list[int]:
        """Each group's number in ``ids`` (ops -> number, kept per model and profile: the same group
        has the same number in every grouping)."""
        if self._cids is None or self._cids[1] is not ids:
            self._cids = ([ids.setdefault(grp, len(ids)) for grp in self.groups], ids)
            self._dcontent = {}
        return self._cids[0]

    def content(self, k: int) -> tuple:
        """What ``Additive.delta`` of group ``k`` reads of the grouping, by content (the numbers of
        ``content_ids``): the groups before and after it in the order (call overheads) and every
        group of ``deps(k)``, in order (which are the producers and consumers of its terms follows
        from the groups' ops).  With the group's own number, a move's change depends on nothing else
        but the processors of those groups and the bit-widths."""
        c = self._dcontent.get(k)
        if c is None:
            cids, n = self._cids[0], len(self.groups)  # type: ignore[index]
            c = self._dcontent[k] = (cids[k - 1] if k > 0 else -1, cids[k + 1] if k + 1 < n else -1,
                                     tuple([cids[x] for x in self.deps(k)]))  # fmt: skip
        return c

    def deps(self, k: int) -> tuple[int, ...]:
        """The groups whose processors ``Additive.delta`` of group ``k`` reads: itself and its
        neighbours in the order (call overheads), and the producers and consumers of its terms."""
        d = self._deps.get(k)
        if d is None:
            s = {k}
            if k > 0:
                s.add(k - 1)
            if k + 1 < len(self.groups):
                s.add(k + 1)
            for _tid, pk, cons, _o in self.terms(k):
                if pk >= 0:
                    s.add(pk)
                s.update(cons)
            d = self._deps[k] = tuple(sorted(s))
        return d

    def dp_steps(self) -> list[tuple]:
        """Per group, what a step of ``dp`` reads besides its candidates: the group, and each
        tensor it reads from outside with how many groups back its producer is (0: a model input
        or a later group, read from the host)."""
        steps = self._dp_steps
        if steps is None:
            steps = self._dp_steps = [(grp, tuple([(tid, k - pk if 0 <= pk < k else 0) for tid, pk in self.ins[k]]))
                                      for k, grp in enumerate(self.groups)]  # fmt: skip
        return steps

    def kept(self, bits: bytes) -> tuple[dict, dict, dict]:
        """The additive model's figures kept for these groups at the bit-widths ``bits`` (a digest
        of every processor's column): single moves' changes, groups' kernel times, boundary times."""
        m = self._kept.get(bits)
        if m is None:
            m = self._kept[bits] = ({}, {}, {})
            if len(self._kept) > KEPT_WIDTHS:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(bits)
        return m

    def terms(self, k: int) -> list[tuple[str, int, tuple[int, ...], bool]]:
        terms = self._terms.get(k)
        if terms is None:
            outs, inputs = self.outs
            terms = [(tid, k, cons, o) for tid, cons, o in outs[k]]
            for tid, pk in self.ins[k]:
                src = outs[pk] if pk >= 0 else inputs
                terms += [(tid, pk, cons, o) for t2, cons, o in src if t2 == tid]
            self._terms[k] = terms
        return terms
