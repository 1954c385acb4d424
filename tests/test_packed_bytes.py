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


def _weights_of(study, node: str) -> float:
    """The kernel's weight bytes, as the trace states them."""
    import re

    return float(re.search(r"weights ([\d,]+) B", study.explain(node)).group(1).replace(",", ""))


def test_a_mac_weight_shaped_like_a_bias_is_held_at_the_ops_width(tmp_path):
    """A 1x1 depthwise conv's weight [C, 1, 1, 1] and a one-output layer's weight [K, 1] have one dim
    above 1, as a bias vector does; they were costed as int32 biases (4 B per value at int8).  At int8
    they take one byte per value; a bias add's (C,) vector still takes four."""
    from onnx import helper as h
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    wdw = numpy_helper.from_array(rng.standard_normal((6, 1, 1, 1)).astype(np.float32), "wdw")
    bias = numpy_helper.from_array(rng.standard_normal((6, 1, 1)).astype(np.float32), "bias")
    nodes = [h.make_node("Conv", ["x", "wdw"], ["c"], name="dw", group=6, kernel_shape=[1, 1]),
             h.make_node("Add", ["c", "bias"], ["y"], name="badd")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 6, 8, 8])], [tensor_info("y", [1, 6, 8, 8])], [wdw, bias])
    s = npukit.Study(save_onnx(m, tmp_path / "dw1.onnx"), "arm-dsp-dla", placement="first-fit")
    s.pin("dw", "dla").pin("badd", "dla").set_bits("int8", processor="dla")
    assert s.placement.set_index("name").loc[["dw", "badd"], "processor"].tolist() == ["dla", "dla"]
    # 6 int8 weights (were 24 B), then the fused add's 6 int32 biases
    assert ("bytes: in x 384 B + weights 6 B + conv2d out stays inside the kernel + weights 24 B + out 384 B = 798 B "
            "(DRAM 768, weights 30, on chip 0) at int8") in s.explain("dw")  # fmt: skip

    w = numpy_helper.from_array(rng.standard_normal((64, 1)).astype(np.float32), "w")
    m = onnx_model([h.make_node("MatMul", ["x", "w"], ["y"], name="fc1")], [tensor_info("x", [1, 64])],
                   [tensor_info("y", [1, 1])], [w])  # fmt: skip
    s = npukit.Study(save_onnx(m, tmp_path / "fc1.onnx"), "arm-dsp-dla", placement="first-fit")
    s.pin("fc1", "dla").set_bits("int8", processor="dla")
    assert _weights_of(s, "fc1") == 64
