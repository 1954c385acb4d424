"""Issue 14, item 3: quantized ONNX in operator form (onnxruntime's QOperator format) imports like the
QDQ form: every QLinear* node becomes DequantizeLinear -> float op (keeping the node's name) ->
QuantizeLinear before TVM sees it."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import SAMPLES, onnx_model, save_onnx, tensor_info

import npukit

QDQ, QOP = SAMPLES / "digits_cnn_qdq.onnx", SAMPLES / "digits_cnn_qop.onnx"


def _compute(study):
    """(op kind, processor) of every op but the (de)quantizations."""
    pl = study.placement
    return [(op, p) for op, p in zip(pl["op"], pl["processor"], strict=True) if op not in ("quantize", "dequantize")]


def test_qdq_and_qoperator_digits_place_alike_and_agree_on_accuracy():
    data = np.load(SAMPLES / "digits_cnn.npz")
    studies = [npukit.Study(p, "arm-dsp-dla") for p in (QDQ, QOP)]
    assert _compute(studies[0]) == _compute(studies[1])
    assert _compute(studies[1]) == [
        ("conv2d", "dla"), ("add", "dla"), ("conv2d", "dla"), ("add", "dla"), ("max_pool2d", "dla"),
        ("reshape", "dla"), ("matmul", "dla"), ("add", "dla"), ("matmul", "dla"), ("add", "dla"), ("softmax", "arm"),
    ]  # fmt: skip  (the cost policy keeps the 10-element softmax on the host: a DSP call costs more than it saves)
    acc = []
    for s in studies:
        s.set_data(data["x"], data["y"])
        acc.append(s.error_dict()["accuracy"])
    assert abs(acc[0] - acc[1]) <= 0.005, acc
    assert min(acc) > 0.95


def test_qoperator_nodes_keep_their_names():
    g = npukit.import_model(QOP).graph
    convs = [op for op in g.ops if op.kind in ("conv2d", "matmul", "softmax")]
    assert [(op.name, op.source_op) for op in convs] == [
        ("/conv1/Conv_quant", "QLinearConv"), ("/conv2/Conv_quant", "QLinearConv"), ("/fc1/Gemm_quant", "QGemm"),
        ("/fc2/Gemm_quant", "QGemm"), ("/softmax/Softmax_quant", "QLinearSoftmax"),
    ]  # fmt: skip


def test_the_script_makes_the_committed_files(tmp_path):
    pytest.importorskip("onnxruntime")
    sys.path.insert(0, str(SAMPLES))
    import make_quantized

    made = make_quantized.make(SAMPLES / "digits_cnn.onnx", SAMPLES / "digits_cnn.npz", tmp_path)
    assert made["qdq"].read_bytes() == QDQ.read_bytes()
    assert made["qop"].read_bytes() == QOP.read_bytes()


def _q(name, arr):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(arr), name)


def _scales():
    return [_q("s", np.float32(0.05)), _q("z", np.uint8(128)), _q("so", np.float32(0.1)), _q("zo", np.uint8(120))]


CASES = {
    "QLinearMatMul": (["x", "s", "z", "w", "ws", "wz", "so", "zo"], "", [("matmul", "QLinearMatMul")]),
    "QLinearAdd": (["x", "s", "z", "x", "s", "z", "so", "zo"], "com.microsoft", [("add", "QLinearAdd")]),
    "QLinearMul": (["x", "s", "z", "x", "s", "z", "so", "zo"], "com.microsoft", [("multiply", "QLinearMul")]),
    "QLinearSigmoid": (["x", "s", "z", "so", "zo"], "com.microsoft", [("sigmoid", "QLinearSigmoid")]),
    "QLinearLeakyRelu": (["x", "s", "z", "so", "zo"], "com.microsoft", [("leakyrelu", "QLinearLeakyRelu")]),
    "QLinearGlobalAveragePool": (["x", "s", "z", "so", "zo"], "com.microsoft", [("mean", "QLinearGlobalAveragePool")]),
    "QLinearConcat": (["so", "zo", "x", "s", "z", "x", "s", "z"], "com.microsoft", [("concat", "QLinearConcat")]),
}  # fmt: skip


@pytest.mark.parametrize("op", list(CASES))
def test_each_quantized_operator_becomes_dq_float_op_q(tmp_path, op):
    from onnx import TensorProto
    from onnx import helper as h

    ins, domain, want = CASES[op]
    node = h.make_node(op, ins, ["y"], name="the_node", domain=domain)
    inits = _scales() + [_q("w", np.arange(16, dtype=np.int8).reshape(4, 4)), _q("ws", np.float32(0.02)),
                         _q("wz", np.int8(0))]  # fmt: skip
    shape = [1, 4, 4, 4] if "Pool" in op else [4, 4]
    m = onnx_model([node], [tensor_info("x", shape, TensorProto.UINT8)], [tensor_info("y", None, TensorProto.UINT8)],
                   inits, domains=["com.microsoft"] if domain else [])  # fmt: skip
    g = npukit.import_model(save_onnx(m, tmp_path / "q.onnx", infer_shapes=False)).graph
    kinds = [op.kind for op in g.ops]
    # one dequantize per quantized activation input (a constant weight's dequantize folds to a float constant)
    assert kinds[-1] == "quantize" and kinds.count("dequantize") == ins.count("x")
    main = [(o.kind, o.name) for o in g.ops if o.kind not in ("quantize", "dequantize")]
    assert main[-1][1] == "the_node"


def test_a_scale_that_is_not_a_constant_is_named(tmp_path):
    from onnx import TensorProto
    from onnx import helper as h

    node = h.make_node("QLinearMatMul", ["x", "s", "z", "x", "xs", "z", "so", "zo"], ["y"], name="mm")
    m = onnx_model([node], [tensor_info("x", [4, 4], TensorProto.UINT8), tensor_info("xs", [], TensorProto.FLOAT)],
                   [tensor_info("y", None, TensorProto.UINT8)], _scales())  # fmt: skip
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(save_onnx(m, tmp_path / "q.onnx", infer_shapes=False))
    assert str(ei.value).endswith("q.onnx: node 'mm' (QLinearMatMul): its weight scale (tensor 'xs') is not a constant; "
                                  "npukit reads quantized operators whose scales and zero points are initializers")


def test_a_quantized_node_is_one_node_with_its_dequantize_and_quantize(tmp_path):
    """The dequantize, float op and quantize a QLinearConv became belong to it: its name covers them
    (a pin or a layer width by that name took only the conv), the float op takes the node's name and
    op type, the quantize makes the node's output, and the annotated ONNX accounts for every op (10
    of 23 were left out: their node was one npukit had made up)."""
    import onnx

    s = npukit.Study(QOP, "vsi-npu")
    g = s.graph
    ids = g.resolve("/conv1/Conv_quant")
    assert [(g.ops[i].name, g.ops[i].kind, g.ops[i].source_op) for i in ids] == [
        ("/conv1/Conv_quant/dequantize", "dequantize", "QLinearConv"), ("/conv1/Conv_quant", "conv2d", "QLinearConv"),
        ("/conv1/Conv_quant/add", "add", "QLinearConv"), ("/conv1/Conv_quant/quantize", "quantize", "QLinearConv")]  # fmt: skip
    assert g.tensors[g.ops[ids[-1]].outputs[0]].name == "/conv1/Conv_output_0_quantized"
    m = onnx.load(str(s.annotated_onnx(tmp_path / "a.onnx")))
    total = sum(float(p.value) for n in m.graph.node for p in n.metadata_props if p.key == "npukit.latency_us")
    assert abs(total - sum(c.latency_us for c in s.result.ops)) < 1e-3 * len(m.graph.node)
    assert all(p.value != "none: no op after import" for n in m.graph.node for p in n.metadata_props)
