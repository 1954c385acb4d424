"""An int8 TFLite model with a float input and output (the converter's QUANTIZE first, DEQUANTIZE
last) on ethos-u55-256: the float side of a (de)quantize -- the QUANTIZE's float32 input, the
DEQUANTIZE's float32 output -- is held in its own dtype whatever the op's bit-width, so the op's
bytes count it at 4 bytes an element and the boundary next to it moves the float tensor and
converts nothing (the op does it).  It was counted twice: the op read its fp32 input at int8
bytes, and the boundary before it charged a quantize of the same tensor (after the DEQUANTIZE,
a dequantize); the numeric error rounded the input to a grid calibrated on [0, 1) before the
model's own QUANTIZE, 48% output error on inputs in [0, 3).  Figures by hand from the profile."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from tflite_builder import Graph, Op, T, build

import npukit
from npukit import pipeline
from npukit.placement import Additive, Evaluator, groups_of

S_IN = 3 / 255  # the input QUANTIZE holds [0, 3]: (-128 - -128) * S_IN .. (127 - -128) * S_IN


def _model(path, pool: bool = False):
    """input [1,8,8,3] f32 -> QUANTIZE (S_IN, -128) -> CONV_2D 3x3 s2 3->8 (RELU6) [-> AVERAGE_POOL_2D
    2x2 s2] -> DEQUANTIZE -> out f32."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(8).astype(np.float32) * 0.1
    sw = np.abs(w).reshape(8, -1).max(1) / 127
    s_c = 6 / 255
    ts = [T("input", (1, 8, 8, 3)), T("input_int8", (1, 8, 8, 3), "int8", scale=[S_IN], zero_point=[-128]),
          T("conv/w", (8, 3, 3, 3), "int8", data=np.round(w / sw[:, None, None, None]).astype(np.int8), scale=list(sw),
            zero_point=[0] * 8),
          T("conv/b", (8,), "int32", data=np.round(b / (S_IN * sw)).astype(np.int32), scale=list(S_IN * sw),
            zero_point=[0] * 8),
          T("conv", (1, 4, 4, 8), "int8", scale=[s_c], zero_point=[-128])]  # fmt: skip
    ops = [Op("QUANTIZE", ["input"], ["input_int8"]),
           Op("CONV_2D", ["input_int8", "conv/w", "conv/b"], ["conv"], "Conv2DOptions",
              {"Padding": 0, "StrideW": 2, "StrideH": 2, "FusedActivationFunction": 3, "DilationWFactor": 1,
               "DilationHFactor": 1})]  # fmt: skip
    last = "conv"
    if pool:
        ts.append(T("pool", (1, 2, 2, 8), "int8", scale=[s_c], zero_point=[-128]))
        ops.append(Op("AVERAGE_POOL_2D", ["conv"], ["pool"], "Pool2DOptions",
                      {"Padding": 1, "StrideW": 2, "StrideH": 2, "FilterWidth": 2, "FilterHeight": 2}))  # fmt: skip
        last = "pool"
    ts.append(T("out", (1, 2, 2, 8) if pool else (1, 4, 4, 8)))
    ops.append(Op("DEQUANTIZE", [last], ["out"]))
    path.write_bytes(build(Graph(ts, ops, ["input"], ["out"])))
    return path


@pytest.fixture(scope="module")
def qconv(tmp_path_factory):
    return _model(tmp_path_factory.mktemp("m") / "qconv.tflite")


def _row(df, name):
    return df.set_index("name").loc[name]


def test_the_float_side_of_the_model_quantize_and_dequantize_is_counted_once(qconv):
    s = npukit.Study(qconv, "ethos-u55-256", placement="first-fit")
    assert {p for p in s.plan.processor} == {"npu"}
    costs, r = s.costs, s.result
    g = s.graph
    q = next(op.op_id for op in g.ops if op.name == "input_int8")
    dq = next(op.op_id for op in g.ops if op.name == "out")
    # the QUANTIZE on the NPU (int8): 1*8*8*3 = 192 elements read as fp32, written as int8
    x = _row(costs, "input_int8")
    assert x["bits"] == "int8"
    w = r.ops[q].weight_bytes  # its scale and zero point
    assert x["bytes"] == 192 * 4 + 192 + w
    assert x["memory_cycles"] == (192 * 4 + 192) / 8  # dram_bytes_per_cycle 8 (the weight port's 5 B/1 is less)
    assert x["compute_cycles"] == 3 * 192 / (8 * 3 / 8)  # 3 ops an element, 8 lanes of which C=3 fill 3
    assert x["cycles"] == 192 + 64 + 3000  # compute-bound, op overhead, the partition's call
    # the DEQUANTIZE: 1*4*4*8 = 128 elements read as int8, written as fp32
    y = _row(costs, "out")
    assert y["bytes"] == 128 + 128 * 4 + r.ops[dq].weight_bytes
    assert y["memory_cycles"] == (128 + 128 * 4) / 8 == 80
    assert y["compute_cycles"] == 2 * 128 / 8
    assert y["cycles"] == 80 + 64
    # the boundaries move the float tensors and convert nothing: the model's own ops do
    b = s.boundaries.set_index("tensor")
    assert b.loc["input", "bytes"] == 1 * 8 * 8 * 3 * 4 == 768
    assert b.loc["input", "transfer_us"] == pytest.approx(2 + 2 * 768 / 4000)  # latency 2 us, via the shared SRAM
    assert b.loc["out", "bytes"] == 1 * 4 * 4 * 8 * 4 == 512
    assert b.loc["out", "transfer_us"] == pytest.approx(2 + 2 * 512 / 4000)
    for t in ("input", "out"):
        assert (b.loc[t, "quantize_us"], b.loc[t, "layout_us"], b.loc[t, "conversion"]) == (0, 0, "")
    assert s.totals["quantize_us"] == 0 and s.totals["busy_us"]["m55"] == 0
    assert s.totals["latency_us"] == pytest.approx(2.384 + (3256 + 322 + 144) / 500 + 2.256)


