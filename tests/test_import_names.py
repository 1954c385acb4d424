"""Issue 3: every op keeps the model's own name, for every input format.

ONNX: the node name, else the node's first output tensor name.  TFLite: the operator's output
tensor name.  PyTorch: the path of the module that made the FX node (``stem.conv``; the FX name
where the top-level forward made it; the FX names are aliases).  Relax: the binding name.
Helper ops a frontend emits beside a node's main op are named ``<node>/<kind>`` and point back to
the node through ``source``; nodes that became no op at all are listed in ``graph.elided``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    DETECTOR,
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

import npukit


def _node_names_onnx(path) -> list[str]:
    import onnx

    m = onnx.load(str(path))
    return [n.name or n.output[0] for n in m.graph.node]


def _every_node_accounted_for(g, node_names):
    """Every model node is an op's source or listed as elided; no op claims a node that does not exist."""
    sources = {op.source for op in g.ops}
    assert sources <= set(node_names), sources - set(node_names)
    assert set(g.elided) <= set(node_names), set(g.elided) - set(node_names)
    assert sources | set(g.elided) == set(node_names), set(node_names) - sources - set(g.elided)
    assert not sources & set(g.elided), f"nodes both elided and present: {sources & set(g.elided)}"
    names = [op.name for op in g.ops]
    assert len(names) == len(set(names)), "op names must be unique"


# ---------------------------------------------------------------------------------------------
# ONNX


def test_digits_onnx_every_op_has_its_node_name(graph_of):
    g = graph_of(DIGITS_ONNX)
    assert g.source_format == "onnx"
    got = [(op.name, op.kind, op.source, op.source_op) for op in g.ops]
    assert got == [
        ("/conv1/Conv", "conv2d", "/conv1/Conv", "Conv"),
        ("/conv1/Conv/add", "add", "/conv1/Conv", "Conv"),  # the bias, fused away by the frontend
        ("/relu1/Relu", "relu", "/relu1/Relu", "Relu"),
        ("/conv2/Conv", "conv2d", "/conv2/Conv", "Conv"),
        ("/conv2/Conv/add", "add", "/conv2/Conv", "Conv"),
        ("/relu2/Relu", "relu", "/relu2/Relu", "Relu"),
        ("/pool/MaxPool", "max_pool2d", "/pool/MaxPool", "MaxPool"),
        ("/flatten/Flatten", "reshape", "/flatten/Flatten", "Flatten"),
        ("/fc1/Gemm", "matmul", "/fc1/Gemm", "Gemm"),
        ("/fc1/Gemm/add", "add", "/fc1/Gemm", "Gemm"),
        ("/relu3/Relu", "relu", "/relu3/Relu", "Relu"),
        ("/fc2/Gemm", "matmul", "/fc2/Gemm", "Gemm"),
        ("/fc2/Gemm/add", "add", "/fc2/Gemm", "Gemm"),
        ("/softmax/Softmax", "softmax", "/softmax/Softmax", "Softmax"),
    ]
    assert [op.op_id for op in g.ops] == list(range(14))
    assert dict(g.elided) == {}
    _every_node_accounted_for(g, _node_names_onnx(DIGITS_ONNX))
    # model inputs / outputs keep their names
    assert [g.tensors[t].name for t in g.inputs] == ["input"]
    assert [g.tensors[t].name for t in g.outputs] == ["probs"]
    assert g.tensors[g.outputs[0]].producer == 13


def test_detector_onnx_names(graph_of):
    g = graph_of(DETECTOR)
    _every_node_accounted_for(g, _node_names_onnx(DETECTOR))
    by_name = {op.name: op for op in g.ops}
    assert by_name["post/nms"].kind == "all_class_non_max_suppression"
    assert by_name["post/nms"].source_op == "NonMaxSuppression"
    assert by_name["post/topk"].kind == "topk"
    assert by_name["head/conv/add"].source == "head/conv"
    # Gather imports as less/add/where (negative index fix-up) + take: all point to the Gather node
    gather = [op for op in g.ops if op.source == "post/gather_boxes"]
    assert [(op.name, op.kind) for op in gather] == [
        ("post/gather_boxes/less", "less"),
        ("post/gather_boxes/add", "add"),
        ("post/gather_boxes/where", "where"),
        ("post/gather_boxes", "take"),
    ]
    assert [g.tensors[t].name for t in g.outputs] == ["selected_indices", "topk_scores", "topk_boxes"]


