"""Generated code on every sample model and every bundled profile (issues 11 and 12): the export
builds with -Werror on the host, builds for the profile's own target (aarch64 Linux, RISC-V Linux or
Cortex-M7 firmware) and runs there under its emulator with outputs bit for bit those of the host
build; the host build of every sample is clean under valgrind."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import SAMPLES, missing_tool

import npukit
from npukit.codegen.build import make, run_program
from npukit.soc import bundled

pytestmark = pytest.mark.slow

MODELS = ["digits_cnn.onnx", "digits_cnn.pt2", "digits_cnn_float.tflite", "digits_cnn_int8.tflite",
          "digits_cnn_qdq.onnx", "digits_cnn_qop.onnx", "tiny_detector.onnx", "mobilenet_v1_025_int8.tflite",
          "transformer_encoder.onnx"]  # fmt: skip


@pytest.mark.parametrize("soc", sorted(bundled()))
@pytest.mark.parametrize("model", MODELS)
def test_every_sample_builds_and_runs_on_the_profiles_target(model, soc, tmp_path):
    from npukit.codegen.targets import available

    s = npukit.Study(SAMPLES / model, soc)
    ok, why = available(s.soc.target)
    if not ok:
        missing_tool(why)
    # four samples: a discrete output (NMS's selected boxes) can flip on a one-step difference of a
    # box coordinate in one sample; the verdict is held over the samples run, as `npukit build` holds it
    r = s.build(tmp_path / "export", samples=4, target=True)
    runs = r["runs"]
    assert "host" in runs and s.soc.target in runs, runs
    # bit for bit; except that a float kernel calling libm (expf, erff, tanhf: softmax, GELU, layer norm)
    # may differ in the last place between two C libraries (glibc on x86-64 and on aarch64)
    t = runs[s.soc.target]
    assert t.get("bit_exact_with_host") is True or all(o["max_rel"] <= 1e-5 for o in t["outputs"].values()), t
    # the host build against the simulation: the verdict `npukit build` exits 1 on (relative RMS within
    # the tolerance, the same shapes)
    assert runs["host"]["within_tolerance"] and r["outputs_agree"], r["mismatches"]
    assert all(np.isfinite(out["max_abs"]) for out in runs["host"]["outputs"].values())


@pytest.mark.parametrize("model", MODELS)
def test_the_host_build_is_clean_under_valgrind(model, tmp_path):
    if shutil.which("valgrind") is None:
        missing_tool("valgrind is not installed")
    s = npukit.Study(SAMPLES / model, "arm-dsp-dla")
    d = tmp_path / "export"
    s.export(d)
    make(d)
    g = s.graph
    shapes = [g.tensors[t].shape for t in g.inputs]
    work = d / ".w"
    work.mkdir()
    argv = ["valgrind", "-q", "--error-exitcode=1", "--leak-check=full", "./model"]
    got = run_program(d, argv, list(s.data.samples[0]), shapes, work)  # raises BuildFailed on any error
    plain = run_program(d, ["./model"], list(s.data.samples[0]), shapes, work)
    assert len(got) == len(g.outputs) and all(np.array_equal(a, b) for a, b in zip(got, plain, strict=True))
