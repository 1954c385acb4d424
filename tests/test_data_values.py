"""set_data refuses values the model's input cannot hold, in the model's words: float data past the
range of a float input's dtype (it became inf, and every figure was measured against inf), integer
data past an integer input's dtype (it wrapped round in silence), and samples of different shapes
(numpy's ValueError came out as it was).  The study keeps its data and takes good data afterwards."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import NUMERICS, SAMPLES, onnx_model, save_onnx, tensor_info
from onnx import TensorProto, numpy_helper
from onnx import helper as h

import npukit


@pytest.fixture(scope="module")
def half_model(tmp_path_factory):
    """out = relu(x @ W), a float16 model: x [1, 16] float16."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 10)).astype(np.float16), "W")
    m = onnx_model([h.make_node("MatMul", ["x", "W"], ["m"], name="mm"), h.make_node("Relu", ["m"], ["out"], name="relu")],
                   [tensor_info("x", [1, 16], TensorProto.FLOAT16)], [tensor_info("out", [1, 10], TensorProto.FLOAT16)],
                   [w])  # fmt: skip
    return save_onnx(m, tmp_path_factory.mktemp("half") / "half.onnx")


def test_float_data_past_a_float32_input_is_refused_not_measured_as_inf():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", NUMERICS)
    x = np.load(SAMPLES / "digits_cnn.npz")["x"][:8].astype(np.float64)
    key = s.data.key
    big = x.copy()
    big[0, 0, 0, 0] = 1e300  # finite in float64, inf in the model's float32
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(big)
    assert str(ei.value) == ("x: values up to 1e+300 overflow input 'input', which is float32 (largest 3.40282e+38); "
                             "the error figures need finite inputs")  # fmt: skip
    assert s.data.key == key  # the study keeps its data
    s.set_data(x)  # and takes good data afterwards
    assert s.error_dict()["samples"] == 8


def test_float_data_past_a_float16_input_is_refused(half_model):
    s = npukit.Study(half_model, NUMERICS)
    x = np.random.default_rng(1).standard_normal((6, 16)).astype(np.float32)
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(x * 1e5)
    assert str(ei.value).startswith("x: values up to ")
    assert str(ei.value).endswith(
        "overflow input 'x', which is float16 (largest 65504); the error figures need finite inputs"
    )
    s.set_data(x)
    e = s.error_dict()
    assert e["samples"] == 6 and np.isfinite(e["outputs"][0]["max_abs"])


def test_a_calibration_array_past_the_input_range_is_refused_naming_the_file(tmp_path):
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", NUMERICS)
    x = np.load(SAMPLES / "digits_cnn.npz")["x"][:8]
    p = tmp_path / "d.npz"
    np.savez(p, x=x, calib=x.astype(np.float64) * 1e300)
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(p)
    assert str(ei.value).startswith(f"{p}: calib: values up to ")
    assert "overflow input 'input', which is float32" in str(ei.value)


def test_integer_data_past_an_integer_input_is_refused_not_wrapped():
    s = npukit.Study(SAMPLES / "digits_cnn_int8.tflite", "arm-dsp-dla")
    key = s.data.key
    x = np.full((3, 8, 8, 1), 100, np.int64)
    x[1, 0, 0, 0] = 300  # int8 wrapped it to 44
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(x)
    assert (
        str(ei.value)
        == "x: values 100..300 out of range for input 'serving_default_input:0', which is int8 (-128..127)"
    )
    with pytest.raises(npukit.DataError, match=r"x: values 200\.\.200 out of range for .* int8 \(-128\.\.127\)"):
        s.set_data(np.full((3, 8, 8, 1), 200, np.uint8))
    assert s.data.key == key
    s.set_data(x.clip(-128, 127).astype(np.int8))
    assert s.error_dict()["samples"] == 3


def test_samples_of_different_shapes_are_refused_in_npukit_words():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", NUMERICS)
    x = np.load(SAMPLES / "digits_cnn.npz")["x"]
    with pytest.raises(npukit.DataError) as ei:
        s.set_data([x[0], x[1][:, :, :4]])
    assert str(ei.value) == ("x: its samples are not all of one shape; input 'input' takes arrays of shape [1, 1, 8, 8]: "
                             "give one array [N, 1, 1, 8, 8]")  # fmt: skip
    s.set_data([x[0], x[1]])
    assert s.error_dict()["samples"] == 2