@pytest.mark.slow
def test_transformer_onnx_names_at_scale(graph_of):
    """1,161 ops: every op is attributed to the node whose conversion emitted it."""
    import collections

    path = DETECTOR.parent / "transformer_encoder.onnx"
    g = graph_of(path)
    _every_node_accounted_for(g, _node_names_onnx(path))
    assert collections.Counter((op.source_op, op.kind) for op in g.ops) == {
        ("MatMul", "matmul"): 320, ("Add", "add"): 320, ("Reshape", "reshape"): 160, ("Transpose", "permute_dims"): 160,
        ("LayerNormalization", "layer_norm"): 81, ("Mul", "multiply"): 40, ("Softmax", "softmax"): 40,
        ("Gelu", "gelu"): 40,
    }  # fmt: skip
    assert all(op.name == op.source for op in g.ops)  # one op per node: every op has its node's exact name
    assert g.op_by_name("layer3/attn/softmax").kind == "softmax"
    assert g.op_by_name("final/ln").kind == "layer_norm"
    # the final Identity node only renames the output
    assert dict(g.elided) == {"final/output": "no computation of its own: passes on another node's value"}
    assert [g.tensors[t].name for t in g.outputs] == ["encoded"]


def test_onnx_unnamed_nodes_fused_and_elided(tmp_path, graph_of):
    """Unnamed node -> its first output name; Conv bias -> `<node>/add`; folded nodes -> elided."""
    from onnx import helper as h

    nodes = [
        h.make_node("Identity", ["x"], ["x_id"], name="pass_input"),
        h.make_node("Conv", ["x_id", "W", "B"], ["conv_out"], name="stem", pads=[1, 1, 1, 1]),
        h.make_node("Add", ["C1", "C2"], ["c_sum"], name="const_add"),  # constant only: folded at import
        h.make_node("Shape", ["conv_out"], ["shp"], name="shape_of"),  # static shape: a constant
        h.make_node("Identity", ["conv_out"], ["conv_id"], name="pass_mid"),
        h.make_node("Add", ["conv_id", "c_sum"], ["biased"]),  # no name: first output
        h.make_node("Relu", ["biased"], ["y"], name=""),  # empty name: first output
    ]
    m = onnx_model(
        nodes, [tensor_info("x", [1, 3, 8, 8])], [tensor_info("y", [1, 4, 8, 8])],
        [initializer("W", [4, 3, 3, 3]), initializer("B", [4], 1), initializer("C1", [1, 4, 1, 1], 2),
         initializer("C2", [1, 4, 1, 1], 3)],
    )  # fmt: skip
    g = graph_of(save_onnx(m, tmp_path / "names.onnx"))
    got = [(op.name, op.kind, op.source) for op in g.ops]
    assert got == [
        ("stem", "conv2d", "stem"),
        ("stem/add", "add", "stem"),
        ("biased", "add", "biased"),
        ("y", "relu", "y"),
    ]
    assert set(g.elided) == {"pass_input", "const_add", "shape_of", "pass_mid"}
    assert "identity" in g.elided["pass_input"] and "input" in g.elided["pass_input"]
    assert "'stem'" in g.elided["pass_mid"]  # it passes on the value of the conv node
    assert "constant" in g.elided["const_add"]
    assert "constant" in g.elided["shape_of"]
    _every_node_accounted_for(g, ["pass_input", "stem", "const_add", "shape_of", "pass_mid", "biased", "y"])
    # the bias add is reachable from its node name too
    assert g.op_by_name("stem/add").source == "stem"
    assert set(g.resolve("stem")) >= {0}


def test_onnx_model_proto_in_memory(graph_of):
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["y"], name="only_relu")], [tensor_info("x", [1, 4])],
                   [tensor_info("y", [1, 4])])  # fmt: skip
    g = npukit.import_model(m).graph
    assert [(op.name, op.kind) for op in g.ops] == [("only_relu", "relu")]


def test_duplicate_onnx_node_names_stay_unique_and_keep_their_source(tmp_path, graph_of):
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["x"], ["a"], name="dup"), h.make_node("Sigmoid", ["a"], ["y"], name="dup")]
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info("y", [1, 4])])
    g = graph_of(save_onnx(m, tmp_path / "dup.onnx"))
    names = [op.name for op in g.ops]
    assert names == ["dup", "dup~2"]
    # the second node goes by its op's name, so a reference means one node, the one the tables show
    assert [op.source for op in g.ops] == names
    s = npukit.Study(tmp_path / "dup.onnx", "riscv-accel")
    s.pin("dup", "riscv")
    assert dict(s.config.pins) == {"dup": "riscv"} and s.graph.resolve("dup") == (0,)
    assert s.explain("dup").startswith("dup  (op_id 0")
    with pytest.raises(npukit.ConfigError) as ei:
        s.pin("dup~2", "accel")
    assert str(ei.value) == "cannot pin 'dup~2' (sigmoid) to accel: accel: sigmoid is not in processors.accel.ops"


# ---------------------------------------------------------------------------------------------
# TFLite


def _tflite_op_names(path) -> list[str]:
    import tflite

    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    sg = model.Subgraphs(0)
    out = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        out.append(sg.Tensors(int(op.OutputsAsNumpy()[0])).Name().decode())
    return out


