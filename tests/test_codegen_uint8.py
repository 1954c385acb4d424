"""uint8 activations (ONNX QDQ with zero point 128, what onnxruntime's quantize_static makes with
QUInt8): the export used to kill the process (TVM's metadata printer, called for the host group's
cache key, crashed on the uint8 zero point), and under first-fit the DLA's conv refused its uint8
input at run time (status 2).  Now both placements export, build with the host compiler, run, and
agree with onnxruntime and bit for bit with npukit's simulation."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool, onnx_model, run_cli, save_onnx, tensor_info

import npukit
from npukit import pipeline
from npukit.codegen.build import make, run_program


def _qdq_conv(tmp_path, zero_dtype, zero_value=None):
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    zero = np.array((128 if zero_dtype == np.uint8 else 0) if zero_value is None else zero_value, zero_dtype)
    inits = [nh.from_array(np.array(0.01, np.float32), "s"), nh.from_array(zero, "z"),
             nh.from_array(np.array(0, np.int8), "zw"), nh.from_array(np.array(0.005, np.float32), "sw"),
             nh.from_array(rng.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8), "wq")]  # fmt: skip
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
             h.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_in"),
             h.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["w"], name="dq_w"),
             h.make_node("Conv", ["xd", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
             h.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="q_out"),
             h.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"], name="dq_out")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 3, 6, 6])], [tensor_info("y", [1, 4, 4, 4])], inits)
    return save_onnx(m, tmp_path / f"qdq_conv_{np.dtype(zero_dtype).name}_{int(zero)}.onnx")


@pytest.mark.slow
@pytest.mark.parametrize("placement", ["cost", "first-fit"])
def test_a_uint8_qdq_model_exports_builds_and_matches(tmp_path, placement):
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    import onnxruntime as ort

    path = _qdq_conv(tmp_path, np.uint8)
    # in a process of its own first: the crash this guards against killed the process
    r = run_cli("study", path, "--soc", "arm-dsp-dla", "--placement", placement, "--export", tmp_path / "cli", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    s = npukit.Study(path, "arm-dsp-dla", placement=placement)
    conv = s.graph.resolve("conv")[0]
    assert s.plan.processor[conv] == ("dla" if placement == "first-fit" else "arm")
    x = np.random.default_rng(1).random((4, 1, 3, 6, 6), np.float32) * 2 - 0.5  # beyond the uint8 range both ways
    s.set_data({"x": x[:, 0]})
    d = tmp_path / "e"
    s.export(d)
    if placement == "first-fit":  # the DLA's conv reads and writes uint8 tensors
        calls = (d / "src" / "partitions_nvdla.c").read_text()
        assert "NVDLA_U8" in calls and "nvdla_conv2d(" in calls
    make(d)
    sim = pipeline.simulate(s.result, s.data, range(len(x)))
    # onnxruntime's graph optimizations fuse the QDQ conv into a uint8 QLinearConv that, in 1.32,
    # differs by up to 0.48 from the model's own arithmetic (which numpy and an unoptimized session
    # agree on): the reference is the model as written
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    (d / ".w").mkdir()
    for k in range(len(x)):
        got = run_program(d, ["./model"], [x[k]], [(1, 3, 6, 6)], d / ".w")[0]
        want = ort.InferenceSession(str(path), plain).run(None, {"x": x[k]})[0]
        assert got.shape == want.shape == (1, 4, 4, 4)
        assert np.array_equal(got.ravel(), np.asarray(sim[k][0]).ravel())
        # the host runs TVM's float QDQ as onnxruntime does; the DLA computes in integers (its
        # requantization rounds once, not twice): within two steps of the output scale
        assert np.abs(got - want).max() <= (1e-6 if placement == "cost" else 0.02 + 1e-6), np.abs(got - want).max()
    r = s.build(tmp_path / "b", samples=len(x))
    assert r["outputs_agree"] is True and r["mismatches"] == []


def test_host_groups_whose_constants_differ_only_in_metadata_lower_apart(tmp_path, monkeypatch):
    """The host code cache is keyed by each group's text and every byte of its constants: TVM prints
    the uint8 zero point as a metadata reference only, so two models whose zero points differ (128,
    100) must still get different keys, and the same model the same keys again."""
    from npukit.tvm import hostc

    keys: list[str] = []
    real = hostc._cache_key
    monkeypatch.setattr(hostc, "_cache_key", lambda *a, **k: keys.append(real(*a, **k)) or keys[-1])
    runs = []
    for zero in (128, 128, 100):
        with pipeline.from_scratch():  # (the second model would be the first's cached code)
            s = npukit.Study(_qdq_conv(tmp_path, np.uint8, zero), "arm-dsp-dla", placement="cost")
            keys.clear()
            _ = s.code
        runs.append(tuple(keys))
    assert runs[0] and runs[0] == runs[1] and set(runs[0]).isdisjoint(runs[2])
