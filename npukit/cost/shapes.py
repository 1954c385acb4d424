"""Kernels of one structure share one costing (no tvm).

A kernel's figures are a function of what ``kernel.kernel_cost`` reads of its members -- each one's
kind, work, geometry, kernel class and output size, and each tensor it reads or writes (kind,
dtype, shape, whether it is a MAC's weight, the width a (de)quantize holds its float side at, its
image layout) -- of which members share a tensor, of their bit-widths and memory contexts, and of
the processor.  A model of repeated blocks (a transformer's layers, a CNN's stages) holds few such
structures: the generated 10,006-op transformer's 6,901 kernels are 17.  A kernel whose structure
was costed before is not costed again: the costing is re-based onto its own op and tensor ids
(``rebase``), and every figure and trace reads the same as a costing of its own would."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from .kernel import KernelCost, UtilMemo, kernel_cost
from .tables import Tables, mac_weights

SHAPES_MEMO = 65536  # structures kept per graph (each a KernelCost)
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
        self.costs: OrderedDict = OrderedDict()
        self.hits = 0  # costings re-based (for tests and benchmarks)

    def _num(self, key) -> int:
        s = self._sigs.get(key)
        if s is None:
            s = self._sigs[key] = len(self._sigs)
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


def rebase(k: KernelCost, ids: tuple[int, ...], tmap: dict[str, str]) -> KernelCost:
    """``k`` for the kernel ``ids`` of the same structure: its op ids by position, its tensor ids
    by ``tmap``."""
    omap = dict(zip(k.ids, ids))
    mems = tuple(m._replace(inputs=tuple([(tmap[x], b, on) for x, b, on in m.inputs]),
                            own=tuple([(tmap[x], w) for x, w in m.own])) if m.inputs or m.own else m
                 for m in k.memory)  # fmt: skip
    convs = tuple((omap[i], tmap[x], *rest) for i, x, *rest in k.conversions)
    return k._replace(ids=ids, anchor=omap[k.anchor], memory=mems, conversions=convs)
