"""Which integer grids are calibrated on the data, and which are the model's own.

A quantized model (a QDQ ONNX model, an int8 TFLite one) carries the grid of every tensor it
quantizes itself (``quant.scheme.model_ranges``); where every tensor a config stores at an integer
width is on such a grid, nothing was calibrated on the data.  The study command once printed
"note: integer scales calibrated on seeded random inputs" for any op at an integer width, and the
export's manifest said ``data.calibrated: true`` (``npukit build`` then refused an export whose
data was gone) from the same coarse test.  Both now ask ``pipeline.calibrated_tensors``: the
tensors the simulation and the generated code store on an integer grid whose range came from the
data."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import DETECTOR, DIGITS_INT8, DIGITS_ONNX, ROOT, SAMPLES, missing_tool, run_cli

import npukit
from npukit.pipeline import calibrated_tensors, error_model
from npukit.quant.scheme import model_grid, model_ranges

QDQ = SAMPLES / "digits_cnn_qdq.onnx"
NOTE = "note: integer scales calibrated on seeded random inputs"
# the QDQ model's first conv on the host and its bias add on the DLA: the conv's output (t2, not a
# tensor the model quantizes) crosses the boundary at int8, on a range calibrated on the data
SPLIT = {"pins": {"/conv1/Conv": "arm", "/conv1/Conv/add": "dla"}, "bits": {"arm": "int8"}}


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """The QDQ digits model and the float one, copied without their .npz sidecars (seeded random data)."""
    d = tmp_path_factory.mktemp("bare")
    shutil.copy(QDQ, d / "qdq.onnx")
    shutil.copy(DIGITS_ONNX, d / "float.onnx")
    return d


def _study(path, pins=(), bits=()):
    s = npukit.Study(path, "arm-dsp-dla")
    for node, proc in dict(pins).items():
        s.pin(node, proc)
    for proc, b in dict(bits).items():
        s.set_bits(b, processor=proc)
    return s


def test_the_qdq_model_stores_only_its_own_grids(bare):
    s = _study(bare / "qdq.onnx")
    assert s.data.source.startswith("seeded random") and "int8" in s.result.bits
    assert calibrated_tensors(s.result) == frozenset()
    assert s.project.manifest["data"]["calibrated"] is False
    assert "calibrated on" not in s.project.files["README.md"]
    r = run_cli("study", bare / "qdq.onnx", "--soc", "arm-dsp-dla", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "note: integer scales" not in r.stdout


def test_a_float_model_at_int8_is_calibrated(bare):
    s = _study(bare / "float.onnx")
    assert calibrated_tensors(s.result) == {"in0", "t2", "t5", "t6", "t7", "t10", "t12"}
    assert s.project.manifest["data"]["calibrated"] is True
    assert "\nInteger scales and zero points were calibrated on seeded random inputs" in s.project.files["README.md"]
    r = run_cli("study", bare / "float.onnx", "--soc", "arm-dsp-dla", timeout=300)
    assert r.returncode == 0, r.stderr
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("note: integer")] == [NOTE + " (16 samples, seed 0; "
            "float inputs uniform in [0, 1)): no data shipped with the model; give your own with study.set_data() or --data"]  # fmt: skip


def test_a_qdq_tensor_the_model_does_not_quantize_stored_at_int8_is_calibrated(bare):
    s = _study(bare / "qdq.onnx", **SPLIT)
    assert calibrated_tensors(s.result) == {"t2"}
    assert s.project.manifest["data"]["calibrated"] is True
    r = run_cli("study", bare / "qdq.onnx", "--soc", "arm-dsp-dla", "--pin", "/conv1/Conv=arm",
                "--pin", "/conv1/Conv/add=dla", "--bits", "arm=int8", timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert sum(ln.startswith(NOTE) for ln in r.stdout.splitlines()) == 1


def test_an_int8_tflite_model_is_not_calibrated():
    s = _study(DIGITS_INT8, bits={"arm": "int8"})
    assert calibrated_tensors(s.result) == frozenset()
    assert s.project.manifest["data"]["calibrated"] is False


@pytest.mark.parametrize("case", ["qdq", "qdq-split", "int8-host", "float", "detector"])
def test_the_code_reads_a_data_range_exactly_for_the_calibrated_tensors(bare, case, monkeypatch):
    """The generated code (``codegen.storage.Storage``, the one place it reads a tensor's range for an
    integer grid) reads a range that is not the model's own for exactly ``calibrated_tensors``: the
    cheap graph-only set the CLI note uses is the one the code generator stores."""
    from npukit.codegen import storage
    from npukit.pipeline.caches import CODE

    path, kw = {"qdq": (bare / "qdq.onnx", {}), "qdq-split": (bare / "qdq.onnx", SPLIT),
                "int8-host": (DIGITS_INT8, {"pins": {3: "arm"}, "bits": {"arm": "int8"}}),
                "float": (bare / "float.onnx", {}),
                "detector": (DETECTOR, {"bits": {"arm": "int8", "dsp": "int8"}})}[case]  # fmt: skip
    reads: set[str] = set()

    class Recording(dict):
        def get(self, k, d=None):
            reads.add(k)
            return dict.get(self, k, d)

    init = storage.Storage.__init__
    monkeypatch.setattr(storage.Storage, "__init__", lambda self, g, ranges: init(self, g, Recording(ranges)))
    CODE.clear()  # (another test's project of the same config would be no code generated here)
    s = _study(path, **kw)
    s.project  # noqa: B018 - generates the code
    assert reads - model_grid(s.result.graph) == calibrated_tensors(s.result)
    assert s.project.manifest["data"]["calibrated"] is bool(calibrated_tensors(s.result))


def test_the_model_grid_tensors_have_the_model_grid_in_the_calibration(bare):
    """Every tensor ``model_grid`` names has, in the calibration the code uses, a range of one of the
    model's own grids, not one measured on the data."""
    s = _study(bare / "qdq.onnx")
    g = s.result.graph
    em = error_model(s.result.model, s.data)
    grids = set(model_ranges(g).values())
    mg = model_grid(g)
    assert set(model_ranges(g)) <= mg and "t2" not in mg
    assert all(em.ranges[t] in grids for t in mg)


def test_build_takes_an_export_on_the_model_grids_without_its_data(bare, tmp_path):
    """An export calibrated on nothing (the QDQ model on its own grids) records ``calibrated: false``:
    `npukit build` runs it on other data rather than refusing."""
    s = _study(bare / "qdq.onnx")
    x = np.random.default_rng(1).random((4, 1, 8, 8), dtype="float32")
    np.savez(tmp_path / "d.npz", x=x)
    s.set_data(tmp_path / "d.npz")
    s.export(tmp_path / "ex")
    rec = json.loads((tmp_path / "ex" / "manifest.json").read_text())["data"]
    assert rec["calibrated"] is False and rec["path"] == str((tmp_path / "d.npz").resolve())
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make and a C compiler are needed")
    (tmp_path / "d.npz").unlink()  # refused while the manifest said calibrated
    b = run_cli("build", tmp_path / "ex", "--json", cwd=ROOT, timeout=600)
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["outputs_agree"] is True
