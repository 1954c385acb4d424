"""The width an op runs at is one answer for the cost model, the timeline, the boundaries, the error
figures and the generated code (``npukit.pipeline.widths``):

* a float16 model's op under an fp32 setting runs at fp16 where its processor runs fp16 -- the code
  stores its tensors as float16 and the simulation runs the model's float16 ops -- and a processor
  without fp16 arithmetic computes in fp32 but still holds the tensors as float16 (2 bytes each);
* a layer width on a kernel member whose values never leave the kernel (a conv's bias add between
  the conv and its relu) has no effect: nothing rounds or converts its values there, so nothing is
  charged either; the per-op table and ``explain`` say so and ``set_bits`` warns.

The model: Conv(3->8, 3x3, pad 1, bias) -> Relu -> Conv(8->4, 1x1, bias) on a [1, 3, 16, 16] input;
arm (arm-dsp-dla) runs fp32 at 2 MACs / 4 vector ops per cycle, fp16 at 4 / 8, int8 at 8 / 16.
"""

from __future__ import annotations

import re
import shutil
import tomllib

import numpy as np
import pytest
from conftest import ROOT, initializer, missing_tool, onnx_model, save_onnx, tensor_info

import npukit
from npukit import pipeline
from npukit.quant.boundary import edge_bits

HALF_NOTE = "fp16, not the fp32 of arm's default_bits: the model holds its values as float16"
INSIDE = ("its values never leave the kernel of 'convA' (conv2d), where nothing rounds, stores or converts them, "
          "so it runs at that kernel's width")  # fmt: skip


def _convnet(tmp_path, half: bool):
    from onnx import TensorProto as T
    from onnx import helper as h

    dt, et = (np.float16, T.FLOAT16) if half else (np.float32, T.FLOAT)
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="convA", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"], name="reluA"),
             h.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="convB")]  # fmt: skip
    inits = [initializer("w1", [8, 3, 3, 3], 1, dt), initializer("b1", [8], 2, dt),
             initializer("w2", [4, 8, 1, 1], 3, dt), initializer("b2", [4], 4, dt)]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 3, 16, 16], et)], [tensor_info("y", [1, 4, 16, 16], et)], inits)
    return save_onnx(m, tmp_path / ("conv16.onnx" if half else "conv32.onnx"))


def _host_only(path, soc="arm-dsp-dla"):
    return npukit.Study(path, soc).set_support("dla", "conv2d", False)


def _activations(code: str) -> list[str]:
    """The element type of every activation descriptor of the generated C."""
    return re.findall(r"(?:npk|nvdla)_tensor t_\w+ = \{[^,]+, (\w+),", code)


def _ort(path, x):
    import onnxruntime as ort

    return ort.InferenceSession(str(path)).run(None, {"x": x})[0]


# ---------------------------------------------------------------------------------------------
# a float16 model


def test_a_float16_model_on_an_fp32_host_is_costed_at_fp16(tmp_path):
    s = _host_only(_convnet(tmp_path, half=True))
    c = s.costs.set_index("name")
    assert set(c["bits"]) == {"fp16"} and set(c["processor"]) == {"arm"}
    assert set(c["bits_note"]) == {HALF_NOTE}
    # bytes at 2 per element: x 768 el + w1 216 + b1 8 + r1 2,048 out (on chip); r1 + w2 32 + b2 4 + y 1,024
    assert c.loc["convA", "bytes"] == 2 * (768 + 216 + 8 + 2048) == 6080
    assert c.loc["convA", "dram_bytes"] == 2 * (768 + 216 + 8) == 1984
    assert c.loc["convB", "bytes"] == 2 * (2048 + 32 + 4 + 1024) == 6216
    # MACs at arm's fp16 rate: 55,296 / 4 + add 2,048 / 8 + relu 2,048 / 8; 8,192 / 4 + add 1,024 / 8
    assert c.loc["convA", "compute_cycles"] == 55296 / 4 + 2048 / 8 + 2048 / 8 == 14336
    assert c.loc["convB", "compute_cycles"] == 8192 / 4 + 1024 / 8 == 2176
    text = s.explain("convA")
    assert f"bit-width: {HALF_NOTE}" in text and "figures on arm at fp16" in text
    assert "in x 1,536 B + weights 432 B" in text and "macs_per_cycle[fp16]" in text
    # the same figures as arm set to fp16 by hand (what runs)
    explicit = _host_only(s.model).set_bits("fp16", processor="arm")
    assert s.totals["latency_us"] == explicit.totals["latency_us"] == pytest.approx((16336 + 4176) / 1200)
    assert s.costs.drop(columns="bits_note").equals(explicit.costs.drop(columns="bits_note"))
    assert set(explicit.costs["bits_note"]) == {""}
    # the code holds every tensor as float16; the simulation rounds nothing (its values are float16)
    assert set(_activations(s.code["src/model.c"])) == {"NPK_F16"}
    assert list(s.error["snr_db"]) == [np.inf] * 5 and s.error_dict()["outputs"][0]["max_abs"] == 0.0
    assert list(s.error["bits"]) == ["fp16"] * 5


