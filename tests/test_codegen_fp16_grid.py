"""A float16 model whose host ops run at an integer width (riscv-accel's int8 host by default, an
int8 a53 on vsi-npu, ``--bits arm=int8`` on arm-dsp-dla): the host holds the tensors as float16
(2 bytes each) on the op's integer grid, rounded in place after each kernel as the simulation's
``fake_quant`` rounds them (in fp32, stored back as float16).  The generated code used to pass
those halves to ``npk_round_to_bits`` as floats with the element count: it read and wrote twice
the tensor's bytes, past the arena into the outputs (SIGSEGV, or outputs with a relative RMS error
of 1).  Now it calls ``npk_round_to_bits_f16`` on the halves.  Each program here is built with the
host compiler (-Werror) and run: on host-only placements with exact float16 ops it equals the
simulation bit for bit; with kernels that accumulate differently (conv, matmul, softmax) it agrees
with it within ``study.build()``'s tolerance; and valgrind finds no invalid access."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import missing_tool, onnx_model, save_onnx, tensor_info

import npukit
from npukit import pipeline
from npukit.codegen.build import run_program


def _need(*tools):
    for t in tools:
        if shutil.which(t) is None:
            missing_tool(f"{t} is not installed")


def _exact_model(tmp_path):
    """Float16 ops the host and the simulation compute alike (one rounding of an exact float
    result): add, multiply by a constant, relu, max pooling, subtract."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    c = nh.from_array(np.array([0.75, -1.5, 2.0, 0.3], np.float16).reshape(1, 4, 1, 1), "c")
    nodes = [h.make_node("Add", ["x", "y"], ["a"], name="add"),
             h.make_node("Mul", ["a", "c"], ["m"], name="mul"),
             h.make_node("Relu", ["m"], ["r"], name="relu"),
             h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             h.make_node("Sub", ["p", "z"], ["o"], name="sub")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 4, 8, 8], T.FLOAT16), tensor_info("y", [1, 4, 8, 8], T.FLOAT16),
                           tensor_info("z", [1, 4, 4, 4], T.FLOAT16)],
                   [tensor_info("o", [1, 4, 4, 4], T.FLOAT16)], [c])  # fmt: skip
    return save_onnx(m, tmp_path / "f16_exact.onnx")


def _conv_model(tmp_path):
    """The tester's model: conv, relu, max pooling, flatten, gemm, all float16 (a 1 KB relu output)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float16), "W1"),
             nh.from_array(rng.normal(0, 0.1, 8).astype(np.float16), "B1"),
             nh.from_array(rng.normal(0, 0.2, (10, 128)).astype(np.float16), "W2"),
             nh.from_array(rng.normal(0, 0.1, 10).astype(np.float16), "B2")]  # fmt: skip
    nodes = [h.make_node("Conv", ["x", "W1", "B1"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             h.make_node("Flatten", ["p"], ["f"], axis=1, name="flat"),
             h.make_node("Gemm", ["f", "W2", "B2"], ["y"], transB=1, name="fc")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 3, 8, 8], T.FLOAT16)], [tensor_info("y", [1, 10], T.FLOAT16)], inits)
    return save_onnx(m, tmp_path / "f16_conv.onnx")


def _transformer_bits_model(tmp_path):
    """The tester's second model: matmul, bias add, layer norm, softmax, a Cast to a float32
    output, tanh and a multiply into a float16 output."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(4)
    H = T.FLOAT16
    inits = [nh.from_array(rng.normal(0, 0.4, (6, 8)).astype(np.float16), "w"),
             nh.from_array(rng.normal(0, 0.1, 8).astype(np.float16), "b"),
             nh.from_array(np.ones(8, np.float16), "g"), nh.from_array(np.zeros(8, np.float16), "be")]  # fmt: skip
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             h.make_node("Add", ["m", "b"], ["a"], name="bias"),
             h.make_node("LayerNormalization", ["a", "g", "be"], ["ln"], axis=-1, name="ln"),
             h.make_node("Softmax", ["ln"], ["sm"], axis=-1, name="softmax"),
             h.make_node("Cast", ["sm"], ["y1"], to=T.FLOAT, name="cast"),
             h.make_node("Tanh", ["a"], ["t"], name="tanh"),
             h.make_node("Mul", ["t", "x2"], ["y2"], name="mul")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 4, 6], H), tensor_info("x2", [1, 4, 8], H)],
                   [tensor_info("y1", [1, 4, 8]), tensor_info("y2", [1, 4, 8], H)], inits)  # fmt: skip
    return save_onnx(m, tmp_path / "f16_tr.onnx")


