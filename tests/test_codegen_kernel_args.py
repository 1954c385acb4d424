"""Kernel calls a new user's models got wrong, each built with the host compiler, run, and held
against onnxruntime and bit for bit against npukit's simulation:

* a MatMul of two activations followed by an Add (attention's pattern) at int8 on the DLA: the
  product is a float intermediate of the composite, and the call passed int8 inputs with a float
  output, which the kernel refuses (status 2); the inputs are now dequantized first;
* a Slice over two axes on a kernel library: the import kept only the last axis of the slice's
  axes / begins / ends / steps (each tuple element overwrote the one before), so the call sliced
  one axis and failed on the shape (status 3)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool, onnx_model, save_onnx, tensor_info

import npukit
from npukit.codegen.build import make, run_program


def _matmul_add(tmp_path):
    from onnx import helper as h
    from onnx import numpy_helper as nh

    c = nh.from_array(np.array([0.5, -0.25, 1.0], np.float32), "c")
    m = onnx_model([h.make_node("MatMul", ["a", "b"], ["m"], name="mm"), h.make_node("Add", ["m", "c"], ["y"], name="add")],
                   [tensor_info("a", [4, 5]), tensor_info("b", [5, 3])], [tensor_info("y", [4, 3])], [c])  # fmt: skip
    return save_onnx(m, tmp_path / "matmul_add.onnx")


def _slice_two_axes(tmp_path):
    from onnx import helper as h
    from onnx import numpy_helper as nh

    consts = [nh.from_array(np.array(v, np.int64), n) for n, v in
              (("starts", [0, 1]), ("ends", [6, 6]), ("axes", [2, 3]), ("steps", [2, 2]))]  # fmt: skip
    m = onnx_model([h.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"], name="slice"),
                    h.make_node("Relu", ["s"], ["y"], name="relu")],
                   [tensor_info("x", [1, 4, 6, 6])], [tensor_info("y", [1, 4, 3, 3])], consts)  # fmt: skip
    return save_onnx(m, tmp_path / "slice_two_axes.onnx")


def _built_and_run(tmp_path, path, soc, xs, tol):
    """First-fit export of ``path`` on ``soc``, built and run on each input set of ``xs``; every
    output equal to the simulation's and within ``tol`` of onnxruntime's."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    import onnxruntime as ort

    s = npukit.Study(path, soc, placement="first-fit")
    g = s.graph
    names = [g.tensors[t].name for t in g.inputs]
    s.set_data({n: np.stack([x[k] for x in xs]) for k, n in enumerate(names)})
    d = tmp_path / "e"
    s.export(d)
    make(d)
    (d / ".w").mkdir()
    sim = npukit.pipeline.simulate(s.result, s.data, range(len(xs)))
    shapes = [g.tensors[t].shape for t in g.inputs]
    for k, x in enumerate(xs):
        got = run_program(d, ["./model"], [a.reshape(sh) for a, sh in zip(x, shapes)], shapes, d / ".w")[0]
        want = ort.InferenceSession(str(path)).run(None, {n: a.reshape(sh) for n, a, sh in zip(names, x, shapes)})[0]
        assert got.shape == want.shape
        assert np.array_equal(got.ravel(), np.asarray(sim[k][0]).ravel())
        assert np.abs(got - want).max() <= tol, np.abs(got - want).max()
    return s, d


@pytest.mark.slow
def test_an_int8_matmul_of_two_activations_with_an_add_runs_on_the_dla(tmp_path):
    rng = np.random.default_rng(3)
    xs = [(rng.random((4, 5), np.float32), rng.random((5, 3), np.float32)) for _ in range(3)]
    s, d = _built_and_run(tmp_path, _matmul_add(tmp_path), "arm-dsp-dla", xs, tol=0.03)  # int8 steps of ~0.014
    assert {s.plan.processor[i] for i in range(2)} == {"dla"} and set(s.costs["bits"]) == {"int8"}
    calls = (d / "src" / "partitions_nvdla.c").read_text()
    assert calls.count("nvdla_dequantize(") == 2 and "nvdla_matmul(&t_in0_f, &t_in1_f," in calls


