"""Work formulas: the MACs and vector operations of one op, each with the formula and values used
(no tvm).  ``npukit.opset.registry`` assigns one of these to every op kind."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..graph import Op, OpGraph
from .shapes import layout_dims, prod

TRANSCENDENTAL = 8  # exp, erf, tanh, sigmoid ... cost as 8 simple vector ops


@dataclass(frozen=True)
class Work:
    """What an op computes: multiply-accumulates and other (vector/scalar) operations."""

    macs: int
    vector_ops: int
    formula: str  # human-readable, with the values substituted
    model: str = ""  # the stated model for data-dependent or approximate counts


def _out_elems(op: Op, g: OpGraph) -> int:
    return sum(g.tensors[t].size for t in op.outputs)


def conv(op: Op, g: OpGraph) -> Work | None:
    """N*O<spatial>*OC*(IC/groups)*K<spatial>, from the data, kernel and output layouts."""
    if len(op.inputs) < 2:
        return None
    a = op.attrs
    x, w, y = (g.tensors[t] for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
    dl = str(a.get("data_layout", "NCHW"))
    kl = str(a.get("kernel_layout", "OIHW"))
    od = layout_dims(str(a.get("out_layout") or dl), y.shape)
    kd = layout_dims(kl, w.shape)
    xd = layout_dims(dl, x.shape)
    groups = int(a.get("groups", 1) or 1)
    spatial = [c for c in kl.upper() if c.isalpha() and c not in "OI"]
    if not (od and kd and xd):
        return None
    n, oc, ic = od.get("N", 1), od.get("C", 1), xd.get("C", 1)
    osp = [od[c] for c in spatial if c in od]
    ksp = [kd[c] for c in spatial if c in kd]
    macs = n * prod(osp) * oc * (ic // groups) * prod(ksp)
    f = (f"N*{'*'.join('O' + c for c in spatial)}*OC*(IC/groups)*{'*'.join('K' + c for c in spatial)}"
         f" = {n}*{'*'.join(map(str, osp))}*{oc}*({ic}/{groups})*{'*'.join(map(str, ksp))} = {macs:,}")  # fmt: skip
    return Work(macs, 0, f)


def conv_transpose(op: Op, g: OpGraph) -> Work | None:
    """N*IH*IW*IC*(OC/groups)*KH*KW."""
    if len(op.inputs) < 2:
        return None
    a = op.attrs
    x, w = g.tensors[op.inputs[0]], g.tensors[op.inputs[1]]
    xd = layout_dims(str(a.get("data_layout", "NCHW")), x.shape)
    kl = str(a.get("kernel_layout", "IOHW"))
    kd = layout_dims(kl, w.shape)
    groups = int(a.get("groups", 1) or 1)
    spatial = [c for c in kl.upper() if c.isalpha() and c not in "OI"]
    if not (xd and kd):
        return None
    n, ic = xd.get("N", 1), xd.get("C", 1)
    oc = kd.get("O", 1) * groups
    isp = [xd[c] for c in spatial if c in xd]
    ksp = [kd[c] for c in spatial if c in kd]
    macs = n * prod(isp) * ic * (oc // groups) * prod(ksp)
    return Work(macs, 0, f"N*IH*IW*IC*(OC/groups)*KH*KW = {n}*{prod(isp)}*{ic}*({oc}/{groups})*{prod(ksp)} = {macs:,}")


def matmul(op: Op, g: OpGraph) -> Work | None:
    """batch*M*N*K = prod(output shape)*K."""
    if len(op.inputs) < 2:
        return None
    x = g.tensors[op.inputs[0]]
    k = int(x.shape[-1]) if x.shape else 1
    n = _out_elems(op, g)
    macs = n * k
    return Work(macs, 0, f"batch*M*N*K = prod(out {tuple(g.tensors[op.outputs[0]].shape)})*K = {n:,}*{k} = {macs:,}")


def outer(op: Op, g: OpGraph) -> Work:
    """One multiply per output element."""
    n = _out_elems(op, g)
    return Work(n, 0, f"out_elems = {n:,} (one multiply each)")


def einsum(op: Op, g: OpGraph) -> Work | None:
    """The product of every index's size (each combination of indices is one multiply-accumulate)."""
    eq = str(op.attrs.get("subscripts", "")).replace(" ", "")
    if "->" not in eq or "." in eq:
        return None
    lhs = eq.split("->")[0].split(",")
    if len(lhs) != len(op.inputs):
        return None
    sizes: dict[str, int] = {}
    for term, t in zip(lhs, op.inputs):
        shape = g.tensors[t].shape
        if len(term) != len(shape):
            return None
        for c, n in zip(term, shape):
            sizes[c] = max(sizes.get(c, 1), int(n))
    macs = prod(sizes.values())
    return Work(macs, 0, f"prod of index sizes {eq} = {'*'.join(f'{c}{sizes[c]}' for c in sorted(sizes))} = {macs:,}")


def attention(op: Op, g: OpGraph) -> Work | None:
    """B*H*S*S_kv*(D+D_v) MACs; softmax over the scores as vector work."""
    if len(op.inputs) < 3:
        return None
    q, kk, v = (g.tensors[t] for t in op.inputs[:3])
    if not (len(q.shape) == 4 and len(kk.shape) == 4 and len(v.shape) == 4):
        return None
    b, s, h, d = q.shape
    skv, dv = kk.shape[1], v.shape[3]
    macs = b * h * s * skv * (d + dv)
    return Work(macs, b * h * s * skv * (TRANSCENDENTAL + 3), f"B*H*S*S_kv*(D+D_v) = {b}*{h}*{s}*{skv}*({d}+{dv}) = {macs:,}")


