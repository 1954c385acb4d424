"""Issue 14, item 1: names that collide with TVM's own identifiers never break an import or a Study.

A property-based test (hypothesis, derandomized so CI runs the same examples every time) builds small
ONNX graphs whose node, tensor, weight, input and output names are drawn from words TVM, C and Python
use themselves (``main``, ``gv``, ``lv1``, ``R``, ``metadata``, ``__builtins__`` ...), names that differ
only by case or by characters a sanitiser drops, and arbitrary text.  Each one must import, make a
Study on arm-dsp-dla and a placement whose names are the model's own.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import initializer, onnx_model, save_onnx, tensor_info

import npukit

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

WORDS = [
    "main", "main1", "gv", "gv1", "lv", "lv0", "lv1", "lv2", "R", "T", "I", "r", "t", "metadata", "relax", "tvm",
    "tir", "ir", "ffi", "global_symbol", "int", "return", "void", "NULL", "class", "def", "None", "True", "lambda",
    "__builtins__", "__init__", "__main__", "_", "self", "a.b", "a_b", "A_B", "a-b", "a b", "a/b", "0", "1abc",
    "x", "X", "conv2d", "add", "relu", "fused_relax_add", "dla", "arm", "#3", "3", "n_main", "main_2",
]  # fmt: skip
NAME = st.one_of(st.sampled_from(WORDS), st.text(min_size=1, max_size=10))
OPS = ("Relu", "Sigmoid", "Add", "Mul", "Conv", "Tanh")
_counter = itertools.count()


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 6))
    c, hw = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    # tensor names (the input, every node's output, every weight) are unique in ONNX; node names need not be
    tnames = draw(st.lists(NAME, min_size=2 * n + 1, max_size=2 * n + 1, unique=True))
    node_names = draw(st.lists(st.one_of(st.just(""), NAME), min_size=n, max_size=n))
    ops = draw(st.lists(st.sampled_from(OPS), min_size=n, max_size=n))
    picks = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n))
    return c, hw, tnames, node_names, ops, picks


def _build(c, hw, tnames, node_names, ops, picks):
    from onnx import helper as h

    shape = [1, c, hw, hw]
    avail = [tnames[0]]
    nodes, inits = [], []
    weights = iter(tnames[len(ops) + 1 :])
    for k, (op, name, pick) in enumerate(zip(ops, node_names, picks, strict=True)):
        x, out = avail[-1], tnames[k + 1]
        if op in ("Add", "Mul"):
            nodes.append(h.make_node(op, [x, avail[pick % len(avail)]], [out], name=name))
        elif op == "Conv":
            w = next(weights)
            inits.append(initializer(w, [c, c, 1, 1], seed=k))
            nodes.append(h.make_node("Conv", [x, w], [out], name=name, kernel_shape=[1, 1]))
        else:
            nodes.append(h.make_node(op, [x], [out], name=name))
        avail.append(out)
    m = onnx_model(nodes, [tensor_info(tnames[0], shape)], [tensor_info(avail[-1], shape)], inits)
    return m, [n.name or n.output[0] for n in nodes]


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_hostile_names_import_study_and_placement(tmp_path_factory, g):
    m, display = _build(*g)
    path = save_onnx(m, tmp_path_factory.mktemp("hostile") / f"h{next(_counter)}.onnx")
    imp = npukit.import_model(path)
    graph = imp.graph
    # one op per node here, in node order: each node's name, a later node of a name already seen made
    # unique ("<name>~2"), so every name means one node
    for k, (op, d) in enumerate(zip(graph.ops, display, strict=True)):
        if d in display[:k]:
            assert op.source.startswith(d + "~") and op.source[len(d) + 1 :].isdigit(), (op.source, display)
        else:
            assert op.source == d
        assert op.name == op.source
    assert len({op.source for op in graph.ops}) == len(graph.ops)
    assert [graph.tensors[t].name for t in graph.inputs] == [m.graph.input[0].name]
    assert [graph.tensors[t].name for t in graph.outputs] == [m.graph.output[0].name]
    assert [gv.name_hint for gv in imp.mod.get_global_vars()] == ["main"]
    study = npukit.Study(path, "arm-dsp-dla")
    pl = study.placement
    assert list(pl["name"]) == [op.name for op in graph.ops]
    assert set(pl["processor"]) <= {"arm", "dsp", "dla"}
    assert np.isfinite(study.totals["latency_us"])


def test_torch_program_with_tvm_like_names():
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lv1 = torch.nn.Linear(4, 4)
            self.gv = torch.nn.ReLU()

        def forward(self, main):
            return self.gv(self.lv1(main))

    ep = torch.export.export(Net(), (torch.randn(1, 4),))
    imp = npukit.import_model(ep)
    assert [gv.name_hint for gv in imp.mod.get_global_vars()] == ["main"]
    assert [imp.graph.tensors[t].name for t in imp.graph.inputs] == ["main"]
    assert {op.source for op in imp.graph.ops} == {"lv1", "gv"}  # (the modules' paths: TVM's own words)
    assert [op.name for op in imp.graph.ops] == ["lv1", "lv1/add", "gv"]


def test_relax_module_with_duplicate_and_reserved_binding_names():
    from npukit.tvm import load

    load()
    from tvm import relax

    x = relax.Var("main", relax.TensorType((1, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.relu(x), name_hint="lv")
            b = bb.emit(relax.op.sigmoid(a), name_hint="lv")  # the same name twice: still two nodes
            out = bb.emit_output(relax.op.add(a, b))
        bb.emit_func_output(out)
    g = npukit.import_model(bb.get()).graph
    assert [op.kind for op in g.ops] == ["relu", "sigmoid", "add"]
    assert len({op.name for op in g.ops}) == 3