def test_tflite_float_names(graph_of):
    g = graph_of(DIGITS_TFLITE)
    assert g.source_format == "tflite"
    node_names = _tflite_op_names(DIGITS_TFLITE)
    _every_node_accounted_for(g, node_names)
    assert dict(g.elided) == {}
    conv1 = node_names[0]
    assert conv1.startswith("digits_cnn_1/conv1_1/")
    # CONV_2D with a fused bias and ReLU: conv2d + add + relu, helpers named after the node
    assert [(op.name, op.kind, op.source, op.source_op) for op in g.ops[:3]] == [
        (conv1, "conv2d", conv1, "CONV_2D"),
        (conv1 + "/add", "add", conv1, "CONV_2D"),
        (conv1 + "/relu", "relu", conv1, "CONV_2D"),
    ]
    assert [op.kind for op in g.ops] == ["conv2d", "add", "relu", "conv2d", "add", "relu", "max_pool2d", "reshape",
                                         "matmul", "add", "relu", "matmul", "add", "softmax"]  # fmt: skip
    assert g.ops[-1].name == "StatefulPartitionedCall_1:0"
    assert g.ops[-1].source_op == "SOFTMAX"
    assert [g.tensors[t].name for t in g.inputs] == ["serving_default_input:0"]
    assert g.tensors[g.inputs[0]].shape == (1, 8, 8, 1)


def test_tflite_int8_names(graph_of):
    g = graph_of(DIGITS_INT8)
    node_names = _tflite_op_names(DIGITS_INT8)
    _every_node_accounted_for(g, node_names)
    conv1 = node_names[0]
    # int8 arrives as dequantize -> float op -> quantize; the fused ReLU is a clip
    assert [(op.name, op.kind) for op in g.ops[:5]] == [
        (conv1 + "/dequantize", "dequantize"),
        (conv1, "conv2d"),
        (conv1 + "/add", "add"),
        (conv1 + "/quantize", "quantize"),
        (conv1 + "/clip", "clip"),
    ]
    assert all(op.source == conv1 for op in g.ops[:5])
    assert g.tensors[g.inputs[0]].dtype == "int8"
    # the node's name goes to the op that computes, not to the quantize after it
    assert [op.name for op in g.ops if op.kind == "softmax"] == ["StatefulPartitionedCall_1:0"]


def _weights_by_kind(g) -> list[tuple[str, list[str]]]:
    """(op kind, names of its constant inputs that are not scalars) of every op that reads one."""
    out = []
    for op in g.ops:
        names = [g.tensors[t].name for t in op.inputs if g.tensors[t].kind == "const" and g.tensors[t].shape != ()]
        if names:
            out.append((op.kind, names))
    return out


def test_tflite_int8_weights_go_by_their_tensors_names(graph_of):
    """An int8 TFLite weight arrives as dequantize(int8 constant, per-channel scale, zero point),
    folded at import: the weight went by its id ('c2', 'c8' ...) where the float file's goes by
    its tensor's name. The weight is the int8 constant's tensor, as the float path names it."""
    g = graph_of(DIGITS_INT8)
    conv1, conv2 = "digits_cnn_1/conv1_1/", "digits_cnn_1/conv2_1/"
    assert _weights_by_kind(g) == [
        ("conv2d", [conv1 + "convolution"]),
        ("add", [f"{conv1}Relu;{conv1}BiasAdd;{conv1}convolution;{conv1}Squeeze"]),
        ("conv2d", [conv2 + "convolution"]),
        ("add", [f"{conv2}Relu;{conv2}BiasAdd;{conv2}convolution;{conv2}Squeeze"]),
        ("matmul", ["digits_cnn_1/fc1_1/MatMul"]),
        ("add", ["digits_cnn_1/fc1_1/Relu;digits_cnn_1/fc1_1/BiasAdd"]),
        ("matmul", ["digits_cnn_1/fc2_1/MatMul"]),
        ("add", ["digits_cnn_1/fc2_1/BiasAdd"]),
    ]
    # the float file's weights go by the same names
    assert [n for _, ns in _weights_by_kind(graph_of(DIGITS_TFLITE)) for n in ns] == [
        n for _, ns in _weights_by_kind(g) for n in ns]


