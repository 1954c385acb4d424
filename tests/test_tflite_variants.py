"""Issue 14, item 4: TFLite fp16 weights (DEQUANTIZE of float16 constants), sparse weights (DENSIFY),
both together, and custom operators, on small flatbuffers written here (no TensorFlow)."""

from __future__ import annotations

import numpy as np
import pytest
from tflite_builder import fc_model

import npukit


@pytest.mark.parametrize("kind", ["float32", "float16", "sparse", "sparse_float16"])
def test_weight_storage_variants_import_to_the_same_graph(tmp_path, kind):
    data, w, b = fc_model(kind)
    path = tmp_path / f"fc_{kind}.tflite"
    path.write_bytes(data)
    g = npukit.import_model(path).graph
    assert [(op.name, op.kind) for op in g.ops] == [("y", "matmul"), ("y/add", "add")]
    weights = [g.consts[t] for t in g.ops[0].inputs if g.tensors[t].kind == "const"]
    assert len(weights) == 1 and weights[0].dtype == np.float32
    np.testing.assert_array_equal(weights[0], w.T)  # densified / widened exactly
    if kind != "float32":  # the DEQUANTIZE / DENSIFY nodes became the constant weight
        assert set(g.elided) == ({"W", "W16"} if kind == "sparse_float16" else {"W"})
        assert all(v.startswith("folded") for v in g.elided.values())
    s = npukit.Study(path, "arm-dsp-dla")
    assert list(s.placement["name"]) == ["y", "y/add"]


def test_custom_operators_are_listed_by_name_with_their_nodes(tmp_path):
    data, _, _ = fc_model("custom")
    path = tmp_path / "custom.tflite"
    path.write_bytes(data)
    with pytest.raises(npukit.UnsupportedOpError) as ei:
        npukit.import_model(path)
    assert str(ei.value) == (
        f"{path}: 2 op(s) TVM's TFLite frontend cannot import (custom Another.Custom-Op, custom MyPostprocess): "
        "'z' (custom MyPostprocess); 'v' (custom Another.Custom-Op)"
    )


def test_tflite_tensors_named_like_tvm_identifiers(tmp_path):
    from tflite_builder import Graph, Op, T, build

    rng = np.random.default_rng(0)
    ts = [T("main", (1, 4)), T("gv", (3, 4), data=rng.standard_normal((3, 4)).astype(np.float32)),
          T("R", (3,), data=np.zeros(3, np.float32)), T("lv1", (1, 3)), T("metadata", (1, 3))]  # fmt: skip
    ops = [Op("FULLY_CONNECTED", ["main", "gv", "R"], ["lv1"], "FullyConnectedOptions"), Op("RELU", ["lv1"], ["metadata"])]
    path = tmp_path / "hostile.tflite"
    path.write_bytes(build(Graph(ts, ops, ["main"], ["metadata"])))
    g = npukit.import_model(path).graph
    assert [op.name for op in g.ops] == ["lv1", "lv1/add", "metadata"]
    assert [g.tensors[t].name for t in g.inputs] == ["main"]
    s = npukit.Study(path, "arm-dsp-dla")
    assert list(s.placement["name"]) == ["lv1", "lv1/add", "metadata"]
