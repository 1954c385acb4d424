"""set_data / --data name what they do not take: an array under a name no model input has, and one
calibration array for a model of several inputs (once split along its first axis, a sample per input)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import SAMPLES
from onnx import TensorProto, helper

import npukit


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory):
    """y = sigmoid((a + b) * b), inputs a and b of [1, 16]."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"), helper.make_node("Mul", ["s", "b"], ["m"], name="mul"),
             helper.make_node("Sigmoid", ["m"], ["y"], name="sig")]  # fmt: skip
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 16]) for n in ("a", "b")]
    g = helper.make_graph(nodes, "two", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path_factory.mktemp("two") / "two.onnx"
    onnx.save(m, path)
    return path


def test_a_dict_entry_no_input_has_is_refused_naming_it():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    x = np.load(SAMPLES / "digits_cnn.npz")["x"][:8]
    key = s.data.key
    with pytest.raises(npukit.DataError) as ei:
        s.set_data({"inpt": x})
    assert str(ei.value) == "x: 'inpt' is not an input of the model; did you mean 'input'? valid names: 'input'"
    with pytest.raises(npukit.DataError) as ei:  # beside the right one: it was dropped in silence
        s.set_data({"input": x, "extra": x})
    assert str(ei.value) == "x: 'extra' is not an input of the model; valid names: 'input'"
    assert s.data.key == key  # the study keeps its data
    s.set_data({"input": x})
    assert s.error_dict()["samples"] == 8


def test_one_calib_array_for_several_inputs_is_refused(two_inputs, tmp_path):
    s = npukit.Study(two_inputs, "arm-dsp-dla")
    rng = np.random.default_rng(0)
    a, b = (rng.random((20, 1, 16), dtype=np.float32) for _ in range(2))
    np.savez(tmp_path / "d.npz", a=a, b=b, calib=a[:5])
    key = s.data.key
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(tmp_path / "d.npz")
    assert str(ei.value) == (f"{tmp_path / 'd.npz'}: calib: the model has 2 inputs ['a', 'b'] and one calibration "
                             "array cannot feed them; leave calib out (the first 32 samples of x calibrate)")  # fmt: skip
    assert s.data.key == key
    np.savez(tmp_path / "ok.npz", a=a, b=b)
    s.set_data(tmp_path / "ok.npz")
    assert len(s.data.calib) == 20 and len(s.data.samples) == 20
    # given per input (from Python), each input gets all its calibration samples
    d = npukit.quant.make_data(s.graph, {"a": a, "b": b}, calib={"b": b[:5], "a": a[:5]})
    assert len(d.calib) == 5 and np.array_equal(d.calib[4][0], a[4]) and np.array_equal(d.calib[4][1], b[4])
    with pytest.raises(npukit.DataError, match=r"^calib: 'c' is not an input of the model; valid names: 'a', 'b'$"):
        npukit.quant.make_data(s.graph, {"a": a, "b": b}, calib={"a": a[:5], "c": b[:5]})


def test_an_empty_calib_array_is_refused(tmp_path):
    """An .npz whose calib holds no samples calibrated every integer scale on nothing, and the study
    reported its figures (SNR 6.6 dB, accuracy 84 % of the digits CNN at int8) as the widths' error."""
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    z = np.load(SAMPLES / "digits_cnn.npz")
    np.savez(tmp_path / "c.npz", x=z["x"], y=z["y"], calib=z["x"][:0])
    key = s.data.key
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(tmp_path / "c.npz")
    assert str(ei.value) == (f"{tmp_path / 'c.npz'}: calib: no samples; give some, or no calib (the first 32 samples "
                             "of x calibrate)")  # fmt: skip
    assert s.data.key == key


def test_an_npz_holding_x_and_an_inputs_own_array_is_refused(tmp_path):
    """digits_cnn's input is named 'input': an .npz holding both x and input read x and dropped the other."""
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    x = np.load(SAMPLES / "digits_cnn.npz")["x"]
    np.savez(tmp_path / "two.npz", x=x, input=x[:5])
    with pytest.raises(npukit.DataError) as ei:
        s.set_data(tmp_path / "two.npz")
    assert str(ei.value) == (f"{tmp_path / 'two.npz'}: holds both 'x' and the array of input 'input'; give the inputs "
                             "one way: x, or one array per input ['input']")  # fmt: skip
    np.savez(tmp_path / "one.npz", input=x[:5])
    s.set_data(tmp_path / "one.npz")
    assert len(s.data.samples) == 5