def test_tflite_int8_mobilenet_weights_are_its_operators_weight_and_bias_tensors(graph_of):
    """Each of MobileNet-v1-0.25's 28 convolutions (14 depthwise) and its classifier reads the weight
    and bias tensors its TFLite operator reads, by their names."""
    import tflite

    model = tflite.Model.GetRootAsModel(MOBILENET.read_bytes(), 0)
    sg = model.Subgraphs(0)
    want = []
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        ins = [int(i) for i in op.InputsAsNumpy()]
        if len(ins) == 3:  # CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED: input, weight, bias
            want.append(tuple(sg.Tensors(i).Name().decode() for i in ins[1:]))
    assert len(want) == 28
    g = graph_of(MOBILENET)
    got = _weights_by_kind(g)
    assert [k for k, _ in got] == ["conv2d", "add"] * 28
    assert [(w[0], b[0]) for (_, w), (_, b) in zip(got[::2], got[1::2], strict=True)] == want
    assert want[0] == ("mobilenet_v1_025_96_1/conv1_1/convolution",
                       "mobilenet_v1_025_96_1/conv1_relu_1/Relu6;mobilenet_v1_025_96_1/conv1_bn_1/batchnorm/add_1;"
                       "mobilenet_v1_025_96_1/conv1_1/convolution;mobilenet_v1_025_96_1/conv1_bn_1/batchnorm/sub")
    s = npukit.Study(MOBILENET, "arm-dsp-dla")
    first_conv = next(op.name for op in g.ops if op.kind == "conv2d")
    assert "mobilenet_v1_025_96_1/conv1_1/convolution [3, 3, 3, 8] float32" in s.explain(first_conv)


# ---------------------------------------------------------------------------------------------
# PyTorch


def _fx_names(ep) -> list[str]:
    return [n.name for n in ep.graph.nodes if n.op == "call_function"]


@pytest.mark.slow
def test_pt2_file_names(graph_of):
    """Each node goes by the path of the module that made it, as the ONNX export of the same network
    (/conv1/Conv ...); the FX names stay aliases."""
    torch = pytest.importorskip("torch")
    g = graph_of(DIGITS_PT2)
    assert g.source_format == "torch"
    ep = torch.export.load(str(DIGITS_PT2))
    modules = ["conv1", "relu1", "conv2", "relu2", "pool", "flatten", "fc1", "relu3", "fc2", "softmax"]
    _every_node_accounted_for(g, modules)
    assert _fx_names(ep) == ["conv2d", "relu", "conv2d_1", "relu_1", "max_pool2d", "flatten", "linear", "relu_2",
                             "linear_1", "softmax"]  # fmt: skip
    got = [(op.name, op.kind, op.source, op.source_op) for op in g.ops]
    assert got == [
        ("conv1", "conv2d", "conv1", "aten.conv2d.default"),
        ("conv1/add", "add", "conv1", "aten.conv2d.default"),
        ("relu1", "relu", "relu1", "aten.relu.default"),
        ("conv2", "conv2d", "conv2", "aten.conv2d.default"),
        ("conv2/add", "add", "conv2", "aten.conv2d.default"),
        ("relu2", "relu", "relu2", "aten.relu.default"),
        ("pool", "max_pool2d", "pool", "aten.max_pool2d.default"),
        ("flatten", "reshape", "flatten", "aten.flatten.using_ints"),
        ("fc1", "matmul", "fc1", "aten.linear.default"),
        ("fc1/add", "add", "fc1", "aten.linear.default"),
        ("relu3", "relu", "relu3", "aten.relu.default"),
        ("fc2", "matmul", "fc2", "aten.linear.default"),
        ("fc2/add", "add", "fc2", "aten.linear.default"),
        ("softmax", "softmax", "softmax", "aten.softmax.int"),
    ]
    assert dict(g.aliases) == {"conv2d": ("conv1",), "relu": ("relu1",), "conv2d_1": ("conv2",), "relu_1": ("relu2",),
                               "max_pool2d": ("pool",), "linear": ("fc1",), "relu_2": ("relu3",), "linear_1": ("fc2",)}  # fmt: skip
    assert g.resolve("conv2d_1") == g.resolve("conv2") == (3, 4)
    assert dict(g.elided) == {}
    assert [g.tensors[t].name for t in g.inputs] == ["input"]
    assert [g.tensors[t].name for t in g.outputs] == ["softmax"]


