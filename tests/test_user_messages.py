"""A new user's findings: the message of each names the file, node or field at fault in the model's own
words (never a raw Python error, never a stale or unrelated cause), and the study keeps working after it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import DIGITS_ONNX, assert_cli_error, onnx_model, run_cli, save_onnx, tensor_info

import npukit


def _digits_rows(n: int = 6, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 1, 1, 8, 8)).astype("float32")


# ---------------------------------------------------------------------------------------------
# the error figures name this study's data, not an earlier study's of the same content


def test_the_data_source_is_this_studys_own_whatever_measured_the_same_arrays_first(tmp_path):
    x = _digits_rows()
    np.savez(tmp_path / "mine.npz", x=x)
    first = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_data(tmp_path / "mine.npz")
    assert first.error_dict()["data_source"] == "mine.npz (6 samples)"
    other = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_data(x)  # the same arrays, given as arrays
    assert other.data.key == first.data.key  # (so the measuring is shared)
    assert other.error_dict()["data_source"] == "user data"
    other.set_data(tmp_path / "mine.npz")
    assert other.error_dict()["data_source"] == "mine.npz (6 samples)"
    other.set_data({"input": x})
    assert other.error_dict()["data_source"] == "user data"
    assert first.error_dict()["data_source"] == "mine.npz (6 samples)"


# ---------------------------------------------------------------------------------------------
# a pin against a layer's bit-width: the pin is named as the conflict


PIN_VS_WIDTH = ("layer '/conv1/Conv' has bit-width int4 and is pinned to riscv, which cannot run int4 "
                "(processors.riscv.macs_per_cycle lists int8, int16, fp32): the pin and the bit-width conflict; "
                "unpin '/conv1/Conv', pin it to a processor that runs int4 and takes conv2d (accel), or give the "
                "layer a width riscv runs")  # fmt: skip


def test_a_pin_against_a_layer_bit_width_names_the_pin_whichever_edit_comes_second():
    s = npukit.Study(DIGITS_ONNX, "riscv-accel")
    s.set_bits("int4", layer="/conv1/Conv")
    assert s.placement.set_index("name").loc["/conv1/Conv", "processor"] == "accel"
    before = s.config
    with pytest.raises(npukit.ConfigError) as e:
        s.pin("/conv1/Conv", "riscv")
    assert str(e.value) == PIN_VS_WIDTH
    assert s.config == before and s.plan.processor[0] == "accel"
    s.reset().pin("/conv1/Conv", "riscv")
    before = s.config
    with pytest.raises(npukit.ConfigError) as e:
        s.set_bits("int4", layer="/conv1/Conv")
    assert str(e.value) == PIN_VS_WIDTH
    assert s.config == before
    s.set_bits("int16", layer="/conv1/Conv")  # the advice works: a width riscv runs
    assert s.plan.processor[0] == "riscv" and s.result.bits[0] == "int16"


def test_a_pin_to_an_accelerator_against_a_layer_width_names_the_pin_whichever_edit_comes_second():
    """As on the host: a layer width the pinned accelerator cannot run moved the op off it, and the edit
    was refused as 'cannot pin ... pinned, it would run on arm' -- even when the edit was set_bits."""
    said = ("layer '/conv1/Conv' has bit-width int16 and is pinned to dla, which cannot run int16 "
            "(processors.dla.macs_per_cycle lists int8, fp16): the pin and the bit-width conflict; unpin "
            "'/conv1/Conv', pin it to a processor that runs int16 and takes conv2d (arm), or give the layer a width "
            "dla runs")  # fmt: skip
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").pin("/conv1/Conv", "dla")
    before, placed = s.config, list(s.plan.processor)
    with pytest.raises(npukit.ConfigError) as e:
        s.set_bits("int16", layer="/conv1/Conv")
    assert str(e.value) == said
    assert s.config == before and list(s.plan.processor) == placed
    s.reset().set_bits("int16", layer="/conv1/Conv")
    with pytest.raises(npukit.ConfigError) as e:
        s.pin("/conv1/Conv", "dla")
    assert str(e.value) == said
    s.set_bits("fp16", layer="/conv1/Conv").pin("/conv1/Conv", "dla")  # the advice works: a width dla runs
    assert s.plan.processor[0] == "dla"


def test_a_pin_of_a_whole_node_against_one_ops_width_names_that_pin():
    s = npukit.Study(DIGITS_ONNX, "riscv-accel")
    s.set_bits("int4", layer="/conv1/Conv/add")  # the bias add alone (stored by its op name)
    with pytest.raises(npukit.ConfigError) as e:
        s.pin("/conv1/Conv", "riscv")
    assert str(e.value) == ("layer '/conv1/Conv/add' has bit-width int4 and is pinned to riscv by the pin of "
                            "'/conv1/Conv', which cannot run int4 (processors.riscv.macs_per_cycle lists int8, int16, "
                            "fp32): the pin and the bit-width conflict; unpin '/conv1/Conv', pin it to a processor "
                            "that runs int4 and takes add (accel), or give the layer a width riscv runs")  # fmt: skip
    assert s.plan.processor[1] == "accel"
    s.pin(0, "accel")  # the study still edits
    assert s.plan.processor[0] == "accel"


# ---------------------------------------------------------------------------------------------
# input_shapes given as anything but {name: dims of ints}: a ShapeError naming the model and entry


def _symbolic(tmp_path):
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["y"], name="r")], [tensor_info("x", ["N", 3, 4, 4])],
                   [tensor_info("y", ["N", 3, 4, 4])])  # fmt: skip
    return save_onnx(m, tmp_path / "dyn.onnx")


@pytest.mark.parametrize(("shapes", "said"), [
    ((1, 3, 4, 4), "input_shapes must map each input's name to its shape, e.g. input_shapes={'<input name>': "
                   "(1, 3, 4, 4)}; got the tuple (1, 3, 4, 4)"),
    ("x=1,3,4,4", "input_shapes must map each input's name to its shape, e.g. input_shapes={'x': (1, 3, 4, 4)}; "
                  "got the str 'x=1,3,4,4'"),
    ({"x": 5}, "input_shapes['x'] = 5: a shape is a sequence of dims, e.g. (1, 3, 224, 224)"),
    ({"x": None}, "input_shapes['x'] = None: a shape is a sequence of dims, e.g. (1, 3, 224, 224)"),
    ({"x": "1,3,4,4"}, "input_shapes['x'] = '1,3,4,4': a shape is a sequence of dims, e.g. (1, 3, 224, 224)"),
    ({"x": (True, 3, 4, 4)}, "input_shapes['x'] = (True, 3, 4, 4): dim 0 is True, not an integer; every dim must be "
                             "a positive integer"),
    ({"x": (1, 3.0, 4, 4)}, "input_shapes['x'] = (1, 3.0, 4, 4): dim 1 is 3.0, not an integer; every dim must be a "
                            "positive integer"),
    ({0: (1, 3, 4, 4)}, "input_shapes key 0 is not an input name (a str)"),
])  # fmt: skip
def test_input_shapes_of_the_wrong_types_name_the_model_and_the_entry(tmp_path, shapes, said):
    path = _symbolic(tmp_path)
    for make in (lambda: npukit.Study(path, "arm-dsp-dla", input_shapes=shapes),
                 lambda: npukit.import_model(path, input_shapes=shapes)):  # fmt: skip
        with pytest.raises(npukit.ShapeError) as e:
            make()
        assert str(e.value) == f"{path}: {said}"
    ok = npukit.Study(path, "arm-dsp-dla", input_shapes={"x": np.array([2, 3, 4, 4])})
    assert ok.graph.tensors[ok.graph.inputs[0]].shape == (2, 3, 4, 4)


def test_input_shapes_of_an_in_memory_model_name_it_by_its_kind(tmp_path):
    import onnx

    proto = onnx.load(_symbolic(tmp_path))
    with pytest.raises(npukit.ShapeError) as e:
        npukit.Study(proto, "arm-dsp-dla", input_shapes={"x": (False, 3, 4, 4)})
    assert str(e.value) == ("<onnx.ModelProto>: input_shapes['x'] = (False, 3, 4, 4): dim 0 is False, not an integer; "
                            "every dim must be a positive integer")  # fmt: skip


@pytest.mark.parametrize(("arg", "said"), [
    ("x=", "inspect: argument --input-shape: --input-shape 'x=': no dims after '='; expected NAME=D1,D2,... e.g. "
           "x=1,3,224,224 (see npukit inspect --help)"),
    ("=1,3,4,4", "inspect: argument --input-shape: --input-shape '=1,3,4,4': no input name before '='; expected "
                 "NAME=D1,D2,... (see npukit inspect --help)"),
    ("x=1,,3,4,4", "inspect: argument --input-shape: --input-shape 'x=1,,3,4,4': dim 1 is empty (see npukit inspect "
                   "--help)"),
])  # fmt: skip
def test_the_command_line_refuses_an_input_shape_it_would_have_read_otherwise(tmp_path, arg, said):
    assert assert_cli_error(run_cli("inspect", _symbolic(tmp_path), "--input-shape", arg)) == said


def test_the_command_line_refuses_one_input_given_two_shapes(tmp_path):
    path = _symbolic(tmp_path)
    r = run_cli("inspect", path, "--input-shape", "x=1,3,4,4", "--input-shape", "x=2,3,4,4")
    assert assert_cli_error(r) == "--input-shape gives input 'x' twice (1,3,4,4 and 2,3,4,4); give each input once"
    r = run_cli("inspect", path, "--input-shape", "x=2,3,4,4", "--input-shape", "x=2,3,4,4")
    assert r.returncode == 0 and "input  'x' [2, 3, 4, 4] float32" in r.stdout, r.stderr


def test_the_command_line_reads_several_input_shapes_separated_by_semicolons(tmp_path):
    """``--input-shape 'x=1,4;x=2,4'`` was read as the shape 2,4 of an input named 'x=1,4;x' ("which is
    not a model input"): a ';' separates inputs, and one given twice is refused as with two options."""
    from onnx import helper as h

    path = _symbolic(tmp_path)
    r = run_cli("inspect", path, "--input-shape", "x=1,3,4,4;x=2,3,4,4")
    assert assert_cli_error(r) == "--input-shape gives input 'x' twice (1,3,4,4 and 2,3,4,4); give each input once"
    r = run_cli("inspect", path, "--input-shape", "x=1,3,4,4;y=")
    assert assert_cli_error(r) == ("inspect: argument --input-shape: --input-shape 'y=': no dims after '='; expected "
                                   "NAME=D1,D2,... e.g. y=1,3,224,224 (in 'x=1,3,4,4;y=') (see npukit inspect --help)")
    m = onnx_model([h.make_node("Add", ["x", "y"], ["z"], name="add")], [tensor_info("x", ["N", 4]),
                   tensor_info("y", ["N", 4])], [tensor_info("z", ["N", 4])])  # fmt: skip
    two = save_onnx(m, tmp_path / "two.onnx")
    r = run_cli("inspect", two, "--input-shape", "x=3,4;y=3,4")
    assert r.returncode == 0, r.stderr
    assert "input  'x' [3, 4] float32" in r.stdout and "input  'y' [3, 4] float32" in r.stdout, r.stdout


# ---------------------------------------------------------------------------------------------
# a model file rewritten in place with the same size and time stamps is read again


def _weights_model(path, value: float):
    from onnx import helper as h
    from onnx import numpy_helper

    w = numpy_helper.from_array(np.full((4, 4), value, "float32"), "w")
    m = onnx_model([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [tensor_info("x", [1, 4])],
                   [tensor_info("y", [1, 4])], [w])  # fmt: skip
    return save_onnx(m, path)


def _weight(study) -> float:
    g = study.graph
    return float(next(iter(g.consts.values())).ravel()[0])


def test_a_model_rewritten_with_the_same_size_and_mtime_is_read_again(tmp_path):
    import os

    path = _weights_model(tmp_path / "m.onnx", 1.0)
    st = os.stat(path)
    assert _weight(npukit.Study(path, "arm-dsp-dla")) == 1.0
    _weights_model(path, 2.0)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as cp -p / rsync -t leave it
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    assert _weight(npukit.Study(path, "arm-dsp-dla")) == 2.0


def test_a_settled_model_file_is_not_read_again_until_it_changes(tmp_path, monkeypatch):
    """The digest of the bytes is kept per stat signature once the file's ctime is settled (here:
    at once), so loading an unchanged file again reads only its stat; a rewrite moves the ctime."""
    import hashlib
    import os
    import time

    from npukit.pipeline import source

    monkeypatch.setattr(source, "SETTLED_NS", 0)
    reads = []
    digest = hashlib.file_digest
    monkeypatch.setattr(source.hashlib, "file_digest", lambda f, alg: reads.append(f.name) or digest(f, alg))
    path = _weights_model(tmp_path / "m.onnx", 1.0)
    time.sleep(0.05)  # (past the file system's time stamp granularity)
    first = npukit.pipeline.load(path)
    assert npukit.pipeline.load(path) is first and reads == [str(path)]
    st = os.stat(path)
    _weights_model(path, 3.0)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = npukit.pipeline.load(path)
    assert len(reads) == 2 and again is not first and float(next(iter(again.graph.consts.values())).ravel()[0]) == 3.0


# ---------------------------------------------------------------------------------------------
# sweep_study given something that is not one row of the sweep, or a row on another profile


@pytest.fixture(scope="module")
def dla_sweep():
    return npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", {"soc.processors.dla.clock_mhz": [500, 1000]}, workers=0,
                        progress=False)  # fmt: skip


HOW = "pass one row of the sweep's results, e.g. df.iloc[3] (or a dict of one row's columns)"


def test_sweep_study_says_what_is_not_a_row(dla_sweep):
    from npukit.sweeps import SweepError

    cases = [
        (3, "sweep_study: 3 is an index, not a row of this sweep; pass the row itself: df.iloc[3] (or a dict of one "
            "row's columns)"),
        ({"foo": 1}, f"sweep_study: not a row of this sweep: it has no 'config' column (its keys: 'foo'); {HOW}"),
        ("0", f"sweep_study: the str '0' is not a row of this sweep; {HOW}"),
        (dla_sweep, f"sweep_study takes one row, not a DataFrame of 2 rows; {HOW}"),
        ({"index": 1, "config": "bits = 8"}, "sweep row 1: its config 'bits = 8' is not a saved config (Expecting "
                                             f"value: line 1 column 1 (char 0)); {HOW}"),
    ]  # fmt: skip
    for row, said in cases:
        with pytest.raises(SweepError) as e:
            npukit.sweep_study(row, DIGITS_ONNX, "arm-dsp-dla")
        assert str(e.value) == said
    s = npukit.sweep_study(dla_sweep.iloc[1], DIGITS_ONNX, "arm-dsp-dla")  # a row still opens
    assert s.soc.processor("dla").clock_mhz == 1000 and s.totals["latency_us"] == dla_sweep.iloc[1]["latency_us"]


def test_a_sweep_row_opened_on_a_profile_without_its_processor_says_so(dla_sweep):
    from npukit.sweeps import SweepError

    with pytest.raises(SweepError) as e:
        npukit.sweep_study(dla_sweep.iloc[0], DIGITS_ONNX, "vsi-npu")
    assert str(e.value) == ("sweep row 0: vsi-npu has no processor 'dla' (the row's column soc.processors.dla.clock_mhz); "
                            "open the row on the profile its sweep ran on (valid names: 'a53', 'npu')")  # fmt: skip
    with pytest.raises(SweepError) as e:
        npukit.sweep_study({"index": 4, "config": '{"bits": {"dla": "fp16"}}'}, DIGITS_ONNX, "vsi-npu")
    assert str(e.value) == ("sweep row 4: vsi-npu has no processor 'dla' (the row's config bits.dla); open the row on "
                            "the profile its sweep ran on (valid names: 'a53', 'npu')")  # fmt: skip
    with pytest.raises(npukit.ConfigError) as e:
        npukit.sweep_study({"index": 5, "config": '{"pins": {"/nope": "dla"}}'}, DIGITS_ONNX, "arm-dsp-dla")
    assert str(e.value).startswith("sweep row 5: its config {\"pins\": {\"/nope\": \"dla\"}} does not fit this model: "
                                   "unknown node '/nope'; ")
    assert str(e.value).endswith("; open the row on the model its sweep ran on")


def test_a_sweep_row_opened_on_an_edited_profile_of_the_same_name_says_so(dla_sweep, tmp_path):
    """The profile edited since the sweep (the DSP at half its clock, same name): the study would not
    be the row's, so it is refused, with the figures that differ and what to do."""
    from npukit.sweeps import SweepError

    text = (Path(npukit.__file__).parent / "profiles" / "arm-dsp-dla.toml").read_text()
    edited = tmp_path / "arm-dsp-dla.toml"
    edited.write_text(text.replace("clock_mhz = 1200", "clock_mhz = 600", 1))  # the host, arm
    assert npukit.load_soc(edited).name == "arm-dsp-dla" and npukit.load_soc(edited).processor("arm").clock_mhz == 600
    row = dla_sweep.iloc[0]
    with pytest.raises(SweepError) as e:
        npukit.sweep_study(row, DIGITS_ONNX, edited)
    got = npukit.Study(DIGITS_ONNX, npukit.load_soc(edited).with_changes({"processors.dla.clock_mhz": 500}),
                       row["config"]).totals["latency_us"]  # fmt: skip
    assert str(e.value) == (f"sweep row 0: opened on digits_cnn.onnx and profile 'arm-dsp-dla', its configuration "
                            f"estimates latency_us = {got:,.6g} us where the sweep recorded {row['latency_us']:,.6g} us: "
                            "the model or the profile is not the one the sweep ran on (edited since?); open the row on "
                            "the files the sweep ran on, or study its config on these: npukit.Study(model, soc, "
                            "json.loads(row['config']))")  # fmt: skip
    assert npukit.sweep_study(row, DIGITS_ONNX, "arm-dsp-dla").totals["latency_us"] == row["latency_us"]


# ---------------------------------------------------------------------------------------------
# a config file's error names the file, then the field at fault, from the API as on the command line

VALID = "'arm', 'dla', 'dsp'"


@pytest.mark.parametrize(("name", "text", "said"), [
    ("badnode.toml", '[pins]\n"/nope" = "dla"\n', "pins.\"/nope\": unknown node '/nope'; some of the 14 valid names: "
                                                 "'/conv1/Conv', '/conv1/Conv/add', '/conv2/Conv', '/conv2/Conv/add', '/fc1/Gemm'"),
    ("badproc.toml", '[bits]\nnpu = "int8"\n', f"bits.npu: unknown processor 'npu'; valid names: {VALID}"),
    ("badpinproc.toml", '[pins]\n"/softmax/Softmax" = "npu"\n', "pins.\"/softmax/Softmax\": unknown processor 'npu'; "
                                                                f"valid names: {VALID}"),
    ("badpin.toml", '[pins]\n"/softmax/Softmax" = "dla"\n', "pins.\"/softmax/Softmax\": cannot pin '/softmax/Softmax' "
                                                            "(softmax) to dla: dla: softmax is not in processors.dla.ops"),
    ("badwidth.toml", '[bits]\ndla = "int4"\n', "bits.dla: dla cannot run int4: processors.dla.macs_per_cycle lists "
                                                "int8, fp16"),
    ("badlayer.toml", '[layer_bits]\n"/conv1/Conv" = "int2"\n', "layer_bits.\"/conv1/Conv\": layer '/conv1/Conv' would run "
                                                                "on arm, which cannot run its bit-width int2"),
    ("badbits.toml", '[bits]\ndla = "int3"\n', "bits.dla: must be one of int2, int4, int8, int16, fp16, fp32, got 'int3'"),
    ("badnode.json", '{"layer_bits": {"/nope": "int8"}}', "layer_bits.\"/nope\": unknown node '/nope'"),
])  # fmt: skip
def test_a_config_file_error_names_the_file_then_the_field(tmp_path, name, text, said):
    path = tmp_path / name
    path.write_text(text)
    for config in (path, str(path)):
        with pytest.raises(npukit.ConfigError) as e:
            npukit.Study(DIGITS_ONNX, "arm-dsp-dla", config)
        assert str(e.value).startswith(f"{path}: {said}")
    if name in ("badnode.toml", "badpin.toml", "badnode.json"):  # (the command line reads the same)
        r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--config", path)
        assert assert_cli_error(r, limit_s=60).startswith(f"{path}: {said}")
    good = tmp_path / "good.toml"
    good.write_text('[pins]\n"/softmax/Softmax" = "dsp"\n')  # the file put right opens
    assert npukit.Study(DIGITS_ONNX, "arm-dsp-dla", good).plan.processor[-1] == "dsp"


def test_a_config_given_as_a_dict_names_the_field_alone():
    with pytest.raises(npukit.ConfigError) as e:
        npukit.Study(DIGITS_ONNX, "arm-dsp-dla", {"bits": {"npu": "int8"}})
    assert str(e.value) == f"bits.npu: unknown processor 'npu'; valid names: {VALID}"
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    with pytest.raises(npukit.ConfigError) as e:  # an edit is said as before: it is no config's field
        s.set_bits("int8", processor="npu")
    assert str(e.value) == f"unknown processor 'npu'; valid names: {VALID}"


# ---------------------------------------------------------------------------------------------
# what the documentation now says, held


def test_an_op_level_edit_is_saved_in_the_models_words():
    s = npukit.Study(DIGITS_ONNX, "riscv-accel")
    s.set_bits("int8", layer=1)  # the bias add of /conv1/Conv
    s.pin("/conv2/Conv/add", "accel")
    s.pin(0, "accel")  # the conv itself keeps the node's name, which means both ops: "#0"
    assert dict(s.config.layer_bits) == {"/conv1/Conv/add": "int8"}
    assert dict(s.config.pins) == {"#0": "accel", "/conv2/Conv/add": "accel"}
    again = npukit.Study(DIGITS_ONNX, "riscv-accel", s.config.to_toml())
    assert again.config == s.config and again.plan.processor == s.plan.processor
    s.unpin("/conv2/Conv/add").set_bits(None, layer="#1")  # either spelling reaches the op
    assert s.config.layer_bits == () and dict(s.config.pins) == {"#0": "accel"}


def test_energy_by_processor_leaves_out_the_links_energy():
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    t, link = s.totals, sum(b.link_energy_uj for b in s.result.bounds)
    assert link > 0 and sum(t["energy_by_processor_uj"].values()) == pytest.approx(t["energy_uj"] - link)


def _unread_input_model(tmp_path):
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["y"], name="r")], [tensor_info("x", [1, 4]), tensor_info("spare", [1, 2])],
                   [tensor_info("y", [1, 4])])  # fmt: skip
    return save_onnx(m, tmp_path / "spare.onnx")


