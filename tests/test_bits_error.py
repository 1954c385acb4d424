"""Issue 7: bit-widths per processor and per layer, and the numeric error measured by running the model."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import NUMERICS, SAMPLES

import npukit
from npukit import quant


@pytest.fixture(scope="module")
def digits():
    return npukit.Study(SAMPLES / "digits_cnn.onnx", NUMERICS)


def test_weight_quantization_is_per_channel_symmetric():
    w = np.array([[1.0, -0.6, 0.26], [0.1, 0.05, -0.2]], np.float32)
    q = quant.quantize_weight(w, "int8", axis=0)
    # row 0: scale 1/127; row 1: scale 0.2/127
    expect0 = np.round(w[0] * 127) / 127
    expect1 = np.round(w[1] / (0.2 / 127)) * (0.2 / 127)
    np.testing.assert_allclose(q[0], expect0, rtol=0, atol=1e-7)
    np.testing.assert_allclose(q[1], expect1, rtol=0, atol=1e-7)
    t = quant.quantize_weight(w, "int2", axis=0)  # ternary: {-1, 0, 1} * max|w_c|
    np.testing.assert_allclose(t[0], [1.0, -1.0, 0.0])
    np.testing.assert_allclose(t[1], [0.0, 0.0, -0.2], atol=1e-7)
    assert quant.quantize_weight(w, "fp32", 0) is not None and np.array_equal(quant.quantize_weight(w, "fp32", 0), w)
    np.testing.assert_array_equal(quant.quantize_weight(w, "fp16", 0), w.astype(np.float16).astype(np.float32))


def test_activation_params_are_affine_over_the_calibrated_range():
    s, z, lo, hi, a, b = quant.act_params(-1.0, 3.0, "int4")
    assert (lo, hi, a, b) == (0, 15, 1, 0)
    assert s == pytest.approx(4.0 / 15)
    assert z == round(1.0 / (4.0 / 15))  # zero point maps 0.0 exactly
    assert tuple(quant.act_params(0.5, 2.0, "int8"))[:2] == pytest.approx((2.0 / 255, 0))  # range widened to hold 0
    assert tuple(quant.act_params(0, 1, "fp32")) == (1, 0, 0, 0, 0, 0)
    assert tuple(quant.act_params(0, 1, "fp16")) == (1, 0, 0, 0, 0, 1)


def test_fp32_everywhere_gives_zero_error(digits):
    digits.set_bits("fp32", processor="cpu")
    err = digits.error
    assert len(err) == 13  # every op but the reshape view
    assert all(math.isinf(v) and v > 0 for v in err["snr_db"])
    assert all(v == 0.0 for v in err["max_abs_err"])
    e = digits.error_dict()
    assert e["outputs"][0]["snr_db"] == math.inf and e["outputs"][0]["max_abs"] == 0.0
    assert e["outputs"][0]["top1_agreement"] == 1.0
    assert e["accuracy"] == e["accuracy_fp32"]
    assert e["samples"] == 450 and "digits_cnn.npz" in e["data_source"]


def test_error_grows_as_bits_shrink(digits):
    snr, acc = {}, {}
    for b in ("int16", "int8", "int4", "int2"):
        digits.set_bits(b, processor="cpu")
        e = digits.error_dict()
        snr[b], acc[b] = e["outputs"][0]["snr_db"], e["accuracy"]
    assert snr["int16"] > snr["int8"] > snr["int4"] > snr["int2"]
    assert acc["int16"] >= acc["int8"] >= acc["int4"] >= acc["int2"]
    assert acc["int8"] >= 0.95  # the trained model survives int8
    assert acc["int2"] < 0.5  # and not int2


def test_layer_override_changes_only_that_layer(digits):
    digits.set_bits("int8", processor="cpu")
    base_cost = digits.costs.set_index("op_id")
    base_err = digits.error.set_index("op_id")
    digits.set_bits("int2", layer="/conv2/Conv")  # the model node: conv2d and its bias add
    cost = digits.costs.set_index("op_id")
    err = digits.error.set_index("op_id")
    layer = set(digits.graph.ops_of_source("/conv2/Conv"))
    assert layer == {3, 4}
    changed = {i for i in cost.index if not cost.loc[i].equals(base_cost.loc[i])}
    assert changed == layer  # only that layer's cost rows move
    assert (cost.loc[list(layer), "bits"] == "int2").all()
    assert cost.loc[3, "macs"] == base_cost.loc[3, "macs"] == 73728
    # its weights are 4x smaller at int2: bytes drop
    assert cost.loc[3, "bytes"] < base_cost.loc[3, "bytes"]
    # its error gets much worse, and layers before it are untouched
    assert err.loc[3, "snr_db"] < base_err.loc[3, "snr_db"] - 10
    for i in (0, 1, 2):
        assert err.loc[i, "snr_db"] == base_err.loc[i, "snr_db"]
    digits.set_bits(None, layer="/conv2/Conv")
    assert digits.costs.set_index("op_id").equals(base_cost)


def test_error_identical_across_processes():
    code = (
        "import json, npukit; s = npukit.Study({m!r}, 'arm-dsp-dla'); s.set_bits('fp16', processor='dla');"
        "e = s.error_dict(); e['per_op'] = [list(r) for r in s.error[['op_id', 'snr_db', 'max_abs_err']].itertuples(index=False)];"
        "print(json.dumps(e, sort_keys=True))"
    ).format(m=str(SAMPLES / "digits_cnn.onnx"))
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300).stdout
            for _ in range(2)]  # fmt: skip
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    assert doc["samples"] == 450 and len(doc["per_op"]) == 13


def test_unsupported_bits_are_clear_errors():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    with pytest.raises(npukit.ConfigError, match=r"dla cannot run int4: processors\.dla\.macs_per_cycle lists int8, fp16"):
        s.set_bits("int4", processor="dla")
    # first-fit: the DLA, first in the profile's order, cannot run the layer's width, so it refuses
    # the layer's ops and the next processor that takes them and runs int16 does (the DSP takes no conv)
    ff = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla", placement="first-fit")
    assert ff.plan.processor[:2] == ("dla", "dla")  # conv1 and its bias add
    ff.set_bits("int16", layer="/conv1/Conv")
    assert ff.plan.processor[:2] == ("arm", "arm") and ff.result.bits[:2] == ("int16", "int16")
    assert ff.placement["dla"][0] == ("cannot run the layer's bit-width int16 (processors.dla.macs_per_cycle lists "
                                      "int8, fp16)")  # fmt: skip
    assert ff.plan.processor[2:] == npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla", placement="first-fit").plan.processor[2:]
    with pytest.raises(npukit.ConfigError, match=r"layer '/conv1/Conv' would run on arm, which cannot run its bit-width "
                       r"int2 .*; no processor that runs int2 takes conv2d here: give the layer a width arm runs$"):  # fmt: skip
        s.set_bits("int2", layer="/conv1/Conv")  # no processor that accepts conv1 runs int2
    with pytest.raises(npukit.ConfigError, match="unknown bit-width 'int3'"):
        s.set_bits("int3", processor="dsp")
    with pytest.raises(npukit.ConfigError, match="unknown processor 'npu'"):
        s.set_bits("int8", processor="npu")
    assert s.config.bits == ()  # nothing half-applied


def test_costs_follow_bits():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "riscv-accel")
    s.set_bits("int8", processor="accel")
    c8 = s.costs.set_index("name")
    s.set_bits("int4", processor="accel")
    c4 = s.costs.set_index("name")
    # fc1 (matmul + bias add + relu fused): weights 256x64 = 16,384 B at int8 -> 8,192 B packed int4;
    # input 256 -> 128 B; the composite's output 64 -> 32 B; the bias stays int32 in both
    assert c8.loc["/fc1/Gemm", "bytes"] - c4.loc["/fc1/Gemm", "bytes"] == pytest.approx(16384 / 2 + 256 / 2 + 64 / 2)
    # the MAC array runs int4 at twice the int8 rate (macs_per_cycle 128 vs 64)
    assert c4.loc["/fc1/Gemm", "compute_cycles"] < c8.loc["/fc1/Gemm", "compute_cycles"]
    assert c4.loc["/conv2/Conv", "compute_cycles"] < c8.loc["/conv2/Conv", "compute_cycles"]


def test_boundary_requantize_rows_where_bit_widths_differ():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla", placement="first-fit")  # softmax on the DSP
    b = s.boundaries.set_index("tensor_id")
    # dla (int8) -> dsp (default int16): a requantize; dsp -> arm host (fp32): a dequantize
    assert b.loc["t12", "src"] == "dla" and b.loc["t12", "dst"] == "dsp"
    assert "requantize int8->int16" in b.loc["t12", "conversion"] and b.loc["t12", "quantize_us"] > 0
    assert "dequantize int16->fp32" in b.loc["t13", "conversion"]
    s.set_bits("int8", processor="dsp")
    b = s.boundaries.set_index("tensor_id")
    assert b.loc["t12", "quantize_us"] == 0 and "quantize" not in b.loc["t12", "conversion"]


def test_set_data_validates_and_counts():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", NUMERICS)
    z = np.load(SAMPLES / "digits_cnn.npz")
    with pytest.raises(npukit.DataError, match=r"x: shape \[10, 8, 8\] does not fit input 'input' of shape \[1, 1, 8, 8\]; "
                                               r"expected \[N, 1, 1, 8, 8\] or \[N, 1, 8, 8\]"):
        s.set_data(z["x"][:10, 0])
    with pytest.raises(npukit.DataError, match=r"y: expected 10 class labels \(shape \[10\]\), got shape \[9\]"):
        s.set_data(z["x"][:10], z["y"][:9])
    with pytest.raises(npukit.DataError, match=r"y: labels span 0\.\.12 but output 'probs' has 10 classes"):
        s.set_data(z["x"][:3], np.array([0, 1, 12]))
    s.set_data(z["x"][:40, None], z["y"][:40])  # [N, 1, 1, 8, 8]: one full input per row
    assert s.error_dict()["samples"] == 40
    s.set_data(z["x"][:40], z["y"][:40])  # [N, 1, 8, 8]: rows without the batch dim of 1
    e = s.error_dict()
    assert e["samples"] == 40 and e["data_source"] == "user data"
    assert e["accuracy_fp32"] == pytest.approx(np.mean(np.array([r.argmax() for r in _ort(z["x"][:40])]) == z["y"][:40]))
    # the data prints as a line, not its arrays; set_data(None) goes back to the model's own data
    assert repr(s.data) == (f"<npukit Data: 40 samples of [1, 1, 8, 8] float32, 40 labels, 32 calibration samples; user data; "
                            f"key {s.data.key}>")  # fmt: skip
    with pytest.raises(npukit.ConfigError, match=r"set_data\(None, y\): labels need inputs"):
        s.set_data(None, z["y"][:40])
    s.set_data(None)
    assert s.data.source == "digits_cnn.npz (450 samples, labelled)" and s.error_dict()["samples"] == 450


def test_npz_errors_name_the_file(tmp_path):
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", NUMERICS)
    bad = tmp_path / "bad.npz"
    np.savez(bad, inputs=np.zeros((2, 1, 8, 8), np.float32))
    with pytest.raises(npukit.DataError, match=r"bad\.npz: no array 'x' \(or one per input \['input'\]\); it holds \['inputs'\]"):
        s.set_data(bad)
    with pytest.raises(npukit.DataError, match=r"missing\.npz: no such data file"):
        s.set_data(tmp_path / "missing.npz")
    (tmp_path / "profile.toml").write_text('name = "x"\n')
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(tmp_path / "profile.toml")
    assert str(ei.value) == (f"{tmp_path / 'profile.toml'}: not a readable .npz file: not an .npz (zip) archive of "
                             "arrays; save one with numpy.savez(path, x=...)")  # fmt: skip
    good = tmp_path / "good.npz"
    np.savez(good, x=np.zeros((2, 1, 8, 8), np.float32))
    (tmp_path / "cut.npz").write_bytes(good.read_bytes()[:60])
    with pytest.raises(npukit.DataError, match=r"cut\.npz: not a readable \.npz file: truncated or damaged; "):
        s.set_data(tmp_path / "cut.npz")
    s.set_data(good)  # the study takes good data after the bad
    assert s.data.source == "good.npz (2 samples)"


def test_float_data_feeds_an_int8_model_through_its_input_quantization():
    s = npukit.Study(SAMPLES / "digits_cnn_int8.tflite", "arm-dsp-dla")
    e = s.error_dict()  # sidecar digits_cnn_int8.npz holds float NHWC images
    assert e["samples"] == 450
    assert e["accuracy_fp32"] == pytest.approx(440 / 450)  # what the TFLite interpreter scores (make_tflite.py)


def test_models_without_data_use_seeded_random_inputs():
    s = npukit.Study(SAMPLES / "tiny_detector.onnx", "arm-dsp-dla")
    e = s.error_dict()
    assert e["samples"] == quant.DEFAULT_RANDOM_SAMPLES
    assert "seeded random inputs" in e["data_source"] and "study.set_data()" in e["data_source"]


def test_cli_bits_and_data(tmp_path):
    cmd = [sys.executable, "-m", "npukit", "study", str(SAMPLES / "digits_cnn.onnx"), "--soc", "riscv-accel",
           "--bits", "accel=int4", "--bits-layer", "/conv1/Conv=int8", "--data", str(SAMPLES / "digits_cnn.npz"), "--json"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    bits = {r["name"]: r["bits"] for r in doc["costs"]}
    assert bits["/conv1/Conv"] == "int8" and bits["/conv1/Conv/add"] == "int8" and bits["/conv2/Conv"] == "int4"
    assert doc["config"] == {"bits": {"accel": "int4"}, "layer_bits": {"/conv1/Conv": "int8"}}
    assert 0.9 < doc["error"]["accuracy"] <= 1.0
    bad = subprocess.run(cmd[:7] + ["--bits", "accel=int16"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "npukit: error: accel cannot run int16: processors.accel.macs_per_cycle lists int2, int4, int8"


def _ort(x):
    import onnxruntime as ort

    sess = ort.InferenceSession(str(SAMPLES / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
    return [sess.run(None, {"input": x[i : i + 1]})[0] for i in range(len(x))]


def test_npz_with_one_array_per_input_where_one_input_is_named_x(tmp_path):
    """An .npz holding one array per input is read that way even when an input is named ``x`` (the
    key a single-input .npz uses)."""
    from conftest import onnx_model, save_onnx, tensor_info
    from onnx import helper as h

    m = onnx_model([h.make_node("Add", ["x", "x2"], ["y"], name="add")], [tensor_info("x", [1, 4]), tensor_info("x2", [1, 4])],
                   [tensor_info("y", [1, 4])])  # fmt: skip
    path = save_onnx(m, tmp_path / "two_in.onnx")
    x = np.arange(12, dtype=np.float32).reshape(3, 1, 4)
    np.savez(tmp_path / "d.npz", x=x, x2=-2 * x)
    s = npukit.Study(path, "arm-dsp-dla").set_data(tmp_path / "d.npz")
    assert len(s.data.samples) == 3
    assert [a.tolist() for a in s.data.samples[2]] == [[[8.0, 9.0, 10.0, 11.0]], [[-16.0, -18.0, -20.0, -22.0]]]
    # inputs named x and y: y is an input, not the labels
    m = onnx_model([h.make_node("Add", ["x", "y"], ["z"], name="add")], [tensor_info("x", [1, 4]), tensor_info("y", [1, 4])],
                   [tensor_info("z", [1, 4])])  # fmt: skip
    np.savez(tmp_path / "xy.npz", x=x, y=3 * x)
    s = npukit.Study(save_onnx(m, tmp_path / "xy.onnx"), "arm-dsp-dla").set_data(tmp_path / "xy.npz")
    assert s.data.labels is None and s.data.samples[1][1].tolist() == [[12.0, 15.0, 18.0, 21.0]]


def test_labels_need_class_scores_at_output_0(tmp_path):
    """Labels are scored against output 0: a model whose output 0 is not one row of class scores
    refuses them (they were once accepted and silently never used)."""
    from conftest import onnx_model, save_onnx, tensor_info
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["y"], name="relu")], [tensor_info("x", [1, 3, 2, 2])],
                   [tensor_info("y", [1, 3, 2, 2])])  # fmt: skip
    s = npukit.Study(save_onnx(m, tmp_path / "relu.onnx"), "arm-dsp-dla")
    x = np.ones((4, 1, 3, 2, 2), np.float32)
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(x, np.zeros(4, int))
    assert str(ei.value) == ("y: class labels are scored against output 0, and output 'y' (shape [1, 3, 2, 2]) is "
                             "not one row of class scores; accuracy cannot be measured on it: give no labels")  # fmt: skip
    s.set_data(x)  # without labels it is taken
    assert len(s.data.samples) == 4 and s.data.labels is None


def test_a_layer_width_its_processor_cannot_run_moves_it_under_the_cost_policy():
    """``set_bits(bits, layer=)`` takes the same configs as ``config=`` and sweeps (a new user found a
    sweep's best point refused by the edit and by --bits-layer): under the cost policy a layer the
    DLA cannot run at int16 goes to a processor that can, and the DLA's verdict says why."""
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    assert s.placement.set_index("name").loc["/conv1/Conv", "processor"] == "dla"
    s.set_bits("int16", layer="/conv1/Conv")
    whole = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla", config={"layer_bits": {"/conv1/Conv": "int16"}})
    assert s.config == whole.config and s.plan == whole.plan and s.totals == whole.totals
    row = s.placement.set_index("name").loc["/conv1/Conv"]
    assert row["processor"] == "arm" and s.costs.set_index("name").loc["/conv1/Conv", "bits"] == "int16"
    assert row["dla"] == "cannot run the layer's bit-width int16 (processors.dla.macs_per_cycle lists int8, fp16)"


def test_top1_agreement_of_a_classifier_run_on_a_batch(tmp_path):
    """A [B, C] output (a classifier on a batch of B) gets its top-1 agreement row by row: the share
    of (sample, batch item) whose class the quantized run keeps (it was None for B > 1)."""
    from conftest import onnx_model, save_onnx, tensor_info
    from onnx import helper as h
    from onnx import numpy_helper

    from npukit import pipeline

    rng = np.random.default_rng(4)
    w = numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "w")
    m = onnx_model([h.make_node("MatMul", ["x", "w"], ["s"], name="fc"), h.make_node("Softmax", ["s"], ["p"], name="sm", axis=1)],
                   [tensor_info("x", [3, 8])], [tensor_info("p", [3, 5])], [w])  # fmt: skip
    s = npukit.Study(save_onnx(m, tmp_path / "batch.onnx"), "riscv-accel").set_bits("int2", processor="accel")
    s.set_data(rng.standard_normal((40, 3, 8)).astype(np.float32))
    got = s.error_dict()["outputs"][0]["top1_agreement"]
    q = pipeline.simulate(s.result, s.data, range(40))
    f = pipeline.simulate_float(s.result, s.data, range(40))
    rows = [np.argmax(np.asarray(a[0]), axis=-1) == np.argmax(np.asarray(b[0]), axis=-1) for a, b in zip(q, f)]
    assert got == pytest.approx(float(np.mean(np.concatenate(rows))))
    assert got is not None and 0.0 < got < 1.0  # int2 loses some classes, not all
    # integer [B, C] outputs are not class scores: the detector's NMS indices [16, 3] get none
    det = npukit.Study(SAMPLES / "tiny_detector.onnx", "arm-dsp-dla").error_dict()["outputs"]
    assert [(o["name"], o["top1_agreement"]) for o in det] == [("selected_indices", None), ("topk_scores", 1.0),
                                                                ("topk_boxes", None)]  # fmt: skip


