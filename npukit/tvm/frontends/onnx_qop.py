"""Quantized ONNX in operator form, rewritten to the QDQ form before import.

onnxruntime's ``quantize_static(..., quant_format=QuantFormat.QOperator)`` writes QLinearConv,
QLinearMatMul and com.microsoft's QGemm / QLinearAdd / QLinearMul / QLinearGlobalAveragePool /
QLinearSigmoid / QLinearConcat / QLinearLeakyRelu / QLinearSoftmax / QLinearAveragePool; TVM's ONNX
frontend knows none of them.  Each node becomes ``DequantizeLinear`` on every quantized input ->
the float op (keeping the node's own name) -> ``QuantizeLinear`` to the node's output scale, the
form the QDQ quantizer writes, so placement, cost and int8 error work alike.  ConvInteger becomes
DequantizeLinear (scale 1) -> Conv -> Cast to int32.  Nothing here imports tvm.
"""

from __future__ import annotations

import json

import numpy as np

from ...errors import ModelError
from .naming import tilde_unique

_MS = "com.microsoft"
# op -> (float op, [(data, scale, zero point) input positions], (out scale, out zp) positions or None)
_UNARY = {
    "QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu", "QLinearGlobalAveragePool": "GlobalAveragePool",
    "QLinearSoftmax": "Softmax", "QLinearAveragePool": "AveragePool",
}  # fmt: skip
_BINARY = {"QLinearAdd": "Add", "QLinearMul": "Mul"}
KNOWN = {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearConcat", "ConvInteger", *_UNARY, *_BINARY}


PIECE = "npukit: a piece of "  # the doc string of every node a quantized node became, then its (name, op type, outputs)


def piece_of(n) -> tuple[str, str, tuple[str, ...]] | None:
    """(name, op type, outputs) of the quantized model node that node ``n`` is a piece of, or None:
    its dequantize, float op and quantize all belong to that one node."""
    doc = n.doc_string
    if not doc.startswith(PIECE):
        return None
    name, op_type, outs = json.loads(doc[len(PIECE):])
    return name, op_type, tuple(outs)


def is_qop(n) -> bool:
    return n.op_type in KNOWN and (n.domain in ("", "ai.onnx", _MS))


def rewrite(model, path: str, node_name):
    """``model`` with every quantized operator replaced by DQ -> float op -> Q; ``model`` itself if none."""
    import onnx  # noqa: PLC0415
    from onnx import helper as h  # noqa: PLC0415
    from onnx import numpy_helper  # noqa: PLC0415

    graph = model.graph
    if not any(is_qop(n) for n in graph.node):
        return model
    inits = {t.name: t for t in graph.initializer}
    taken = {t for n in graph.node for t in list(n.input) + list(n.output)} | set(inits) | {i.name for i in graph.input}
    new_inits: list = []
    nodes: list = []

    fresh = tilde_unique(taken)

    def init(name: str, arr: np.ndarray) -> str:
        nm = fresh(name)
        new_inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), nm))
        return nm

    def value(n, t: str, what: str) -> np.ndarray:
        if t in inits:
            return numpy_helper.to_array(inits[t])
        raise ModelError(f"{path}: node {node_name(n)!r} ({n.op_type}): its {what} (tensor {t!r}) is not a constant; "
                         "npukit reads quantized operators whose scales and zero points are initializers")  # fmt: skip

    def dq(n, k: int, x: str, scale: str, zp: str, axis: int | None = None) -> str:
        out = fresh(f"{node_name(n)}/dequantized_{k}")
        ins = [x, scale] + ([zp] if zp else [])
        kw = {} if axis is None else {"axis": axis}
        nodes.append(h.make_node("DequantizeLinear", ins, [out], name=fresh(f"{node_name(n)}/dequantize_{k}"), **kw))
        return out

    def q(n, y: str, out: str, scale: str, zp: str) -> None:
        nodes.append(h.make_node("QuantizeLinear", [y, scale] + ([zp] if zp else []), [out],
                                 name=fresh(f"{node_name(n)}/quantize")))  # fmt: skip

    def float_op(n, op: str, ins: list[str], attrs, out: str | None = None) -> str:
        y = out or fresh(f"{node_name(n)}/float")
        node = h.make_node(op, ins, [y], name=n.name or node_name(n))
        node.attribute.extend(a for a in attrs if a.name not in ("channels_last", "opset", "domain"))
        nodes.append(node)
        return y

    def bias(n, b: str, s1: str, s2: str) -> str:
        """An int32 bias quantized with scale s1 * s2 (input scale times weight scale), dequantized."""
        scale = (value(n, s1, "input scale").astype(np.float32) * value(n, s2, "weight scale").astype(np.float32))
        scale_name = init(f"{node_name(n)}/bias_scale", scale.reshape(-1) if scale.size > 1 else scale.reshape(()))
        zp_name = init(f"{node_name(n)}/bias_zero_point", np.zeros(scale.shape if scale.size > 1 else (), np.int32))
        return dq(n, 2, b, scale_name, zp_name, axis=0 if scale.size > 1 else None)

    def rewrite_one(n) -> None:
        """The quantized node ``n`` as dequantize -> float op -> quantize nodes."""
        i = list(n.input) + [""] * 10
        attrs = list(n.attribute)
        if any(a.name == "channels_last" and a.i for a in attrs):
            raise ModelError(f"{path}: node {node_name(n)!r} ({n.op_type}): attribute channels_last=1 is not supported")
        t = n.op_type
        if t == "QLinearConv":
            x = dq(n, 0, i[0], i[1], i[2])
            w = dq(n, 1, i[3], i[4], i[5], axis=0 if value(n, i[4], "weight scale").size > 1 else None)
            ins = [x, w] + ([bias(n, i[8], i[1], i[4])] if i[8] else [])
            q(n, float_op(n, "Conv", ins, attrs), n.output[0], i[6], i[7])
        elif t == "QLinearMatMul":
            a = dq(n, 0, i[0], i[1], i[2])
            b_axis = 1 if value(n, i[4], "weight scale").size > 1 else None
            b = dq(n, 1, i[3], i[4], i[5], axis=b_axis)
            q(n, float_op(n, "MatMul", [a, b], attrs), n.output[0], i[6], i[7])
        elif t == "QGemm":
            a = dq(n, 0, i[0], i[1], i[2])
            trans_b = next((x.i for x in attrs if x.name == "transB"), 0)
            per_ch = value(n, i[4], "weight scale").size > 1
            b = dq(n, 1, i[3], i[4], i[5], axis=(0 if trans_b else 1) if per_ch else None)
            ins = [a, b] + ([bias(n, i[6], i[1], i[4])] if i[6] else [])
            if i[7]:
                q(n, float_op(n, "Gemm", ins, attrs), n.output[0], i[7], i[8])
            else:
                float_op(n, "Gemm", ins, attrs, out=n.output[0])
        elif t in _BINARY:
            a = dq(n, 0, i[0], i[1], i[2])
            b = dq(n, 1, i[3], i[4], i[5])
            q(n, float_op(n, _BINARY[t], [a, b], attrs), n.output[0], i[6], i[7])
        elif t in _UNARY:
            x = dq(n, 0, i[0], i[1], i[2])
            q(n, float_op(n, _UNARY[t], [x], attrs), n.output[0], i[3], i[4])
        elif t == "QLinearConcat":
            xs = [dq(n, k, i[2 + 3 * k], i[3 + 3 * k], i[4 + 3 * k]) for k in range((len(n.input) - 2) // 3)]
            q(n, float_op(n, "Concat", xs, attrs), n.output[0], i[0], i[1])
        elif t == "ConvInteger":
            one = init(f"{node_name(n)}/unit_scale", np.asarray(1.0, np.float32))
            x = dq(n, 0, i[0], one, i[2])
            w = dq(n, 1, i[1], one, i[3])
            y = float_op(n, "Conv", [x, w], attrs)
            nodes.append(h.make_node("Cast", [y], [n.output[0]], name=fresh(f"{node_name(n)}/to_int32"),
                                     to=onnx.TensorProto.INT32))  # fmt: skip

    for n in graph.node:
        if not is_qop(n):
            nodes.append(n)
            continue
        first = len(nodes)
        rewrite_one(n)
        for piece in nodes[first:]:  # every piece is the quantized node's: its name, op type and outputs
            piece.doc_string = PIECE + json.dumps([node_name(n), n.op_type, list(n.output)])
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(new_inits)
    # value_info of the rewritten outputs may carry stale types; the frontend infers them again
    del out.graph.value_info[:]
    return out
