"""Issue 3: exact MACs (conv: N*OH*OW*OC*(IC/groups)*KH*KW; dense: M*K*N), shown by `npukit inspect`.

Every expected number is written out as the arithmetic a reader can check by hand.
"""

from __future__ import annotations

import json

import pytest
from conftest import (
    DIGITS_INT8,
    DIGITS_ONNX,
    DIGITS_PT2,
    DIGITS_TFLITE,
    MOBILENET,
    initializer,
    onnx_model,
    run_cli,
    save_onnx,
    tensor_info,
)

from npukit.opset import work


def _macs(g) -> list[tuple[str, str, int]]:
    return [(op.name, op.kind, work(op, g).macs) for op in g.ops]


def _conv_model(tmp_path, name, x_shape, w_shape, with_bias=False, **attrs):
    from onnx import helper as h

    inputs = ["x", "w"] + (["b"] if with_bias else [])
    inits = [initializer("w", w_shape)] + ([initializer("b", [w_shape[0]], 1)] if with_bias else [])
    node = h.make_node("Conv", inputs, ["y"], name=name, **attrs)
    m = onnx_model([node], [tensor_info("x", x_shape)], [tensor_info("y", None)], inits)
    return save_onnx(m, tmp_path / f"{name}.onnx")


# name, input NCHW, weight OIHW, attrs, output shape, MACs = N*OH*OW*OC*(IC/groups)*KH*KW
CONV_CASES = [
    ("plain_3x3", [1, 3, 8, 8], [4, 3, 3, 3], {}, (1, 4, 6, 6), 1 * 6 * 6 * 4 * 3 * 3 * 3),
    ("stride2_pad1", [1, 3, 17, 17], [8, 3, 3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1]), (1, 8, 9, 9),
     1 * 9 * 9 * 8 * 3 * 3 * 3),
    ("dilation2", [1, 4, 16, 16], [6, 4, 3, 3], dict(dilations=[2, 2]), (1, 6, 12, 12), 1 * 12 * 12 * 6 * 4 * 3 * 3),
    ("groups2", [1, 8, 10, 10], [12, 4, 3, 3], dict(group=2, pads=[1, 1, 1, 1]), (1, 12, 10, 10),
     1 * 10 * 10 * 12 * (8 // 2) * 3 * 3),
    ("depthwise", [1, 8, 10, 10], [8, 1, 3, 3], dict(group=8, pads=[1, 1, 1, 1]), (1, 8, 10, 10),
     1 * 10 * 10 * 8 * (8 // 8) * 3 * 3),
    ("depthwise_multiplier2", [1, 4, 6, 6], [8, 1, 3, 3], dict(group=4), (1, 8, 4, 4), 1 * 4 * 4 * 8 * 1 * 3 * 3),
    ("rect_kernel_batch2", [2, 3, 9, 12], [5, 3, 1, 5], dict(strides=[1, 2]), (2, 5, 9, 4), 2 * 9 * 4 * 5 * 3 * 1 * 5),
    ("pointwise", [1, 16, 7, 7], [32, 16, 1, 1], {}, (1, 32, 7, 7), 1 * 7 * 7 * 32 * 16 * 1 * 1),
    # pads [top, left, bottom, right]: OH = (11 + 0 + 2 - 4) // 3 + 1 = 4, OW = (11 + 1 + 0 - 4) // 3 + 1 = 3
    ("asym_pads_stride3", [1, 2, 11, 11], [3, 2, 4, 4], dict(strides=[3, 3], pads=[0, 1, 2, 0]), (1, 3, 4, 3),
     1 * 4 * 3 * 3 * 2 * 4 * 4),
]  # fmt: skip


@pytest.mark.parametrize("name,x,w,attrs,out,macs", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv2d_macs(tmp_path, graph_of, name, x, w, attrs, out, macs):
    g = graph_of(_conv_model(tmp_path, name, x, w, **attrs))
    assert [op.kind for op in g.ops] == ["conv2d"]
    op = g.ops[0]
    assert g.tensors[op.outputs[0]].shape == out
    wk = work(op, g)
    assert wk.macs == macs
    assert f"= {macs:,}" in wk.formula  # the formula ends in the value it computed


def test_conv_with_bias_counts_macs_on_the_conv_only(tmp_path, graph_of):
    g = graph_of(_conv_model(tmp_path, "cb", [1, 3, 8, 8], [4, 3, 3, 3], with_bias=True, pads=[1, 1, 1, 1]))
    assert _macs(g) == [("cb", "conv2d", 1 * 8 * 8 * 4 * 3 * 3 * 3), ("cb/add", "add", 0)]


def test_conv1d_macs(tmp_path, graph_of):
    # N*OW*OC*(IC/groups)*KW; OW = (20 + 2 + 2 - 5) // 2 + 1 = 10
    g = graph_of(_conv_model(tmp_path, "c1d", [1, 4, 20], [6, 4, 5], strides=[2], pads=[2, 2]))
    assert [op.kind for op in g.ops] == ["conv1d"]
    assert g.tensors[g.ops[0].outputs[0]].shape == (1, 6, 10)
    assert work(g.ops[0], g).macs == 1 * 10 * 6 * 4 * 5


def test_grouped_conv1d_macs(tmp_path, graph_of):
    g = graph_of(_conv_model(tmp_path, "c1g", [2, 6, 9], [9, 2, 3], group=3))
    assert g.tensors[g.ops[0].outputs[0]].shape == (2, 9, 7)
    assert work(g.ops[0], g).macs == 2 * 7 * 9 * (6 // 3) * 3


def _single(tmp_path, name, node, inputs, outputs, inits=()):
    return save_onnx(onnx_model([node], inputs, outputs, inits), tmp_path / f"{name}.onnx")


def test_matmul_and_gemm_macs(tmp_path, graph_of):
    from onnx import helper as h

    # batched activation x activation: batch*M*N*K
    p = _single(tmp_path, "bmm", h.make_node("MatMul", ["a", "b"], ["y"], name="bmm"),
                [tensor_info("a", [2, 4, 8, 16]), tensor_info("b", [2, 4, 16, 5])], [tensor_info("y", [2, 4, 8, 5])])  # fmt: skip
    assert _macs(graph_of(p)) == [("bmm", "matmul", 2 * 4 * 8 * 5 * 16)]

    # 3-D activation x 2-D weight (a linear layer on a sequence)
    p = _single(tmp_path, "seq", h.make_node("MatMul", ["a", "w"], ["y"], name="seq"), [tensor_info("a", [2, 7, 16])],
                [tensor_info("y", [2, 7, 10])], [initializer("w", [16, 10])])  # fmt: skip
    assert _macs(graph_of(p)) == [("seq", "matmul", 2 * 7 * 10 * 16)]

    # Gemm with transB and a bias: M*K*N on the matmul, the bias add has no MACs
    p = _single(tmp_path, "gemm", h.make_node("Gemm", ["a", "w", "c"], ["y"], name="fc", transB=1),
                [tensor_info("a", [3, 16])], [tensor_info("y", [3, 10])], [initializer("w", [10, 16]), initializer("c", [10])])  # fmt: skip
    assert _macs(graph_of(p)) == [("fc", "matmul", 3 * 16 * 10), ("fc/add", "add", 0)]

    # matrix x vector
    p = _single(tmp_path, "mv", h.make_node("MatMul", ["a", "v"], ["y"], name="mv"), [tensor_info("a", [5, 12])],
                [tensor_info("y", [5])], [initializer("v", [12])])  # fmt: skip
    assert _macs(graph_of(p)) == [("mv", "matmul", 5 * 12)]


def test_elementwise_and_pooling_have_no_macs(tmp_path, graph_of):
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Softmax", ["p"], ["y"], name="sm", axis=-1)]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 2, 4, 4])], [tensor_info("y", [1, 2, 2, 2])])
    g = graph_of(save_onnx(m, tmp_path / "ew.onnx"))
    assert _macs(g) == [("relu", "relu", 0), ("pool", "max_pool2d", 0), ("sm", "softmax", 0)]


# ---------------------------------------------------------------------------------------------
# the digits samples in every format: the same network, the same MACs

DIGITS_CONV1 = 1 * 8 * 8 * 8 * 1 * 3 * 3  # 8x8 input, 3x3 pad 1, 1 -> 8 channels
DIGITS_CONV2 = 1 * 8 * 8 * 16 * 8 * 3 * 3  # 8 -> 16 channels
DIGITS_FC1 = 1 * 256 * 64
DIGITS_FC2 = 1 * 64 * 10
DIGITS_TOTAL = DIGITS_CONV1 + DIGITS_CONV2 + DIGITS_FC1 + DIGITS_FC2
assert DIGITS_TOTAL == 95_360


@pytest.mark.parametrize("path", [DIGITS_ONNX, DIGITS_TFLITE, DIGITS_INT8, pytest.param(DIGITS_PT2, marks=pytest.mark.slow)],
                         ids=["onnx", "tflite-float", "tflite-int8", "pt2"])  # fmt: skip
def test_digits_macs_every_format(graph_of, path):
    if path.suffix == ".pt2":
        pytest.importorskip("torch")
    g = graph_of(path)
    mac_ops = [(op.kind, work(op, g).macs) for op in g.ops if work(op, g).macs]
    assert mac_ops == [("conv2d", DIGITS_CONV1), ("conv2d", DIGITS_CONV2), ("matmul", DIGITS_FC1),
                       ("matmul", DIGITS_FC2)]  # fmt: skip
    assert sum(work(op, g).macs for op in g.ops) == DIGITS_TOTAL


def test_tflite_convs_are_nhwc(graph_of):
    g = graph_of(DIGITS_TFLITE)
    convs = [op for op in g.ops if op.kind == "conv2d"]
    assert [op.attrs["data_layout"] for op in convs] == ["NHWC", "NHWC"]
    assert [g.tensors[op.outputs[0]].shape for op in convs] == [(1, 8, 8, 8), (1, 8, 8, 16)]


@pytest.mark.slow
def test_mobilenet_depthwise_nhwc_macs(graph_of):
    """MobileNet-v1 0.25 at 96x96: a stride-2 3x3 stem, then 13 depthwise-separable blocks."""
    g = graph_of(MOBILENET)
    # (input size, in channels, out channels, depthwise stride) of the 13 blocks
    blocks = [(48, 8, 16, 1), (48, 16, 32, 2), (24, 32, 32, 1), (24, 32, 64, 2), (12, 64, 64, 1),
              (12, 64, 128, 2), (6, 128, 128, 1), (6, 128, 128, 1), (6, 128, 128, 1), (6, 128, 128, 1),
              (6, 128, 128, 1), (6, 128, 256, 2), (3, 256, 256, 1)]  # fmt: skip
    expect = [48 * 48 * 8 * 3 * 3 * 3]  # stem: OH*OW*OC*IC*KH*KW
    for size, cin, cout, stride in blocks:
        o = size // stride
        expect.append(o * o * cin * 1 * 3 * 3)  # depthwise: IC/groups = 1
        expect.append(o * o * cout * cin * 1 * 1)  # pointwise
    expect.append(1 * 1 * 10 * 256)  # the 1x1 classifier conv after the global pool
    convs = [op for op in g.ops if op.kind == "conv2d"]
    assert [work(op, g).macs for op in convs] == expect
    dw = [op for op in convs if int(op.attrs["groups"]) > 1]
    assert len(dw) == 13 and all(op.attrs["data_layout"] == "NHWC" for op in convs)
    assert sum(work(op, g).macs for op in g.ops) == sum(expect) == 7_491_712


# ---------------------------------------------------------------------------------------------
# what `npukit inspect` prints


def test_inspect_prints_names_and_macs():
    r = run_cli("inspect", DIGITS_ONNX)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"{DIGITS_ONNX}: onnx, 14 ops"
    assert "input  'input' [1, 1, 8, 8] float32" in r.stdout
    assert "output 'probs' [1, 10] float32" in r.stdout
    rows = {ln.split()[1]: ln.split() for ln in lines if ln[:1].isdigit()}
    assert rows["/conv1/Conv"] == ["0", "/conv1/Conv", "conv2d", "1x8x8x8", "float32", f"{DIGITS_CONV1:,}"]
    assert rows["/conv2/Conv"][-1] == f"{DIGITS_CONV2:,}" == "73,728"
    assert rows["/fc1/Gemm"][2:] == ["matmul", "1x64", "float32", "16,384"]
    assert rows["/fc2/Gemm"][-1] == "640"
    assert rows["/softmax/Softmax"][-1] == "0"
    assert len(rows) == 14
    assert lines[-1].startswith("total: 14 ops, 95,360 MACs, ")


def test_inspect_json_fields():
    r = run_cli("inspect", DIGITS_TFLITE, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(d) >= {"model", "format", "inputs", "outputs", "ops", "elided", "totals"}
    assert d["format"] == "tflite"
    assert d["inputs"] == [{"name": "serving_default_input:0", "shape": [1, 8, 8, 1], "dtype": "float32"}]
    assert d["outputs"] == [{"name": "StatefulPartitionedCall_1:0", "shape": [1, 10], "dtype": "float32"}]
    assert len(d["ops"]) == 14
    op0 = d["ops"][0]
    assert set(op0) >= {"op_id", "name", "op", "source", "source_op", "shape", "dtype", "macs", "macs_formula"}
    assert (op0["op_id"], op0["op"], op0["shape"], op0["dtype"], op0["macs"], op0["source_op"]) == (
        0, "conv2d", [1, 8, 8, 8], "float32", DIGITS_CONV1, "CONV_2D")  # fmt: skip
    assert op0["macs_formula"].endswith(f"= {DIGITS_CONV1:,}")
    assert [o["op_id"] for o in d["ops"]] == list(range(14))
    assert d["totals"]["ops"] == 14
    assert d["totals"]["macs"] == DIGITS_TOTAL
    # parameters: conv1 8*1*3*3+8, conv2 16*8*3*3+16, fc1 256*64+64, fc2 64*10+10
    assert d["totals"]["params"] == (8 * 9 + 8) + (16 * 8 * 9 + 16) + (256 * 64 + 64) + (64 * 10 + 10)
    assert d["elided"] == {}


def test_inspect_input_shape_pins_a_symbolic_dim(tmp_path):
    from onnx import helper as h

    node = h.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])
    m = onnx_model([node], [tensor_info("x", ["N", 3, 8, 8])], [tensor_info("y", ["N", 4, 8, 8])],
                   [initializer("w", [4, 3, 3, 3])])  # fmt: skip
    p = save_onnx(m, tmp_path / "sym.onnx")
    r = run_cli("inspect", p, "--input-shape", "x=3,3,8,8", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ops"][0]["shape"] == [3, 4, 8, 8]
    assert d["ops"][0]["macs"] == 3 * 8 * 8 * 4 * 3 * 3 * 3
