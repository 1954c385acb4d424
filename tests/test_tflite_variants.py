"""Issue 14, item 4: TFLite fp16 weights (DEQUANTIZE of float16 constants), sparse weights (DENSIFY),
both together, and custom operators, on small flatbuffers written here (no TensorFlow)."""

from __future__ import annotations

import numpy as np
import pytest
from tflite_builder import fc_model

import npukit


@pytest.mark.parametrize("kind", ["float32", "float16", "sparse", "sparse_float16"])
def test_weight_storage_variants_import_to_the_same_graph(tmp_path, kind):
    data, w, b = fc_model(kind)
    path = tmp_path / f"fc_{kind}.tflite"
    path.write_bytes(data)
    g = npukit.import_model(path).graph
    assert [(op.name, op.kind) for op in g.ops] == [("y", "matmul"), ("y/add", "add")]
    weights = [g.consts[t] for t in g.ops[0].inputs if g.tensors[t].kind == "const"]
    assert len(weights) == 1 and weights[0].dtype == np.float32
    np.testing.assert_array_equal(weights[0], w.T)  # densified / widened exactly
    if kind != "float32":  # the DEQUANTIZE / DENSIFY nodes became the constant weight
        assert set(g.elided) == ({"W", "W16"} if kind == "sparse_float16" else {"W"})
        assert all(v.startswith("folded") for v in g.elided.values())
    s = npukit.Study(path, "arm-dsp-dla")
    assert list(s.placement["name"]) == ["y", "y/add"]


def test_custom_operators_are_listed_by_name_with_their_nodes(tmp_path):
    data, _, _ = fc_model("custom")
    path = tmp_path / "custom.tflite"
    path.write_bytes(data)
    with pytest.raises(npukit.UnsupportedOpError) as ei:
        npukit.import_model(path)
    assert str(ei.value) == (
        f"{path}: 2 op(s) TVM's TFLite frontend cannot import (custom Another.Custom-Op, custom MyPostprocess): "
        "'z' (custom MyPostprocess); 'v' (custom Another.Custom-Op)"
    )


def test_tflite_tensors_named_like_tvm_identifiers(tmp_path):
    from tflite_builder import Graph, Op, T, build

    rng = np.random.default_rng(0)
    ts = [T("main", (1, 4)), T("gv", (3, 4), data=rng.standard_normal((3, 4)).astype(np.float32)),
          T("R", (3,), data=np.zeros(3, np.float32)), T("lv1", (1, 3)), T("metadata", (1, 3))]  # fmt: skip
    ops = [Op("FULLY_CONNECTED", ["main", "gv", "R"], ["lv1"], "FullyConnectedOptions"), Op("RELU", ["lv1"], ["metadata"])]
    path = tmp_path / "hostile.tflite"
    path.write_bytes(build(Graph(ts, ops, ["main"], ["metadata"])))
    g = npukit.import_model(path).graph
    assert [op.name for op in g.ops] == ["lv1", "lv1/add", "metadata"]
    assert [g.tensors[t].name for t in g.inputs] == ["main"]
    s = npukit.Study(path, "arm-dsp-dla")
    assert list(s.placement["name"]) == ["lv1", "lv1/add", "metadata"]


def _int8_avg_pool(tmp_path):
    from tflite_builder import Graph, Op, T, build

    q = {"scale": [0.05], "zero_point": [-3]}  # TFLite: the pool's input and output share them
    g = Graph(tensors=[T("x", (1, 4, 4, 2), "int8", **q), T("ap", (1, 2, 2, 2), "int8", **q)],
              ops=[Op("AVERAGE_POOL_2D", ["x"], ["ap"], "Pool2DOptions",
                      {"Padding": 1, "StrideW": 2, "StrideH": 2, "FilterWidth": 2, "FilterHeight": 2})],
              inputs=["x"], outputs=["ap"])  # fmt: skip
    path = tmp_path / "avg_pool_int8.tflite"
    path.write_bytes(build(g))
    return path