def test_the_placement_search_reads_fp16_for_a_float16_model(tmp_path):
    s = npukit.Study(_convnet(tmp_path, half=True), "arm-dsp-dla")
    bits_of, runs = pipeline.bits_policy(s.soc, s.config, s.graph)
    assert set(bits_of.table["arm"]) == {"fp16"}
    assert set(bits_of.table["dsp"]) == {"int16"} and set(bits_of.table["dla"]) == {"int8"}  # (narrower: they stand)
    s.set_bits("fp32", processor="dsp")
    bits_of, runs = pipeline.bits_policy(s.soc, s.config, s.graph)
    assert set(bits_of.table["dsp"]) == {"fp16"}
    # an fp32 layer on a float16 op is fp16: the DLA, which runs fp16 and not fp32, takes it
    s.set_bits(None, processor="dsp").set_bits("fp32", layer="convA")
    bits_of, runs = pipeline.bits_policy(s.soc, s.config, s.graph)
    assert runs(0, "dla") and bits_of(0, "dla") == "fp16"
    s.set_placement("first-fit")
    assert s.plan.processor[0] == "dla" and s.op_bits()[0] == "fp16"
    assert s.costs.set_index("name").loc["convA", "bits_note"] == ("fp16, not the fp32 of layer 'convA': the model "
                                                                   "holds its values as float16")  # fmt: skip


def test_a_float16_tensor_leaving_the_host_is_quantized_from_fp16(tmp_path):
    s = npukit.Study(_convnet(tmp_path, half=True), "arm-dsp-dla").pin("convA", "arm").pin("convB", "dla")
    b = s.boundaries.set_index("tensor")
    # r1: 2,048 elements sent as arm holds them (quantize_on = "dst": the DLA quantizes), 2 bytes each
    assert (b.loc["r1", "bytes"], b.loc["r1", "conversion"]) == (4096.0, "layout NCHW->tiled, quantize fp16->int8")
    assert (b.loc["y", "bytes"], b.loc["y", "conversion"]) == (1024.0, "layout tiled->NCHW, dequantize int8->fp16")
    (r1,) = [x for x in s.result.bounds if x.tensor == "t2"]
    assert (r1.src_bits, r1.dst_bits, r1.quantize.read_bytes) == ("fp16", "int8", 4096.0)
    # the simulation rounds r1 to int8 on its way to the DLA; the code stores it F16 on arm, S8 on the DLA
    assert edge_bits(s.graph, s.plan, s.result.bits) == {(3, "t2"): "int8"}
    assert "NPK_F16" in _activations(s.code["src/model.c"])
    assert re.search(r"nvdla_tensor t_t2 = \{[^,]+, NVDLA_S8,", s.code["src/partitions_nvdla.c"])


