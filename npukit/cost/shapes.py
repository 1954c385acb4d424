"""Kernels and partitions of one structure share one costing and one set of keys (no tvm).

A kernel's figures are a function of what ``kernel.kernel_cost`` reads of its members -- each one's
kind, work, geometry, kernel class and output size, and each tensor it reads or writes (kind,
dtype, shape, whether it is a MAC's weight, the width a (de)quantize holds its float side at, its
image layout) -- of which members share a tensor, of their bit-widths and memory contexts, and of
the processor.  A partition's kernel keys and memory contexts (``grouping.run_keys``) are a
function of its ops' structures, which of their producers and readers are in it, its composites
and first op, by position, and the widths.  A model of repeated blocks (a transformer's layers, a
CNN's stages) holds few such structures: the generated 10,006-op transformer's 6,901 kernels are of
15 structures, its 2,071 partitions of 10 (first-fit, arm-dsp-dla).  One met before is not worked
out again: the kept result is re-based onto its own op and tensor ids (``rebase``, ``kept_run``),
and every figure, context and trace reads the same as its own would."""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Sequence

from .kernel import KernelCost, UtilMemo, kernel_cost
from .tables import Tables, mac_weights

SHAPES_MEMO = 65536  # structures kept per graph (each a KernelCost)
RUNS_MEMO = 4096  # partition structures kept per graph
SIGS_KEPT = 1 << 17  # structures numbered per graph before the numbering table is emptied
SHARE = True  # False: every kernel is costed as itself (the tests compare the two)


def shapes_of(t: Tables) -> Shapes:
    """The graph's ``Shapes``, kept on its tables."""
    s = t.__dict__.get("_shapes")
    if s is None:
        s = t.__dict__["_shapes"] = Shapes(t)
    return s