@pytest.mark.slow
def test_exported_program_in_memory_names_ops_by_their_modules():
    """The names are the module paths of the program the user holds (ep.graph), not TVM's
    decomposition's; what the top-level forward computes itself keeps its FX name."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4 * 4 * 4, 5)

        def forward(self, x):
            y = torch.relu(self.conv(x))
            y = torch.nn.functional.max_pool2d(y, 2)
            y = y.flatten(1)
            return torch.softmax(self.fc(y), dim=-1)

    torch.manual_seed(0)
    ep = torch.export.export(Net().eval(), (torch.randn(1, 3, 8, 8),))
    fx = _fx_names(ep)
    assert fx == ["conv2d", "relu", "max_pool2d", "flatten", "linear", "softmax"]
    g = npukit.import_model(ep).graph
    assert g.source_format == "torch"
    _every_node_accounted_for(g, ["conv", "relu", "max_pool2d", "flatten", "fc", "softmax"])
    by_kind = {}
    for op in g.ops:
        by_kind.setdefault(op.kind, []).append(op)
    assert by_kind["conv2d"][0].name == "conv"
    assert by_kind["matmul"][0].name == "fc" and by_kind["matmul"][0].source == "fc"
    assert by_kind["softmax"][0].name == "softmax"
    assert by_kind["max_pool2d"][0].source == "max_pool2d"
    assert by_kind["reshape"][0].source == "flatten"
    assert {op.source for op in g.ops if op.kind == "add"} == {"conv", "fc"}  # the two biases
    assert dict(g.elided) == {}
    assert [g.tensors[t].name for t in g.inputs] == ["x"]


# ---------------------------------------------------------------------------------------------
# Relax IRModule


def _relax_module(dataflow: bool):
    import contextlib

    from npukit.tvm import load

    load()
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("image", relax.TensorType((1, 3, 8, 8), "float32"))
    w = relax.const(np.ones((4, 3, 3, 3), np.float32))
    c1 = relax.const(np.ones((4,), np.float32))
    c2 = relax.const(np.full((4,), 2, np.float32))
    with bb.function("main", [x]):
        with bb.dataflow() if dataflow else contextlib.nullcontext():
            c = bb.emit(relax.op.nn.conv2d(x, w, padding=1), name_hint="my_conv")
            k = bb.emit(relax.op.add(c1, c2), name_hint="const_sum")  # constants only: folds away
            kr = bb.emit(relax.op.reshape(k, (1, 4, 1, 1)), name_hint="bias_shape")
            b = bb.emit(relax.op.add(c, kr), name_hint="bias")
            r = bb.emit(relax.op.nn.relu(b), name_hint="act")
            if dataflow:
                r = bb.emit_output(r)
        bb.emit_func_output(r)
    return bb.get()


@pytest.mark.parametrize("dataflow", [True, False], ids=["dataflow", "plain-bindings"])
def test_relax_module_binding_names(dataflow):
    g = npukit.import_model(_relax_module(dataflow)).graph
    assert g.source_format == "relax"
    assert [(op.name, op.kind, op.source) for op in g.ops] == [
        ("my_conv", "conv2d", "my_conv"),
        ("bias", "add", "bias"),
        ("act", "relu", "act"),
    ]
    assert set(g.elided) == {"const_sum", "bias_shape"}
    assert [g.tensors[t].name for t in g.inputs] == ["image"]


# ---------------------------------------------------------------------------------------------
# hostile names: kept unchanged as data


HOSTILE = [
    'a "double" and \'single\' quote',
    "ends */ a comment /* opens",
    "line one\nline two\r\n\ttab",
    "int",
    "return",
    "ünïcödé/名前/🙂",
    "../../etc/passwd",
    "N" * 400,
    "back\\slash %s %d {}",
    "<script>alert(1)</script>",
    " leading and trailing space ",
]
HOSTILE_INPUT = 'in"put */\nvalue'
HOSTILE_OUTPUT = "out int;"


@pytest.fixture(scope="module")
def hostile_model(tmp_path_factory):
    from onnx import helper as h

    nodes, prev = [], HOSTILE_INPUT
    for i, name in enumerate(HOSTILE):
        out = HOSTILE_OUTPUT if i == len(HOSTILE) - 1 else f"t{i}"
        op = "Relu" if i % 2 == 0 else "Sigmoid"
        nodes.append(h.make_node(op, [prev], [out], name=name))
        prev = out
    m = onnx_model(nodes, [tensor_info(HOSTILE_INPUT, [1, 3, 4, 4])], [tensor_info(HOSTILE_OUTPUT, [1, 3, 4, 4])])
    return save_onnx(m, tmp_path_factory.mktemp("hostile") / "hostile.onnx")


def test_hostile_names_kept_as_data(hostile_model, graph_of):
    g = graph_of(hostile_model)
    assert [op.name for op in g.ops] == HOSTILE
    assert [op.source for op in g.ops] == HOSTILE
    assert [g.tensors[t].name for t in g.inputs] == [HOSTILE_INPUT]
    assert [g.tensors[t].name for t in g.outputs] == [HOSTILE_OUTPUT]
    for name in HOSTILE:
        assert g.resolve(name) == (HOSTILE.index(name),)


def test_hostile_names_survive_a_study(hostile_model, study_of):
    s = study_of(hostile_model, "arm-dsp-dla")
    assert list(s.placement["name"]) == HOSTILE
    s.pin(HOSTILE[2], "arm")
    assert dict(s.config.pins) == {HOSTILE[2]: "arm"}
    assert s.plan.processor[2] == "arm"
    assert npukit.Config.from_toml(s.config.to_toml()) == s.config
    assert npukit.Config.from_json(s.config.to_json()) == s.config
    # explain() is text for a terminal: a name's control characters are shown escaped, one line per item
    text = s.explain(HOSTILE[2])
    assert text.splitlines()[0].startswith(HOSTILE[2].encode("unicode_escape").decode("ascii") + "  (op_id 2,")


def test_hostile_names_survive_inspect_json(hostile_model):
    r = run_cli("inspect", hostile_model, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [o["name"] for o in doc["ops"]] == HOSTILE
    assert [o["source"] for o in doc["ops"]] == HOSTILE
    assert [i["name"] for i in doc["inputs"]] == [HOSTILE_INPUT]
    assert [o["name"] for o in doc["outputs"]] == [HOSTILE_OUTPUT]
    # the text table keeps one line per op: control characters are shown escaped, never raw
    r = run_cli("inspect", hostile_model)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("op_id"))
    rows = lines[header + 1 : header + 1 + len(HOSTILE)]
    assert [ln.split()[0] for ln in rows] == [str(i) for i in range(len(HOSTILE))]
    assert "line one\\nline two" in r.stdout
    assert lines[header + 1 + len(HOSTILE)].startswith("total: 11 ops")


def test_a_node_named_like_an_op_id_past_the_last_op_is_that_node(tmp_path):
    """``#12`` is how a config names op 12 unless the model has a node of that name
    (test_op_ids_and_names_that_look_like_op_ids); a node named ``#157`` in a model of four ops is that
    node, not an unknown name whose closest valid name is itself, and so is ``#1``."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="#157"),
             h.make_node("Sigmoid", ["r"], ["y"], name="#1")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 2, 4, 4])], [tensor_info("y", [1, 3, 2, 2])],
                   [initializer("w", (3, 2, 3, 3)), initializer("b", (3,), 1)])  # fmt: skip
    path = save_onnx(m, tmp_path / "hash_names.onnx")
    s = npukit.Study(path, "arm-dsp-dla")
    assert [(op.kind, op.source) for op in s.graph.ops] == [("conv2d", "conv"), ("add", "conv"), ("relu", "#157"),
                                                             ("sigmoid", "#1")]  # fmt: skip
    assert s.graph.resolve("#157") == (2,) and s.graph.resolve("#1") == (3,) and s.graph.resolve(1) == (1,)
    assert s.explain("#157").startswith("#157  (op_id 2, relax.nn.relu, from onnx node '#157' Relu)")
    s.pin("#157", "arm")
    assert dict(s.config.pins) == {"#157": "arm"} and s.plan.processor[2] == "arm"
    s.pin(1, "arm")  # the conv's bias add: "#1" is a node's name, so the config stores the op's
    assert dict(s.config.pins) == {"#157": "arm", "conv/add": "arm"}


