"""A layer bit-width inside one partition: the op after it reads a tensor written at another width and
converts it as it loads it -- 2 vector ops per element at its own width's vector rate, the input's
bytes at the width it was written at -- said in its trace (no conversion was charged anywhere)."""

from __future__ import annotations

from conftest import initializer, onnx_model, save_onnx, tensor_info

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