def pool(op: Op, g: OpGraph) -> Work:
    """out_elems * pool window."""
    win = prod(op.attrs.get("pool_size", ()) or (1,))
    n = _out_elems(op, g)
    return Work(0, n * win, f"out_elems*pool_window = {n:,}*{win} = {n * win:,}")


def reduce(op: Op, g: OpGraph) -> Work:
    """One op per input element."""
    n = g.tensors[op.inputs[0]].size if op.inputs else _out_elems(op, g)
    return Work(0, n, f"in_elems = {n:,} (one op per input element)")


def softmax(op: Op, g: OpGraph) -> Work:
    """elems * (max + sub + exp + sum + div)."""
    n = g.tensors[op.inputs[0]].size
    c = 4 + TRANSCENDENTAL
    return Work(0, n * c, f"elems*(max+sub+exp+sum+div) = {n:,}*{c} = {n * c:,}")


def norm(op: Op, g: OpGraph) -> Work:
    """elems * 8 (mean, var, sub, mul, rsqrt, scale, shift)."""
    n = g.tensors[op.inputs[0]].size
    return Work(0, n * 8, f"elems*8 (mean, var, sub, mul, rsqrt, scale, shift) = {n:,}*8 = {n * 8:,}")


def batch_norm(op: Op, g: OpGraph) -> Work:
    """elems * 2 (scale, shift)."""
    n = g.tensors[op.inputs[0]].size
    return Work(0, n * 2, f"elems*2 (scale, shift) = {n:,}*2 = {n * 2:,}")


def _rows_n(op: Op, g: OpGraph) -> tuple[int, int]:
    x = g.tensors[op.inputs[0]]
    axis = op.attrs.get("axis", -1)
    axis = -1 if axis is None else int(axis)
    n = int(x.shape[axis]) if x.shape else 1
    return max(x.size // max(n, 1), 1), n


def topk(op: Op, g: OpGraph) -> Work:
    """rows * n * ceil(log2(k+1)): heap selection."""
    rows, n = _rows_n(op, g)
    k = int(op.attrs.get("k", n) or n)
    depth = max(1, math.ceil(math.log2(k + 1)))
    v = rows * n * depth
    return Work(0, v, f"rows*n*ceil(log2(k+1)) = {rows}*{n}*{depth} = {v:,}",
                "heap selection: each of n candidates compared along a k-heap")  # fmt: skip


def sort(op: Op, g: OpGraph) -> Work:
    """rows * n * ceil(log2 n): comparison sort along the axis."""
    rows, n = _rows_n(op, g)
    depth = max(1, math.ceil(math.log2(max(n, 2))))
    v = rows * n * depth
    return Work(0, v, f"rows*n*ceil(log2 n) = {rows}*{n}*{depth} = {v:,}", "comparison sort")


def sort_all(op: Op, g: OpGraph) -> Work:
    """n * ceil(log2 n) over all input elements (unique, median, nonzero, bucketize)."""
    n = max(g.tensors[op.inputs[0]].size, 1) if op.inputs else 1
    depth = max(1, math.ceil(math.log2(max(n, 2))))
    return Work(0, n * depth, f"n*ceil(log2 n) = {n}*{depth} = {n * depth:,}", "comparison sort of all elements")


def nms(op: Op, g: OpGraph) -> Work:
    """sort B*C*n*log2 n + IoU B*C*n(n-1)/2*12, worst case."""
    boxes = g.tensors[op.inputs[0]] if op.inputs else None
    scores = g.tensors[op.inputs[1]] if len(op.inputs) > 1 else None
    nb = int(boxes.shape[-2]) if boxes is not None and len(boxes.shape) >= 2 else _out_elems(op, g)
    ncls = int(scores.shape[1]) if scores is not None and len(scores.shape) == 3 else 1
    nbatch = int(scores.shape[0]) if scores is not None and scores.shape else 1
    depth = max(1, math.ceil(math.log2(max(nb, 2))))
    sort_ops = nbatch * ncls * nb * depth
    iou_ops = nbatch * ncls * (nb * (nb - 1) // 2) * 12
    v = sort_ops + iou_ops
    return Work(0, v, f"sort B*C*n*log2 n + IoU B*C*n(n-1)/2*12 = {sort_ops:,} + {iou_ops:,} = {v:,}",
                "worst case: every box passes the score threshold and is compared with every other")  # fmt: skip


def view(op: Op, g: OpGraph) -> Work:
    """Nothing: the op relabels a tensor's shape."""
    return Work(0, 0, "view: relabels the shape, no work")


def copy(op: Op, g: OpGraph) -> Work:
    """One op per output element."""
    n = _out_elems(op, g)
    return Work(0, n, f"copy: out_elems = {n:,}")


def elementwise(cost: int):
    """``cost`` vector ops per output element."""

    def f(op: Op, g: OpGraph) -> Work:
        n = _out_elems(op, g)
        return Work(0, n * cost, f"out_elems*{cost} ({op.kind}) = {n:,}*{cost} = {n * cost:,}")

    f.__doc__ = f"out_elems * {cost}"
    f.cost = cost  # type: ignore[attr-defined]
    return f


def opaque(op: Op, g: OpGraph) -> Work:
    """A call into a TIR function a frontend wrote itself (``call_tir``): its work is not known, so one
    op per output element is counted, and said."""
    n = _out_elems(op, g)
    return Work(0, n, f"opaque TIR function: out_elems = {n:,}", "unknown work: one op per output element assumed")