def _fc_relu(tmp_path, names) -> Path:
    """x -> FULLY_CONNECTED -> RELU with the activation tensors named ``names`` (None: no name field),
    referred to by index (two of them may read alike)."""
    from tflite_builder import Graph, Op, T, build

    x, y, z = names
    w = T("W", (4, 4), data=np.arange(16, dtype=np.float32).reshape(4, 4) / 8 - 1)
    b = T("b", (4,), data=np.zeros(4, np.float32))
    g = Graph(tensors=[T(x, (1, 4)), w, T(y, (1, 4)), T(z, (1, 4)), b],
              ops=[Op("FULLY_CONNECTED", [0, 1, 4], [2], "FullyConnectedOptions"), Op("RELU", [2], [3])],
              inputs=[0], outputs=[3])  # fmt: skip
    path = tmp_path / f"fc_relu_{'_'.join(str(n) for n in names)}.tflite"
    path.write_bytes(build(g))
    return path


@pytest.mark.parametrize(("names", "ops", "output"), [
    (("x", "t", "t"), [("t", "matmul"), ("t/add", "add"), ("t~2", "relu")], "t~2"),  # the second 't' is 't~2'
    ((None, None, None), [("tensor2", "matmul"), ("tensor2/add", "add"), ("tensor3", "relu")], "tensor3"),
    (("", "", ""), [("tensor2", "matmul"), ("tensor2/add", "add"), ("tensor3", "relu")], "tensor3"),
])  # fmt: skip
def test_tflite_tensors_alike_or_unnamed_keep_every_op(tmp_path, names, ops, output):
    """TVM's TFLite frontend finds values by tensor name: of two alike the first won (the RELU
    vanished, silently), and a file without names was called corrupt.  Each tensor now has a name of
    its own and every op is imported and runs."""
    path = _fc_relu(tmp_path, names)
    imp = npukit.import_model(path)
    g = imp.graph
    assert [(op.name, op.kind) for op in g.ops] == ops
    assert dict(g.elided) == {}
    assert g.output_names == (output,)
    import tvm
    from tvm import relax

    x = np.array([[-1.0, 2.0, -3.0, 4.0]], np.float32)
    target = tvm.target.Target({"kind": "llvm"})
    ex = tvm.compile(imp.mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x))
    while not hasattr(out, "numpy"):
        out = out[0]
    w = np.arange(16, dtype=np.float32).reshape(4, 4) / 8 - 1
    np.testing.assert_allclose(out.numpy(), np.maximum(x @ w.T, 0), rtol=1e-6)  # FULLY_CONNECTED: W is [out, in]
    s = npukit.Study(path, "arm-dsp-dla")
    assert list(s.placement["name"]) == [n for n, _ in ops]


