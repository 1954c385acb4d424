"""A layout conversion that moves no byte is neither charged nor emitted; ``axis = "last"`` reads the
axis where the processor holds it.

1. NCHW <-> NHWC of a tensor with C = 1, or with H = W = 1 (after a global pool), leaves every byte
   where it is: the cost model charged a layout conversion at such a boundary (0.068 us arm -> dsp
   and 0.12 us back for a [1, 1, 8, 8] fp32 tensor on arm-dsp-dla) and the generated code called
   ``<lib>_layout_convert`` for it.  Now neither: the boundary's trace says why (``same memory
   order: C = 1``), the transfer is charged as before and the code copies the tensor across.
2. ``axis = "last"`` read the model's axis order (NCHW) while the DSP holds an image NHWC (channels
   innermost, as its vector lanes are filled): a softmax over C was refused and one over W accepted.

Compiling and running these exports against onnxruntime: tests/test_codegen_layouts.py.
"""

from __future__ import annotations

import pytest
from conftest import initializer, onnx_model, save_onnx, tensor_info

import npukit
from npukit.cost.layouts import memory_order, same_memory


def c1_model(tmp_path):
    """conv -> [1, 1, 8, 8] -> sigmoid -> relu: a one-channel feature map."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("Sigmoid", ["c"], ["s"], name="sig"),
             h.make_node("Relu", ["s"], ["y"], name="relu")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 3, 8, 8])], [tensor_info("y", [1, 1, 8, 8])],
                   [initializer("w", [1, 3, 3, 3])])  # fmt: skip
    return save_onnx(m, tmp_path / "c1.onnx")


def pooled_model(tmp_path):
    """conv -> [1, 8, 8, 8] -> global average pool -> [1, 8, 1, 1] -> sigmoid -> relu."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("GlobalAveragePool", ["c"], ["p"], name="gap"),
             h.make_node("Sigmoid", ["p"], ["s"], name="sig"),
             h.make_node("Relu", ["s"], ["y"], name="relu")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 3, 8, 8])], [tensor_info("y", [1, 8, 1, 1])],
                   [initializer("w", [8, 3, 3, 3])])  # fmt: skip
    return save_onnx(m, tmp_path / "pooled.onnx")


def across(path, bits: str = "fp32") -> npukit.Study:
    """The sigmoid on the DSP (NHWC), everything else on the host (NCHW): the tensor into it and the
    one out of it cross between the two layouts."""
    s = npukit.Study(path, "arm-dsp-dla", placement="first-fit")
    for op in s.graph.ops:
        s.pin(op.name, "dsp" if op.kind == "sigmoid" else "arm")
    return s.set_bits(bits, processor="dsp")


