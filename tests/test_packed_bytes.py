"""Packed sub-byte tensors take whole bytes, and a trace shows the figures it computed with."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SAMPLES, onnx_model, save_onnx, tensor_info

import npukit


def _odd7(tmp_path):
    """x [1, 64] @ w [64, 7] -> relu -> softmax: seven values cross to the host."""
    from onnx import helper as h
    from onnx import numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 7)).astype(np.float32), "w")
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="fc"), h.make_node("Relu", ["m"], ["r"], name="act"),
             h.make_node("Softmax", ["r"], ["y"], name="sm", axis=-1)]  # fmt: skip
    return save_onnx(onnx_model(nodes, [tensor_info("x", [1, 64])], [tensor_info("y", [1, 7])], [w]),
                     tmp_path / "odd7.onnx")  # fmt: skip


def test_seven_int4_values_take_four_bytes(tmp_path):
    s = npukit.Study(_odd7(tmp_path), "riscv-accel").pin("fc", "accel").pin("act", "accel")
    s.set_bits("int4", processor="accel")
    b = s.boundaries.set_index("tensor").loc["r"]
    assert b["bytes"] == 4  # ceil(7 * 4 / 8), not 3.5
    link = s.soc.link("accel", "riscv")
    k = 2 if link.via_dram else 1
    assert b["transfer_us"] == pytest.approx(link.latency_us + k * 4 / (link.bandwidth_gbps * 1000))
    # the matmul reads x (64 int4 values: 32 B) and w (448 int4 values: 224 B); its output is read
    # in the kernel (the relu is fused), which writes 7 int4 values: 4 B
    costs = s.costs.set_index("name")
    assert costs.loc["fc", "bytes"] + costs.loc["act", "bytes"] == 32 + 224 + 4
    text = s.explain("sm")
    assert "ceil(elements * bits/8) = ceil(7 * 4/8) = 4 B" in text


def test_a_trace_shows_the_utilisation_it_computed_with():
    """digits' first conv on the DLA: util_mac = fill(1, 64) * fill(8, 16) = 1/64 * 1/2 = 0.0078125,
    shown as such, so the compute formula's shown values give its result."""
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    text = s.explain("/conv1/Conv")
    assert "fill(IC/groups=1, 64) * fill(OC=8, 16) * fill(pixels=64, 1) = 0.0078125" in text
    assert "4,608 / (1024 * 0.0078125 * 1)" in text