def test_an_input_no_op_reads_may_be_left_out_of_the_data(tmp_path):
    path = _unread_input_model(tmp_path)
    s = npukit.Study(path, "arm-dsp-dla")
    x = np.random.default_rng(0).standard_normal((3, 1, 4)).astype("float32")
    with pytest.raises(npukit.DataError) as e:
        s.set_data({"spare": np.zeros((3, 1, 2), "float32")})
    assert str(e.value) == ("x: no array for input(s) ['x']; the model's inputs are ['x', 'spare'] (no op reads "
                            "['spare']: they may be left out)")  # fmt: skip
    for given in ({"x": x}, x):
        s.set_data(given)
        assert s.data.samples[0][1].tolist() == [[0.0, 0.0]] and len(s.data.samples) == 3
    np.savez(tmp_path / "d.npz", x=x)
    assert s.set_data(tmp_path / "d.npz").error_dict()["samples"] == 3
    r = run_cli("inspect", path)
    assert "  input  'spare' [1, 2] float32  (no op reads it: data may leave it out, and it is fed zeros)" in r.stdout
    r = run_cli("inspect", path, "--json")
    assert __import__("json").loads(r.stdout)["unread_inputs"] == ["spare"]


def test_a_bad_width_in_a_config_names_the_node_as_toml_spells_it(tmp_path):
    """A layer's bad width names its field quoted, as every other error of a layer_bits / pins entry does
    (it read ``layer_bits.fc 1``, a key no TOML file can hold unquoted)."""
    path = tmp_path / "c.toml"
    path.write_text('[layer_bits]\n"/fc1/Gemm" = "int3"\n')
    with pytest.raises(npukit.ConfigError) as e:
        npukit.Study(DIGITS_ONNX, "arm-dsp-dla", path)
    assert str(e.value) == f"{path}: layer_bits.\"/fc1/Gemm\": must be one of int2, int4, int8, int16, fp16, fp32, got 'int3'"
    with pytest.raises(npukit.ConfigError) as e:
        npukit.Study(DIGITS_ONNX, "arm-dsp-dla", {"pins": {"/fc1/Gemm": 3}})
    assert str(e.value) == "config: pins.\"/fc1/Gemm\": must be a processor name, got 3"


