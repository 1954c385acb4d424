"""Edge cases a new user meets: index inputs, fp16 and scalar models, strict JSON, one-line usage
errors, bad data and bad paths, names that look like generated ones, edits that would silently
drop a setting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import npukit

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"


def _save(tmp_path, name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, path)
    return path


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "npukit", *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def embedding(tmp_path):
    """ids (int64) -> Gather from a 50x8 table -> ReduceMean -> MatMul."""
    rng = np.random.default_rng(0)
    table = numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "table")
    w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed", axis=0),
             helper.make_node("ReduceMean", ["e", "axes"], ["m"], name="pool", keepdims=0),
             helper.make_node("MatMul", ["m", "w"], ["y"], name="head")]  # fmt: skip
    return _save(tmp_path, "embedding", nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [table, w, axes], opset=18)  # fmt: skip


def test_index_inputs_are_drawn_in_range_and_checked(embedding):
    # in a subprocess: an out-of-range index in compiled code could crash the interpreter
    code = f"import npukit, json; s = npukit.Study({str(embedding)!r}, 'arm-dsp-dla'); print(json.dumps(s.error_dict()['samples']))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == 16
    s = npukit.Study(embedding, "arm-dsp-dla")
    with pytest.raises(npukit.DataError, match=r"x: values 0\.\.70 out of range for input 'ids', which indexes an axis of size 50"):
        s.set_data(np.array([[0, 1, 2, 3, 4, 70]], np.int64))
    s.set_data(np.array([[0, 1, 2, 3, 4, -1]], np.int64))  # negative indices count from the end
    assert s.error_dict()["samples"] == 1


def test_fp16_and_scalar_models_measure_their_error(tmp_path):
    w = numpy_helper.from_array(np.ones((4, 4), np.float16), "w")
    fp16 = _save(tmp_path, "fp16", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])], [w])  # fmt: skip
    e = npukit.Study(fp16, "arm-dsp-dla").error_dict()
    assert e["samples"] == 16 and e["outputs"][0]["name"] == "y"
    scalar = _save(tmp_path, "scalar", [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                                        helper.make_node("Neg", ["r"], ["y"], name="neg")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])  # fmt: skip
    s = npukit.Study(scalar, "arm-dsp-dla")
    s.set_data(np.array([-1.0, 2.0, 3.5], np.float32))
    e = s.error_dict()
    assert e["samples"] == 3 and e["outputs"][0]["max_abs"] == 0.0


def test_an_int8_model_at_its_own_precision_loses_nothing():
    s = npukit.Study(SAMPLES / "digits_cnn_int8.tflite", "ethos-u55-256")
    e = s.error_dict()
    out = e["outputs"][0]
    assert out["top1_agreement"] == 1.0 and out["max_abs"] <= 1.0  # at most one LSB of the int8 output
    assert e["accuracy"] == e["accuracy_fp32"]


def test_json_output_is_strict_json():
    r = _cli("study", SAMPLES / "digits_cnn.onnx", "--soc", "arm-dsp-dla", "--bits", "dsp=fp32", "--error", "--json")
    assert r.returncode == 0, r.stderr
    assert "Infinity" not in r.stdout and "NaN" not in r.stdout
    doc = json.loads(r.stdout)
    snr = {row["name"]: row for row in doc["error"]["outputs"]}
    assert snr["probs"]["snr_db"] is not None  # finite here; an exact output would print null


@pytest.mark.parametrize("args, expect", [
    (("study", "m.onnx", "--soc", "x", "--bits", "dla"), "npukit: error: study: argument --bits: 'dla': expected PROC=BITS (see npukit study --help)"),
    (("study", "m.onnx", "--soc", "x", "--input-shape", "x=1,a"), "npukit: error: study: argument --input-shape: --input-shape 'x=1,a': dims must be integers (see npukit study --help)"),
    (("inspect",), "npukit: error: inspect: the following arguments are required: model (see npukit inspect --help)"),
    (("nope",), None),
])  # fmt: skip
def test_usage_errors_are_one_line(args, expect):
    r = _cli(*args, timeout=30)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npukit: error: ")
    if expect:
        assert lines[0] == expect


def test_bad_output_paths_are_one_line_errors(tmp_path):
    r = _cli("study", SAMPLES / "digits_cnn.onnx", "--soc", "arm-dsp-dla", "--report", tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"npukit: error: {tmp_path}: is a directory; give a file path to write to"
    r = _cli("study", SAMPLES / "digits_cnn.onnx", "--soc", "arm-dsp-dla", "--config", SAMPLES / "digits_cnn.onnx")
    assert r.returncode == 2 and "not a text file; a config is TOML or JSON" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_data_is_a_data_error(tmp_path):
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    x = np.load(SAMPLES / "digits_cnn.npz")["x"][:4]
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(npukit.DataError, match=r"x\.npy: a single array \(\.npy\); give an \.npz"):
        s.set_data(tmp_path / "x.npy")
    bad = x.copy()
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(npukit.DataError, match="x: holds NaN or infinite values"):
        s.set_data(bad)
    with pytest.raises(npukit.DataError, match="y: class labels must be integers, got dtype <U1"):
        s.set_data(x, np.array(list("abcd")))
    np.savez(tmp_path / "obj.npz", x=np.array([x[0], "a"], dtype=object))
    with pytest.raises(npukit.DataError, match=r"obj\.npz: array 'x' cannot be read without pickle"):
        s.set_data(tmp_path / "obj.npz")
    assert s.error_dict()["samples"] == 450  # the sample's own data is still in use


def test_made_up_names_never_take_a_real_one(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a1"], name="a"),
             helper.make_node("Neg", ["a1"], ["a2"], name="a"),
             helper.make_node("Abs", ["a2"], ["y"], name="a~2")]  # fmt: skip
    p = _save(tmp_path, "dups", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])  # fmt: skip
    g = npukit.import_model(p).graph
    assert [op.name for op in g.ops] == ["a", "a~3", "a~2"]
    # the second node named "a" goes by its op's name, so "a" means one node as every table shows it
    assert [op.source for op in g.ops] == ["a", "a~3", "a~2"]
    s = npukit.Study(p, "arm-dsp-dla")
    assert s.graph.resolve("a") == (0,) and s.explain("a").startswith("a  (op_id 0")
    s.pin("a~3", "arm")
    assert dict(s.config.pins) == {"a~3": "arm"}
    ann = onnx.load(s.annotated_onnx(tmp_path / "annotated.onnx"))  # each node carries its own ops' figures
    assert [(n.name, {e.key: e.value for e in n.metadata_props}["npukit.ops"]) for n in ann.graph.node] == [
        ("a", "a (relu)"), ("a", "a~3 (negative)"), ("a~2", "a~2 (abs)")]


def test_op_ids_and_names_that_look_like_op_ids(tmp_path):
    """A model's own node names come first: a node named "#3" or "0" is that node, not op 3 or op 0
    (the configs' spelling of an op id); an op whose id is spelt like such a node is stored by its name."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="#3"),
             helper.make_node("Gemm", ["r", "w", "b"], ["m"], name="g"),
             helper.make_node("Neg", ["m"], ["n"], name="0"),
             helper.make_node("Abs", ["n"], ["y"], name="abs")]  # fmt: skip
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.5] * 16), helper.make_tensor("b", TensorProto.FLOAT, [4], [1.0] * 4)]
    p = _save(tmp_path, "hashnames", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)  # fmt: skip
    s = npukit.Study(p, "arm-dsp-dla")
    g = s.graph
    assert [(op.name, op.kind) for op in g.ops] == [("#3", "relu"), ("g", "matmul"), ("g/add", "add"), ("0", "negative"), ("abs", "abs")]
    assert g.resolve("#3") == (0,) and g.resolve("0") == (3,) and g.resolve("#4") == (4,) and g.resolve(3) == (3,)
    assert s.explain("#3").startswith("#3  (op_id 0") and s.explain("0").startswith("0  (op_id 3")
    s.pin("#3", "arm")
    assert dict(s.config.pins) == {"#3": "arm"} and s.plan.processor[0] == "arm"
    s.pin(2, "arm")  # the bias add of "g": stored by its op's name, in the model's words
    assert dict(s.config.pins)["g/add"] == "arm"
    s.unpin("#2")  # (its id spelt "#2" is op 2 -- no node holds that name)
    s.unpin("#3")
    assert s.config.pins == ()
    nodes[3] = helper.make_node("Abs", ["n"], ["y"], name="#2")  # now a node holds it
    p2 = _save(tmp_path, "hashnames2", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)  # fmt: skip
    s2 = npukit.Study(p2, "arm-dsp-dla")
    s2.pin(2, "arm")
    assert dict(s2.config.pins) == {"g/add": "arm"}  # stored by its op's name, which reads back as op 2
    again = npukit.Study(p2, "arm-dsp-dla", s2.config.to_toml())
    assert again.plan.processor[2] == "arm" and again.plan.processor[4] == s2.plan.processor[4]


