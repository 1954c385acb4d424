"""Each model output keeps the model's own name, in order, whatever tensor it is.

An output can be the same tensor as another output (an Identity of it), a tensor another op also
reads, a model input, or a constant (after folding): the names are the model's, per output, not
the name of some other tensor (``graph.output_names``; ``inspect``, the C header and the numeric
error report read them).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import onnx_model, run_cli, save_onnx, tensor_info
from onnx import helper as h
from onnx import numpy_helper

import npukit


def _const(name: str, value: np.ndarray):
    return h.make_node("Constant", [], [name], name=f"make_{name}", value=numpy_helper.from_array(value))


def _consumed(order):
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Sigmoid", ["y"], ["z"], name="sig")]
    return nodes, order


def _identity_of_output(order):
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Identity", ["y"], ["y2"], name="idn")]
    return nodes, order


def _input(order):
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Identity", ["x"], ["x_copy"], name="idn")]
    return nodes, order


def _constant(order):
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), _const("k", np.full((1, 4), 3.0, np.float32)),
             h.make_node("Exp", ["k"], ["z"], name="exp_of_k")]  # fmt: skip
    return nodes, order


# (case id, model builder, its outputs in order = the names npukit must report, the kind of each output's tensor)
CASES = [
    ("consumed-output", _consumed, ["y", "z"], ["act", "act"]),
    ("consumed-output-last", _consumed, ["z", "y"], ["act", "act"]),
    ("identity-of-output", _identity_of_output, ["y", "y2"], ["act", "act"]),
    ("identity-of-output-first", _identity_of_output, ["y2", "y"], ["act", "act"]),
    ("output-is-input", _input, ["x", "y"], ["input", "act"]),
    ("output-is-identity-of-input", _input, ["y", "x_copy"], ["act", "input"]),
    ("output-is-constant", _constant, ["y", "k", "z"], ["act", "const", "const"]),
]


def _save(tmp_path, case, build, order) -> str:
    nodes, outs = build(order)
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info(o, [1, 4]) for o in outs])
    return save_onnx(m, tmp_path / f"{case}.onnx")


@pytest.mark.parametrize("case,build,names,kinds", CASES, ids=[c[0] for c in CASES])
def test_onnx_output_names_in_order(tmp_path, case, build, names, kinds):
    g = npukit.import_model(_save(tmp_path, case, build, names)).graph
    assert g.output_names == tuple(names)
    assert [g.output_name(k) for k in range(len(g.outputs))] == names
    assert [g.tensors[t].kind for t in g.outputs] == kinds
    # an input and a constant keep their own names; an op's tensor takes the first output's name
    assert [g.tensors[t].name for t in g.inputs] == ["x"]
    for t in g.outputs:
        if g.tensors[t].kind == "act":
            assert g.tensors[t].name == next(names[j] for j, u in enumerate(g.outputs) if u == t)
        if g.tensors[t].kind == "input":
            assert g.tensors[t].name == "x"


def test_two_outputs_of_one_tensor_keep_two_names(tmp_path):
    g = npukit.import_model(_save(tmp_path, "twice", _identity_of_output, ["y", "y2"])).graph
    assert len(g.ops) == 1 and g.outputs[0] == g.outputs[1]  # one tensor, two model outputs
    assert g.output_names == ("y", "y2")
    assert g.tensors[g.outputs[0]].name == "y"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Every kind at once (the tester's pass2.onnx): a transposed matmul, an Identity of the matmul, an
    input and a constant as outputs."""
    nodes = [
        h.make_node("MatMul", ["a", "b"], ["mm"], name="bmm"),
        h.make_node("Transpose", ["mm"], ["t"], name="tr", perm=[0, 2, 1]),
        h.make_node("Identity", ["mm"], ["mm_copy"], name="idn"),
        _const("k", np.full((2, 2), 3.0, np.float32)),
    ]
    m = onnx_model(nodes, [tensor_info("a", [2, 3, 4]), tensor_info("b", [4, 5])],
                   [tensor_info("t", [2, 5, 3]), tensor_info("mm_copy", [2, 3, 5]), tensor_info("b", [4, 5]),
                    tensor_info("k", [2, 2])])  # fmt: skip
    return save_onnx(m, tmp_path_factory.mktemp("mixed") / "mixed.onnx")


MIXED = ["t", "mm_copy", "b", "k"]


def test_mixed_outputs_in_a_study(mixed):
    s = npukit.Study(mixed, "arm-dsp-dla")
    assert s.graph.output_names == tuple(MIXED)
    assert [o["name"] for o in s.error_dict()["outputs"]] == MIXED
    header = s.code["include/npukit_model.h"]  # float *out2;  /* b: [4, 5] float32 */
    assert re.findall(r"\*out(\d+);  /\* (.*?): ", header) == [(str(k), n) for k, n in enumerate(MIXED)]


def test_mixed_outputs_in_inspect(mixed):
    r = run_cli("inspect", mixed, "--json")
    assert r.returncode == 0, r.stderr
    assert [o["name"] for o in json.loads(r.stdout)["outputs"]] == MIXED
    r = run_cli("inspect", mixed)
    assert r.returncode == 0, r.stderr
    assert [ln.split("'")[1] for ln in r.stdout.splitlines() if ln.startswith("  output ")] == MIXED


def test_tflite_output_names_in_order(tmp_path):
    from tflite_builder import Graph, Op, T, build

    rng = np.random.default_rng(0)
    w = T("W", (3, 4), data=rng.standard_normal((3, 4)).astype(np.float32))
    g = Graph(tensors=[T("a", (1, 4)), T("b", (1, 4)), T("sum", (1, 4)), w,
                       T("bias", (3,), data=rng.standard_normal(3).astype(np.float32)), T("fc", (1, 3))],
              ops=[Op("ADD", ["a", "b"], ["sum"], "AddOptions"),
                   Op("FULLY_CONNECTED", ["sum", "W", "bias"], ["fc"], "FullyConnectedOptions")],
              inputs=["a", "b"], outputs=["fc", "sum", "a", "sum", "W"])  # fmt: skip
    path = tmp_path / "outs.tflite"
    path.write_bytes(build(g))
    graph = npukit.import_model(path).graph
    assert graph.output_names == ("fc", "sum", "a", "sum", "W")
    assert [graph.tensors[t].kind for t in graph.outputs] == ["act", "act", "input", "act", "const"]


@pytest.mark.slow
def test_pt2_output_names_are_the_fx_names():
    """A .pt2 output is an FX node (or a user input): it is named after the node (its FX name for an op of
    the top-level forward, as here; the path of the module that made it otherwise), also when the program returns
    one node twice, a clone of another output, an input or a constant."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k", torch.ones(1, 4))

        def forward(self, x):
            y = torch.relu(x)
            return y, y, y.clone(), x, self.k * 2

    ep = torch.export.export(Net().eval(), (torch.randn(1, 4),))
    g = npukit.import_model(ep).graph
    assert g.output_names == ("relu", "relu", "clone", "x", "mul")
    assert [g.tensors[t].kind for t in g.outputs] == ["act", "act", "act", "input", "const"]