def _roundings(code: str) -> tuple[list[str], list[str]]:
    """The in-place roundings of the model's C: (calls on halves, calls on floats)."""
    return (re.findall(r"npk_round_to_bits_f16\(\(uint16_t \*\)", code),
            re.findall(r"npk_round_to_bits\(\(float \*\)", code))  # fmt: skip


def _host_int8(s):
    host = s.soc.host
    ops = [i for i, p in enumerate(s.result.plan.processor) if p == host]
    assert ops and all(s.result.bits[i] == "int8" for i in ops)
    return ops


@pytest.mark.slow
@pytest.mark.parametrize("soc,proc", [("riscv-accel", None), ("vsi-npu", "a53")])
def test_float16_on_an_int8_host_equals_the_simulation_bit_for_bit(tmp_path, soc, proc):
    _need("make", "cc")
    s = npukit.Study(_exact_model(tmp_path), soc)
    if proc:
        s.set_bits("int8", processor=proc)
    assert len(_host_int8(s)) == len(s.graph.ops)  # every op on the host, at int8
    halves, floats = _roundings(s.code["src/model.c"])
    assert len(halves) == 5 and floats == []  # every op's float16 output rounded on its grid, as halves
    d = tmp_path / "e"
    r = s.build(d, samples=4)
    assert r["outputs_agree"] is True and r["mismatches"] == []
    g = s.graph
    shapes = [g.tensors[t].shape for t in g.inputs]
    ref = pipeline.simulate(s.result, s.data, range(4))
    (d / ".w").mkdir()
    for i in range(4):
        got = run_program(d, ["./model"], list(s.data.samples[i]), shapes, d / ".w")
        assert got[0].dtype == np.float16 and got[0].shape == (1, 4, 4, 4)
        np.testing.assert_array_equal(got[0], np.asarray(ref[i][0]))


@pytest.mark.slow
def test_float16_conv_model_on_riscv_accels_int8_host_runs_and_agrees(tmp_path):
    """The tester's crash: the 1 KB relu output rounded as 512 floats wrote past the arena."""
    _need("make", "cc")
    s = npukit.Study(_conv_model(tmp_path), "riscv-accel")
    _host_int8(s)
    code = s.code["src/model.c"]
    assert "npk_round_to_bits_f16((uint16_t *)(npukit_arena + 2048), 512, 8," in code  # r: 512 halves, 1 KB
    assert _roundings(code)[1] == []
    r = s.build(tmp_path / "e", samples=4)
    assert r["outputs_agree"] is True and r["mismatches"] == []
    out = r["runs"]["host"]["outputs"]["y"]
    assert out["within_tolerance"] and out["rel_rms"] < 0.02 and out["argmax_agreement"] == 1.0


@pytest.mark.slow
def test_float16_model_with_arm_at_int8_on_arm_dsp_dla_first_fit_runs_and_agrees(tmp_path):
    """``--placement first-fit --bits arm=int8``: the float16 tensors on arm rounded as halves, the
    float32 output (the Cast's) as floats."""
    _need("make", "cc")
    s = npukit.Study(_transformer_bits_model(tmp_path), "arm-dsp-dla", placement="first-fit")
    s.set_bits("int8", processor="arm")
    _host_int8(s)
    code = s.code["src/model.c"]
    halves, floats = _roundings(code)
    assert len(halves) == 4 and floats == ["npk_round_to_bits((float *)"]
    assert "npk_round_to_bits((float *)(outputs->out0), 32, 8," in code  # y1, float32
    assert "npk_round_to_bits_f16((uint16_t *)(outputs->out1), 32, 8," in code  # y2, float16
    r = s.build(tmp_path / "e", samples=8)
    assert r["outputs_agree"] is True and r["mismatches"] == []
    for name in ("y1", "y2"):
        assert r["runs"]["host"]["outputs"][name]["rel_rms"] < 0.02


@pytest.mark.slow
def test_float16_on_an_int8_host_is_clean_under_valgrind(tmp_path):
    """valgrind used to report an invalid read in npk_round_to_bits (the tester's conv model)."""
    _need("make", "cc", "valgrind")
    s = npukit.Study(_conv_model(tmp_path), "riscv-accel")
    d = tmp_path / "e"
    s.build(d, samples=1)  # exported and built
    g = s.graph
    np.save(d / "v0.npy", np.asarray(s.data.samples[0][0]).reshape(g.tensors[g.inputs[0]].shape))
    (d / "vout").mkdir()
    r = subprocess.run(["valgrind", "-q", "--error-exitcode=1", "--leak-check=full", "./model", "v0.npy", "vout"],
                       cwd=d, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert np.load(d / "vout" / "0.npy").shape == (1, 10)
