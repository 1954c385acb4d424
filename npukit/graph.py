"""OpGraph: the model as plain frozen data (no tvm).

One ``Op`` per Relax operator call of the normalised module, in topological (binding) order, so
``op_id`` is stable for the same model.  Every op keeps the model's own name: ``source`` is the
name of the model node it came from (ONNX node name, else its first output; TFLite output tensor
name; FX node name; Relax binding name) and ``name`` is unique within the graph: the node's name
itself for the node's main op, ``<node>/<kind>`` for the helpers a frontend emitted beside it
(a bias ``add`` next to a ``conv2d``).  Model nodes that produced no op at all (folded constants,
identities) are listed in ``elided`` with a pointer to where their value went.

Work figures (MACs and elementwise "vector ops") are pure functions of an op and its tensors;
each comes with its formula so ``explain()`` can show where a number came from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class Tensor:
    """A value in the graph: a model input, a constant (weight) or an op's output."""

    tid: str  # graph-unique id: "in0", "c3", "t12" or "t12.1" (tuple field)
    shape: tuple[int, ...]
    dtype: str
    kind: str  # "input" | "const" | "act"
    producer: int | None = None  # op_id for kind "act"
    name: str = ""  # the model's own name where it has one

    @property
    def size(self) -> int:
        return int(math.prod(self.shape)) if self.shape else 1

    @property
    def nbytes(self) -> int:
        return self.size * dtype_bytes(self.dtype)


@dataclass(frozen=True)
class Op:
    """One operator call."""

    op_id: int
    name: str  # unique in the graph, model-derived
    source: str  # the model node it came from
    source_op: str  # the model's op type (Conv, CONV_2D, aten.conv2d.default, relax.nn.conv2d)
    op: str  # full Relax op name, e.g. "relax.nn.conv2d"
    attrs: Mapping[str, Any]
    inputs: tuple[str, ...]  # tensor ids, argument order (tuple arguments flattened)
    outputs: tuple[str, ...]
    var: str  # the binding's name in the tagged Relax module

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", short_op(self.op))

    kind: str = field(init=False, compare=False, repr=False)  # short op name: "relax.nn.conv2d" -> "conv2d"


@dataclass(frozen=True)
class OpGraph:
    """The whole model as data."""

    ops: tuple[Op, ...]
    tensors: Mapping[str, Tensor]
    inputs: tuple[str, ...]  # tensor ids of model inputs, in order
    outputs: tuple[str, ...]  # tensor ids of model outputs, in order
    consts: Mapping[str, np.ndarray] = field(repr=False, compare=False, hash=False)
    elided: Mapping[str, str] = field(default_factory=dict)  # model node -> what became of it
    source_format: str = ""  # "onnx" | "tflite" | "torch" | "relax"
    path: str = ""

    # lookups (built once, cached on the instance)
    def __post_init__(self) -> None:
        by_name = {op.name: op.op_id for op in self.ops}
        by_source: dict[str, list[int]] = {}
        consumers: dict[str, list[int]] = {}
        for op in self.ops:
            by_source.setdefault(op.source, []).append(op.op_id)
            for t in op.inputs:
                consumers.setdefault(t, []).append(op.op_id)
        object.__setattr__(self, "_by_name", MappingProxyType(by_name))
        object.__setattr__(
            self, "_by_source", MappingProxyType({k: tuple(v) for k, v in by_source.items()})
        )
        object.__setattr__(
            self, "_consumers", MappingProxyType({k: tuple(v) for k, v in consumers.items()})
        )

    def __len__(self) -> int:
        return len(self.ops)

    def op_by_name(self, name: str) -> Op | None:
        i = self._by_name.get(name)  # type: ignore[attr-defined]
        return None if i is None else self.ops[i]

    def ops_of_source(self, source: str) -> tuple[int, ...]:
        return self._by_source.get(source, ())  # type: ignore[attr-defined]

    def consumers(self, tid: str) -> tuple[int, ...]:
        return self._consumers.get(tid, ())  # type: ignore[attr-defined]

    def producers(self, op: Op) -> tuple[int, ...]:
        """op_ids feeding ``op`` (sorted, unique)."""
        out = {self.tensors[t].producer for t in op.inputs if self.tensors[t].kind == "act"}
        return tuple(sorted(p for p in out if p is not None))

    def resolve(self, node: str | int) -> tuple[int, ...]:
        """op_ids for a user's node reference: an op_id (int, or ``"#12"`` as stored in configs), a
        model node name (all of its ops) or an op name (``<node>/add`` for a helper op)."""
        if isinstance(node, (int, np.integer)) and not isinstance(node, bool):
            if 0 <= int(node) < len(self.ops):
                return (int(node),)
            return ()
        s = str(node)
        if s.startswith("#") and s[1:].isdigit():  # an op id as stored in configs ("#12")
            return (int(s[1:]),) if int(s[1:]) < len(self.ops) else ()
        ids = self.ops_of_source(s)  # a model node: all the ops it became (conv2d + its bias add)
        if ids:
            return ids
        op = self.op_by_name(s)
        if op is not None:
            return (op.op_id,)
        if s.isdigit() and int(s) < len(self.ops):
            return (int(s),)
        return ()

    def names(self) -> list[str]:
        return [op.name for op in self.ops]