def test_labels_changed_in_place_after_set_data_do_not_change_the_figures():
    """The study's data is a value keyed by its content: the labels were the caller's own array, so
    shuffling it afterwards changed the accuracy of the next width measured but not of those cached."""
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", NUMERICS)
    z = np.load(SAMPLES / "digits_cnn.npz")
    x, y = z["x"][:40], z["y"][:40].copy()
    s.set_data(x, y)
    s.set_bits("int8")
    first = s.error_dict()
    y[:] = (y + 1) % 10  # the caller reuses its array
    s.set_bits("int4")
    assert s.error_dict()["accuracy_fp32"] == first["accuracy_fp32"]
    assert np.array_equal(s.data.labels, z["y"][:40])


def test_a_study_that_measures_nothing_does_not_fail_on_a_sidecar_unlike_the_model(tmp_path):
    """``npukit study MODEL`` printed every table, then failed on the model's ``<stem>.npz`` (read
    only to say whether the scales were calibrated on random inputs) and exited 2, where --json
    exited 0; --error still refuses the sidecar, in one line naming it."""
    from conftest import assert_cli_error, run_cli

    model = tmp_path / "digits.onnx"
    model.write_bytes((SAMPLES / "digits_cnn.onnx").read_bytes())
    np.savez(tmp_path / "digits.npz", x=np.zeros((3, 5), np.float32))
    r = run_cli("study", model, "--soc", "riscv-accel")
    assert r.returncode == 0, r.stderr
    assert "totals: latency" in r.stdout and r.stderr == ""
    assert "seeded random" not in r.stdout  # (the model has data of its own, if not data that fits)
    msg = assert_cli_error(run_cli("study", model, "--soc", "riscv-accel", "--error"))
    assert msg.startswith(f"{tmp_path / 'digits.npz'}: x: shape [3, 5] does not fit input 'input'")
    (tmp_path / "digits.npz").unlink()  # no sidecar: the note says the scales came from random inputs
    r = run_cli("study", model, "--soc", "riscv-accel")
    assert r.returncode == 0 and "note: integer scales calibrated on seeded random inputs" in r.stdout


