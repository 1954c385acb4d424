"""An integer ReduceMean: on the host, TVM's C wrote its int64 result into the int32 output.

TVM legalizes the mean of an int32 tensor as its int32 sum divided by an int64 count, an int64
result (``call_tir`` out_ty int64) where the op's output is int32: the host C wrote 8-byte values
into the caller's 4-byte buffer, and the tester's int32 means came out [m0, -1, m1, -1] (the other
outputs overwritten).  The host C now computes it as the sum divided by the count in int32 (the
sum wraps, the division truncates, as TVM, the simulation, computes it).  And an accelerator whose
reductions compute in float refuses the model's integer mean, as it refuses an integer sum (the
C7x's float mean gave 956301248 for the simulation's -117440569)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool, onnx_model, save_onnx, tensor_info

import npukit
from npukit import pipeline

K = 4194303  # 2^22 - 1: the values are above 2^24 (a float does not hold them), the sums fit int32
X = (np.array([100, 100, 27, 1, -128, -1, -1, 3, 1, 2, 0, 0, 5, 5, 5, 6], np.int32) * K).reshape(1, 2, 2, 4)
MEAN = [239075271, -133169120, 3145727, 22020090]  # sum / 4, truncated toward zero


def _int_mean(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper as h

    m = onnx_model([h.make_node("ReduceMean", ["x"], ["m"], name="rmean", axes=[3], keepdims=1)],
                   [tensor_info("x", [1, 2, 2, 4], T.INT32)], [tensor_info("m", [1, 2, 2, 1], T.INT32)], opset=13)  # fmt: skip
    return save_onnx(m, tmp_path / "int_mean.onnx")


def test_an_integer_mean_stays_on_the_host_with_a_reason(tmp_path):
    path = _int_mean(tmp_path)
    s = npukit.Study(path, "tda4vm-like", placement="first-fit")
    assert list(s.placement["processor"]) == ["a72"]
    assert ("the kernel library has no call for mean of the model's int32 integers (its reductions compute in "
            "float)") in s.explain("rmean")  # fmt: skip
    s = npukit.Study(path, "arm-dsp-dla", placement="first-fit")
    assert list(s.placement["processor"]) == ["arm"]
    s.set_data(np.stack([X, X]))
    assert np.asarray(pipeline.simulate(s.result, s.data, [0])[0][0]).ravel().tolist() == MEAN


@pytest.mark.slow
@pytest.mark.parametrize("soc", ["arm-dsp-dla", "tda4vm-like"])
def test_the_host_c_of_an_int32_mean_writes_int32_as_onnxruntime_computes_it(tmp_path, soc):
    import onnxruntime as ort

    from npukit.codegen.build import make, run_program

    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    path = _int_mean(tmp_path)
    want = ort.InferenceSession(str(path)).run(None, {"x": X})[0]
    assert want.ravel().tolist() == MEAN
    s = npukit.Study(path, soc, placement="first-fit")
    s.set_data(np.stack([X, X[:, ::-1]]))
    d = tmp_path / "e"
    s.export(d)
    make(d)
    (d / ".w").mkdir(exist_ok=True)
    got = run_program(d, ["./model"], [X], [(1, 2, 2, 4)], d / ".w")[0]
    assert got.dtype == np.int32 and got.shape == (1, 2, 2, 1)
    assert got.ravel().tolist() == MEAN
    r = s.build(tmp_path / "b", samples=2)
    assert r["outputs_agree"] is True and r["mismatches"] == []