def test_an_int8_average_pool_is_a_quantized_pool_as_from_onnx(tmp_path):
    """TVM imports TFLite's int8 AVERAGE_POOL_2D as astype(int32) -> avg_pool2d -> astype(int8): the DLA,
    which takes quantized pools, got only the middle op, with int32 tensors crossing to it and back
    (an ONNX QDQ pool ran there whole).  It is now dequantize -> avg_pool2d -> quantize, and the
    averages round to the nearest integer (TVM's int32 pool truncated them toward zero)."""
    import tvm
    from tvm import relax

    path = _int8_avg_pool(tmp_path)
    imp = npukit.import_model(path)
    assert [(op.name, op.kind) for op in imp.graph.ops] == [("ap/dequantize", "dequantize"), ("ap", "avg_pool2d"),
                                                            ("ap/quantize", "quantize")]  # fmt: skip
    assert dict(imp.graph.elided) == {}
    s = npukit.Study(path, "arm-dsp-dla", placement="first-fit")
    assert list(s.placement["processor"]) == ["dla"] * 3 and s.totals["partitions"] == 1
    assert list(s.placement["pattern"]) == ["dla.dequantize_avg_pool2d_quantize"] * 3  # one int8 pool kernel
    # the same pool as ONNX QDQ (NCHW) places and costs alike
    from conftest import onnx_model, save_onnx, tensor_info
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes = [h.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"], name="dq"),
             h.make_node("AveragePool", ["xf"], ["pf"], name="ap", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("QuantizeLinear", ["pf", "s", "z"], ["y"], name="q")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 2, 4, 4], TensorProto.INT8)], [tensor_info("y", [1, 2, 2, 2], TensorProto.INT8)],
                   [nh.from_array(np.array(0.05, np.float32), "s"), nh.from_array(np.array(-3, np.int8), "z")])  # fmt: skip
    o = npukit.Study(save_onnx(m, tmp_path / "avg_pool_qdq.onnx"), "arm-dsp-dla", placement="first-fit")
    assert list(o.placement["op"]) == list(s.placement["op"]) and list(o.placement["processor"]) == ["dla"] * 3
    assert o.totals["macs"] == s.totals["macs"] and o.totals["partitions"] == 1

    x = np.random.default_rng(0).integers(-128, 128, (1, 4, 4, 2)).astype(np.int8)
    x[0, 0:2, 0:2, 0] = [[1, 2], [1, 2]]  # mean 1.5
    x[0, 0:2, 2:4, 0] = [[2, 3], [2, 3]]  # 2.5
    x[0, 2:4, 0:2, 0] = [[2, 2], [2, 1]]  # 1.75 (truncated to 1 before)
    target = tvm.target.Target({"kind": "llvm"})
    ex = tvm.compile(imp.mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    got = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    windows = x.astype(np.int64).reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 2, 2, 2, 4)
    np.testing.assert_array_equal(got, np.round(windows.mean(-1)).astype(np.int8))  # nearest, halves to even
    assert got[0, 0, 0, 0] == 2 and got[0, 0, 1, 0] == 2 and got[0, 1, 0, 0] == 2


def _int8_conv_pool_fc(path):
    """QUANTIZE -> CONV_2D (RELU6 fused) -> AVERAGE_POOL_2D -> RESHAPE -> FULLY_CONNECTED -> DEQUANTIZE."""
    from tflite_builder import Graph, Op, T, build

    rng = np.random.default_rng(3)
    w1, b1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, rng.standard_normal(8).astype(np.float32) * 0.1
    wf, bf = rng.standard_normal((5, 32)).astype(np.float32) * 0.2, rng.standard_normal(5).astype(np.float32) * 0.1
    s_in, s_c = 1 / 255, 6 / 255
    sw1, swf = np.abs(w1).reshape(8, -1).max(1) / 127, np.abs(wf).max(1) / 127
    q1, qf = np.round(w1 / sw1[:, None, None, None]).astype(np.int8), np.round(wf / swf[:, None]).astype(np.int8)
    ts = [T("input", (1, 8, 8, 3)), T("input_int8", (1, 8, 8, 3), "int8", scale=[s_in], zero_point=[-128]),
          T("conv/w", (8, 3, 3, 3), "int8", data=q1, scale=list(sw1), zero_point=[0] * 8),
          T("conv/b", (8,), "int32", data=np.round(b1 / (s_in * sw1)).astype(np.int32), scale=list(s_in * sw1),
            zero_point=[0] * 8),
          T("conv/Relu6", (1, 4, 4, 8), "int8", scale=[s_c], zero_point=[-128]),
          T("pool", (1, 2, 2, 8), "int8", scale=[s_c], zero_point=[-128]),
          T("flat/shape", (2,), "int32", data=np.array([1, 32], np.int32)),
          T("flat", (1, 32), "int8", scale=[s_c], zero_point=[-128]),
          T("fc/w", (5, 32), "int8", data=qf, scale=list(swf), zero_point=[0] * 5),
          T("fc/b", (5,), "int32", data=np.round(bf / (s_c * swf)).astype(np.int32), scale=list(s_c * swf),
            zero_point=[0] * 5),
          T("fc", (1, 5), "int8", scale=[0.05], zero_point=[0]), T("out", (1, 5))]  # fmt: skip
    ops = [Op("QUANTIZE", ["input"], ["input_int8"]),
           Op("CONV_2D", ["input_int8", "conv/w", "conv/b"], ["conv/Relu6"], "Conv2DOptions",
              {"Padding": 0, "StrideW": 2, "StrideH": 2, "FusedActivationFunction": 3, "DilationWFactor": 1,
               "DilationHFactor": 1}),
           Op("AVERAGE_POOL_2D", ["conv/Relu6"], ["pool"], "Pool2DOptions",
              {"Padding": 1, "StrideW": 2, "StrideH": 2, "FilterWidth": 2, "FilterHeight": 2}),
           Op("RESHAPE", ["pool", "flat/shape"], ["flat"]),
           Op("FULLY_CONNECTED", ["flat", "fc/w", "fc/b"], ["fc"], "FullyConnectedOptions"),
           Op("DEQUANTIZE", ["fc"], ["out"])]  # fmt: skip
    path.write_bytes(build(Graph(ts, ops, ["input"], ["out"])))
    return path


