"""Which ops npukit's kernel library has a call for (no tvm): read by the code generator, which
lowers an accelerator's op to that call, and by the support rules, so that an accelerator never
takes an op its generated code could not run (the profile may list it: a what-if of a processor
npukit's reference kernels do not cover).  The host's code comes from TVM and runs every op."""

from __future__ import annotations

from ..graph import Op, OpGraph

BINARY = {"add": "ADD", "subtract": "SUBTRACT", "multiply": "MULTIPLY", "maximum": "MAXIMUM", "minimum": "MINIMUM",
          "divide": "DIVIDE"}  # fmt: skip
UNARY = {"relu": "RELU", "sigmoid": "SIGMOID", "tanh": "TANH", "gelu": "GELU", "gelu_tanh": "GELU_TANH", "exp": "EXP",
         "silu": "SILU", "negative": "NEGATIVE", "abs": "ABS", "sqrt": "SQRT", "rsqrt": "RSQRT"}  # fmt: skip
# one call each, whatever their attributes (``lower.KernelLowering.op`` has a branch for every one)
CALLS = frozenset({
    *BINARY, *UNARY, "clip", "leakyrelu", "matmul", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "mean", "sum",
    "max", "min", "softmax", "log_softmax", "reshape", "squeeze", "expand_dims", "flatten", "permute_dims", "concat",
    "split", "strided_slice", "quantize", "dequantize", "astype", "topk", "sort", "argsort",
    "all_class_non_max_suppression",
})  # fmt: skip
CHECKED = frozenset({"conv2d", "layer_norm", "batch_norm", "group_norm", "instance_norm", "pad", "resize2d"})  # a call for some of their attributes
KNOWN = CALLS | CHECKED  # the kinds the kernel library has a call for, at all
# the kinds with a call of the model's own integer arithmetic (``npk_binary_int`` / ``npk_unary_int``)
INT_UNARY = {"relu": "RELU", "clip": "CLIP", "negative": "NEGATIVE", "abs": "ABS"}
PLAIN_INT = frozenset({"int8", "int16", "int32", "int64", "uint8"})  # the dtypes those calls take
PAD_MODES = {"constant": "CONSTANT", "replicate": "REPLICATE", "reflect": "REFLECT", "circular": "CIRCULAR"}
COORD_MODES = {"half_pixel": "HALF_PIXEL", "align_corners": "ALIGN_CORNERS", "asymmetric": "ASYMMETRIC",
               "pytorch_half_pixel": "PYTORCH_HALF_PIXEL", "tf_half_pixel_for_nn": "TF_HALF_PIXEL_FOR_NN"}  # fmt: skip
ROUNDING = {"round_prefer_floor": "ROUND_PREFER_FLOOR", "round_prefer_ceil": "ROUND_PREFER_CEIL", "floor": "FLOOR",
            "ceil": "CEIL", "round": "ROUND_HALF_EVEN"}  # fmt: skip


def axis(a, rank: int) -> int:
    a = int(a)
    return a + rank if a < 0 else a


def resize_modes(a) -> tuple[str | None, str, str]:
    """(method, coordinate mode, rounding) of a resize2d's attributes, as the library names them
    (method None: one it has no call for)."""
    method = {"nearest_neighbor": "NEAREST", "linear": "BILINEAR"}.get(str(a.get("method")))
    cmode = str(a.get("coordinate_transformation_mode", "half_pixel"))
    rnd = str(a.get("rounding_method", "") or ("round" if cmode == "align_corners" else "floor"))
    return method, cmode, rnd


def integer_arithmetic(g: OpGraph, op: Op) -> bool:
    """Is ``op`` the model's own integer arithmetic: an elementwise op (binary or unary) whose inputs
    and output are integer tensors of the model (an int8 Add of an int8 model that carries no
    quantization, a Cast -> Add -> Cast)?  Its integers are the values: it wraps modulo 2^bits, as
    ONNX, onnxruntime, TVM (the simulation, the host's code) and C compute it.  The binary ops and
    relu, clip, negative, abs (``INT_UNARY``) lower to ``npk_binary_int`` / ``npk_unary_int``; any
    other unary op of integers has no call (``missing_call`` refuses it on accelerators).  A quantized
    value saturates to its grid instead: a float tensor held at an integer width on an accelerator,
    or a QDQ / TFLite add, which imports as dequantize -> float add -> quantize; its op is float."""
    if op.kind not in BINARY and op.kind not in INT_UNARY and op.kind not in UNARY:
        return False
    return bool(op.outputs) and all(g.tensors[t].dtype in PLAIN_INT for t in (*op.inputs, *op.outputs))