def test_an_object_numpy_cannot_read_is_refused_as_data_not_raised_as_it_is():
    """A torch tensor that requires grad (or of a dtype numpy lacks) raised torch's RuntimeError /
    TypeError out of set_data."""
    torch = pytest.importorskip("torch")
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", NUMERICS)
    z = np.load(SAMPLES / "digits_cnn.npz")
    key = s.data.key
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(torch.tensor(z["x"][:4], requires_grad=True))
    assert str(ei.value) == ("x: cannot be read as an array of numbers for input 'input': RuntimeError: Can't call "
                             "numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")  # fmt: skip
    with pytest.raises(npukit.DataError, match=r"^x\['input'\]|^x: cannot be read as an array of numbers .*TypeError"):
        s.set_data(torch.tensor(z["x"][:4]).bfloat16())
    with pytest.raises(npukit.DataError, match=r"^y: cannot be read as an array of class labels: RuntimeError: "):
        s.set_data(z["x"][:4], torch.tensor(z["y"][:4], dtype=torch.float32, requires_grad=True))
    assert s.data.key == key
    s.set_data(torch.tensor(z["x"][:4]), torch.tensor(z["y"][:4]))  # plain tensors are arrays
    assert s.error_dict()["samples"] == 4 and s.error_dict()["accuracy"] is not None


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory):
    """out = relu((a + b) @ W), inputs a and b of [1, 16], both read."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32), "W")
    nodes = [h.make_node("Add", ["a", "b"], ["s"], name="add"), h.make_node("MatMul", ["s", "W"], ["m"], name="mm"),
             h.make_node("Relu", ["m"], ["out"], name="relu")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("a", [1, 16]), tensor_info("b", [1, 16])], [tensor_info("out", [1, 4])], [w])
    return save_onnx(m, tmp_path_factory.mktemp("two") / "two.onnx")


def test_an_input_given_as_none_is_refused_not_fed_zeros(two_inputs):
    """{"a": None, "b": B} and [None, B] fed input a zeros in silence (it is read: every figure was of
    another input); {"a": None, "b": None} raised a bare StopIteration."""
    s = npukit.Study(two_inputs, NUMERICS)
    b = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    key = s.data.key
    for x in ({"a": None, "b": b}, [None, b]):
        with pytest.raises(npukit.DataError, match=r"^x: no array for input\(s\) \['a'\]"):
            s.set_data(x)
    for x in ({"a": None, "b": None}, (None, None)):
        with pytest.raises(npukit.DataError, match=r"^x: no array for input\(s\) \['a', 'b'\]"):
            s.set_data(x)
    assert s.data.key == key
    s.set_data({"a": b, "b": b})
    assert s.error_dict()["samples"] == 5


def test_cli_error_does_not_call_an_output_compared_on_no_sample_exact():
    """The detector at int2 selects other boxes than the float model on every sample: its
    selected_indices were compared on none, and ``--error`` printed "SNR inf dB, max abs 0" (as if
    the width changed nothing), where int4 printed 10.5 dB."""
    from conftest import run_cli

    r = run_cli("study", SAMPLES / "tiny_detector.onnx", "--soc", "riscv-accel", "--placement", "first-fit",
                "--bits", "accel=int2", "--error", timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("error: output")]
    assert lines[0] == ("error: output 'selected_indices': not compared: its shape differs from the float model's on "
                        "all 16 samples")  # fmt: skip
    assert lines[1].startswith("error: output 'topk_scores': SNR 17.2 dB")


def test_an_output_compared_on_no_sample_has_no_figures_in_the_api_json_and_sweep():
    """The same output in ``error_dict`` (NaN, not SNR inf / max abs 0), ``--json`` (null) and a
    sweep's row (the worst output compared: topk_boxes' 4.6 dB, not inf)."""
    import json
    import math

    from conftest import run_cli

    from npukit.sweeps.evaluate import errors

    s = npukit.Study(SAMPLES / "tiny_detector.onnx", "riscv-accel", {"placement": "first-fit", "bits": {"accel": "int2"}})
    e = s.error_dict()
    sel = next(o for o in e["outputs"] if o["name"] == "selected_indices")
    assert math.isnan(sel["snr_db"]) and math.isnan(sel["max_abs"]) and sel["shape_mismatches"] == e["samples"] == 16
    compared = [o["snr_db"] for o in e["outputs"] if o["name"] != "selected_indices"]
    row = errors(s._error_result(), {})  # noqa: SLF001 - the sweep's columns of this study's figures
    assert row["snr_db"] == min(compared) and round(row["snr_db"], 1) == 4.6
    r = run_cli("study", SAMPLES / "tiny_detector.onnx", "--soc", "riscv-accel", "--placement", "first-fit",
                "--bits", "accel=int2", "--error", "--json", timeout=600)  # fmt: skip
    out = next(o for o in json.loads(r.stdout)["error"]["outputs"] if o["name"] == "selected_indices")
    assert (out["snr_db"], out["max_abs"], out["shape_mismatches"]) == (None, None, 16)


def test_float_data_past_a_bfloat16_input_is_refused_not_blamed_on_the_model(tmp_path):
    """A bfloat16 input missed the check (its dtype does not start with "float"): 1e300 became inf and
    the error figures said the float model itself gave inf at its Cast."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32), "W")
    nodes = [h.make_node("Cast", ["x"], ["xf"], name="cast", to=TensorProto.FLOAT),
             h.make_node("MatMul", ["xf", "W"], ["out"], name="mm")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 16], TensorProto.BFLOAT16)], [tensor_info("out", [1, 4])], [w])
    s = npukit.Study(save_onnx(m, tmp_path / "bf.onnx"), NUMERICS)
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(np.full((3, 16), 1e300))
    assert str(ei.value) == ("x: values up to 1e+300 overflow input 'x', which is bfloat16 (largest 3.38953e+38); "
                             "the error figures need finite inputs")  # fmt: skip
    s.set_data(np.full((3, 16), 0.5))
    assert s.error_dict()["samples"] == 3