def test_an_int8_average_pool_after_a_relu6_conv_keeps_the_conv_output_grid(tmp_path):
    """TVM reads the pool as dequantize(scale 1, zero 0) -> avg_pool2d -> quantize(1, 0) (the integers
    averaged as they are): the code generator took that scale 1 as the conv output's grid, so the
    CMSIS-NN conv wrote its RELU6 output with offset 0 and clamp 0..6, and the program's outputs
    were off by more than their own size (relative RMS 1.7 against the simulation)."""
    from npukit.codegen.storage import model_quant

    s = npukit.Study(_int8_conv_pool_fc(tmp_path / "convpool.tflite"), "cortex-m7-cmsis-nn")
    g = s.graph
    relu6 = next(t for t, v in g.tensors.items() if v.name == "conv/Relu6")
    pooled = next(t for t, v in g.tensors.items() if v.name == "pool")
    assert model_quant(g, relu6) == pytest.approx((6 / 255, -128)) and model_quant(g, pooled) == pytest.approx((6 / 255, -128))
    r = s.build(tmp_path / "export", samples=4)
    assert r["outputs_agree"], r["mismatches"]


def test_an_op_npukit_has_no_entry_for_is_refused_at_import_naming_its_node(tmp_path):
    """The cost model refused it later with no file and no node: "npukit has no entry for op 'view'"."""
    from tflite_builder import Graph, Op, T, build

    ts = [T("x", (1, 4)), T("bits", (1, 4), "int32")]
    path = tmp_path / "bitcast.tflite"
    path.write_bytes(build(Graph(ts, [Op("BITCAST", ["x"], ["bits"])], ["x"], ["bits"])))
    with pytest.raises(npukit.UnsupportedOpError) as ei:
        npukit.import_model(path)
    assert str(ei.value).startswith(f"{path}: 1 op(s) npukit has no entry for (no work formula, no rules): "
                                    "'bits' (BITCAST, as relax.memory.view); for 'view': closest valid names: ")  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Malformed files: every fault names the file, the operator (its index, its output tensor and its
# code) or the tensor, and what is wrong -- not a bare AssertionError, IndexError or flatbuffer numbers


def _fc_relu_graph(*, fc_options="FullyConnectedOptions", w=None, b=None, opcode_index=None, fc_reads="x",
                   relu_reads="y", outputs=("z",), subgraph=True):  # fmt: skip
    from tflite_builder import Graph, Op, T

    w = w or {}
    b = b or {}
    wdata = None if "external" in w or "buffer" in w else np.ones((4, 4), np.float32)
    ts = [T("x", (1, 4)), T("W", (4, 4), data=wdata, **w), T("b", (4,), data=np.zeros(4, np.float32), **b),
          T("y", (1, 4)), T("z", (1, 4)), T("u", (1, 4))]  # fmt: skip
    ops = [Op("FULLY_CONNECTED", [fc_reads, "W", "b"], ["y"], fc_options, opcode_index=opcode_index),
           Op("RELU", [relu_reads], ["z"])]  # fmt: skip
    return Graph(ts, ops, ["x"], list(outputs), subgraph=subgraph)


_MALFORMED = {
    "no_options": (dict(fc_options=None),
                   "operator 0 'y' (FULLY_CONNECTED) has no builtin options: its FullyConnectedOptions table (the "
                   "operator's attributes) is absent, and TVM's FULLY_CONNECTED converter needs it (is the file corrupt?)"),
    "wrong_options": (dict(fc_options="Pool2DOptions"),
                      "operator 0 'y' (FULLY_CONNECTED) carries Pool2DOptions where its FullyConnectedOptions belong "
                      "(is the file corrupt?)"),
    "buffer_index": (dict(w={"buffer": 9}),
                     "tensor 'W' refers to buffer 9, but the model has 2 buffers (is the file corrupt?)"),
    "empty_weight": (dict(w={"buffer": 0}),
                     "operator 0 'y' (FULLY_CONNECTED) reads tensor 'W', which no operator writes, is not a model "
                     "input and holds no data (is the file corrupt?)"),
    "external_past_end": (dict(w={"external": (10_000, 64)}),
                          "tensor 'W' keeps its data at bytes 10000..10064 of the file, but the file has {size} bytes "
                          "(is the file truncated?)"),
    "opcode_index": (dict(opcode_index=7),
                     "operator 0 'y' uses operator code index 7, but the model has 2 operator codes (is the file "
                     "corrupt?)"),
    "output_index": (dict(outputs=(17,)),
                     "the model's output 17 is not a tensor of the subgraph (6 tensors; is the file corrupt?)"),
    "read_before_written": (dict(fc_reads="z"),
                            "operator 0 'y' (FULLY_CONNECTED) reads tensor 'z', which only the later operator 1 'z' "
                            "(RELU) writes (TFLite lists operators in the order they run) (is the file corrupt?)"),
    "reads_its_own_output": (dict(relu_reads="z"),
                             "operator 1 'z' (RELU) reads tensor 'z', which it writes itself (is the file corrupt?)"),
    "output_unwritten": (dict(outputs=("z", "u")),
                         "the model's output 'u' is written by no operator and is neither a model input nor a "
                         "constant (is the file corrupt?)"),
    "scales_without_zero_points": (dict(b={"scale": [0.1], "zero_point": []}),
                                   "tensor 'b' has 1 quantization scale(s) and 0 zero point(s); TFLite gives one "
                                   "zero point per scale (is the file corrupt?)"),
    "no_subgraph": (dict(subgraph=False), "the TFLite model has no subgraph"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(_MALFORMED))
def test_a_malformed_tflite_file_names_the_operator_or_tensor_and_the_fault(tmp_path, case):
    from tflite_builder import build

    kw, words = _MALFORMED[case]
    path = tmp_path / f"{case}.tflite"
    data = build(_fc_relu_graph(**kw))
    path.write_bytes(data)
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(path)
    assert str(ei.value) == f"{path}: {words.format(size=len(data))}"


def test_a_quantized_tensor_s_zero_point_and_channels_are_checked(tmp_path):
    from tflite_builder import Graph, Op, T, build

    def fc(w_quant):
        ts = [T("x", (1, 4), "int8", scale=[0.1], zero_point=[0]),
              T("W", (3, 4), "int8", np.ones((3, 4), np.int8), **w_quant),
              T("y", (1, 3), "int8", scale=[0.1], zero_point=[0])]  # fmt: skip
        path = tmp_path / "q.tflite"
        path.write_bytes(build(Graph(ts, [Op("FULLY_CONNECTED", ["x", "W"], ["y"], "FullyConnectedOptions")], ["x"], ["y"])))
        with pytest.raises(npukit.ModelError) as ei:
            npukit.import_model(path)
        return str(ei.value).removeprefix(f"{path}: ")

    assert fc({"scale": [0.1], "zero_point": [300]}) == (
        "tensor 'W' has the zero point 300, outside int8's range -128..127 (is the file corrupt?)")
    assert fc({"scale": [0.1, 0.2, 0.3], "zero_point": [0, 1, 0]}) == (
        "tensor 'W' is quantized per channel with non-zero zero points (0, 1, 0); TFLite's per-channel quantization "
        "has them all 0 (is the file corrupt?)")
    assert fc({"scale": [0.1, 0.2], "zero_point": [0, 0]}) == (
        "tensor 'W' has 2 per-channel quantization scales along dimension 0 of its shape [3, 4], which has 3 (is the "
        "file corrupt?)")


def test_an_operator_without_the_options_of_its_kind_is_named_by_index_and_output(tmp_path):
    """A CONV_2D and a RESHAPE (no shape input) without options failed in TVM's bare assert: the
    user read "AssertionError"."""
    from tflite_builder import Graph, Op, T, build

    w = np.ones((3, 1, 1, 2), np.float32)
    ts = [T("x", (1, 4, 4, 2)), T("k", (3, 1, 1, 2), data=w), T("c", (1, 4, 4, 3)), T("flat", (1, 48))]
    ops = [Op("CONV_2D", ["x", "k"], ["c"], "Conv2DOptions", {"StrideW": 1, "StrideH": 1}), Op("RESHAPE", ["c"], ["flat"])]
    path = tmp_path / "reshape.tflite"
    path.write_bytes(build(Graph(ts, ops, ["x"], ["flat"])))
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(path)
    assert str(ei.value) == (f"{path}: operator 1 'flat' (RESHAPE) has no builtin options: its ReshapeOptions table "
                             "(the operator's attributes) is absent, and TVM's RESHAPE converter needs it (is the file "
                             "corrupt?)")  # fmt: skip
    ops[0] = Op("CONV_2D", ["x", "k"], ["c"])
    ops[1] = Op("RESHAPE", ["c"], ["flat"], "ReshapeOptions")
    path.write_bytes(build(Graph(ts, ops, ["x"], ["flat"])))
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(path)
    assert str(ei.value) == (f"{path}: operator 0 'c' (CONV_2D) has no builtin options: its Conv2DOptions table (the "
                             "operator's attributes) is absent, and TVM's CONV_2D converter needs it (is the file "
                             "corrupt?)")  # fmt: skip


def test_another_bare_assert_of_tvm_s_converter_says_which_check_failed(tmp_path):
    """ARG_MAX along two axes at once: TVM's converter asserts a single axis with no message."""
    from tflite_builder import Graph, Op, T, build

    ts = [T("x", (2, 3)), T("axes", (2,), "int32", data=np.array([0, 1], np.int32)), T("i", (1,), "int32")]
    path = tmp_path / "argmax.tflite"
    path.write_bytes(build(Graph(ts, [Op("ARG_MAX", ["x", "axes"], ["i"], "ArgMaxOptions", {"OutputType": 2})],
                                 ["x"], ["i"])))  # fmt: skip
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(path)
    assert str(ei.value) == (f"{path}: operator 0 'i' (ARG_MAX): TVM's ARG_MAX converter refused it: its check "
                             "`axis_value.size == 1` failed")  # fmt: skip


def test_an_operator_writing_a_tensor_another_writes_is_named(tmp_path):
    from tflite_builder import Graph, Op, T, build

    ts = [T("x", (1, 4)), T("y", (1, 4))]
    path = tmp_path / "twice.tflite"
    path.write_bytes(build(Graph(ts, [Op("RELU", ["x"], ["y"]), Op("TANH", ["x"], ["y"])], ["x"], ["y"])))
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(path)
    assert str(ei.value) == (f"{path}: operator 1 'y' (TANH) writes tensor 'y', but operator 0 'y' (RELU) writes it "
                             "too (is the file corrupt?)")  # fmt: skip


def test_weights_kept_outside_the_flatbuffer_are_refused_by_name(tmp_path):
    """TFLite's layout for models over 2 GB keeps a buffer's bytes after the flatbuffer (offset,
    size); TVM's importer reads only data inside it and failed in "a bytes-like object is required"."""
    from tflite_builder import build

    path = tmp_path / "external.tflite"
    path.write_bytes(build(_fc_relu_graph(w={"external": (16, 64)})))
    with pytest.raises(npukit.UnsupportedOpError) as ei:
        npukit.import_model(path)
    assert str(ei.value) == (f"{path}: tensor 'W' keeps its data outside the flatbuffer (buffer 1, 64 bytes at offset "
                             "16: TFLite's layout for models over 2 GB), which TVM's TFLite importer does not read")  # fmt: skip