def test_a_width_set_on_every_processor_says_which_run_it():
    """set_bits(b) with no processor: when none runs b, per processor (what it advised) cannot help."""
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    with pytest.raises(npukit.ConfigError) as e:
        s.set_bits("int4")
    assert str(e.value) == ("no processor of arm-dsp-dla runs int4 (processors.<name>.macs_per_cycle lists: arm int8, "
                            "int16, fp16, fp32; dsp int8, int16, fp16, fp32; dla int8, fp16)")  # fmt: skip
    with pytest.raises(npukit.ConfigError) as e:
        s.set_bits("int16")
    assert str(e.value) == "dla cannot run int16; set it per processor with processor= (arm, dsp run it)"
    assert s.config == npukit.Config()


def test_a_name_in_other_letter_case_is_offered_first():
    """difflib's ratio is case-sensitive: 'CONV2D' was answered with 'some of the 175 valid names: abs,
    acos ...' and 'DLA' with the processors but no 'did you mean'."""
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    with pytest.raises(npukit.ConfigError) as e:
        s.set_support("dla", "CONV2D", False)
    assert str(e.value) == "unknown op 'CONV2D'; closest valid names: 'conv2d'"
    with pytest.raises(npukit.ConfigError) as e:
        s.pin("/softmax/Softmax", "DLA")
    assert str(e.value) == f"unknown processor 'DLA'; did you mean 'dla'? valid names: {VALID}"
    with pytest.raises(npukit.ConfigError) as e:
        s.pin("/softmax/Softmax", "ARM ")
    assert str(e.value) == f"unknown processor 'ARM '; did you mean 'arm'? valid names: {VALID}"
    with pytest.raises(npukit.ConfigError) as e:
        s.pin("/SOFTMAX/SOFTMAX", "arm")
    assert str(e.value).startswith("unknown node '/SOFTMAX/SOFTMAX'; closest valid names: '/softmax/Softmax'")
    assert s.config == npukit.Config()


