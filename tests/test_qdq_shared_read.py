"""A QDQ op that reads one dequantized tensor twice: ``Add(xd, xd)``, xd = DequantizeLinear(x).

The import gives every reader of a shared dequantize its own copy (so each reader's quantized
pattern can fuse it).  It counted the readers by the Python identity of each binding's var, which
TVM's FFI makes anew on every access, so one op reading the dequantize twice counted as two readers:
each canonical pass added a copy, the original was left unread, the graph kept it as an op and the
tagged module (unused bindings removed) did not, and every partition failed with "ops [0] missing
from the partitioned module".  Now the model imports as dequantize -> add -> quantize, the add
reading its one dequantize twice, and places, partitions (replay = TVM's passes), simulates and
runs as onnxruntime computes it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool, onnx_model, save_onnx, tensor_info

import npukit
from npukit import pipeline
from npukit.config import Config

X = np.array([[-128, -100, -64, -1], [0, 63, 64, 127]], np.int8)
WANT = [-128, -128, -128, -2, 0, 126, 127, 127]  # onnxruntime: 2 * x on the grid, saturated

# (profile, placement policy) -> the processor of dequantize, add, quantize
PLACED = {
    ("arm-dsp-dla", "first-fit"): ["dla", "dla", "dla"],
    ("arm-dsp-dla", "cost"): ["arm", "arm", "arm"],
    ("cortex-m7-cmsis-nn", "first-fit"): ["cmsis_nn", "cmsis_nn", "cmsis_nn"],
    ("cortex-m7-cmsis-nn", "cost"): ["cmsis_nn", "cmsis_nn", "cmsis_nn"],
}


def _qdq_add_self(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    inits = [nh.from_array(np.array(0.1, np.float32), "s"), nh.from_array(np.array(0, np.int8), "z")]
    nodes = [h.make_node("DequantizeLinear", ["x", "s", "z"], ["xd"], name="dq"),
             h.make_node("Add", ["xd", "xd"], ["a"], name="add"),
             h.make_node("QuantizeLinear", ["a", "s", "z"], ["y"], name="q")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [2, 4], T.INT8)], [tensor_info("y", [2, 4], T.INT8)], inits)
    return save_onnx(m, tmp_path / "qdq_add_self.onnx")


def test_the_import_keeps_one_dequantize_the_add_reads_twice(tmp_path):
    model = pipeline.load(_qdq_add_self(tmp_path))
    g = model.graph
    assert [op.kind for op in g.ops] == ["dequantize", "add", "quantize"]
    dq, add, _ = g.ops
    assert add.inputs == (dq.outputs[0], dq.outputs[0])
    main = model.module["main"]
    calls = [b for blk in main.body.blocks for b in blk.bindings if hasattr(b.value, "op")]
    assert len(calls) == 3  # the tagged module holds every op of the graph, no more


@pytest.mark.parametrize("soc,policy", sorted(PLACED))
def test_placement_and_simulation_of_an_add_of_one_dequantized_tensor(tmp_path, soc, policy):
    from npukit.tvm.partition import read_plan

    path = _qdq_add_self(tmp_path)
    s = npukit.Study(path, soc, placement=policy)
    assert list(s.placement["processor"]) == PLACED[(soc, policy)]
    assert len(s.plan.partitions) == 1
    # the replayed Plan is TVM's own passes' (building the module checks it too)
    model = pipeline.load(path)
    part = pipeline.partition(model, s.soc, Config(placement=policy))
    assert read_plan(part.mod, model.graph, s.soc.host) == part.plan == s.plan
    s.set_data(np.stack([X, X[::-1]]))
    sim = pipeline.simulate(s.result, s.data, [0, 1])
    assert np.asarray(sim[0][0]).ravel().tolist() == WANT
    assert np.asarray(sim[1][0]).ravel().tolist() == WANT[4:] + WANT[:4]  # (X's rows swapped)


@pytest.mark.slow
@pytest.mark.parametrize("soc,proc,call", [("arm-dsp-dla", "dla", "nvdla_add(&t_t0_k, &t_t0_k,"),
                                           ("cortex-m7-cmsis-nn", "cmsis_nn", "m7_nn_add(&t_t0_k, &t_t0_k,")])  # fmt: skip
def test_the_exported_program_of_an_add_of_one_dequantized_tensor_matches_onnxruntime(tmp_path, soc, proc, call):
    import onnxruntime as ort

    from npukit.codegen.build import make, run_program

    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    path = _qdq_add_self(tmp_path)
    want = ort.InferenceSession(str(path)).run(None, {"x": X})[0]
    assert want.ravel().tolist() == WANT
    s = npukit.Study(path, soc, placement="first-fit")
    assert s.plan.processor[s.graph.resolve("add")[0]] == proc
    s.set_data(np.stack([X, X[::-1]]))
    d = tmp_path / "e"
    s.export(d)
    calls = "\n".join(p.read_text() for p in (d / "src").glob("partitions_*.c"))
    assert call in calls  # the one dequantized tensor is both operands
    make(d)
    (d / ".w").mkdir(exist_ok=True)
    got = run_program(d, ["./model"], [X], [(2, 4)], d / ".w")[0]
    assert got.dtype == np.int8 and np.array_equal(got, want), got
    r = s.build(tmp_path / "b", samples=2)
    assert r["outputs_agree"] is True and r["mismatches"] == []
