"""Bad inputs a new user makes (huge or unfeedable inputs, external data, hand-edited configs, contradicting
flags, names given twice in a profile): each an NpukitError in the model's words, the same Study answering after it, no traceback on the command line."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, assert_cli_error, initializer, onnx_model, run_cli, save_onnx, tensor_info

import npukit


def assert_model_refused(path, want: str) -> None:
    """The model at ``path`` is refused with ``want``, by the API and by ``npukit inspect`` alike."""
    with pytest.raises(npukit.ModelError) as e:
        npukit.Study(path, "arm-dsp-dla")
    assert str(e.value) == want
    assert assert_cli_error(run_cli("inspect", path), limit_s=60) == want


def _open_batch(tmp: Path) -> Path:
    from onnx import helper as h

    nodes = [h.make_node("MatMul", ["x", "w"], ["y"], name="fc")]
    m = onnx_model(nodes, [tensor_info("x", ["B", 4])], [tensor_info("y", ["B", 3])], [initializer("w", [4, 3])])
    return save_onnx(m, tmp / "open_batch.onnx")


@pytest.mark.parametrize("dims, shown, count", [
    ((99999999999, 4), "(99999999999, 4)", "4e+11"),
    ((2**63, 4), "(9223372036854775808, 4)", "3.69e+19"),  # beyond int64: TVM's own words were "ffi.BigInt"
])  # fmt: skip
def test_pinned_shape_too_large_is_refused_like_a_declared_one(tmp_path, dims, shown, count):
    path = _open_batch(tmp_path)
    want = (f"{path}: input_shapes['x'] = {shown}: {count} elements; npukit refuses tensors of more than "
            "2.15e+09 elements")  # fmt: skip
    with pytest.raises(npukit.ShapeError) as e:
        npukit.Study(path, "arm-dsp-dla", input_shapes={"x": dims})
    assert str(e.value) == want
    r = run_cli("inspect", path, "--input-shape", "x=" + ",".join(map(str, dims)))
    assert assert_cli_error(r, limit_s=60) == want
    s = npukit.Study(path, "arm-dsp-dla", input_shapes={"x": (2, 4)})  # a sane size still works
    assert s.totals["macs"] == 24


def test_random_data_too_large_for_memory_is_a_data_error(tmp_path):
    """A shape the import accepts but whose 16 random samples do not fit in memory, where the error is
    measured on them: one line, exit 2 (was a numpy ``_ArrayMemoryError`` traceback from
    ``quant/data.py``).  Without ``--error`` nothing reads the data, and the study is printed (exit 0),
    as ``--json`` prints it."""
    path = _open_batch(tmp_path)
    limit = 6 << 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "npukit", "study", str(path), "--soc", "arm-dsp-dla",
                        "--input-shape", "x=100000000,4", "--error"], capture_output=True, text=True, env=env,
                       preexec_fn=cap, timeout=300)  # fmt: skip
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    quiet = subprocess.run(p.args[:-1], capture_output=True, text=True, env=env, preexec_fn=cap, timeout=300)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr[-2000:]
    assert p.stderr == ("npukit: error: seeded random inputs: 16 samples of input 'x' [100000000, 4] float32 "
                        "(23.8 GiB) do not fit in this machine's memory; give fewer, smaller samples of your own "
                        "with study.set_data() or --data\n")  # fmt: skip


_FEEDS = ("float64, float32, float16, bfloat16, int64, int32, int16, int8, uint64, uint32, uint16, uint8, bool and "
          "float8 inputs")  # fmt: skip


def _typed_input(tmp: Path, name: str, elem_type) -> Path:
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Identity", ["x"], ["a"], name="idn"), h.make_node("Cast", ["a"], ["y"], name="c", to=T.FLOAT)]
    m = onnx_model(nodes, [tensor_info("x", [1, 4], elem_type)], [tensor_info("y", [1, 4])])
    return save_onnx(m, tmp / f"{name}.onnx", infer_shapes=False)


@pytest.mark.parametrize("name, elem_type, said", [
    # before: "TVM's ONNX importer failed: unknown dtype `object`"
    ("string", 8, f"input 'x' is string, which npukit cannot feed (it feeds {_FEEDS}); cast it in the model"),
    # before: "TVM's ONNX importer failed: unknown dtype `complex64`"
    ("complex", 14, f"input 'x' is complex64, which npukit cannot feed (it feeds {_FEEDS}); cast it in the model"),
    # before: a ValueError traceback from numpy's iinfo in the seeded random data
    ("uint4", 21, f"input 'x' is uint4, which npukit cannot feed (it feeds {_FEEDS}); cast it in the model"),
    # before: a TypeError traceback, "data type 'None' not understood"
    ("untyped", 0, f"input 'x' has no element type, which npukit cannot feed (it feeds {_FEEDS}); declare one"),
])  # fmt: skip
def test_input_of_a_type_npukit_cannot_feed(tmp_path, name, elem_type, said):
    path = _typed_input(tmp_path, name, elem_type)
    with pytest.raises(npukit.ModelError) as e:
        npukit.Study(path, "arm-dsp-dla").error_dict()
    assert str(e.value) == f"{path}: {said}"
    assert assert_cli_error(run_cli("study", path, "--soc", "arm-dsp-dla", "--error"), limit_s=60) == f"{path}: {said}"


def test_inputs_numpy_holds_still_study(tmp_path):
    for name, et in (("bf16", 16), ("f8", 17), ("u16", 4), ("i64", 7), ("b", 9)):
        s = npukit.Study(_typed_input(tmp_path, name, et), "arm-dsp-dla")
        assert s.error_dict()["outputs"][0]["name"] == "y"


def test_string_initializer_is_named(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["a"], name="r")], [tensor_info("x", [1, 4])],
                   [tensor_info("a", [1, 4]), tensor_info("s", [1], T.STRING)],
                   [h.make_tensor("s", T.STRING, [1], [b"hi"])])  # fmt: skip
    path = save_onnx(m, tmp_path / "strs.onnx", infer_shapes=False)
    with pytest.raises(npukit.ModelError) as e:
        npukit.Study(path, "arm-dsp-dla")
    # before: "TVM's ONNX importer failed: unknown dtype `object`"
    assert str(e.value) == f"{path}: initializer 's' is string, which npukit cannot read; only numeric and boolean constants"


def test_sequence_input_is_not_asked_for_a_shape(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper as h

    seq = h.make_tensor_sequence_value_info("s", T.FLOAT, [1, 4])
    m = onnx_model([h.make_node("SequenceAt", ["s", "i"], ["a"], name="at")], [seq, tensor_info("i", [], T.INT64)],
                   [tensor_info("a", [1, 4])])  # fmt: skip
    path = save_onnx(m, tmp_path / "seq.onnx", infer_shapes=False)
    # before: "input 's' has unknown rank; pin it with npukit.Study(..., input_shapes={'s': (1, 3, 224, 224)}) ..."
    want = f"{path}: input 's' is a sequence, not a tensor; npukit studies models whose inputs are dense tensors"
    assert assert_cli_error(run_cli("inspect", path), limit_s=60) == want


def _external(tmp: Path) -> Path:
    import onnx
    from onnx import helper as h

    m = onnx_model([h.make_node("Add", ["x", "w"], ["a"], name="add")], [tensor_info("x", [1, 4])],
                   [tensor_info("a", [1, 4])], [initializer("w", [1, 4])])  # fmt: skip
    path = tmp / "ext.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, location="ext.weights", size_threshold=0)
    return path


def test_external_data_missing_or_short_is_named(tmp_path):
    whole = _external(tmp_path / "whole" if (tmp_path / "whole").mkdir() is None else None)
    assert npukit.Study(whole, "arm-dsp-dla").totals["latency_us"] > 0  # whole, it studies
    path = _external(tmp_path)
    data = (tmp_path / "ext.weights").read_bytes()
    (tmp_path / "ext.weights").write_bytes(data[:8])
    # before: "ext.onnx: not a readable ONNX model, the file may be truncated (External data length ...)"
    want = (f"{path}: cannot read the model's external data (External data length (16) exceeds available data "
            "(8 bytes from offset 0) for tensor 'w')")  # fmt: skip
    assert assert_cli_error(run_cli("inspect", path), limit_s=60) == want
    (tmp_path / "ext.weights").unlink()
    # before: "... the file may be truncated (Data of TensorProto ( tensor name: w) should be stored in ..., but it
    # is not regular file.)"
    want = (f"{path}: initializer 'w' keeps its data in the file 'ext.weights' beside the model, which is missing; "
            "copy it next to ext.onnx")  # fmt: skip
    assert_model_refused(path, want)


def test_external_data_changed_or_deleted_within_one_session_is_read_again(tmp_path):
    """The import cache was keyed by the .onnx file alone: a rewritten or deleted external data file
    went unnoticed until a fresh process (the old weights, then a study of data that is gone)."""
    import numpy as np

    path = _external(tmp_path)
    weights = tmp_path / "ext.weights"
    saved = np.frombuffer(weights.read_bytes(), np.float32).reshape(1, 4)
    assert [a.tolist() for a in npukit.Study(path, "arm-dsp-dla").graph.consts.values()] == [saved.tolist()]
    weights.write_bytes(np.array([[5, 6, 7, 8]], np.float32).tobytes())  # same size, in place
    assert [a.tolist() for a in npukit.Study(path, "arm-dsp-dla").graph.consts.values()] == [[[5.0, 6.0, 7.0, 8.0]]]
    weights.unlink()
    assert_model_refused(path, f"{path}: initializer 'w' keeps its data in the file 'ext.weights' beside the model, "
                               "which is missing; copy it next to ext.onnx")  # fmt: skip


def test_an_opset_newer_than_onnx_knows_is_refused(tmp_path):
    """Opset 99 imported without a word (TVM read each op as the newest version it knows)."""
    import onnx
    from onnx import helper as h

    newest = onnx.defs.onnx_opset_version()
    m = onnx_model([h.make_node("Relu", ["x"], ["y"], name="r")], [tensor_info("x", [1, 4])],
                   [tensor_info("y", [1, 4])], opset=99)  # fmt: skip
    path = save_onnx(m, tmp_path / "opset99.onnx", infer_shapes=False)
    assert_model_refused(path, f"{path}: the model declares ONNX opset 99, which the installed onnx {onnx.__version__} "
                               f"does not know; npukit reads opsets up to {newest} (export the model at opset "
                               f"{newest} or lower)")  # fmt: skip
    m.opset_import[0].version = newest  # the newest opset it knows still imports
    assert [op.kind for op in npukit.import_model(m).graph.ops] == ["relu"]


@pytest.mark.parametrize("value, shown", [
    ('"dla:max_pool2d"', "'dla:max_pool2d'"),  # before: "disabled[0]: expected 'processor:op', got 'd'"
    ("5", "5"),  # before: TypeError: 'int' object is not iterable (a traceback)
    ('{ dla = "max_pool2d" }', "{'dla': 'max_pool2d'}"),  # before: "disabled[0]: ... got 'dla'"
])  # fmt: skip
def test_a_hand_edited_config_whose_disabled_is_not_a_list(tmp_path, value, shown):
    p = tmp_path / "edited.toml"
    p.write_text(f"disabled = {value}\n")
    want = f"{p}: disabled: must be a list of 'processor:op' strings, got {shown}"
    r = run_cli("study", ROOT / "sample_models" / "digits_cnn.onnx", "--soc", "arm-dsp-dla", "--config", p)
    assert assert_cli_error(r, limit_s=60) == want
    with pytest.raises(npukit.ConfigError) as e:
        npukit.Config.read(p)
    assert str(e.value) == want


def test_config_lists_and_sets_still_read():
    assert npukit.Config.from_dict({"disabled": ["dla:conv2d"]}) == npukit.Config.from_dict({"disabled": {"dla:conv2d"}})
    assert npukit.Config.from_dict({"enabled": ("dla:softmax",)}).enabled == frozenset({("dla", "softmax")})


def test_a_shape_output_names_its_node(tmp_path):
    from onnx import TensorProto as T
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["r"], name="act"), h.make_node("Shape", ["x"], ["s"], name="my/shape")],
                   [tensor_info("x", [1, 4])], [tensor_info("r", [1, 4]), tensor_info("s", [2], T.INT64)])  # fmt: skip
    path = save_onnx(m, tmp_path / "shape_out.onnx")
    # before: the shape output vanished (`inspect` listed output 'r' only), and `study --error` ended in a
    # traceback from the simulator: AttributeError: 'Shape' object has no attribute 'numpy'
    want = f"{path}: node 'my/shape' (Shape) makes a shape, which npukit cannot read"
    assert_model_refused(path, want)
    only = save_onnx(onnx_model([h.make_node("Shape", ["x"], ["s"], name="sh")], [tensor_info("x", [1, 4])],
                                [tensor_info("s", [2], T.INT64)]), tmp_path / "shape_only.onnx")  # fmt: skip
    # before: "shape_only.onnx: an op the importer added makes a shape, which npukit cannot read"
    assert assert_cli_error(run_cli("inspect", only), limit_s=60) == f"{only}: node 'sh' (Shape) makes a shape, which npukit cannot read"


@pytest.mark.parametrize("flags, said", [
    # before: the last flag silently won (exit 0, /softmax/Softmax on dsp)
    (["--pin", "#13=arm", "--pin", "/softmax/Softmax=dsp"],
     "--pin #13=arm and --pin /softmax/Softmax=dsp contradict each other (both name '/softmax/Softmax'); give one"),
    (["--bits", "dla=int8", "--bits", "dla=fp16"], "--bits dla=int8 and --bits dla=fp16 contradict each other; give one"),
    (["--bits-layer", "/conv1/Conv=int8", "--bits-layer", "/conv1/Conv=int16"],
     "--bits-layer /conv1/Conv=int8 and --bits-layer /conv1/Conv=int16 contradict each other; give one"),
])  # fmt: skip
def test_repeated_flags_that_contradict_are_refused(tmp_path, flags, said):
    out = tmp_path / "report.html"
    r = run_cli("study", ROOT / "sample_models" / "digits_cnn.onnx", "--soc", "arm-dsp-dla", *flags, "--report", out)
    assert assert_cli_error(r, limit_s=60) == said
    assert not out.exists()


def test_repeated_flags_that_agree_or_refine_still_study():
    r = run_cli("study", ROOT / "sample_models" / "digits_cnn.onnx", "--soc", "arm-dsp-dla", "--pin", "#13=dsp",
                "--pin", "/softmax/Softmax=dsp", "--pin", "/conv1/Conv=arm", "--pin", "/conv1/Conv/add=dla", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", ["digits_cnn.npz", "data.onnx", "data.pt2"])
def test_a_data_archive_given_as_the_model_is_called_data(tmp_path, name):
    """Model and data swapped. before: "unknown model extension '.npz'; ... (the file looks like a torch.export
    archive (.pt2, a zip file): name it .pt2)", and as data.onnx "the file is a torch.export archive ..., not an
    ONNX model: ... name it data.pt2" (a .npz is a zip file too)."""
    p = tmp_path / name
    p.write_bytes((ROOT / "sample_models" / "digits_cnn.npz").read_bytes())
    want = (f"{p}: the file is a NumPy .npz archive of arrays, not a model; give it as the study's data (--data "
            "FILE.npz, study.set_data(path)) and the model file (.onnx, .tflite, .pt2) as the model")  # fmt: skip
    assert_model_refused(p, want)