def test_tflite_weights_and_inputs_go_by_their_tensors_names(tmp_path):
    """explain() called a TFLite FC's weight and bias 'c0' and 'c1' (ids, one of which was also a real
    node's name) and the model input 'in0' in the bytes line.  Constants keep their tensors' names,
    also one the importer transposed (the FC weight), and the bytes terms name tensors as the model does."""
    path = _fc_relu(tmp_path, ("x", "y", "z"))
    s = npukit.Study(path, "arm-dsp-dla").pin("y", "arm")
    g = s.graph
    assert sorted(g.tensors[t].name for t in g.consts) == ["W", "b"]
    text = s.explain("y")
    assert "inputs: x [1, 4] float32, W [4, 4] float32" in text
    assert "bytes: in x 16 B + weights 64 B" in text
    assert "inputs: y [t0] [1, 4] float32, b [4] float32" in s.explain("y/add")


def test_a_relax_module_s_outputs_keep_their_var_names():
    """The error figures, the generated header and the build name a Relax main's outputs as its
    result vars are named (they were the tagged module's internal 't1')."""
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((1, 8), "float32")):
            with R.dataflow():
                h = R.nn.relu(x)
                probs = R.nn.softmax(h, axis=-1)
                half = R.multiply(h, R.const(0.5, "float32"))
                R.output(probs, half)
            return (probs, half)

    st = npukit.Study(Mod, "arm-dsp-dla")
    assert st.graph.output_names == ("probs", "half")
    assert [o["name"] for o in st.error_dict()["outputs"]] == ["probs", "half"]
    assert "/* probs: [1, 8] float32 */" in st.code["include/npukit_model.h"]


def test_a_pt2_program_s_weights_keep_their_module_paths(tmp_path):
    """explain() named a .pt2's weights c0, c2 ...; the program maps them to stem.weight, fc.bias."""
    torch = pytest.importorskip("torch")

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(torch.relu(self.stem(x)).mean((2, 3)))

    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(M().eval(), (torch.zeros(1, 3, 8, 8),)), path)
    g = npukit.import_model(path).graph
    # the shape the op reads, and the shape the model holds (a Linear's weight is read transposed)
    assert sorted((t.name, t.shape, t.model_shape) for t in g.tensors.values() if t.kind == "const") == [
        ("fc.bias", (4,), None), ("fc.weight", (8, 4), (4, 8)), ("stem.bias", (1, 8, 1, 1), (8,)),
        ("stem.weight", (8, 3, 3, 3), None)]  # fmt: skip
    study = npukit.Study(path, "arm-dsp-dla")
    text = study.explain("conv2d")  # (the FX name: an alias of the node 'stem')
    assert "inputs: x [1, 3, 8, 8] float32, stem.weight [8, 3, 3, 3] float32\n" in text
    assert "  inputs: mean [1, 8] float32, fc.weight [8, 4] float32 (the model holds fc.weight as [4, 8])\n" in (
        study.explain("fc"))


def _mha_state(torch, model, *args):
    """Every weight of ``model`` exported: the const tensors by name -> (shape the op reads, shape held)."""
    ep = torch.export.export(model.eval(), args)
    g = npukit.import_model(ep).graph
    got: dict = {}
    for t in g.tensors.values():
        if t.kind == "const" and t.name:
            got.setdefault(t.name, []).append((t.shape, t.model_shape))
    return {k: sorted(v, key=str) for k, v in got.items()}, {k: tuple(v.shape) for k, v in ep.state_dict.items()}


