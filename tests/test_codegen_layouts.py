"""The exports of tests/test_same_memory_order.py compile and compute the model: a boundary copy where
NCHW and NHWC hold the same memory (C = 1, H = W = 1), and a softmax over the axis an NHWC or tiled
accelerator holds innermost, run on its buffer as it lies (the axis passed to the kernel library is
the model's axis as that buffer's (N, C, H, W) index), match onnxruntime."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool
from test_same_memory_order import across, attention_model, c1_model, pooled_model, softmax_model

import npukit
from npukit import pipeline
from npukit.codegen.build import make, run_program


@pytest.fixture(autouse=True)
def _cc():
    for t in ("make", "cc"):
        if shutil.which(t) is None:
            missing_tool(f"{t} is not installed")


def _run(study: npukit.Study, d, n: int = 4) -> list[np.ndarray]:
    """Export ``study`` to ``d``, build it and run it on ``n`` samples: the first output of each."""
    study.export(d)
    make(d)
    g = study.graph
    shapes = [g.tensors[t].shape for t in g.inputs]
    work = d / ".w"
    work.mkdir(exist_ok=True)
    return [run_program(d, ["./model"], list(study.data.samples[i]), shapes, work)[0] for i in range(n)]


def _onnxruntime(path, study: npukit.Study, n: int = 4) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path))
    name = sess.get_inputs()[0].name
    shape = study.graph.tensors[study.graph.inputs[0]].shape
    return [sess.run(None, {name: np.asarray(study.data.samples[i][0], np.float32).reshape(shape)})[0] for i in range(n)]


@pytest.mark.parametrize("make_model", [c1_model, pooled_model, attention_model])
def test_a_boundary_copy_without_layout_conversion_matches_onnxruntime(make_model, tmp_path):
    path = make_model(tmp_path)
    s = across(path)
    code = s.code["src/model.c"]
    assert "layout_convert" not in code and "xi_dsp_copy(&src, &dst)" in code
    for got, want in zip(_run(s, tmp_path / "export"), _onnxruntime(path, s)):
        assert np.allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-6), np.max(np.abs(got.reshape(want.shape) - want))


@pytest.mark.parametrize("soc, proc, bits, layout, step, ort_atol", [
    ("arm-dsp-dla", "dsp", "fp32", "NHWC", 0.0, 1e-6),
    # int16 storage: one step of the output's [0, 1] grid from the simulation; the input's int16 grid
    # (the conv's range) from onnxruntime -- a softmax over a wrong axis is off by tenths
    ("hexagon-like", "hvx", "int16", "TILED", 1 / 65535, 1e-3),
])  # fmt: skip
def test_a_softmax_over_channels_runs_on_the_accelerators_own_buffer(soc, proc, bits, layout, step, ort_atol, tmp_path):
    """Softmax over model axis 1 (C) of an NCHW image, on an accelerator that holds channels innermost:
    one softmax call over its own buffer with axis 1 of (N, C, H, W), no conversion around it."""
    path = softmax_model(tmp_path, 1)
    s = npukit.Study(path, soc, placement="first-fit")
    s.pin("conv", s.soc.host).pin("sm", proc).set_bits(bits, processor=proc)
    assert s.result.verdicts[(1, proc)].ok
    lib = s.soc.processor(proc).kernel_library
    part = s.code[f"src/partitions_{lib}.c"]
    assert f"{lib}_softmax(" in part and ", 1)) != 0) return st;" in part and "layout_convert" not in part
    assert f"{lib.upper()}_{layout}" in part
    got = _run(s, tmp_path / "export")
    sim = pipeline.simulate(s.result, s.data, range(len(got)))
    for a, b, want in zip(got, sim, _onnxruntime(path, s)):
        assert np.allclose(a.reshape(want.shape), np.asarray(b[0]).reshape(want.shape), rtol=1e-5, atol=1e-6 + step)
        assert np.allclose(a.reshape(want.shape), want, rtol=1e-5, atol=ort_atol)


def test_a_softmax_of_an_nhwc_model_passes_its_axis_as_the_buffers_nchw_index(tmp_path):
    """A TFLite model holds the image NHWC: its softmax over the last axis (C, model axis 3) is
    (N, C, H, W) axis 1 of the DSP's buffer; the program matches the fp32 simulation."""
    from tflite_builder import Graph, Op, T, build

    rng = np.random.default_rng(0)
    g = Graph(
        tensors=[T("x", (1, 5, 6, 3)), T("w", (4, 3, 3, 3), data=rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
                 T("b", (4,), data=np.zeros(4, np.float32)), T("c", (1, 5, 6, 4)), T("y", (1, 5, 6, 4))],
        ops=[Op("CONV_2D", ["x", "w", "b"], ["c"], "Conv2DOptions", {"Padding": 0, "StrideW": 1, "StrideH": 1}),
             Op("SOFTMAX", ["c"], ["y"], "SoftmaxOptions", {"Beta": 1.0})],
        inputs=["x"], outputs=["y"])  # fmt: skip
    path = tmp_path / "nhwc.tflite"
    path.write_bytes(build(g))
    s = npukit.Study(path, "arm-dsp-dla", placement="first-fit")
    sm = next(op for op in s.graph.ops if op.kind == "softmax")
    for op in s.graph.ops:
        s.pin(op.name, "dsp" if op is sm else "arm")
    s.set_bits("fp32", processor="dsp")
    assert s.result.verdicts[(sm.op_id, "dsp")].text.startswith("accepted (softmax over axis 3 (C of the model's NHWC)")
    part = s.code["src/partitions_xi_dsp.c"]
    assert "xi_dsp_softmax(" in part and ", 1)) != 0) return st;" in part and "layout_convert" not in part
    got = _run(s, tmp_path / "export")
    sim = pipeline.simulate(s.result, s.data, range(len(got)))
    for a, b in zip(got, sim):
        want = np.asarray(b[0])
        assert np.allclose(a.reshape(want.shape), want, rtol=1e-5, atol=1e-6)
        assert np.allclose(want.sum(axis=-1), 1, atol=1e-5)  # over the channels
