"""A float model that itself gives inf or NaN: the numeric error is measured against its fp32
outputs, so such an output is refused in the model's words (the output, the sample, the first node
whose float output is not finite), with no numpy warning; the command line says the same in one line."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_cli_error, initializer, onnx_model, run_cli, save_onnx, tensor_info

import npukit


def _divided_by_zero(tmp_path, last: str = "Relu"):
    """x @ w / 0 -> ``last``: the Div gives +-inf (Relu keeps the +inf; Sigmoid makes it finite)."""
    from onnx import helper as h
    from onnx import numpy_helper

    zero = numpy_helper.from_array(np.zeros([1, 4], np.float32), "z")
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="fc"), h.make_node("Div", ["m", "z"], ["d"], name="div0"),
             h.make_node(last, ["d"], ["y"], name="act")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info("y", [1, 4])], [initializer("w", [4, 4]), zero])
    return save_onnx(m, tmp_path / f"div_by_zero_{last.lower()}.onnx")


def test_a_reference_output_that_is_not_finite_is_refused_naming_output_and_node(tmp_path):
    path = _divided_by_zero(tmp_path)
    want = (f"{path}: the float model itself gives inf or NaN at output 'y' on sample 0 of 16, first at node "
            "'div0' (Div); the numeric error is measured against the fp32 outputs, so they must be finite")  # fmt: skip
    s = npukit.Study(path, "arm-dsp-dla")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (was: SNR nan dB, after numpy's "invalid value encountered in subtract")
        for measure in (lambda: s.error, s.error_dict):
            with pytest.raises(npukit.ModelError) as e:
                measure()
            assert str(e.value) == want
    assert s.totals["macs"] == 16  # the study still answers what needs no measuring
    r = run_cli("study", path, "--soc", "arm-dsp-dla", "--error")
    assert assert_cli_error(r) == want
    assert "nan" not in r.stdout and "Warning" not in r.stderr


def _overflows_fp16(tmp_path):
    """x @ w * 1e6: finite in fp32, beyond fp16's largest value (65504)."""
    from onnx import helper as h
    from onnx import numpy_helper

    big = numpy_helper.from_array(np.full([1, 4], 1e6, np.float32), "k")
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="fc"), h.make_node("Mul", ["m", "k"], ["y"], name="big")]
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info("y", [1, 4])], [initializer("w", [4, 4]), big])
    return save_onnx(m, tmp_path / "overflows_fp16.onnx")


def test_values_that_are_not_finite_give_defined_figures_without_warnings(tmp_path):
    """An fp16 overflow (fp32 finite, fp16 inf) is an infinite error: SNR -inf dB, max abs inf (was
    Python's ValueError 'math domain error' out of snr_db).  A float op's own inf that the next op
    makes finite again is no error where both runs agree: SNR inf, max abs 0 (was NaN, after numpy's
    'invalid value encountered in subtract')."""
    from conftest import NUMERICS

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = npukit.Study(_overflows_fp16(tmp_path), NUMERICS).set_bits("fp16", processor="cpu")
        e = s.error.set_index("name")
        assert (e.loc["big", "snr_db"], e.loc["big", "max_abs_err"]) == (-np.inf, np.inf)
        assert 40 < e.loc["fc", "snr_db"] < np.inf  # the matmul itself stays in range
        out = s.error_dict()["outputs"][0]
        assert (out["name"], out["snr_db"], out["max_abs"]) == ("y", -np.inf, np.inf)

        s = npukit.Study(_divided_by_zero(tmp_path, "Sigmoid"), "arm-dsp-dla")  # sigmoid(+-inf): 1 or 0
        e = s.error.set_index("name")
        assert e["snr_db"].tolist() == [np.inf] * 3 and e["max_abs_err"].tolist() == [0.0] * 3  # fp32 everywhere
        assert s.error_dict()["outputs"][0]["snr_db"] == np.inf


def test_fp16_keeps_an_inf_an_inf_as_ieee_half_does(tmp_path):
    """The fp16 simulation computed x + (fp16(x) - x), NaN for an inf (inf - inf): a Div's +-inf,
    which the next Sigmoid makes 0 or 1, came out NaN at fp16 (SNR -inf dB at the div and the
    output, top-1 agreement 0.19) where IEEE fp16 holds inf and the program's half does too."""
    s = npukit.Study(_divided_by_zero(tmp_path, "Sigmoid"), "arm-dsp-dla")
    for p in ("arm", "dsp", "dla"):
        s.set_bits("fp16", processor=p)
    assert set(s.costs["bits"]) == {"fp16"}
    e = s.error.set_index("name")
    assert e.loc["div0", "snr_db"] == np.inf and e.loc["div0", "max_abs_err"] == 0.0
    assert e.loc["act", "snr_db"] == np.inf and e.loc["act", "max_abs_err"] == 0.0
    out = s.error_dict()["outputs"][0]
    assert (out["snr_db"], out["top1_agreement"]) == (np.inf, 1.0)


def _divides_one_column_by_zero(tmp_path):
    """x / [0, 1, 1, 1] -> Sigmoid: column 0 is +-inf, the others x itself."""
    from onnx import helper as h
    from onnx import numpy_helper

    z = numpy_helper.from_array(np.array([[0, 1, 1, 1]], np.float32), "z")
    nodes = [h.make_node("Div", ["x", "z"], ["d"], name="div0"), h.make_node("Sigmoid", ["d"], ["y"], name="act")]
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info("y", [1, 4])], [z])
    return save_onnx(m, tmp_path / "div_one_column.onnx")


def test_an_infinite_calibrated_range_is_the_range_of_the_finite_values(tmp_path):
    """Calibration replaced a range reaching +-inf by 0: the Div's int8 grid held the one value 0 (every
    output of the Sigmoid after it 0.5), and an inf on the grid came out NaN.  The range is now that of
    the op's finite values ([-2, 2] here), and an inf saturates to the grid's end, as the generated
    code's quantize saturates it (docs/quantization.md)."""
    from npukit import pipeline

    x = np.array([[[2.0, -2.0, 1.0, 0.5]], [[-1.0, 0.25, 2.0, -2.0]]], np.float32)
    s = npukit.Study(_divides_one_column_by_zero(tmp_path), "arm-dsp-dla").set_bits("int8", processor="arm")
    assert set(s.costs["processor"]) == {"arm"} and set(s.costs["bits"]) == {"int8"}
    s.set_data(x)
    scale = 4 / 255
    top = (255 - round(2 / scale)) * scale  # the grid's largest value: +inf saturates to it
    bottom = (0 - round(2 / scale)) * scale
    got = [np.asarray(pipeline.simulate(s.result, s.data, [k])[0][0]).ravel() for k in range(2)]
    assert np.all(np.isfinite(got))
    sig = 1 / (1 + np.exp(-np.array([top, bottom])))
    assert abs(got[0][0] - sig[0]) < 0.01 and abs(got[1][0] - sig[1]) < 0.01  # (the sigmoid's own grid: 1/255)
    want = 1 / (1 + np.exp(-x[:, 0, 1:]))
    np.testing.assert_allclose(np.stack(got)[:, 1:], want, atol=0.01)
    assert s.error_dict()["outputs"][0]["top1_agreement"] == 1.0
