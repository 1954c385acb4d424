"""An edit of one op is stored under a spelling that means that op alone: where a model node is named
"#<id>", the op that keeps its node's name (a conv with a bias add) was stored under that name, and the
edit silently grew to every op of the node."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import npukit


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """conv 'c' (conv2d + its bias add), an Add node named 'c/add', a Relu named '#0'."""
    rng = np.random.default_rng(0)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="c", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x2"], ["y0"], name="c/add"), helper.make_node("Relu", ["y0"], ["y"], name="#0")]  # fmt: skip
    g = helper.make_graph(nodes, "sub", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                          [w("w", 8, 8, 3, 3), w("b", 8), w("x2", 1, 8, 8, 8)])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path_factory.mktemp("sub") / "sub.onnx"
    onnx.save(m, path)
    return path


def test_one_op_of_a_node_is_stored_as_that_op_when_hash_id_is_a_node_name(model):
    s = npukit.Study(model, "arm-dsp-dla")
    assert list(s.placement.name) == ["c", "c/add~2", "c/add", "#0"]
    s.pin(0, "arm")  # the conv alone, not its bias add
    assert dict(s.config.pins) == {"0": "arm"}
    assert sorted(npukit.pipeline.pins_of(s.graph, s.config)) == [0]
    s.set_bits("fp16", layer="c").set_bits("int8", layer=0)  # the node, then its conv alone
    assert dict(s.config.layer_bits) == {"0": "int8", "c": "fp16"}
    t = npukit.Study(model, "arm-dsp-dla", s.config.to_toml())  # a saved config means the same ops
    assert t.config == s.config and sorted(npukit.pipeline.pins_of(t.graph, t.config)) == [0]
    assert npukit.pipeline.layer_bits_of(t.graph, t.config) == {0: "int8", 1: "fp16"}
    s.unpin(0)
    assert s.config.pins == ()
