"""The one op vocabulary (no tvm): every Relax operator npukit knows is one ``OpKind`` entry holding
its role, its work formula and how the rest of npukit treats it.  Importers, rules, patterns,
cost, quantization and code generation read it; adding an op kind is one entry here.

Roles:

    mac          multiply-accumulate root (conv, matmul, attention, einsum): a fused kernel's anchor
    elementwise  one output element from one element of each input (add, relu, exp, ...)
    quantize     quantize / dequantize / astype: elementwise conversions of the number format
    view         relabels the shape, no work, no data moved (reshape, squeeze, ...)
    copy         moves data without arithmetic (transpose, concat, slice, gather, pad, resize ...)
    pool         windowed reduction (max / avg pooling)
    reduce       reduction over axes (sum, mean, argmax, adaptive pooling ...)
    norm         normalisation (layer / group / rms / instance / batch norm)
    softmax      softmax / log_softmax
    sort         sort / argsort / topk / unique ...
    nms          non-maximum suppression
    other        anything else with a stated per-element model

Flags: ``epilogue`` (may run fused after a MAC root in one kernel: bias add, activation,
requantize, clamp), ``activation`` (an activation slot in a BYOC fused chain), ``relabel`` (the
values are unchanged: rounding them again is pointless).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import UnsupportedOpError, closest
from ..graph import Op, OpGraph
from . import work as w
from .names import full as full_name
from .work import TRANSCENDENTAL, Work


@dataclass(frozen=True)
class OpKind:
    name: str  # short Relax name: "conv2d"
    full: str  # full Relax name: "relax.nn.conv2d"
    role: str
    formula: Callable[[Op, OpGraph], Work | None]
    epilogue: bool = False
    activation: bool = False
    relabel: bool = False

    @property
    def mac(self) -> bool:
        return self.role == "mac"

    @property
    def view(self) -> bool:
        return self.role == "view"


_T = TRANSCENDENTAL
# elementwise ops: vector operations per output element (a stated, documented table)
ELEMENTWISE_COST = {
    "add": 1, "subtract": 1, "multiply": 1, "maximum": 1, "minimum": 1, "negative": 1,
    "abs": 1, "relu": 1, "clip": 2, "leakyrelu": 2, "prelu": 2, "where": 1, "equal": 1,
    "greater": 1, "less": 1, "greater_equal": 1, "less_equal": 1, "not_equal": 1,
    "logical_and": 1, "logical_or": 1, "logical_not": 1, "logical_xor": 1, "floor": 1, "ceil": 1,
    "round": 1, "trunc": 1, "sign": 1, "square": 1, "divide": 4, "floor_divide": 4, "mod": 4,
    "floor_mod": 4, "sqrt": 4, "rsqrt": 4, "power": _T, "exp": _T, "log": _T, "erf": _T,
    "tanh": _T, "sigmoid": _T, "gelu": _T + 3, "gelu_tanh": _T + 5, "silu": _T + 1,
    "softplus": 2 * _T, "sin": _T, "cos": _T, "tan": _T,
    "asin": _T, "acos": _T, "atan": _T, "atan2": _T, "sinh": _T, "cosh": _T, "asinh": _T,
    "acosh": _T, "atanh": _T, "selu": _T + 2, "log_add_exp": 2 * _T + 1,
    "bitwise_and": 1, "bitwise_or": 1, "bitwise_xor": 1, "bitwise_not": 1, "left_shift": 1,
    "right_shift": 1, "isfinite": 1, "isinf": 1, "isnan": 1, "ewise_fma": 2,
    "cumsum": 1, "cumprod": 1, "nll_loss": 2, "cross_entropy_with_logits": _T + 2,
    "multinomial_from_uniform": 2, "astype": 1, "quantize": 3, "dequantize": 2,
}  # fmt: skip
ACTIVATIONS = ("relu", "clip", "sigmoid", "gelu", "gelu_tanh", "silu", "tanh", "leakyrelu")
EPILOGUE = frozenset({"add", "subtract", "multiply", "maximum", "minimum", "clip", "relu", "leakyrelu", "prelu",
                      "quantize", "dequantize", "astype", "negative", "abs"})  # fmt: skip
RELABEL = frozenset({"reshape", "squeeze", "expand_dims", "flatten", "batch_flatten", "dropout"})
VIEWS = RELABEL | {"broadcast_to"}
COPIES = frozenset({
    "permute_dims", "concat", "split", "strided_slice", "take", "gather_elements",
    "gather_nd", "tile", "repeat", "layout_transform", "pad", "flip", "collapse_sum_to",
    "collapse_sum_like", "dynamic_strided_slice", "scatter_elements", "scatter_nd", "one_hot",
    "zeros_like", "ones_like", "full_like", "arange", "zeros", "ones", "full",
    "resize2d", "resize3d", "stack", "meshgrid", "tril", "triu", "eye", "eye_like", "hamming_window",
    "pixel_shuffle", "reverse_sequence", "slice_scatter", "index_put", "index_tensor", "affine_grid",
    "grid_sample", "roi_align", "roi_pool", "get_valid_counts", "multibox_transform_loc",
})  # fmt: skip
REDUCES = frozenset({"sum", "mean", "max", "min", "prod", "variance", "std", "argmax", "argmin",
                     "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"})  # fmt: skip


def _entries() -> dict[str, OpKind]:
    e: dict[str, OpKind] = {}

    def add(name, role, formula, **flags):
        e[name] = OpKind(name, full_name(name), role, formula, epilogue=name in EPILOGUE, activation=name in ACTIVATIONS,
                         relabel=name in RELABEL, **flags)  # fmt: skip

    for k in ("conv1d", "conv2d", "conv3d"):
        add(k, "mac", w.conv)
    for k in ("conv1d_transpose", "conv2d_transpose", "conv3d_transpose"):
        add(k, "mac", w.conv_transpose)
    add("matmul", "mac", w.matmul)
    add("einsum", "mac", w.einsum)
    for k in ("attention", "attention_bias", "attention_var_len"):
        add(k, "mac", w.attention)
    add("outer", "elementwise", w.outer)
    for k in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
        add(k, "pool", w.pool)
    for k in sorted(REDUCES):
        add(k, "reduce", w.reduce)
    for k in ("softmax", "log_softmax"):
        add(k, "softmax", w.softmax)
    for k in ("layer_norm", "group_norm", "rms_norm", "instance_norm"):
        add(k, "norm", w.norm)
    add("batch_norm", "norm", w.batch_norm)
    add("topk", "sort", w.topk)
    for k in ("sort", "argsort"):
        add(k, "sort", w.sort)
    for k in ("unique", "median", "nonzero", "bucketize"):
        add(k, "sort", w.sort_all)
    for k in ("non_max_suppression", "all_class_non_max_suppression"):
        add(k, "nms", w.nms)
    for k in sorted(VIEWS):
        add(k, "view", w.view)
    add("call_tir", "other", w.opaque)
    for k in sorted(COPIES):
        add(k, "copy", w.copy)
    for k, c in sorted(ELEMENTWISE_COST.items()):
        if k not in e:
            add(k, "quantize" if k in ("quantize", "dequantize", "astype") else "elementwise", w.elementwise(c))
    return e


KINDS: MappingProxyType = MappingProxyType(dict(sorted(_entries().items())))


def known() -> tuple[str, ...]:
    return tuple(KINDS)


def kind(name: str) -> OpKind:
    """The registry entry of an op kind (short or full Relax name); an unknown kind raises
    ``UnsupportedOpError`` listing the closest known kinds."""
    short = name.rsplit(".", 1)[-1]
    k = KINDS.get(short)
    if k is None:
        raise UnsupportedOpError(f"npukit has no entry for op {name!r} (no work formula, no rules); "
                                 f"{closest(short, KINDS)}")  # fmt: skip
    return k


def get(name: str) -> OpKind | None:
    return KINDS.get(name.rsplit(".", 1)[-1])


def work(op: Op, g: OpGraph) -> Work:
    """MACs and vector ops of one op, with the formula and values used.  A formula that cannot read
    the op's shapes (an unusual rank or layout) falls back to one op per output element, and says so."""
    f = kind(op.kind).formula(op, g)
    if f is not None:
        return f
    n = sum(g.tensors[t].size for t in op.outputs)
    return Work(0, n, f"{op.kind}: shapes not understood by its formula; one op per output element = {n:,}",
                "fallback: the op's shapes do not fit its formula")  # fmt: skip


def is_mac(name: str) -> bool:
    k = KINDS.get(name)
    return k is not None and k.role == "mac"


def is_view(name: str) -> bool:
    k = KINDS.get(name)
    return k is not None and k.role == "view"
