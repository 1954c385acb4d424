"""A layer bit-width inside one partition: the op after it reads a tensor written at another width and
converts it as it loads it -- 2 vector ops per element at its own width's vector rate, the input's
bytes at the width it was written at -- said in its trace (no conversion was charged anywhere)."""

from __future__ import annotations

import shutil

import pytest
from conftest import DIGITS_ONNX, ROOT, initializer, missing_tool, onnx_model, save_onnx, tensor_info

import npukit


def _model(tmp_path):
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="c1", pads=[1, 1, 1, 1]),
             h.make_node("MaxPool", ["c"], ["y"], name="p1", kernel_shape=[2, 2], strides=[2, 2])]  # fmt: skip
    return save_onnx(onnx_model(nodes, [tensor_info("x", [1, 4, 8, 8])], [tensor_info("y", [1, 4, 4, 4])],
                                [initializer("w", [4, 4, 3, 3])]), tmp_path / "convpool.onnx")  # fmt: skip


def test_an_op_after_a_layer_at_another_width_pays_the_conversion(tmp_path):
    s = npukit.Study(_model(tmp_path), "arm-dsp-dla", placement="first-fit")
    s.pin("c1", "arm").pin("p1", "arm")  # one host partition: no boundary converts between them
    before = s.costs.set_index("name").loc["p1"]
    s.set_bits("int8", layer="c1")
    assert s.plan.partition[0] == s.plan.partition[1] and s.boundaries.empty
    after = s.costs.set_index("name").loc["p1"]
    assert (before["bits"], after["bits"]) == ("fp32", "fp32")
    # the conv's output: 4 x 8 x 8 = 256 elements, converted int8 -> fp32 at 4 vector ops per cycle (arm, fp32)
    assert after["compute_cycles"] - before["compute_cycles"] == 2 * 256 / 4
    assert before["bytes"] - after["bytes"] == 256 * (4 - 1)  # read as the conv wrote it: 1 byte per element
    assert "p1 converts" not in s.explain("c1")
    assert "max_pool2d converts its input c int8 -> fp32 as it loads it: 2 * 256 / vector_ops_per_cycle[fp32] 4 = 128" \
        in s.explain("p1")  # fmt: skip
    s.set_bits(None, layer="c1")
    assert s.costs.set_index("name").loc["p1"]["compute_cycles"] == before["compute_cycles"]


def test_a_receivers_layout_conversion_reads_the_tensor_as_it_arrives():
    """quantize_on = "src", layout_on = "dst": arm quantizes /relu1/Relu's 512 fp32 elements to int8
    before sending them, so the DLA's layout conversion reads 512 B, not the 2,048 B of the fp32
    tensor arm made (the sender-side quantize's width was ignored: a profile's layout cost came out
    3x too high)."""
    import tomllib

    doc = tomllib.loads((ROOT / "npukit" / "profiles" / "arm-dsp-dla.toml").read_text())
    doc["conversion"]["quantize_on"] = "src"
    s = npukit.Study(DIGITS_ONNX, npukit.load_soc(doc), placement="first-fit").set_support("dla", "relu", False)
    b = s.boundaries.set_index("tensor").loc["/relu1/Relu_output_0"]
    assert (b.src, b.dst, b.bytes) == ("arm", "dla", 512.0)
    dla = s.soc.processor("dla")
    assert dla.layout == "tiled" and dla.vector_ops_per_cycle["int8"] == 64 and dla.dram_bytes_per_cycle == 16
    assert b.layout_us == pytest.approx((512 / 64 + 2 * 512 / 16) / dla.clock_mhz, rel=1e-12)
    assert ("layout_us: on dla: (1*elements / vector_ops_per_cycle[int8] + 2*bytes(int8) / dram_bytes_per_cycle) "
            "/ clock_mhz = (1*512 / 64 + 2*512 / 16) / 1000") in s.explain("/conv2/Conv")  # fmt: skip


def test_a_layout_copy_runs_at_a_width_the_processor_runs():
    """A vector rate given for a width the processor does not run (fp32 on an int8 / fp16 DLA) made
    the layout copy run 'as fp32', 0.25 moves per element, and its energy took the smallest
    energy_pj_per_op of the widths it does run: a figure the profile never gave for fp32."""
    import tomllib

    doc = tomllib.loads((ROOT / "npukit" / "profiles" / "arm-dsp-dla.toml").read_text())
    doc["processors"]["dla"]["vector_ops_per_cycle"]["fp32"] = 4096
    s = npukit.Study(DIGITS_ONNX, npukit.load_soc(doc), placement="first-fit").set_support("dla", "relu", False)
    b = s.boundaries.set_index("tensor").loc["/relu1/Relu_output_0"]
    assert (b.src, b.dst, b.bytes) == ("arm", "dla", 2048.0)
    assert b.layout_us == pytest.approx((512 / 64 + 2 * 2048 / 16) / 1000, rel=1e-12)
    assert ("layout_us: on dla: (1*elements / vector_ops_per_cycle[int8] + 2*bytes(fp32) / dram_bytes_per_cycle) "
            "/ clock_mhz = (1*512 / 64 + 2*2,048 / 16) / 1000") in s.explain("/conv2/Conv")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("soc,layer_bits", [
    ("arm-dsp-dla", {"/conv1/Conv": "fp16"}),  # conv + bias at fp16 on the int8 DLA, its ReLU at int8
    ("hexagon-like", {"/fc1/Gemm": "fp16", "/fc1/Gemm/add": "int16"}),  # a matmul at fp16, its bias add at int16
])  # fmt: skip
def test_a_fused_kernel_computing_in_float_with_an_integer_output_quantizes_its_result(tmp_path, soc, layer_bits):
    """A conv / matmul kernel whose root runs at a float width while the tensor it writes is held at an
    integer one (a layer bit-width on the conv of an int8 DLA: the fused ReLU after it stays int8):
    the generated call passed the float input and the integer output to one npk conv2d / matmul, which
    refuses that mix (NPK_ERR_DTYPE), so the program failed ('npukit_model_run failed with status 2 in
    partition 0 on dla').  The kernel now writes a float scratch that a quantize call stores into the
    integer output, as the unfused matmul did; the program runs and agrees with the simulation."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    s = npukit.Study(DIGITS_ONNX, soc, {"placement": "first-fit", "layer_bits": layer_bits})
    node = next(iter(layer_bits))
    root = next(op for op in s.graph.ops if op.name == node)
    assert s.plan.processor[root.op_id] != s.soc.host
    src = "".join(text for path, text in s.code.items() if path.startswith("src/partitions_"))
    assert f"{node}: its float result to the integer output" in src
    rep = s.build(tmp_path / "e", samples=4)
    assert rep["outputs_agree"], rep["mismatches"]