def _dla_profile(fp16: bool):
    """arm-dsp-dla with a DLA that runs fp32 too (its fp16 rates), or fp32 instead of fp16."""
    doc = tomllib.loads((ROOT / "npukit" / "profiles" / "arm-dsp-dla.toml").read_text())
    d = doc["processors"]["dla"]
    for k in ("macs_per_cycle", "vector_ops_per_cycle", "energy_pj_per_mac", "energy_pj_per_op"):
        d[k]["fp32"] = d[k]["fp16"]
        if not fp16:
            del d[k]["fp16"]
    return npukit.load_soc(doc)


def test_a_dla_at_fp32_holds_a_float16_model_as_float16(tmp_path):
    path = _convnet(tmp_path, half=True)
    s = npukit.Study(path, _dla_profile(fp16=True), placement="first-fit").set_bits("fp32", processor="dla")
    assert set(s.plan.processor) == {"dla"} and set(s.op_bits()) == {"fp16"}
    assert set(s.costs["bits_note"]) == {"fp16, not the fp32 of dla's setting: the model holds its values as float16"}
    assert set(_activations(s.code["src/partitions_nvdla.c"])) == {"NVDLA_F16"}
    # a DLA without fp16 arithmetic computes in fp32 (its rates), the tensors still 2 bytes each
    s2 = npukit.Study(path, _dla_profile(fp16=False), placement="first-fit").set_bits("fp32", processor="dla")
    c = s2.costs.set_index("name")
    assert set(c["bits"]) == {"fp32"} and c.loc["convA", "bytes"] == 6080 and c.loc["convB", "bytes"] == 6216
    assert c.loc["convB", "bits_note"] == ("fp32 arithmetic: dla runs no fp16 (processors.dla.macs_per_cycle), so "
                                           "it computes in fp32; it holds the model's float16 tensors as float16")  # fmt: skip
    assert "at fp32 (the model's float16 tensors at 16 bits: never held wider)" in s2.explain("convB")
    b = s2.boundaries.set_index("tensor")
    assert (b.loc["x", "bytes"], b.loc["x", "conversion"]) == (1536.0, "layout NCHW->tiled")  # nothing to convert
    assert set(_activations(s2.code["src/partitions_nvdla.c"])) == {"NVDLA_F16"}


def test_a_float16_host_program_matches_onnxruntime(tmp_path):
    """The all-host fp16 program, built and run, against onnxruntime's float16 run of the model."""
    from npukit.codegen.build import make, run_program

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        missing_tool("no C compiler")
    path = _convnet(tmp_path, half=True)
    s = _host_only(path)
    d = tmp_path / "export"
    s.export(d)
    make(d)
    (tmp_path / "w").mkdir()
    for i in range(4):
        x = np.asarray(s.data.samples[i][0], np.float16).reshape(1, 3, 16, 16)
        got = run_program(d, ["./model"], [x], [(1, 3, 16, 16)], tmp_path / "w")[0].astype(np.float32)
        want = _ort(path, x).astype(np.float32)
        # every stored value rounded to binary16 (the conv's output, the bias add's, the relu's ...):
        # within a few fp16 steps at the output's scale (one step of 8 .. 16 is 2^-7)
        step = float(np.spacing(np.float16(np.abs(want).max())))
        assert np.max(np.abs(got - want)) <= 4 * step, (float(np.max(np.abs(got - want))), step)


# ---------------------------------------------------------------------------------------------
# a layer width inside a kernel