def test_a_pt2_multihead_attention_s_weights_keep_their_names_and_size():
    """A batch-first MultiheadAttention's in_proj_weight was a [batch * seq, 8, 24] constant (torch's decomposition
    of a linear over a non-contiguous input expands the weight per row); a cross-attention's parts of
    in_proj_weight (split into q and kv) had no name at all."""
    torch = pytest.importorskip("torch")

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)

        def forward(self, x):
            return self.layer(x)

    got, held = _mha_state(torch, Enc(), torch.randn(2, 5, 8))
    assert set(got) == set(held)  # every weight, by its state_dict name
    assert got["layer.self_attn.in_proj_weight"] == [((8, 24), (24, 8))]  # read transposed, one copy
    assert got["layer.self_attn.out_proj.weight"] == [((8, 8), None)]  # (square: transposed, the same shape)
    assert got["layer.self_attn.out_proj.bias"] == [((8,), None)]

    class Cross(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x, memory):
            return self.attn(x, memory, memory)[0]

    got, held = _mha_state(torch, Cross(), torch.randn(1, 5, 8), torch.randn(1, 3, 8))
    assert set(got) == set(held) == {"attn.in_proj_weight", "attn.in_proj_bias", "attn.out_proj.weight",
                                     "attn.out_proj.bias"}  # fmt: skip
    # its q and kv rows, each read transposed (a split's parts fold, beyond TVM's FoldConstant: no permute_dims op
    # reads them, as none reads the ONNX file's transposed weights)
    assert got["attn.in_proj_weight"] == [((8, 16), (24, 8)), ((8, 8), (24, 8))]
    assert got["attn.in_proj_bias"] == [((16,), (24,)), ((8,), (24,))]


def _named_net(torch):
    """stem (a Sequential), a block called twice (a conv and two functions of its own), a ReLU called twice."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x)) + x

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU())
            self.block = Block()
            self.act = torch.nn.ReLU()

        def forward(self, x):
            y = self.act(self.stem(x))
            y = self.block(self.block(y))
            return self.act(y).flatten(1)

    torch.manual_seed(0)
    return torch.export.export(Net().eval(), (torch.randn(1, 3, 4, 4),))


def test_pt2_ops_are_named_by_the_module_paths_of_the_code():
    torch = pytest.importorskip("torch")
    g = npukit.import_model(_named_net(torch)).graph
    assert [(op.name, op.source) for op in g.ops] == [
        ("stem.0", "stem.0"), ("stem.0/add", "stem.0"), ("stem.1", "stem.1"),
        ("act", "act"),  # a module's first call: its path
        ("block.conv", "block.conv"), ("block.conv/add", "block.conv"),
        ("block/relu", "block/relu"), ("block/add", "block/add"),  # ops of block's own forward: <path>/<op>
        ("block.conv~2", "block.conv~2"), ("block.conv~2/add", "block.conv~2"),  # its second call: <path>~2
        ("block~2/relu", "block~2/relu"), ("block~2/add", "block~2/add"),
        ("act~2", "act~2"),
        ("flatten", "flatten"),  # the top-level forward's own op: its FX name
    ]  # fmt: skip
    # a module path that made several ops means them all (its submodules' included); the FX names are aliases
    assert g.resolve("block") == (4, 5, 6, 7) and g.resolve("block~2") == (8, 9, 10, 11)
    assert g.resolve("stem") == (0, 1, 2)
    assert g.resolve("conv2d_1") == g.resolve("block.conv") == (4, 5)
    assert g.resolve("relu_4") == g.resolve("act~2") == (12,)
    assert g.resolve("#3") == g.resolve(3) == g.resolve("act") == (3,)


def test_pt2_pins_and_widths_by_module_path(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "named.pt2"
    torch.export.save(_named_net(torch), path)
    study = npukit.Study(path, "arm-dsp-dla", {"placement": "first-fit"})
    study.pin("block~2", "arm")
    study.pin("conv2d", "arm")  # the FX name of stem.0: stored as the model's name
    assert study.config.pins == (("block~2", "arm"), ("stem.0", "arm"))
    pl = study.placement.set_index("name")
    assert list(pl.loc[["block.conv~2", "block.conv~2/add", "block~2/relu", "block~2/add", "stem.0", "stem.0/add"],
                       "processor"]) == ["arm"] * 6  # fmt: skip
    assert pl.loc["block.conv~2", "reason"].startswith("pinned to arm")
    study.set_bits("fp16", layer="block")
    assert study.config.layer_bits == (("block", "fp16"),)
    bits = study.costs.set_index("name")["bits"]
    assert list(bits[["block.conv", "block.conv/add", "block/relu", "block/add"]]) == ["fp16"] * 4
    assert bits["block.conv~2"] != "fp16"  # (block's second call is block~2)
    with pytest.raises(npukit.ConfigError) as e:
        study.pin("blok", "arm")
    assert str(e.value).startswith("unknown node 'blok'; closest valid names: 'block'")


@pytest.mark.slow
def test_pt2_pin_by_module_path_on_the_command_line(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "named.pt2"
    torch.export.save(_named_net(torch), path)
    r = run_cli("study", path, "--soc", "arm-dsp-dla", "--pin", "block.conv=arm", "--json")
    assert r.returncode == 0, r.stderr
    ops = {o["name"]: o for o in json.loads(r.stdout)["placement"]}
    assert (ops["block.conv"]["processor"], ops["block.conv/add"]["processor"]) == ("arm", "arm")