class Shapes:
    """A graph's op fingerprints and kernel structures, and the costings kept per structure."""

    def __init__(self, t: Tables):
        self.t = t
        self._op: list[int] | None = None
        self._of: dict[tuple[int, ...], tuple[int, tuple[str, ...]] | None] = {}
        self._sigs: dict = {}
        self._next = itertools.count()
        self.costs: OrderedDict = OrderedDict()
        self.runs: OrderedDict = OrderedDict()  # partitions' kernel keys and contexts, per structure
        self.hits = 0  # costings re-based (for tests and benchmarks)
        self.run_hits = 0  # partitions' keys re-based

    def _num(self, key) -> int:
        """A number standing for a structure.  Numbers are never reused: past ``SIGS_KEPT``
        structures the table is emptied, structures met again get new numbers and the results kept
        under the old ones age out of the bounded memos."""
        s = self._sigs.get(key)
        if s is None:
            if len(self._sigs) >= SIGS_KEPT:
                self._sigs.clear()
            s = self._sigs[key] = next(self._next)
        return s

    def _ops(self) -> list[int]:
        """Per op: a number standing for everything ``kernel_cost`` reads of the op alone."""
        if self._op is None:
            t, g = self.t, self.t.g
            tensors, weights, own, half = g.tensors, mac_weights(g), t.own, t.half
            lays = t.image_layouts

            def tensor(i: int, tid: str):
                x = tensors[tid]
                return (x.kind, x.dtype, tuple(x.shape), x.size, tid in weights, own.get((i, tid)), tid in half,
                        lays.get(tid))  # fmt: skip

            col = []
            for op in g.ops:
                i = op.op_id
                col.append(self._num((op.kind, t.work[i], t.geometry(i), t.kernel_class(i), t.out_elems[i],
                                      i in t.weighted, tuple(tensor(i, x) for x in op.inputs),
                                      tuple(tensor(i, x) for x in op.outputs))))  # fmt: skip
            self._op = col
        return self._op

    def of(self, ids: tuple[int, ...]) -> tuple[int, tuple[str, ...]] | None:
        """(structure number, the kernel's tensor ids in the order the structure numbers them) of the
        kernel ``ids``; None when its members are not in op order (its anchor's tie-break reads op
        ids: such a kernel is costed as itself)."""
        hit = self._of.get(ids)
        if hit is None and ids not in self._of:
            if any(a >= b for a, b in zip(ids, ids[1:])):
                hit = None
            else:
                ops, fp = self.t.g.ops, self._ops()
                local: dict[str, int] = {}
                wiring = []
                for i in ids:
                    op = ops[i]
                    wiring.append(tuple(local.setdefault(x, len(local)) for x in (*op.inputs, *op.outputs)))
                hit = (self._num((tuple(fp[i] for i in ids), tuple(wiring))), tuple(local))
            if len(self._of) >= 1 << 18:
                self._of.clear()
            self._of[ids] = hit
        return hit

    def cost(self, ids: tuple[int, ...], p, pkey, bits: Sequence[str], ctxs, um: UtilMemo) -> KernelCost:
        """``kernel_cost`` of ``ids`` on ``p`` (``pkey``: the processor's content, ``model.processor_key``),
        from a kernel of the same structure when one was costed."""
        shape = self.of(ids) if SHARE else None
        if shape is None:
            return kernel_cost(ids, self.t, p, bits, ctxs, um)
        key = (shape[0], pkey, tuple([bits[i] for i in ids]), tuple([ctxs[i] for i in ids]))
        got = self.costs.get(key)
        if got is None:
            k = kernel_cost(ids, self.t, p, bits, ctxs, um)
            self.costs[key] = (k, shape[1])
            if len(self.costs) > SHAPES_MEMO:
                self.costs.popitem(last=False)
            return k
        self.hits += 1
        k, tids = got
        if k.ids == ids:
            return k
        return rebase(k, ids, dict(zip(tids, shape[1])))

    def run(self, op_ids: Sequence[int], comps, first: int, onchip: int, proc: str, col: Sequence[str],
            near: Sequence[int] = ()):  # fmt: skip
        """The key of the partition of ``op_ids`` (ascending) on ``proc`` (``onchip`` bytes) at the
        widths ``col`` (per op id), composites ``comps``, first op ``first`` (-1: none pays a call),
        by structure: each op's fingerprint, which of its producers and readers are in the
        partition (by position), whether a model output reads it, the composites and the first op
        by position.  ``near``: the ops of a larger partition that ``op_ids`` read from or feed,
        besides them (``grouping.run_keys``' ``partition``), each by its fingerprint and width.
        ``grouping.run_keys`` reads nothing else.  None when structures are not shared."""
        if not SHARE:
            return None
        fp = self._ops()
        t = self.t
        specs, cons, gout = t.input_specs(), t.consumers, t.graph_out
        loc = {i: n for n, i in enumerate((*op_ids, *near))}
        get = loc.get
        ops = tuple([(fp[i], tuple([get(p, -1) if p >= 0 else -2 for _tid, p in specs[i]]),
                      tuple([get(c, -1) for c in cons[i]]), gout[i]) for i in op_ids])  # fmt: skip
        around = tuple([(fp[i], col[i]) for i in near])
        shape = (ops, around, tuple(tuple(loc[i] for i in c) for c in comps), loc.get(first, -1))
        return self._num(shape), proc, onchip, tuple([col[i] for i in op_ids])

    def kept_run(self, key, op_ids: Sequence[int]):
        """``run_keys``' (kernel keys, [(op id, context)]) of a partition of structure ``key``
        (``run``) kept before, re-based onto ``op_ids``; None if none was."""
        got = self.runs.get(key)
        if got is None:
            return None
        self.run_hits += 1
        lks, lcs = got
        sig = self.t.sig
        ks = []
        for lids, proc, rest in lks:
            ids = tuple([op_ids[j] for j in lids])
            ks.append((ids, proc, sig((ids, *rest))))
        return ks, [(op_ids[j], c) for j, c in lcs]

    def keep_run(self, key, op_ids: Sequence[int], col: Sequence[str], got) -> None:
        """Keep ``run_keys``' result ``got`` for the partition of ``op_ids`` under ``key`` (``run``),
        by position."""
        ks, cs = got
        loc = {i: n for n, i in enumerate(op_ids)}
        ctx = dict(cs)
        lks = []
        for ids, proc, _sig in ks:
            if len(ids) == 1:
                rest = (col[ids[0]], ctx[ids[0]])
            else:
                rest = (tuple(col[i] for i in ids), tuple(ctx[i] for i in ids))
            lks.append((tuple(loc[i] for i in ids), proc, rest))
        self.runs[key] = (lks, [(loc[i], c) for i, c in cs])
        if len(self.runs) > RUNS_MEMO:
            self.runs.popitem(last=False)


def rebase(k: KernelCost, ids: tuple[int, ...], tmap: dict[str, str]) -> KernelCost:
    """``k`` for the kernel ``ids`` of the same structure: its op ids by position, its tensor ids
    by ``tmap``."""
    omap = dict(zip(k.ids, ids))
    mems = tuple(m._replace(inputs=tuple([(tmap[x], b, on) for x, b, on in m.inputs]),
                            own=tuple([(tmap[x], w) for x, w in m.own])) if m.inputs or m.own else m
                 for m in k.memory)  # fmt: skip
    convs = tuple((omap[i], tmap[x], *rest) for i, x, *rest in k.conversions)
    return k._replace(ids=ids, anchor=omap[k.anchor], memory=mems, conversions=convs)
