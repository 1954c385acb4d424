"""Shape helpers shared by the work formulas, the support rules, the cost model and quantization
(no tvm): layout letters -> sizes, a conv's channels and kernel, MAC geometry, a weight's
output-channel axis.  Each is written once here."""

from __future__ import annotations

import math

from ..graph import Op, OpGraph


def layout_dims(layout: str, shape: tuple[int, ...]) -> dict[str, int]:
    """Map layout letters to sizes (``"NCHW", (1, 8, 6, 6)`` -> ``{N: 1, C: 8, H: 6, W: 6}``);
    NCHW16c-style sub-dims are folded into their parent; {} when the rank does not match."""
    out: dict[str, int] = {}
    letters = [c for c in layout if c.isalpha()]
    if len(letters) != len(shape):
        return {}
    for c, n in zip(letters, shape, strict=True):
        key = c.upper()
        out[key] = out.get(key, 1) * int(n)
    return out


def prod(xs) -> int:
    return int(math.prod(int(x) for x in xs)) if xs else 1


def spatial_attr(op: Op, key: str) -> tuple[int, ...]:
    """A spatial attribute (strides, dilation, pool_size) as a tuple of ints; () when absent."""
    v = op.attrs.get(key)
    if v is None:
        return ()
    return tuple(int(x) for x in (v if isinstance(v, tuple) else (v,)))


def kernel_hw(op: Op, g: OpGraph) -> tuple[int, ...]:
    """The spatial kernel (or pooling window) of an op: (KH, KW) for a 2-D conv / pool."""
    if "pool_size" in op.attrs:
        return spatial_attr(op, "pool_size")
    if op.kind.startswith("conv") and len(op.inputs) >= 2:
        w = g.tensors[op.inputs[1]]
        kl = str(op.attrs.get("kernel_layout", "OIHW"))
        letters = [c for c in kl if c.isalpha()]
        if len(letters) == len(w.shape):
            return tuple(int(n) for c, n in zip(letters, w.shape) if c.upper() not in "OI")
    return ()


def channels(op: Op, g: OpGraph) -> tuple[int, int, int]:
    """(in channels, out channels, groups) of a conv, from its data / output layouts."""
    x, y = g.tensors[op.inputs[0]], g.tensors[op.outputs[0]]
    dl = str(op.attrs.get("data_layout", "NCHW"))
    ol = str(op.attrs.get("out_layout") or dl)

    def c_of(layout, shape):
        letters = [c for c in layout if c.isalpha()]
        if len(letters) == len(shape) and "C" in letters:
            return int(shape[letters.index("C")])
        return int(shape[1]) if len(shape) > 1 else 1

    return c_of(dl, x.shape), c_of(ol, y.shape), int(op.attrs.get("groups", 1) or 1)


def geometry(op: Op, g: OpGraph) -> tuple:
    """How a MAC op fills a MAC array: ("conv", IC/groups, OC, output pixels, KH*KW) or
    ("matmul", K, N, M), or () for any other op."""
    y = g.tensors[op.outputs[0]]
    if op.kind.startswith("conv") and len(op.inputs) >= 2:
        ic, oc, groups = channels(op, g)
        return ("conv", ic // max(groups, 1), oc, max(1, y.size // max(oc, 1)), math.prod(kernel_hw(op, g)) or 1)
    if op.kind == "matmul" and len(op.inputs) >= 2:
        xs = g.tensors[op.inputs[0]].shape
        k = xs[-1] if xs else 1
        n = y.shape[-1] if y.shape else 1
        return ("matmul", k, n, max(1, y.size // max(n, 1)))
    return ()


def weight_axis(g: OpGraph, tid: str) -> int:
    """The output-channel axis of a weight tensor, from its first consumer's kernel layout."""
    for c in g.consumers(tid):
        op = g.ops[c]
        if op.kind.startswith("conv"):
            kl = str(op.attrs.get("kernel_layout", "OIHW"))
            letters = [ch for ch in kl if ch.isalpha()]
            if "O" in letters and len(letters) == len(g.tensors[tid].shape):
                return letters.index("O")
            return 0
        if op.kind == "matmul":
            return len(g.tensors[tid].shape) - 1
    return 0