def softmax_model(tmp_path, axis: int):
    """conv -> [1, 4, 6, 5] -> softmax over ``axis``: an image (the conv names its layout, NCHW)."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("Softmax", ["c"], ["y"], name="sm", axis=axis)]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 3, 6, 5])], [tensor_info("y", [1, 4, 6, 5])],
                   [initializer("w", [4, 3, 3, 3])])  # fmt: skip
    return save_onnx(m, tmp_path / f"softmax{axis}.onnx")


# -- the memory order itself -------------------------------------------------------------------


def test_memory_order_drops_dims_of_one_element_and_joins_whole_tiles():
    assert same_memory((1, 1, 8, 8), "NCHW", "NHWC") == "same memory order: C = 1"
    assert same_memory((2, 8, 1, 1), "NHWC", "NCHW") == "same memory order: H = W = 1"
    assert same_memory((1, 1, 1, 5), "NCHW", "NHWC") == "same memory order: C = H = 1"
    assert same_memory((1, 8, 1, 5), "NCHW", "NHWC") == ""  # C moves past W = 5
    assert same_memory((1, 8, 3, 3), "NCHW", "NHWC") == ""
    # a tiled layout (N, C/B, H, W, B): unpadded, NHWC with C split in two
    assert same_memory((1, 32, 1, 1), "NHWC", "tiled", 1, 16) == \
        "same memory order: H = W = 1; C = 32: 2 whole 16-channel tiles, no padding"  # fmt: skip
    assert same_memory((1, 16, 4, 4), "NHWC", "tiled", 1, 16) == \
        "same memory order: C = 16: 1 whole 16-channel tile, no padding"  # fmt: skip
    assert same_memory((1, 16, 4, 4), "NCHW", "tiled", 1, 16) == ""
    assert same_memory((1, 1, 8, 8), "NCHW", "tiled", 1, 16) == ""  # C = 1 padded to a 16-channel tile
    assert memory_order("tiled", (1, 20, 2, 2), 16) is None
    assert memory_order("tiled", (1, 32, 2, 2), 16) == (("C", 16, 2), ("H", 1, 2), ("W", 1, 2), ("C", 1, 16))


# -- 1. no layout cost and no conversion call where the memory order is the same ------------------


@pytest.mark.parametrize("make, tensors, why", [
    (c1_model, ("c", "s"), "same memory order: C = 1"),
    (pooled_model, ("p", "s"), "same memory order: H = W = 1"),
])  # fmt: skip
def test_no_layout_cost_where_every_byte_stays_put(make, tensors, why, tmp_path):
    s = across(make(tmp_path))
    assert dict(zip(s.placement["name"], s.placement["processor"]))["sig"] == "dsp"
    b = s.boundaries.set_index("tensor")
    assert sorted(zip(b.index, b.src, b.dst)) == sorted([(tensors[0], "arm", "dsp"), (tensors[1], "dsp", "arm")])
    link = s.soc.link("arm", "dsp")
    for tid in tensors:
        r = b.loc[tid]
        assert (r.layout_us, r.quantize_us, r.conversion) == (0.0, 0.0, "")
        # the transfer is still charged, as before
        assert r.transfer_us == pytest.approx(link.latency_us + 2 * r.bytes / (link.bandwidth_gbps * 1000))
        assert r.energy_uj == pytest.approx(r.bytes * link.energy_pj_per_byte / 1e6)
    text = s.explain("sig")
    for src, dst in (("arm", "dsp"), ("dsp", "arm")):
        lay = {"arm": "NCHW", "dsp": "NHWC"}
        assert f"layout_us: 0 us, no layout conversion: {why} ({src}'s {lay[src]} and {dst}'s {lay[dst]} put every " \
               "element of (N, C, H, W) = (" in text  # fmt: skip
    code = s.code["src/model.c"]
    assert "layout_convert" not in code and "layout_convert" not in s.code["src/partitions_xi_dsp.c"]
    assert code.count("xi_dsp_copy(&src, &dst)") == 1 and code.count("npk_copy(&src, &dst)") == 1
    assert code.count(f"({why}: no layout conversion)") == 2


def test_a_requantize_still_happens_where_only_the_width_changes(tmp_path):
    """At the DSP's int16 the boundaries quantize and dequantize; no layout cost is added to them."""
    s = across(c1_model(tmp_path), "int16")
    b = s.boundaries.set_index("tensor")
    assert list(b.loc[["c", "s"], "conversion"]) == ["quantize fp32->int16", "dequantize int16->fp32"]
    assert (b.loc[["c", "s"], "quantize_us"] > 0).all() and (b.loc[["c", "s"], "layout_us"] == 0).all()
    code = s.code["src/model.c"]
    assert "xi_dsp_quantize(&src, &dst)" in code and "npk_dequantize(&src, &dst)" in code
    assert "layout_convert" not in code