def test_an_edit_that_would_drop_a_layer_bit_width_is_refused():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "riscv-accel")
    s.set_bits("int2", layer="/conv2/Conv")  # on the accelerator, which runs int2
    before = s.config
    with pytest.raises(npukit.ConfigError, match=r"layer '/conv2/Conv' would run on riscv, which cannot run its bit-width int2"):
        s.set_support("accel", "conv2d", False)  # the conv would fall back to the host
    assert s.config == before and s.plan.processor[3] == "accel"
    with pytest.raises(npukit.ConfigError, match="set_support: enabled must be True or False, got 'maybe'"):
        s.set_support("dla", "conv2d", "maybe")


def test_explain_a_node_without_ops(tmp_path):
    nodes = [helper.make_node("Identity", ["x"], ["i"], name="ident"), helper.make_node("Relu", ["i"], ["y"], name="relu")]
    p = _save(tmp_path, "ident", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])  # fmt: skip
    s = npukit.Study(p, "arm-dsp-dla")
    assert s.explain("ident") == "ident: a model node without an op of its own: identity: passes on a model input"
    # an edit of it says the same, not "unknown node" (a new user pinned part of a GELU written as erf)
    for edit in (lambda: s.pin("ident", "arm"), lambda: s.set_bits("fp16", layer="ident")):
        with pytest.raises(npukit.ConfigError) as e:
            edit()
        assert str(e.value) == ("node 'ident' has no op of its own (identity: passes on a model input), so it cannot "
                                "be pinned or given a bit-width on its own")  # fmt: skip
    assert s.config == npukit.Config()