PROFILE_TEXT = (ROOT / "npukit" / "profiles" / "arm-dsp-dla.toml").read_text()


@pytest.mark.parametrize("old, new, said", [
    # before: accepted; the table met last silently replaced the other ("relax.sigmoid" = {} dropped ranks = [4])
    ("sigmoid = { ranks = [4] }", 'sigmoid = { ranks = [4] }\n"relax.sigmoid" = {}',
     "processors.dla.ops.relax.sigmoid: names the op sigmoid, as processors.dla.ops.sigmoid does; keep one"),
    # before: accepted; efficiency of conv2d on arm was 0.3, the 0.5 ignored
    ("vector_lanes = 4\n", 'vector_lanes = 4\nefficiency = { conv2d = 0.5, "relax.nn.conv2d" = 0.3 }\n',
     "processors.arm.efficiency.relax.nn.conv2d: names conv2d, as processors.arm.efficiency.conv2d does; keep one"),
    # before: accepted; topk's preference for the DSP silently replaced by the empty list
    ('topk = ["dsp"]', 'topk = ["dsp"]\n"relax.topk" = []',
     "placement.prefer.relax.topk: names the op topk, as placement.prefer.topk does; keep one"),
])  # fmt: skip
def test_a_profile_naming_one_op_twice_is_refused(tmp_path, old, new, said):
    p = tmp_path / "soc.toml"
    assert old in PROFILE_TEXT
    p.write_text(PROFILE_TEXT.replace(old, new, 1))
    with pytest.raises(npukit.ProfileError) as e:
        npukit.load_soc(p)
    assert str(e.value) == f"{p}: {said}"
    r = run_cli("study", ROOT / "sample_models" / "digits_cnn.onnx", "--soc", p)
    assert assert_cli_error(r, limit_s=60) == f"{p}: {said}"


def test_a_directory_given_as_the_config_or_the_grid_is_refused_naming_it(tmp_path):
    """Both said "no such ... file" of a directory that exists (the profile's case: tests/test_profiles.py)."""
    from conftest import DIGITS_ONNX

    from npukit.sweeps import GridError, load_grid

    d = tmp_path / "somedir"
    d.mkdir()
    want = f"{d}: is a directory, expected a config file (.toml or .json, see --save-config)"
    with pytest.raises(npukit.ConfigError) as e:
        npukit.Study(DIGITS_ONNX, "arm-dsp-dla", d)
    assert str(e.value) == want
    assert assert_cli_error(run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--config", d)) == want
    with pytest.raises(GridError) as e:
        load_grid(d)
    assert str(e.value) == f"{d}: is a directory, expected a grid file (.toml)"
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", d, "--out", tmp_path / "o.parquet")
    assert assert_cli_error(r) == f"{d}: is a directory, expected a grid file (.toml)"