def test_a_layout_conversion_that_moves_bytes_is_still_charged_and_emitted(tmp_path):
    """The same chain with 8 channels: NCHW -> NHWC moves every byte."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("Sigmoid", ["c"], ["s"], name="sig"), h.make_node("Relu", ["s"], ["y"], name="relu")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 3, 8, 8])], [tensor_info("y", [1, 8, 8, 8])],
                   [initializer("w", [8, 3, 3, 3])])  # fmt: skip
    s = across(save_onnx(m, tmp_path / "c8.onnx"))
    b = s.boundaries.set_index("tensor")
    assert list(b.loc[["c", "s"], "conversion"]) == ["layout NCHW->NHWC", "layout NHWC->NCHW"]
    assert (b.loc[["c", "s"], "layout_us"] > 0).all()
    assert "xi_dsp_layout_convert(&src, &dst)" in s.code["src/model.c"]


def attention_model(tmp_path):
    """Attention scores with no convolution: q [1, 2, 4, 8] @ k [1, 2, 8, 4] -> [1, 2, 4, 4] (batch,
    heads, seq, seq) -> sigmoid -> relu.  Rank 4, but no image: no op that has a layout reaches it."""
    from onnx import helper as h

    nodes = [h.make_node("MatMul", ["q", "k"], ["a"], name="scores"),
             h.make_node("Sigmoid", ["a"], ["s"], name="sig"), h.make_node("Relu", ["s"], ["y"], name="relu")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("q", [1, 2, 4, 8])], [tensor_info("y", [1, 2, 4, 4])],
                   [initializer("k", [1, 2, 8, 4])])  # fmt: skip
    return save_onnx(m, tmp_path / "attn.onnx")


def test_a_rank4_tensor_that_is_no_image_crosses_layouts_without_conversion(tmp_path):
    """An attention's [batch, heads, seq, seq] between the NCHW host and the NHWC DSP: every processor
    holds it row-major in the model's order (heads are no channels), so nothing converts it; the cost
    model charged 'layout NCHW->NHWC' for it, and the code transposed it."""
    s = across(attention_model(tmp_path))
    assert dict(zip(s.placement["name"], s.placement["processor"]))["sig"] == "dsp"
    b = s.boundaries.set_index("tensor")
    assert sorted(zip(b.index, b.src, b.dst)) == [("a", "arm", "dsp"), ("s", "dsp", "arm")]
    assert list(b.loc[["a", "s"], "conversion"]) == ["", ""] and (b.loc[["a", "s"], "layout_us"] == 0).all()
    assert "layout_us: 0 us, no layout conversion: not an image: no op that has a layout (a convolution, a pool) " \
           "reaches it, so every processor holds it row-major in the model's axis order" in s.explain("sig")  # fmt: skip
    code = s.code["src/model.c"]
    assert "layout_convert" not in code and code.count("xi_dsp_copy(&src, &dst)") == code.count("npk_copy(&src, &dst)") == 1


# -- 2. axis = "last" reads the axis where the processor holds it ------------------------------------


def test_axis_last_reads_an_image_in_the_processors_layout(tmp_path):
    """The DSP (NHWC, softmax = { axis = "last" }) holds the conv's NCHW output with C innermost."""
    over_c = npukit.Study(softmax_model(tmp_path, 1), "arm-dsp-dla", placement="first-fit")
    v = over_c.result.verdicts[(1, "dsp")]
    assert v.ok and v.text == "accepted (softmax over axis 1 (C of the model's NCHW), innermost in dsp's NHWC layout)"
    assert list(over_c.placement["processor"])[1] == "dsp"
    over_w = npukit.Study(softmax_model(tmp_path, 3), "arm-dsp-dla", placement="first-fit")
    v = over_w.result.verdicts[(1, "dsp")]
    assert not v.ok and v.rule == "axis"
    assert v.text == ("axis 3 (W of the model's NCHW) is not the innermost axis in dsp's NHWC layout "
                      "(innermost: axis 1 (C of the model's NCHW))")  # fmt: skip
    assert list(over_w.placement["processor"])[1] == "arm"
    # on an NCHW processor (the host's layout) it is the other way round
    from npukit.rules_axis import axis_read
    from npukit.soc import OpRule

    arm = over_c.soc.processor("arm")
    fail_c, _ = axis_read(over_c.graph.ops[1], over_c.graph, OpRule("softmax", axis="last"), arm)
    fail_w, read_w = axis_read(over_w.graph.ops[1], over_w.graph, OpRule("softmax", axis="last"), arm)
    assert fail_c is not None and fail_c.text.endswith("in arm's NCHW layout (innermost: axis 3 (W of the model's NCHW))")
    assert fail_w is None and read_w == "softmax over axis 3 (W of the model's NCHW), innermost in arm's NCHW layout"


def test_axis_last_on_a_tensor_that_is_no_image_reads_the_models_order(tmp_path):
    """A rank-4 tensor no conv, pool or resize names the layout of (an attention's scores) is
    row-major on every processor: its last axis is the innermost."""
    from onnx import helper as h

    for axis, ok in ((3, True), (1, False)):
        m = onnx_model([h.make_node("Softmax", ["x"], ["y"], name="sm", axis=axis)], [tensor_info("x", [1, 2, 4, 4])],
                       [tensor_info("y", [1, 2, 4, 4])])  # fmt: skip
        s = npukit.Study(save_onnx(m, tmp_path / f"attn{axis}.onnx"), "arm-dsp-dla", placement="first-fit")
        v = s.result.verdicts[(0, "dsp")]
        assert v.ok == ok and (v.text == "accepted" if ok else v.text == (
            "axis 1 is not the innermost axis in the model's axis order (innermost: axis 3)"))


def test_a_processors_layout_can_move_an_op_so_it_is_no_cost_field(tmp_path):
    """The axis rule reads an image in the processor's layout: made NCHW, the DSP refuses the softmax
    over C, so profiles differing in a layout do not share a partition (``rules_digest``) and a sweep
    over a layout re-partitions (``moves_ops``)."""
    from npukit.soc.profile import COST_FIELDS
    from npukit.sweeps.grid import moves_ops

    s = npukit.Study(softmax_model(tmp_path, 1), "arm-dsp-dla", placement="first-fit")
    nchw = s.soc.with_changes({"processors.dsp.layout": "NCHW"})
    assert "layout" not in COST_FIELDS and nchw.rules_digest != s.soc.rules_digest
    assert moves_ops("processors.dsp.layout", "NCHW", s.soc)
    t = npukit.Study(softmax_model(tmp_path, 1), nchw, placement="first-fit")
    assert list(s.placement["processor"])[1] == "dsp" and list(t.placement["processor"])[1] == "arm"
    assert t.result.verdicts[(1, "dsp")].text == ("axis 1 (C of the model's NCHW) is not the innermost axis in dsp's "
                                                  "NCHW layout (innermost: axis 3 (W of the model's NCHW))")  # fmt: skip