def test_a_mistyped_input_name_in_set_data_is_refused_with_the_inputs_names(tmp_path):
    """A dict key that names no input was ignored: beside the read input, a misspelled unread one was
    fed zeros without a word; alone, the message said which inputs had no array, not the key's."""
    s = npukit.Study(_unread_input_model(tmp_path), "arm-dsp-dla")
    x = np.random.default_rng(0).standard_normal((3, 1, 4)).astype("float32")
    spare = np.ones((3, 1, 2), "float32")
    with pytest.raises(npukit.DataError) as e:
        s.set_data({"x": x, "spaer": spare})
    assert str(e.value) == "x: 'spaer' is not an input of the model; did you mean 'spare'? valid names: 'spare', 'x'"
    with pytest.raises(npukit.DataError) as e:
        npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_data({"inptu": np.zeros((2, 1, 1, 8, 8), "float32")})
    assert str(e.value) == "x: 'inptu' is not an input of the model; did you mean 'input'? valid names: 'input'"
    s.set_data({"x": x, "spare": spare})
    assert s.data.samples[0][1].tolist() == [[1.0, 1.0]]


def test_an_op_id_past_the_last_op_names_the_ids_there_are():
    """``--explain '#99'`` on the 14-op digits CNN said "unknown node '#99'; some of the 14 valid names:
    '/conv1/Conv', ..." -- names, where the user gave an op id."""
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    for ref in ("#99", 99, "99", "#14"):
        with pytest.raises(npukit.ConfigError) as ei:
            s.pin(ref, "arm")
        n = str(ref).lstrip("#")
        assert str(ei.value) == f"unknown op id #{n}; the model's ops are #0 .. #13"
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--explain", "#99")
    assert assert_cli_error(r) == "unknown op id #99; the model's ops are #0 .. #13"


# ---------------------------------------------------------------------------------------------
# reset drops the edits, not the placement policy the study was made with


def test_reset_keeps_the_placement_policy_and_drops_every_edit():
    """A study made with ``placement="first-fit"`` (the classroom notebook's) became a cost-policy
    study after ``reset()`` or the widget's "reset all edits"."""
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla", placement="first-fit")
    fresh = dict(s.totals)
    s.pin("/conv1/Conv", "arm").set_support("dla", "conv2d", False).set_bits("fp16", processor="dla")
    assert s.reset().config == npukit.Config(placement="first-fit")
    assert dict(s.totals) == fresh
    assert npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_placement("cost").reset().config.placement == "cost"


def test_the_widgets_reset_says_the_policy_it_kept():
    from npukit.ui.requests import apply_edit

    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla", placement="first-fit").pin("/conv1/Conv", "arm")
    assert apply_edit(s, {"type": "reset"}) == ("ok", "every edit dropped (placement policy first-fit kept) \u2192")
    assert s.config == npukit.Config(placement="first-fit")
