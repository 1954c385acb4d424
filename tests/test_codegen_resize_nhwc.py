"""A resize of an NHWC model (TFLite's RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR) runs on the
accelerators that take resize2d, as the same resize of an NCHW model (ONNX Resize) does: the
kernel library's resize reads the buffer as it lies through its (N, C, H, W) view, as the pools do.
Before, code generation refused every layout but NCHW ("code generation cannot run it here:
resize2d nearest_neighbor / asymmetric / floor in layout NHWC"), so a TFLite model kept its resize
on the host where the ONNX export of the same network offloaded it (tda4vm-like first-fit: a72
instead of c66x, 239.7 us against 279.5 us)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool

import npukit


@pytest.fixture(autouse=True)
def _cc():
    for t in ("make", "cc"):
        if shutil.which(t) is None:
            missing_tool(f"{t} is not installed")


def _resize_model(path, code, options, fields):
    pytest.importorskip("tflite")
    from tflite_builder import Graph, Op, T, build

    ts = [T("x", (1, 4, 4, 3)), T("size", (2,), "int32", data=np.array([8, 8], np.int32)), T("up", (1, 8, 8, 3)),
          T("y", (1, 8, 8, 3))]  # fmt: skip
    ops = [Op(code, ["x", "size"], ["up"], options, fields), Op("TANH", ["up"], ["y"])]
    path.write_bytes(build(Graph(ts, ops, ["x"], ["y"])))
    return path


@pytest.mark.parametrize("code, options, fields", [
    ("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions", {"AlignCorners": False, "HalfPixelCenters": False}),
    ("RESIZE_BILINEAR", "ResizeBilinearOptions", {"AlignCorners": False, "HalfPixelCenters": True}),
])  # fmt: skip
@pytest.mark.parametrize("soc, proc", [("tda4vm-like", "c66x"), ("hexagon-like", "hvx")])
def test_an_nhwc_resize_is_offloaded_and_its_code_agrees_with_the_simulation(tmp_path, code, options, fields, soc, proc):
    """At the widest width each processor runs (fp32, else int16) the code computes the simulation's
    values to within a step of the int16 grid; at the default widths a bilinear value near a step of
    the int8 grid may round to the next step (within the build's tolerance)."""
    path = _resize_model(tmp_path / "rs.tflite", code, options, fields)
    s = npukit.Study(path, soc, placement="first-fit")
    placed = dict(zip(s.placement["op"], s.placement["processor"], strict=True))
    assert placed["resize2d"] == proc
    report = s.build(tmp_path / "out", samples=4)
    assert report["outputs_agree"] and report["mismatches"] == []
    for p in s.soc.processors:
        s.set_bits("fp32" if "fp32" in p.macs_per_cycle else "int16", processor=p.name)
    report = s.build(tmp_path / "wide", samples=4)
    assert report["outputs_agree"] and report["runs"]["host"]["outputs"]["y"]["max_abs"] <= 1e-4