@pytest.mark.parametrize("edit, message", [
    ({"processors.dla.dtypes": ["float33"]}, "processors.dla.dtypes.0: unknown dtype 'float33'"),
    ({"processors.dla.ops.conv2d": {"strides": []}}, "processors.dla.ops.conv2d.strides: must not be empty"),
    ({"placement.order": ["dla", "dla"]}, "placement.order: lists an entry twice"),
    ({"processors.dla.macs_per_cycle": {"int8": 1e-320}}, "processors.dla.macs_per_cycle.int8: must be between 1e-09 and 1e+15"),
    ({"processors.dla.clock_mhz": 1e-300}, "processors.dla.clock_mhz: must be between 1e-09 and 1e+15"),
])  # fmt: skip
def test_profile_values_out_of_physical_range(edit, message):
    soc = npukit.load_soc("arm-dsp-dla")
    with pytest.raises(npukit.ProfileError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.").replace("+", r"\+")):
        soc.with_changes(edit)


def test_a_study_starts_from_a_saved_config_file(tmp_path):
    """``Study(model, soc, "saved.toml")`` reads the file (as --config does), not the path as TOML text."""
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    s.pin("/softmax/Softmax", "dsp")
    (tmp_path / "c.toml").write_text(s.config.to_toml())
    (tmp_path / "c.JSON").write_text(s.config.to_json())
    for c in (str(tmp_path / "c.toml"), tmp_path / "c.JSON"):
        assert npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla", c).config == s.config
    with pytest.raises(npukit.ConfigError, match=r"nope\.toml: no such config file$"):
        npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla", str(tmp_path / "nope.toml"))
    (tmp_path / "bad.toml").write_text("pins = {")
    with pytest.raises(npukit.ConfigError, match=r"bad\.toml: not valid TOML"):
        npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla", tmp_path / "bad.toml")


def test_an_output_a_reshape_relabels_is_written_to_dram_by_its_producer(tmp_path):
    """x -> Tanh -> Reshape -> output 'flat', and x -> Relu -> output 's': a reshape moves no data,
    so the Tanh writes the model output itself, to DRAM, as the Relu does (it kept it on chip, and
    the output was never written anywhere)."""
    vi = helper.make_tensor_value_info
    shape = numpy_helper.from_array(np.array([1, 128], np.int64), "shape")
    nodes = [helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
             helper.make_node("Reshape", ["t", "shape"], ["flat"], name="flatten"),
             helper.make_node("Relu", ["x"], ["s"], name="relu")]  # fmt: skip
    path = _save(tmp_path, "view_out", nodes, [vi("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                 [vi("flat", TensorProto.FLOAT, [1, 128]), vi("s", TensorProto.FLOAT, [1, 8, 4, 4])], [shape])  # fmt: skip
    s = npukit.Study(path, "arm-dsp-dla", placement="first-fit").pin("tanh", "arm").pin("relu", "arm")
    c = s.costs.set_index("name")
    assert list(c.index) == ["tanh", "flatten", "relu"]
    assert list(c["processor"]) == ["arm", "arm", "arm"]
    # 128 floats read, 128 written: both to DRAM
    assert c.loc["tanh", "dram_bytes"] == c.loc["relu", "dram_bytes"] == 2 * 128 * 4
    assert c.loc["flatten", "bytes"] == 0
    assert "out 512 B =" in next(ln for ln in s.explain("tanh").splitlines() if ln.strip().startswith("bytes:"))


def test_a_tensor_above_the_kernel_calls_rank_stays_off_the_accelerators(tmp_path):
    """A rank-7 tensor pinned to an accelerator exported, then its C failed to compile: the kernel
    libraries' tensor descriptor holds 6 dims (NPK_MAX_RANK).  Accelerators now refuse such ops."""
    from npukit.rules import MAX_KERNEL_RANK

    header = (ROOT / "npukit" / "codegen" / "kernels" / "npk_ref.h").read_text()
    assert f"#define NPK_MAX_RANK {MAX_KERNEL_RANK}\n" in header
    vi = helper.make_tensor_value_info
    shape = numpy_helper.from_array(np.array([1, 2, 2, 2, 2, 2, 4], np.int64), "shape")
    back = numpy_helper.from_array(np.array([1, 128], np.int64), "back")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["u"], name="up"),
             helper.make_node("Sigmoid", ["u"], ["s"], name="sig"),
             helper.make_node("Reshape", ["s", "back"], ["y"], name="down")]  # fmt: skip
    path = _save(tmp_path, "rank7", nodes, [vi("x", TensorProto.FLOAT, [1, 128])], [vi("y", TensorProto.FLOAT, [1, 128])],
                 [shape, back])  # fmt: skip
    s = npukit.Study(path, "tda4vm-like", placement="first-fit")
    p = s.placement.set_index("name")
    assert p.loc["sig", "c7x"] == "rank-7 tensor: kernel calls take rank 6 at most"
    assert set(p["processor"]) == {"a72"}
    with pytest.raises(npukit.ConfigError, match=r"cannot pin 'sig' \(sigmoid\) to c7x: c7x: rank-7 tensor"):
        s.pin("sig", "c7x")


def test_explain_shows_a_latency_below_a_nanosecond_as_the_figure_it_is():
    """A what-if clock of 1e14 MHz gives a kernel a latency of 7.4e-12 us: ``explain`` printed it
    '= 0.000 us' (three decimals), while the energy line beside it read 7.4e-12 from the same figure;
    the latency line shows the figure, as every other term does."""
    soc = npukit.load_soc("arm-dsp-dla").with_changes({"processors.dla.clock_mhz": 1e14})
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", soc, placement="first-fit")
    c = s.costs.set_index("name").loc["/conv2/Conv"]
    assert c.processor == "dla" and 0 < c.latency_us < 1e-9
    line = next(x for x in s.explain("/conv2/Conv").splitlines() if x.strip().startswith("latency_us:"))
    assert line.strip() == f"latency_us: cycles / clock_mhz = {c.cycles:,.1f} / 1e+14 = {c.latency_us:.6g} us [profile: clock_mhz]"


def test_a_tensor_over_max_tensor_bytes_is_refused_naming_the_field():
    """An accelerator whose max_tensor_bytes is smaller than a layer's tensors refused it as
    'tensor of 4,608 bytes > max 64', alike an op table's limits; it names the processor's field."""
    soc = npukit.load_soc("arm-dsp-dla").with_changes({"processors.dla.max_tensor_bytes": 64})
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", soc, placement="first-fit")
    row = s.placement.set_index("name").loc["/conv2/Conv"]
    assert row.processor == "arm"
    assert row.dla == "tensor of 4,608 bytes > max_tensor_bytes 64"  # the conv2 weight, [16, 8, 3, 3] float32
    assert "dla: tensor of 4,608 bytes > max_tensor_bytes 64" in row.reason
