"""A top-k's values are stored at the top-k's own bit-width, in the simulation as in the generated
code: a top-k at int8 after a softmax at int16 (one processor, per-layer widths) writes its values on
the int8 grid of the values it selects from, and the per-op error has a row for it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import NUMERICS
from onnx import TensorProto, helper

import npukit
from npukit import pipeline
from npukit.quant import act_params


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    nodes = [
        helper.make_node("Softmax", ["x"], ["probs"], name="softmax", axis=-1),
        helper.make_node("TopK", ["probs", "k"], ["top_v", "top_i"], name="topk", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "sm_topk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("top_v", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("top_i", TensorProto.INT64, [1, 4])],
        [helper.make_tensor("k", TensorProto.INT64, [1], [4])])  # fmt: skip
    path = tmp_path_factory.mktemp("topk") / "sm_topk.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    s = npukit.Study(path, NUMERICS)
    s.set_bits("int16", layer="softmax")
    s.set_bits("int8", layer="topk")
    return s


def test_topk_values_are_simulated_on_the_int8_grid_of_their_input(study):
    g = study.graph
    (sm,) = [op for op in g.ops if op.name == "softmax"]
    (tk,) = [op for op in g.ops if op.name == "topk"]
    lo, hi = pipeline.error_model(study.result.model, study.data).ranges[sm.outputs[0]]
    scale, zero = float(act_params(lo, hi, "int8")[0]), float(act_params(lo, hi, "int8")[1])
    outs = pipeline.simulate(study.result, study.data, range(8))
    for values, _indices in outs:
        steps = np.asarray(values, np.float64) / scale + zero
        np.testing.assert_allclose(steps, np.round(steps), rtol=0, atol=1e-3)  # on the grid: whole steps
    assert tk.op_id in set(study.error["op_id"])
    row = study.error.set_index("op_id").loc[tk.op_id]
    assert row["bits"] == "int8"