def missing_call(g: OpGraph, op: Op) -> str | None:
    """Why the kernel library has no call for ``op`` (None: it has one)."""
    k, a = op.kind, op.attrs
    if k in UNARY and k not in INT_UNARY and integer_arithmetic(g, op):
        return f"the kernel library has no call for {k} of integer tensors"
    if k in ("sum", "mean", "max", "min") and op.outputs and g.tensors[op.outputs[0]].dtype in PLAIN_INT:
        # its reductions read real values in float and saturate: the model's integer sum (and the
        # sum a mean divides) wraps, and an int32 / int64 value above 2^24 does not survive a float
        dt = g.tensors[op.inputs[0]].dtype
        if k in ("sum", "mean") or dt in ("int32", "int64"):
            return f"the kernel library has no call for {k} of the model's {dt} integers (its reductions compute in float)"
    if k in ("conv2d", "matmul") and op.inputs and g.tensors[op.inputs[0]].dtype in PLAIN_INT:
        # its conv / matmul read float or quantized values (a scale and zero point, saturating): the
        # model's own integers (a Relax conv2d of int8 into int32) accumulate exactly, or wrap
        return f"the kernel library has no call for {k} of the model's {g.tensors[op.inputs[0]].dtype} integers"
    if k in CALLS:
        return None
    if k not in KNOWN:
        return f"the kernel library has no call for {k}"
    if k == "conv2d":
        if len(op.inputs) < 2:
            return "conv2d without a weight"
        w = g.tensors[op.inputs[1]]
        if w.kind == "const":
            return None
        wp = w.producer
        if wp is not None and g.ops[wp].kind == "dequantize" and g.tensors[g.ops[wp].inputs[0]].kind == "const":
            return None
        if w.kind == "input":  # (a Relax module's main taking its weights as parameters)
            return f"conv2d whose weights are the model input {w.name!r}, not constants"
        return "conv2d with computed (not constant) weights"
    if k == "layer_norm":
        rank = len(g.tensors[op.inputs[0]].shape)
        axes = sorted(axis(x, rank) for x in a.get("axes", (-1,)))
        return None if axes == list(range(rank - len(axes), rank)) else f"layer_norm over axes {axes} (only the last axes)"
    if k in ("group_norm", "instance_norm"):  # one group_norm call: over the channels (axis 1) and every later axis
        rank = len(g.tensors[op.inputs[0]].shape)
        axes = sorted(axis(x, rank) for x in a.get("axes", ()))
        if axis(int(a.get("channel_axis", 1)), rank) != 1 or rank < 3 or axes != list(range(2, rank)):
            return f"{k} over axes {axes} with channel axis {a.get('channel_axis')} (only axis 1, over every later axis)"
        return None
    if k == "batch_norm":
        if a.get("training"):
            return "batch_norm in training mode (export the model in eval mode)"
        if any(g.consumers(t) or t in g.outputs for t in op.outputs[1:]):
            return "batch_norm's mean / variance outputs are used"
        return None
    if k == "pad":
        width = [int(w) for w in a.get("pad_width", ())]
        rank = len(g.tensors[op.inputs[0]].shape)
        if PAD_MODES.get(str(a.get("pad_mode", "constant"))) is None or len(width) != 2 * rank or min(width, default=0) < 0 \
                or len(op.inputs) != 1:  # fmt: skip
            return f"pad {a.get('pad_mode')!r} with widths {width}"
        return None
    if k == "resize2d":
        method, cmode, rnd = resize_modes(a)
        if (method is None or str(a.get("layout", "NCHW")) not in ("NCHW", "NHWC") or cmode not in COORD_MODES
                or (method == "NEAREST" and rnd not in ROUNDING) or len(op.inputs) != 1):  # fmt: skip
            return f"resize2d {a.get('method')} / {cmode} / {rnd} in layout {a.get('layout')}"
    return None