def test_a_layer_width_inside_a_kernel_has_no_effect(tmp_path):
    path = _convnet(tmp_path, half=False)
    base = _host_only(path)
    s = _host_only(path)
    with pytest.warns(UserWarning, match=re.escape(f"layer 'convA/add' at int8 has no effect: {INSIDE} (fp32)")):
        s.set_bits("int8", layer="convA/add")
    c = s.costs.set_index("name")
    assert list(c["bits"]) == ["fp32"] * 5
    assert c.loc["convA/add", "bits_note"] == f"fp32, not the int8 of layer 'convA/add': {INSIDE}"
    # every figure as without the edit: no conversion charged, no other rate
    assert s.costs.drop(columns="bits_note").equals(base.costs.drop(columns="bits_note"))
    assert s.totals["latency_us"] == base.totals["latency_us"] == pytest.approx((27648 + 512 + 512 + 2000 + 4096
                                                                                 + 256 + 2000) / 1200)  # fmt: skip
    assert "converts its input" not in s.explain("convA")
    assert f"bit-width: fp32, not the int8 of layer 'convA/add': {INSIDE}" in s.explain("convA/add")
    # the simulation rounds nothing, the code is the code without the edit
    assert list(s.error["bits"]) == ["fp32"] * 5 and list(s.error["snr_db"]) == [np.inf] * 5
    strip = re.compile(r"config: .*?\*/", re.S)
    assert strip.sub("", s.code["src/model.c"]) == strip.sub("", base.code["src/model.c"])
    # and the model it simulates is the model onnxruntime runs
    x = np.asarray(s.data.samples[0][0], np.float32).reshape(1, 3, 16, 16)
    (sim,) = pipeline.simulate(s.result, s.data, [0])
    assert np.allclose(np.asarray(sim[0]).reshape(1, 4, 16, 16), _ort(path, x), rtol=1e-5, atol=1e-5)


def test_the_last_op_of_a_kernel_rounds_its_output_and_nothing_inside_is_converted(tmp_path):
    s = _host_only(_convnet(tmp_path, half=False)).set_bits("int8", layer="reluA")
    c = s.costs.set_index("name")
    assert list(c["bits"]) == ["fp32", "fp32", "int8", "fp32", "fp32"] and set(c["bits_note"]) == {""}
    # the relu reads the bias add's output inside the kernel: no conversion; it writes r1 at int8
    assert c.loc["convA", "compute_cycles"] == 55296 / 2 + 2048 / 4 + 2048 / 16 == 28288
    assert c.loc["convA", "bytes"] == 4 * (768 + 216 + 8) + 2048 == 6016
    assert "converts its input" not in s.explain("convA")
    # convB, another kernel, reads r1 at int8 and converts it as it loads it: 2 * 2,048 / 4
    assert c.loc["convB", "compute_cycles"] == 8192 / 2 + 1024 / 4 + 2 * 2048 / 4 == 5376
    assert "conv2d converts its input r1 int8 -> fp32 as it loads it: 2 * 2,048 / vector_ops_per_cycle[fp32] 4 = 1,024" \
        in s.explain("convB")  # fmt: skip
    err = s.error.set_index("name")
    assert err.loc["reluA", "snr_db"] < 60 and err.loc["convA/add", "snr_db"] == np.inf
    assert "npk_round_to_bits" in s.code["src/model.c"]  # r1 rounded to its int8 grid in place


def test_an_anchors_layer_width_is_its_kernels_width(tmp_path):
    s = _host_only(_convnet(tmp_path, half=False)).set_bits("int8", layer=0)  # the conv alone, not its bias add
    c = s.costs.set_index("name")
    assert list(c["bits"]) == ["int8", "int8", "fp32", "fp32", "fp32"]
    assert c.loc["convA/add", "bits_note"] == f"int8, not the fp32 of arm's default_bits: {INSIDE}"
    # conv at int8 (8 MACs per cycle), its add in the loop nest at int8, the relu at fp32: nothing converted
    assert c.loc["convA", "compute_cycles"] == 55296 / 8 + 2048 / 16 + 2048 / 4 == 7552
    assert "converts its input" not in s.explain("convA")
    err = s.error.set_index("name")  # the conv's int8 weights are the only rounding
    assert err.loc["convA", "snr_db"] < 60 and err.loc["convA/add", "bits"] == "int8"


def test_integer_models_keep_their_widths():
    from conftest import DIGITS_INT8

    s = npukit.Study(DIGITS_INT8, "arm-dsp-dla")
    assert s.op_bits() == pipeline.settings(s.soc, s.config, s.plan, s.graph)
    assert set(s.costs["bits_note"]) == {""}
