"""The model's own integer arithmetic in generated accelerator code.  An int8 ONNX Add of the
model's own int8 tensors (no quantization) wraps: onnxruntime, TVM (npukit's simulation, the host's
code) and C give int8 100 + 100 = -56.  The DLA's call (npk_add) and CMSIS-NN's
(arm_elementwise_add_s8) saturate, which is right for a quantized value but not for the model's
integers: the tester's Add(x, x) on [-128, -100, ..., 64, 127] came out [-128 -128 -128 ... 127 127]
on the DLA and on CMSIS-NN while onnxruntime gave [0 56 -128 -2 0 126 -128 -2], and build() said
the outputs disagree.  Such an op now lowers to npk_binary_int / npk_unary_int (exact, wrapping),
on the CMSIS-NN processor too; a quantized (QDQ) add still saturates to its grid, as onnxruntime's
QuantizeLinear does; and an accelerator refuses the integer reductions its float kernels would get
wrong, so placement keeps them on the host."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool, onnx_model, save_onnx, tensor_info

import npukit
from npukit import pipeline
from npukit.codegen.build import make, run_program

X = np.array([[-128, -100, -64, -1], [0, 63, 64, 127]], np.int8)  # the tester's input
WRAPPED = [0, 56, -128, -2, 0, 126, -128, -2]  # onnxruntime's Add(x, x) of int8
SATURATED = [-128, -128, -128, -2, 0, 126, 127, 127]  # a quantized add's: 2 * x on its grid


def _need_cc():
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")


def _int8_add(tmp_path):
    """The tester's model: y = Add(x, x), x and y int8, no quantization anywhere."""
    from onnx import TensorProto as T
    from onnx import helper as h

    m = onnx_model([h.make_node("Add", ["x", "x"], ["y"], name="add")], [tensor_info("x", [2, 4], T.INT8)],
                   [tensor_info("y", [2, 4], T.INT8)])  # fmt: skip
    return save_onnx(m, tmp_path / "int8_add.onnx")


