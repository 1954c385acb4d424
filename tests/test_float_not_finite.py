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