def freeze(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(sorted(d.items())))


# ---------------------------------------------------------------------------------------------
# dtypes and op names

_DTYPE_BITS = {
    "float64": 64, "float32": 32, "float16": 16, "bfloat16": 16,
    "int64": 64, "int32": 32, "int16": 16, "int8": 8, "int4": 4, "int2": 2,
    "uint64": 64, "uint32": 32, "uint16": 16, "uint8": 8, "bool": 8,
}  # fmt: skip


def dtype_bits(dtype: str) -> int:
    return _DTYPE_BITS.get(str(dtype), 32)


def dtype_bytes(dtype: str) -> float:
    return dtype_bits(dtype) / 8


def short_op(op: str) -> str:
    """"relax.nn.conv2d" -> "conv2d"; "relax.vision.all_class_non_max_suppression" -> same tail."""
    return op.rsplit(".", 1)[-1]


# ---------------------------------------------------------------------------------------------
# work: MACs and vector operations, with the formula they came from


@dataclass(frozen=True)
class Work:
    """What an op computes: multiply-accumulates and other (vector/scalar) operations."""

    macs: int
    vector_ops: int
    formula: str  # human-readable, with the values substituted
    model: str = ""  # the stated model for data-dependent or approximate counts


# elementwise operations per output element, by op kind (a stated, documented table)
TRANSCENDENTAL = 8  # exp, erf, tanh, sigmoid ... cost as 8 simple vector ops
ELEMENTWISE_COST = {
    "add": 1, "subtract": 1, "multiply": 1, "maximum": 1, "minimum": 1, "negative": 1,
    "abs": 1, "relu": 1, "clip": 2, "leakyrelu": 2, "prelu": 2, "where": 1, "equal": 1,
    "greater": 1, "less": 1, "greater_equal": 1, "less_equal": 1, "not_equal": 1,
    "logical_and": 1, "logical_or": 1, "logical_not": 1, "floor": 1, "ceil": 1, "round": 1,
    "sign": 1, "square": 1, "divide": 4, "floor_divide": 4, "mod": 4, "floor_mod": 4,
    "sqrt": 4, "rsqrt": 4, "power": TRANSCENDENTAL, "exp": TRANSCENDENTAL,
    "log": TRANSCENDENTAL, "erf": TRANSCENDENTAL, "tanh": TRANSCENDENTAL,
    "sigmoid": TRANSCENDENTAL, "gelu": TRANSCENDENTAL + 3, "gelu_tanh": TRANSCENDENTAL + 5,
    "silu": TRANSCENDENTAL + 1, "softplus": 2 * TRANSCENDENTAL, "hardswish": 4,
    "hardsigmoid": 3, "sin": TRANSCENDENTAL, "cos": TRANSCENDENTAL,
    "astype": 1, "quantize": 3, "dequantize": 2,
}  # fmt: skip
# ops that only relabel a tensor's shape: no work, no data movement of their own
VIEW_OPS = frozenset({"reshape", "squeeze", "expand_dims", "flatten", "broadcast_to"})
# ops that copy data: one vector op per output element
COPY_OPS = frozenset({
    "permute_dims", "transpose", "concat", "split", "strided_slice", "take", "gather_elements",
    "gather_nd", "tile", "repeat", "layout_transform", "pad", "flip", "collapse_sum_to",
    "dynamic_strided_slice", "scatter_elements", "scatter_nd", "one_hot", "zeros_like",
    "ones_like", "full_like", "arange", "zeros", "ones", "full", "image_resize2d", "resize2d",
})  # fmt: skip
REDUCE_OPS = frozenset({"sum", "mean", "max", "min", "prod", "variance", "std", "argmax", "argmin"})


