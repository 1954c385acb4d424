"""Figures follow what a processor does with the data, not how the file writes it: a vector unit
fills its lanes along the dim the processor's own layout holds innermost (the same network costs the
same from ONNX (NCHW), TFLite (NHWC) and torch.export, and a global average pool the same with or
without keepdims), and a lookup reads the rows it gathers, not its whole table."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DIGITS_ONNX, DIGITS_PT2, DIGITS_TFLITE, SAMPLES, initializer, onnx_model, save_onnx, tensor_info

import npukit
from npukit.cost.layouts import image_layouts, innermost
from npukit.soc import bundled

PROFILES = sorted(bundled())


@pytest.mark.parametrize("policy", ["cost", "first-fit"])
def test_the_same_network_from_onnx_tflite_and_torch_costs_alike_on_every_profile(policy):
    for soc in PROFILES:
        totals = [npukit.Study(m, soc, placement=policy).totals for m in (DIGITS_ONNX, DIGITS_TFLITE, DIGITS_PT2)]
        for t in totals[1:]:
            assert t["partitions"] == totals[0]["partitions"], soc
            assert t["latency_us"] == pytest.approx(totals[0]["latency_us"], rel=1e-9), soc
            assert t["energy_uj"] == pytest.approx(totals[0]["energy_uj"], rel=1e-9), soc
            assert t["busy_us"] == pytest.approx(totals[0]["busy_us"], rel=1e-9), soc


def test_image_layouts_follow_the_file_and_skip_tensors_no_image_op_reaches(graph_of):
    g = graph_of(DIGITS_ONNX)
    conv = next(op for op in g.ops if op.kind == "conv2d")
    lays = image_layouts(g)
    assert lays[conv.outputs[0]] == "NCHW"
    assert image_layouts(graph_of(DIGITS_TFLITE))[next(op for op in graph_of(DIGITS_TFLITE).ops
                                                       if op.kind == "conv2d").outputs[0]] == "NHWC"  # fmt: skip
    assert image_layouts(graph_of(SAMPLES / "transformer_encoder.onnx")) == {}  # [batch, heads, seq, dim]: no image op reaches them
    # the dim a processor holds innermost: channels on NHWC / tiled, the last spatial dim on NCHW;
    # a dim of one element takes no place
    assert innermost("NCHW", (1, 16, 8, 4), "NHWC") == (16, "C")
    assert innermost("NHWC", (1, 8, 4, 16), "tiled") == (16, "C")
    assert innermost("NHWC", (1, 8, 4, 16), "NCHW") == (4, "W")
    assert innermost("NCHW", (1, 16, 1, 1), "NCHW") == (16, "C")
    assert innermost(None, (1, 4, 8, 64), "NHWC") == (64, "")
    assert innermost(None, (1, 10, 1), "NCHW") == (10, "")


def _gap(tmp_path: Path, keepdims: bool) -> Path:
    from onnx import helper as h

    tail = (h.make_node("GlobalAveragePool", ["r"], ["y"]) if keepdims
            else h.make_node("ReduceMean", ["r"], ["y"], axes=[2, 3], keepdims=0))  # fmt: skip
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             h.make_node("Relu", ["c"], ["r"], name="relu"), tail]  # fmt: skip
    out = tensor_info("y", [1, 24, 1, 1] if keepdims else [1, 24])
    m = onnx_model(nodes, [tensor_info("x", [1, 3, 6, 6])], [out], [initializer("w", [24, 3, 3, 3]), initializer("b", [24])])
    return save_onnx(m, tmp_path / f"gap_{keepdims}.onnx")


@pytest.mark.parametrize("soc", ["ethos-u55-256", "vsi-npu", "tda4vm-like", "arm-dsp-dla"])
def test_a_global_average_pool_costs_the_same_with_or_without_keepdims(tmp_path, soc):
    figs = []
    for keep in (True, False):
        st = npukit.Study(_gap(tmp_path, keep), soc, placement="first-fit")
        i = next(op.op_id for op in st.graph.ops if op.kind == "mean")
        c = st.result.ops[i]
        figs.append((st.plan.processor[i], c.compute_cycles, c.latency_us))
    assert figs[0] == figs[1]


def test_util_vec_fills_channels_on_nhwc_and_width_on_nchw_with_its_trace(tmp_path):
    """The relu of a [1, 24, 6, 6] NCHW conv output, on arm-dsp-dla's arm host (made 16 lanes): NHWC holds
    C = 24 innermost, fill(24, 16) = 24 / 32 = 0.75; made NCHW, W = 6: 6 / 16 = 0.375."""
    path = _gap(tmp_path, True)
    base = npukit.load_soc("arm-dsp-dla").with_changes({"processors.arm.vector_lanes": 16})
    for layout, util, dim in (("NHWC", 0.75, "C=24"), ("NCHW", 0.375, "W=6")):
        soc = base.with_changes({"processors.arm.layout": layout})
        st = npukit.Study(path, soc, placement="first-fit").pin("relu", "arm")
        i = next(op.op_id for op in st.graph.ops if op.kind == "relu")
        (comp,) = [c for c in st.result.ops[i].k.compute if c.inner != (1, "")]
        assert comp.util_vec == util
        assert f"fill({dim}, innermost in arm's {layout} layout; vector_lanes 16)" in st.explain("relu")


def test_an_embedding_lookup_reads_the_rows_it_gathers_not_the_table(tmp_path):
    """4 token ids into a 5000 x 64 fp32 table: the lookup reads 4 rows, 4 * 64 * 4 = 1,024 B, once
    (it was charged the whole 1,280,000 B table, re-read 4x as if tiled against its input: 270 us)."""
    from onnx import TensorProto
    from onnx import helper as h

    m = onnx_model([h.make_node("Gather", ["emb", "ids"], ["y"], name="lookup", axis=0)],
                   [tensor_info("ids", [1, 4], TensorProto.INT64)], [tensor_info("y", [1, 4, 64])],
                   [initializer("emb", [5000, 64])])  # fmt: skip
    st = npukit.Study(save_onnx(m, tmp_path / "emb.onnx"), "arm-dsp-dla", placement="first-fit")
    i = next(op.op_id for op in st.graph.ops if op.kind == "take")
    c = st.result.ops[i]
    assert c.weight_bytes == 4 * 64 * 4
    assert c.k.memory[c.k.ids.index(i)].reread == (0, 0.0, 0.0)
    assert "weights 1,024 B (the rows a lookup reads of its 1,280,000 B table)" in st.explain("lookup")


def test_a_layout_copy_on_a_cpu_without_an_fpu_moves_fp32_as_integers():
    """riscv-accel's host has no FPU (fp32 0.025 vector ops per cycle, int16 0.5): the NCHW -> tiled
    copy of the digits CNN's 1x1x8x8 fp32 input was costed as soft-float arithmetic, 64 / 0.025 =
    2,560 cycles.  A copy runs at the width moving the most bits per cycle: int16 (0.5 * 16 = 8 bits
    per cycle against 0.8 for fp32), 32 / 16 = 2 moves per element: (2 * 64 / 0.5 + 2 * 256 / 4) =
    384 cycles at 100 MHz = 3.84 us; its energy counts the same ops at int16's pJ:
    (2 * 64 * 10 + 2 * 256 * 5) / 1e6 + 1 mW * 3.84 us / 1e3 = 0.00768 uJ."""
    s = npukit.Study(DIGITS_ONNX, "riscv-accel")
    (b,) = [b for b in s.result.bounds if b.tensor == "in0"]
    lay = b.layout
    assert (lay.on, lay.on_bits, lay.ops_per_elem, lay.cycles) == ("riscv", "int16", 2, 384.0)
    assert lay.us == pytest.approx(3.84) and lay.energy_uj == pytest.approx(0.00768)


def test_a_boundary_converts_only_what_the_generated_code_converts():
    """The int8 digits CNN on cortex-m7-cmsis-nn: its flatten (an int8 reshape) runs on the m7, whose
    default width is fp32; the int8 tensor crossing to and from it was charged a dequantize and a
    quantize (2.40 us) that the generated code never runs: the model's integer tensor keeps its width.
    A layout names how a rank-4 tensor is held: the detector's rank-3 boxes crossing arm -> dsp were
    charged an NCHW -> NHWC conversion the code never makes (both sides row-major)."""
    s = npukit.Study(SAMPLES / "digits_cnn_int8.tflite", "cortex-m7-cmsis-nn", placement="first-fit")
    crossing = [b for b in s.result.bounds if {b.src, b.dst} == {"m7", "cmsis_nn"}]
    assert crossing and all(b.quantize is None and b.layout is None for b in crossing)
    d = npukit.Study(SAMPLES / "tiny_detector.onnx", "arm-dsp-dla", placement="first-fit")
    ranks = {len(d.graph.tensors[b.tensor].shape): b.layout is not None for b in d.result.bounds}
    assert ranks.get(3) is False and ranks.get(4) is True