def _qdq_add(tmp_path):
    """A quantized add: int8 inputs dequantized (scale 0.1, zero 0), added in float, quantized to the
    same grid (QuantizeLinear saturates)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    inits = [nh.from_array(np.array(0.1, np.float32), "s"), nh.from_array(np.array(0, np.int8), "z")]
    nodes = [h.make_node("DequantizeLinear", ["a", "s", "z"], ["ad"], name="dq_a"),
             h.make_node("DequantizeLinear", ["b", "s", "z"], ["bd"], name="dq_b"),
             h.make_node("Add", ["ad", "bd"], ["sum"], name="add"),
             h.make_node("QuantizeLinear", ["sum", "s", "z"], ["y"], name="q")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("a", [2, 4], T.INT8), tensor_info("b", [2, 4], T.INT8)],
                   [tensor_info("y", [2, 4], T.INT8)], inits)  # fmt: skip
    return save_onnx(m, tmp_path / "qdq_add.onnx")


def _int_ops(tmp_path, dtype: str):
    """Every elementwise op of the model's integers a kernel call computes: add, sub, mul, div,
    max, min of two inputs, and neg, abs, relu, clip of one."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    tt = {"int8": T.INT8, "int32": T.INT32}[dtype]
    info = np.iinfo(dtype)
    inits = [nh.from_array(np.array(info.min // 3, dtype), "lo"), nh.from_array(np.array(info.max // 3, dtype), "hi")]
    binary = [("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("Div", "div"), ("Max", "max"), ("Min", "min")]
    nodes = [h.make_node(o, ["x", "y"], [f"o_{n}"], name=n) for o, n in binary]
    nodes += [h.make_node("Neg", ["x"], ["o_neg"], name="neg"), h.make_node("Abs", ["x"], ["o_abs"], name="abs"),
              h.make_node("Relu", ["x"], ["o_relu"], name="relu"),
              h.make_node("Clip", ["x", "lo", "hi"], ["o_clip"], name="clip")]  # fmt: skip
    outs = [n.output[0] for n in nodes]
    m = onnx_model(nodes, [tensor_info("x", [2, 4], tt), tensor_info("y", [2, 4], tt)],
                   [tensor_info(o, [2, 4], tt) for o in outs], inits)  # fmt: skip
    return save_onnx(m, tmp_path / f"int_ops_{dtype}.onnx"), outs


def _ort(path, feeds) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(str(path)).run(None, feeds)


def _run(s, d, inputs) -> list[np.ndarray]:
    shapes = [s.graph.tensors[t].shape for t in s.graph.inputs]
    (d / ".w").mkdir(exist_ok=True)
    return run_program(d, ["./model"], inputs, shapes, d / ".w")


@pytest.mark.slow
@pytest.mark.parametrize("soc,proc,call", [("arm-dsp-dla", "dla", "nvdla_binary_int("),
                                           ("cortex-m7-cmsis-nn", "cmsis_nn", "m7_nn_binary_int(")])  # fmt: skip
def test_the_models_own_int8_add_wraps_on_the_accelerator_as_onnxruntime(tmp_path, soc, proc, call):
    _need_cc()
    path = _int8_add(tmp_path)
    want = _ort(path, {"x": X})[0]
    assert want.ravel().tolist() == WRAPPED
    s = npukit.Study(path, soc, placement="first-fit")
    assert s.plan.processor[s.graph.resolve("add")[0]] == proc
    s.set_data(np.stack([X, X[::-1]]))
    d = tmp_path / "e"
    s.export(d)
    calls = "\n".join(p.read_text() for p in (d / "src").glob("partitions_*.c"))
    assert call in calls and "arm_elementwise_add_s8(" not in calls
    make(d)  # -std=c11 -Wall -Wextra -Werror
    got = _run(s, d, [X])[0]
    assert got.dtype == np.int8 and got.shape == (2, 4)
    assert np.array_equal(got, want), got
    sim = pipeline.simulate(s.result, s.data, [0, 1])
    assert np.array_equal(np.asarray(sim[0][0]).ravel(), want.ravel())
    assert np.array_equal(_run(s, d, [X[::-1]])[0], _ort(path, {"x": X[::-1]})[0])
    r = s.build(tmp_path / "b", samples=2)
    assert r["outputs_agree"] is True and r["mismatches"] == []


@pytest.mark.slow
@pytest.mark.parametrize("soc,proc,call", [("arm-dsp-dla", "dla", "nvdla_add("),
                                           ("cortex-m7-cmsis-nn", "cmsis_nn", "arm_elementwise_add_s8(")])  # fmt: skip
def test_a_quantized_int8_add_still_saturates_to_its_grid(tmp_path, soc, proc, call):
    _need_cc()
    path = _qdq_add(tmp_path)
    want = _ort(path, {"a": X, "b": X})[0]
    assert want.ravel().tolist() == SATURATED  # QuantizeLinear saturates
    s = npukit.Study(path, soc, placement="first-fit")
    assert s.plan.processor[s.graph.resolve("add")[0]] == proc
    s.set_data({"a": np.stack([X, X]), "b": np.stack([X, X])})
    d = tmp_path / "e"
    s.export(d)
    calls = "\n".join(p.read_text() for p in (d / "src").glob("partitions_*.c"))
    assert call in calls and "_binary_int(" not in calls
    make(d)
    got = _run(s, d, [X, X])[0]
    assert np.array_equal(got, want), got
    assert np.array_equal(np.asarray(pipeline.simulate(s.result, s.data, [0])[0][0]).ravel(), want.ravel())


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "int32"])
def test_every_elementwise_op_of_the_models_integers_matches_onnxruntime(tmp_path, dtype):
    """On tda4vm-like's C66x (add, sub, mul, max, min) and the DLA (add): overflow, the minimum's
    negation and abs, truncating division, and int32 values a float cannot hold (2^24 + 1)."""
    _need_cc()
    path, outs = _int_ops(tmp_path, dtype)
    info = np.iinfo(dtype)
    big = 16777217 if dtype == "int32" else 3
    x = np.array([[info.min, -100, -7, big], [0, 63, 7, info.max]], dtype)
    y = np.array([[3, -100, 2, 5], [1, 64, -2, info.max]], dtype)
    want = _ort(path, {"x": x, "y": y})
    for soc, proc in (("tda4vm-like", "c66x"), ("arm-dsp-dla", "dla")):
        s = npukit.Study(path, soc, placement="first-fit")
        on = {op.name for op in s.graph.ops if s.plan.processor[op.op_id] == proc}
        assert {"add"} <= on and (soc != "tda4vm-like" or {"sub", "mul", "max", "min"} <= on), on
        s.set_data({"x": np.stack([x, x[::-1]]), "y": np.stack([y, y])})  # (no zero divisor: onnxruntime leaves x / 0 undefined)
        d = tmp_path / soc
        s.export(d)
        make(d)
        got = _run(s, d, [x, y])
        sim = pipeline.simulate(s.result, s.data, [0])[0]
        for name, a, b, c in zip(outs, got, want, sim, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), (soc, name, a, b)
            assert np.array_equal(a.ravel(), np.asarray(c).ravel()), (soc, name, a, c)


def test_the_cmsis_processor_lowers_the_models_int8_add_to_npk_not_to_a_saturating_call(tmp_path):
    """Generated code only (no compiler): the model's own int8 add on cmsis_nn is npk_binary_int,
    a quantized add is CMSIS-NN's arm_elementwise_add_s8."""
    s = npukit.Study(_int8_add(tmp_path), "cortex-m7-cmsis-nn", placement="first-fit")
    code = "\n".join(t for n, t in s.code.items() if "partitions_" in n)
    assert "m7_nn_binary_int(" in code and "M7_NN_ADD" in code and "arm_elementwise_add_s8(" not in code
    q = npukit.Study(_qdq_add(tmp_path), "cortex-m7-cmsis-nn", placement="first-fit")
    code = "\n".join(t for n, t in q.code.items() if "partitions_" in n)
    assert "arm_elementwise_add_s8(" in code and "_binary_int(" not in code


def test_an_integer_sum_stays_on_the_host_with_a_reason(tmp_path):
    """The kernel library's reductions compute in float and saturate: an accelerator whose profile
    lists sum and max refuses the model's integer sum (which wraps) and an int32 max (above 2^24 a
    float loses it), and placement keeps them on the host, the reason naming the kernel library."""
    import tomllib
    from pathlib import Path

    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes = [h.make_node("ReduceSum", ["x", "ax"], ["s"], name="rsum", keepdims=1),
             h.make_node("ReduceMax", ["x"], ["m"], name="rmax", axes=[3], keepdims=1)]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 2, 2, 4], T.INT32)],
                   [tensor_info("s", [1, 2, 2, 1], T.INT32), tensor_info("m", [1, 2, 2, 1], T.INT32)],
                   [nh.from_array(np.array([3], np.int64), "ax")], opset=13)  # fmt: skip
    doc = tomllib.loads((Path(npukit.__file__).parent / "profiles" / "arm-dsp-dla.toml").read_text())
    doc["processors"]["dla"]["ops"].update({"sum": {}, "max": {}})
    s = npukit.Study(save_onnx(m, tmp_path / "int_sum.onnx"), npukit.load_soc(doc), placement="first-fit")
    for node, kind in (("rsum", "sum"), ("rmax", "max")):
        assert s.plan.processor[s.graph.resolve(node)[0]] == "arm"
        text = s.explain(node)
        assert (f"dla: code generation cannot run it here: the kernel library has no call for {kind} of the model's "
                "int32 integers (its reductions compute in float)") in text, text  # fmt: skip