def _layout_dims(layout: str, shape: tuple[int, ...]) -> dict[str, int]:
    """Map the layout letters to sizes; NCHW16c style sub-dims are folded into their parent."""
    out: dict[str, int] = {}
    letters = [c for c in layout if c.isalpha()]
    if len(letters) != len(shape):
        return {}
    for c, n in zip(letters, shape, strict=True):
        key = c.upper()
        out[key] = out.get(key, 1) * int(n)
    return out


def _prod(xs) -> int:
    return int(math.prod(int(x) for x in xs)) if xs else 1


def work(op: Op, g: OpGraph) -> Work:
    """MACs and vector ops of one op, with the formula and values used."""
    kind = op.kind
    ins = [g.tensors[t] for t in op.inputs]
    outs = [g.tensors[t] for t in op.outputs]
    out_elems = sum(t.size for t in outs)
    a = op.attrs

    if kind in ("conv1d", "conv2d", "conv3d") and len(ins) >= 2:
        x, w, y = ins[0], ins[1], outs[0]
        dl = str(a.get("data_layout", "NCHW"))
        kl = str(a.get("kernel_layout", "OIHW"))
        od = _layout_dims(str(a.get("out_layout") or dl), y.shape)
        kd = _layout_dims(kl, w.shape)
        xd = _layout_dims(dl, x.shape)
        groups = int(a.get("groups", 1) or 1)
        spatial = [c for c in kl.upper() if c.isalpha() and c not in "OI"]
        if od and kd and xd:
            n, oc, ic = od.get("N", 1), od.get("C", 1), xd.get("C", 1)
            osp = [od[c] for c in spatial if c in od]
            ksp = [kd[c] for c in spatial if c in kd]
            macs = n * _prod(osp) * oc * (ic // groups) * _prod(ksp)
            sp = "*".join(map(str, osp))
            kk = "*".join(map(str, ksp))
            f = (
                f"N*{'*'.join('O' + c for c in spatial)}*OC*(IC/groups)*{'*'.join('K' + c for c in spatial)}"
                f" = {n}*{sp}*{oc}*({ic}/{groups})*{kk} = {macs:,}"
            )
            return Work(macs, 0, f)
    if kind in ("conv1d_transpose", "conv2d_transpose") and len(ins) >= 2:
        x, w = ins[0], ins[1]
        dl = str(a.get("data_layout", "NCHW"))
        kl = str(a.get("kernel_layout", "IOHW"))
        xd = _layout_dims(dl, x.shape)
        kd = _layout_dims(kl, w.shape)
        groups = int(a.get("groups", 1) or 1)
        spatial = [c for c in kl.upper() if c.isalpha() and c not in "OI"]
        if xd and kd:
            n, ic = xd.get("N", 1), xd.get("C", 1)
            oc = kd.get("O", 1) * groups
            isp = [xd[c] for c in spatial if c in xd]
            ksp = [kd[c] for c in spatial if c in kd]
            macs = n * _prod(isp) * ic * (oc // groups) * _prod(ksp)
            f = f"N*IH*IW*IC*(OC/groups)*KH*KW = {n}*{_prod(isp)}*{ic}*({oc}/{groups})*{_prod(ksp)} = {macs:,}"
            return Work(macs, 0, f)
    if kind in ("matmul", "dense", "linear") and len(ins) >= 2:
        x = ins[0]
        k = int(x.shape[-1]) if x.shape else 1
        macs = out_elems * k
        mn = outs[0].shape
        f = f"batch*M*N*K = prod(out {tuple(mn)})*K = {out_elems:,}*{k} = {macs:,}"
        return Work(macs, 0, f)
    if kind == "attention" and len(ins) >= 3:
        q, kk, v = ins[0], ins[1], ins[2]  # (B, S, H, D)
        if len(q.shape) == 4 and len(kk.shape) == 4 and len(v.shape) == 4:
            b, s, h, d = q.shape
            skv, dv = kk.shape[1], v.shape[3]
            macs = b * h * s * skv * (d + dv)
            f = f"B*H*S*S_kv*(D+D_v) = {b}*{h}*{s}*{skv}*({d}+{dv}) = {macs:,}"
            return Work(macs, b * h * s * skv * (TRANSCENDENTAL + 3), f)
    if kind in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
        win = _prod(a.get("pool_size", ()) or (1,))
        ops_ = out_elems * win
        return Work(0, ops_, f"out_elems*pool_window = {out_elems:,}*{win} = {ops_:,}")
    if kind.startswith("adaptive_avg_pool") or kind in REDUCE_OPS:
        n = ins[0].size if ins else out_elems
        return Work(0, n, f"in_elems = {n:,} (one op per input element)")
    if kind in ("softmax", "log_softmax"):
        n = ins[0].size
        c = 4 + TRANSCENDENTAL
        return Work(0, n * c, f"elems*(max+sub+exp+sum+div) = {n:,}*{c} = {n * c:,}")
    if kind in ("layer_norm", "group_norm", "rms_norm", "instance_norm"):
        n = ins[0].size
        return Work(0, n * 8, f"elems*8 (mean, var, sub, mul, rsqrt, scale, shift) = {n:,}*8 = {n * 8:,}")
    if kind == "batch_norm":
        n = ins[0].size
        return Work(0, n * 2, f"elems*2 (scale, shift) = {n:,}*2 = {n * 2:,}")
    if kind in ("topk", "sort", "argsort"):
        x = ins[0]
        axis = int(a.get("axis", -1))
        n = int(x.shape[axis]) if x.shape else 1
        rows = max(x.size // max(n, 1), 1)
        if kind == "topk":
            k = int(a.get("k", n) or n)
            depth = max(1, math.ceil(math.log2(k + 1)))
            ops_ = rows * n * depth
            return Work(
                0, ops_,
                f"rows*n*ceil(log2(k+1)) = {rows}*{n}*{depth} = {ops_:,}",
                "heap selection: each of n candidates compared along a k-heap",
            )  # fmt: skip
        depth = max(1, math.ceil(math.log2(max(n, 2))))
        ops_ = rows * n * depth
        return Work(0, ops_, f"rows*n*ceil(log2 n) = {rows}*{n}*{depth} = {ops_:,}", "comparison sort")
    if "non_max_suppression" in kind or kind == "nms":
        boxes = ins[0] if ins else None
        scores = ins[1] if len(ins) > 1 else None
        nb = int(boxes.shape[-2]) if boxes is not None and len(boxes.shape) >= 2 else out_elems
        ncls = int(scores.shape[1]) if scores is not None and len(scores.shape) == 3 else 1
        nbatch = int(scores.shape[0]) if scores is not None and scores.shape else 1
        depth = max(1, math.ceil(math.log2(max(nb, 2))))
        sort_ops = nbatch * ncls * nb * depth
        iou_ops = nbatch * ncls * (nb * (nb - 1) // 2) * 12
        ops_ = sort_ops + iou_ops
        return Work(
            0, ops_,
            f"sort B*C*n*log2 n + IoU B*C*n(n-1)/2*12 = {sort_ops:,} + {iou_ops:,} = {ops_:,}",
            "worst case: every box passes the score threshold and is compared with every other",
        )  # fmt: skip
    if kind in VIEW_OPS:
        return Work(0, 0, "view: relabels the shape, no work")
    if kind in COPY_OPS:
        return Work(0, out_elems, f"copy: out_elems = {out_elems:,}")
    cost = ELEMENTWISE_COST.get(kind)
    if cost is not None:
        ops_ = out_elems * cost
        return Work(0, ops_, f"out_elems*{cost} ({kind}) = {out_elems:,}*{cost} = {ops_:,}")
    return Work(0, out_elems, f"generic: one op per output element = {out_elems:,}")