@pytest.mark.slow
@pytest.mark.parametrize("soc,lib", [("tda4vm-like", "vxlib"), ("ethos-u55-256", "ethosu")])
def test_a_slice_over_two_axes_runs_on_a_kernel_library(tmp_path, soc, lib):
    rng = np.random.default_rng(4)
    xs = [(rng.standard_normal((1, 4, 6, 6)).astype(np.float32),) for _ in range(3)]
    s, d = _built_and_run(tmp_path, _slice_two_axes(tmp_path), soc, xs, tol=0.05)
    sl = s.graph.resolve("slice")[0]
    assert s.plan.processor[sl] != s.soc.host
    assert s.graph.ops[sl].attrs["arg1"] == (2, 3) and s.graph.ops[sl].attrs["arg4"] == (2, 2)
    assert f"{lib}_slice_params slc = {{2, {{2, 3}}, {{0, 1}}, {{6, 6}}, {{2, 2}}}};" in "".join(
        p.read_text() for p in (d / "src").glob("partitions_*.c"))


@pytest.mark.slow
def test_a_failed_run_names_the_step_that_failed(tmp_path):
    """The program said only "failed with status N"; it now names the step: here a DLA conv whose
    stride an edit of the generated code set to 0 (the kernel refuses it: status 6)."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    s = npukit.Study(npukit.__file__.rsplit("/npukit/", 1)[0] + "/sample_models/digits_cnn.onnx", "arm-dsp-dla",
                     placement="first-fit")  # fmt: skip
    d = tmp_path / "e"
    s.export(d)
    src = d / "src" / "partitions_nvdla.c"
    text = src.read_text()
    assert "nvdla_conv2d_params conv = {1, 1," in text
    src.write_text(text.replace("nvdla_conv2d_params conv = {1, 1,", "nvdla_conv2d_params conv = {0, 1,", 1))
    make(d)
    (d / ".w").mkdir()
    x = np.zeros((1, 1, 8, 8), np.float32)
    with pytest.raises(npukit.NpukitError) as e:
        run_program(d, ["./model"], [x], [(1, 1, 8, 8)], d / ".w")
    assert "npukit_model_run failed with status 6 in partition 0 on dla (partition_dla_0: /conv1/Conv, " in str(e.value)


def _embedding(tmp_path):
    """ids (int64, [1, 8]) -> Gather rows of a 50 x 4 table (negative ids count from the end)."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    table = nh.from_array(np.arange(200, dtype=np.float32).reshape(50, 4) / 10, "E")
    m = onnx_model([h.make_node("Gather", ["E", "ids"], ["y"], name="emb", axis=0)],
                   [tensor_info("ids", [1, 8], TensorProto.INT64)], [tensor_info("y", [1, 8, 4])], [table])  # fmt: skip
    return save_onnx(m, tmp_path / "embedding.onnx")


@pytest.mark.slow
def test_an_index_out_of_range_fails_the_run_naming_the_input(tmp_path):
    """TVM's take reads wherever an index points: the generated program, given an id past the table
    (by ``./model``, where npukit's own data checks do not run), read out of bounds (a segfault, a
    HardFault on a Cortex-M, or garbage and exit 0).  An index input is now checked before the run:
    in range it runs as onnxruntime does, out of range the run fails naming the input (exit 1)."""
    path = _embedding(tmp_path)
    ok = [np.array([[0, 1, 2, 49, -1, -50, 7, 8]], np.int64)]
    s, d = _built_and_run(tmp_path, path, "tda4vm-like", [ok], 0.0)
    assert "input ids: indices into E (emb, 50 entries)" in (d / "src" / "model.c").read_text()
    for bad in (50, -51, 10**8):
        x = ok[0].copy()
        x[0, 3] = bad
        with pytest.raises(npukit.NpukitError) as e:
            run_program(d, ["./model"], [x], [(1, 8)], d / ".w")
        assert "npukit_model_run failed with status 6 in input 'ids': an index out of -50..49 for 'emb'" in str(e.value)