def test_a_layer_width_refusal_names_the_op_that_cannot_run_it():
    """A model node that became several ops (a conv and its bias add) on different processors: the
    refusal names the op whose processor cannot run the width.  Under first-fit an accelerator that
    cannot run a layer's width refuses its ops (the next processor takes them), so what remains to
    refuse is the host that cannot run it."""
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "riscv-accel", placement="first-fit")
    s.set_support("accel", "add", False)  # the bias add to the host; the conv stays on the accelerator
    assert [s.plan.processor[i] for i in s.graph.resolve("/conv1/Conv")] == ["accel", "riscv"]
    with pytest.raises(npukit.ConfigError) as e:
        s.set_bits("int2", layer="/conv1/Conv")
    assert str(e.value) == ("layer '/conv1/Conv' (its op '/conv1/Conv/add', add) would run on riscv, which cannot run "
                            "its bit-width int2 (processors.riscv.macs_per_cycle lists int8, int16, fp32); no processor "
                            "that runs int2 takes add here: give the layer a width riscv runs, or set the widths of its "
                            "ops one by one (layer=<op id>)")  # fmt: skip
    s.set_bits("int2", layer=0)  # the advice works: the conv alone (op id 0)
    assert [s.costs.loc[i, "bits"] for i in s.graph.resolve("/conv1/Conv")] == ["int2", "int8"]

    # on arm-dsp-dla the DLA cannot run int16: the layer's bias add leaves it for the host, as its conv did
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla", placement="first-fit")
    s.set_support("dla", "conv2d", False)
    assert [s.plan.processor[i] for i in s.graph.resolve("/conv1/Conv")] == ["arm", "dla"]
    s.set_bits("int16", layer="/conv1/Conv")
    assert [s.plan.processor[i] for i in s.graph.resolve("/conv1/Conv")] == ["arm", "arm"]
    assert [s.costs.loc[i, "bits"] for i in s.graph.resolve("/conv1/Conv")] == ["int16", "int16"]