def test_explain_shows_the_float_side_in_its_own_dtype(qconv):
    s = npukit.Study(qconv, "ethos-u55-256", placement="first-fit")
    q, dq = s.explain("input_int8"), s.explain("out")
    assert "bytes: in input 768 B (fp32: quantize's float side, in its own dtype) + weights 5 B + out 192 B = 965 B" in q
    assert "elements * bits/8 = 192 * 32/8 = 768 B (fp32 on m55, held alike on npu" in q
    assert "quantize_us" not in q
    assert "in conv 128 B + weights 5 B + out 512 B (fp32: dequantize's float side, in its own dtype) = 645 B" in dq
    assert "elements * bits/8 = 128 * 32/8 = 512 B (fp32 on npu, held alike on m55" in dq
    assert "quantize_us" not in dq


def test_the_placement_search_prices_the_boundaries_as_the_cost_model_does(qconv):
    """The search's own figures -- a virtual plan's crossings and its bound, the additive model's
    boundary terms -- read the same widths as the real boundaries (they charged the quantize)."""
    s = npukit.Study(qconv, "ethos-u55-256")
    model, g, soc, cfg = s._model, s.graph, s.soc, s.config
    assert {p for p in s.plan.processor} == {"npu"}
    bits_of, _runs = pipeline.bits_policy(soc, cfg, g)
    groups = groups_of(g, soc, pipeline.verdicts(model, soc, cfg))
    cols = {p: hashlib.sha256("|".join(bits_of.table[p]).encode()).digest() for p in soc.names}
    ev = Evaluator(g, soc, pipeline.tables(model), bits_of, groups, pipeline.cost_model(model, soc), bits_of.table,
                   (None, cols))  # fmt: skip
    add = Additive(ev, {}, b"qconv")
    real = {b.tensor: b.transfer_us + b.layout_us + b.quantize_us for b in s.result.bounds}
    q = next(op.op_id for op in g.ops if op.name == "input_int8")
    last = next(op.op_id for op in g.ops if op.name == "out")
    assert add.boundary_us("in0", "m55", "npu", None, q) == real["in0"] == pytest.approx(2.384)
    out = g.outputs[0]
    assert add.boundary_us(out, "npu", "m55", last, None) == real[out] == pytest.approx(2.256)
    assign = ["npu"] * len(groups)
    lat, _energy = ev.latency(assign)
    assert lat == pytest.approx(s.totals["latency_us"])
    assert ev.bound(assign) <= lat + 1e-9
    assert ev.bound(assign) == pytest.approx(lat)  # a chain: the bound is the latency


def test_the_error_is_the_models_own_whatever_the_calibration_data(tmp_path):
    """Inputs in [0, 3), ranges calibrated on [0, 1): the simulation rounded the input to the
    calibrated grid before the model's QUANTIZE (48% output error, 6.3 dB); the model's own
    QUANTIZE reads it now, as on the device.  With the pool on the host at int8, its output is
    rounded on the grid of the QUANTIZE after it, the model's own, not on the calibrated one (30%)."""
    path = _model(tmp_path / "qpool.tflite", pool=True)
    rng = np.random.default_rng(7)
    np.savez(tmp_path / "x.npz", x=(rng.random((8, 1, 8, 8, 3)) * 3).astype(np.float32),
             calib=rng.random((8, 1, 8, 8, 3)).astype(np.float32))  # fmt: skip
    s = npukit.Study(path, "ethos-u55-256", placement="first-fit").set_data(tmp_path / "x.npz")
    assert {p for p in s.plan.processor} == {"npu"}
    assert s.error_dict()["outputs"][0]["snr_db"] == np.inf
    rounded, edges = pipeline.products._error_args(s.result)
    assert edges == {}  # no boundary rounds anything
    s.pin("pool", "m55").pin("pool/dequantize", "m55").pin("pool/quantize", "m55").set_bits("int8", processor="m55")
    g = s.graph
    pool = next(op.op_id for op in g.ops if op.name == "pool")
    assert s.plan.processor[pool] == "m55" and pool in pipeline.products._error_args(s.result)[0]  # rounded at int8
    em = pipeline.products.error_model(s._model, s.data)
    # (TVM reads an int8 average pool as dequantize(1, 0) -> avg_pool2d -> quantize(1, 0): integers averaged)
    assert em.ranges[g.ops[pool].outputs[0]] == (-128.0, 127.0)
    assert em.ranges["in0"] == pytest.approx((0.0, 255 * S_IN))  # the input QUANTIZE's grid, not [0, 1)
    assert s.error_dict()["outputs"][0]["snr_db"] == np.inf
    # inside the model a quantize after an op at int8 is that op's requantisation (an int8 deployment
    # folds it): its float input is held at the op's width, so nothing converts it as it loads it
    assert "converts its input" not in s.explain("pool/quantize")
