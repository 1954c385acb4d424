"""Issue 3: every bad input is an NpukitError naming the file / node / field, and on the command line
one line ``npukit: error: ...`` with exit code 2, no traceback, within 10 s.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import (
    DIGITS_ONNX,
    DIGITS_PT2,
    DIGITS_TFLITE,
    assert_cli_error,
    initializer,
    onnx_model,
    run_cli,
    save_onnx,
    tensor_info,
)

import npukit

PROFILE = Path(npukit.__file__).parent / "profiles" / "arm-dsp-dla.toml"

# ---------------------------------------------------------------------------------------------
# bad model files: (id, builder(tmp) -> path, exception class, words the message must hold)


def _empty(tmp: Path) -> Path:
    p = tmp / "empty.onnx"
    p.write_bytes(b"")
    return p


def _cut_tail(src: Path, n: int, name: str):
    def make(tmp: Path) -> Path:
        p = tmp / name
        p.write_bytes(src.read_bytes()[:-n])
        return p

    return make


def _truncated(src: Path, keep: float, name: str):
    def make(tmp: Path) -> Path:
        p = tmp / name
        data = src.read_bytes()
        p.write_bytes(data[: int(len(data) * keep)])
        return p

    return make


def _text_as_onnx(tmp: Path) -> Path:
    p = tmp / "notes.onnx"
    p.write_text("these are my meeting notes, not a model\n" * 20)
    return p


def _text_as_tflite(tmp: Path) -> Path:
    p = tmp / "notes.tflite"
    p.write_text("hello\n" * 50)
    return p


def _unknown_ext(tmp: Path) -> Path:
    p = tmp / "model.caffemodel"
    p.write_bytes(DIGITS_ONNX.read_bytes())
    return p


def _custom_op(tmp: Path) -> Path:
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["x"], ["a"], name="pre"),
             h.make_node("FrobnicateX", ["a"], ["y"], name="my/frob", domain="com.example")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info("y", [1, 4])], domains=["com.example"])
    return save_onnx(m, tmp / "custom.onnx", infer_shapes=False)


def _several_unsupported(tmp: Path) -> Path:
    from onnx import helper as h

    nodes = [h.make_node("Celu", ["x"], ["a"], name="act/celu"),
             h.make_node("Relu", ["a"], ["b"], name="fine"),
             h.make_node("Celu", ["b"], ["c"]),  # unnamed: reported by its output name
             h.make_node("Wobble", ["c"], ["y"], name="vendor/wobble", domain="com.acme")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info("y", [1, 4])], domains=["com.acme"])
    return save_onnx(m, tmp / "several.onnx", infer_shapes=False)


def _tflite_unsupported(tmp: Path) -> Path:
    """The float digits model with two operator codes rewritten in place to ops TVM's TFLite
    frontend lacks (MAX_POOL_2D -> SKIP_GRAM, SOFTMAX -> LSH_PROJECTION)."""
    import struct

    import tflite
    from tflite.BuiltinOperator import BuiltinOperator as B

    buf = bytearray(DIGITS_TFLITE.read_bytes())
    model = tflite.Model.GetRootAsModel(buf, 0)
    swap = {B.MAX_POOL_2D: B.SKIP_GRAM, B.SOFTMAX: B.LSH_PROJECTION}
    done = 0
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        new = swap.get(max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()))
        if new is None:
            continue
        dep, cur = oc._tab.Offset(4), oc._tab.Offset(10)  # deprecated_builtin_code (int8), builtin_code (int32)
        assert dep and cur
        struct.pack_into("<b", buf, oc._tab.Pos + dep, new)
        struct.pack_into("<i", buf, oc._tab.Pos + cur, new)
        done += 1
    assert done == 2
    p = tmp / "unsupported.tflite"
    p.write_bytes(bytes(buf))
    return p


def _no_ops(tmp: Path) -> Path:
    m = onnx_model([], [tensor_info("x", [1, 4])], [tensor_info("x", [1, 4])])
    return save_onnx(m, tmp / "noops.onnx", infer_shapes=False)


def _only_identity(tmp: Path) -> Path:
    from onnx import helper as h

    m = onnx_model([h.make_node("Identity", ["x"], ["y"], name="id")], [tensor_info("x", [1, 4])],
                   [tensor_info("y", [1, 4])])  # fmt: skip
    return save_onnx(m, tmp / "identity.onnx")


def _only_constants(tmp: Path) -> Path:
    from onnx import helper as h
    from onnx import numpy_helper

    k = h.make_node("Constant", [], ["k"], name="k", value=numpy_helper.from_array(np.ones((1, 4), np.float32)))
    m = onnx_model([k, h.make_node("Exp", ["k"], ["e"], name="exp")], [tensor_info("x", [1, 4])],
                   [tensor_info("e", [1, 4]), tensor_info("x", [1, 4])])  # fmt: skip
    return save_onnx(m, tmp / "constants.onnx")


def _symbolic_batch(tmp: Path) -> Path:
    from onnx import helper as h

    node = h.make_node("Conv", ["image", "w"], ["y"], name="conv", pads=[1, 1, 1, 1])
    m = onnx_model([node], [tensor_info("image", ["N", 3, 8, 8])], [tensor_info("y", ["N", 4, 8, 8])],
                   [initializer("w", [4, 3, 3, 3])])  # fmt: skip
    return save_onnx(m, tmp / "symbolic.onnx")


def _dangling_input(tmp: Path) -> Path:
    from onnx import helper as h

    m = onnx_model([h.make_node("Add", ["x", "ghost"], ["y"], name="add_ghost")], [tensor_info("x", [1, 4])],
                   [tensor_info("y", [1, 4])])  # fmt: skip
    return save_onnx(m, tmp / "dangling.onnx", infer_shapes=False)


MODEL_CASES = [
    ("empty", _empty, npukit.ModelError, ["empty.onnx", "empty"]),
    ("truncated-onnx", _truncated(DIGITS_ONNX, 0.5, "half.onnx"), npukit.ModelError, ["half.onnx", "truncated"]),
    ("truncated-onnx-tail", _truncated(DIGITS_ONNX, 0.99999, "tail.onnx"), npukit.ModelError, ["tail.onnx"]),
    ("truncated-tflite", _truncated(DIGITS_TFLITE, 0.5, "half.tflite"), npukit.ModelError, ["half.tflite", "truncated"]),
    # cut inside the last buffer: fails deep inside TVM's TFLite frontend, which must stay silent
    ("truncated-tflite-tail", _truncated(DIGITS_TFLITE, 0.99998, "tail.tflite"), npukit.ModelError, ["tail.tflite"]),
    ("truncated-pt2", _truncated(DIGITS_PT2, 0.5, "half.pt2"), npukit.ModelError, ["half.pt2", "truncated"]),
    # (its last bytes cut: the zip directory found was a nested archive's, said to be a torch.save() file)
    ("truncated-pt2-tail", _cut_tail(DIGITS_PT2, 100, "tail.pt2"), npukit.ModelError, ["tail.pt2", "may be truncated"]),
    ("text-as-onnx", _text_as_onnx, npukit.ModelError, ["notes.onnx"]),
    ("text-as-tflite", _text_as_tflite, npukit.ModelError, ["notes.tflite", "TFLite"]),
    ("unknown-extension", _unknown_ext, npukit.ModelError, ["model.caffemodel", "'.caffemodel'", ".onnx", ".tflite", ".pt2"]),
    ("custom-op", _custom_op, npukit.UnsupportedOpError, ["custom.onnx", "'my/frob'", "com.example.FrobnicateX"]),
    ("several-unsupported", _several_unsupported, npukit.UnsupportedOpError,
     ["several.onnx", "3 node(s)", "'act/celu' (Celu)", "'c' (Celu)", "'vendor/wobble' (com.acme.Wobble)"]),
    ("tflite-unsupported", _tflite_unsupported, npukit.UnsupportedOpError,
     ["unsupported.tflite", "2 op(s)", "'digits_cnn_1/pool_1/MaxPool2d' (SKIP_GRAM)",
      "'StatefulPartitionedCall_1:0' (LSH_PROJECTION)"]),
    ("no-ops", _no_ops, npukit.ModelError, ["noops.onnx", "no ops"]),
    ("only-identity", _only_identity, npukit.ModelError,
     ["identity.onnx", "computes nothing", "no ops", "'y' is the input 'x'"]),
    ("only-constants", _only_constants, npukit.ModelError,
     ["constants.onnx", "computes nothing", "'e' is a constant", "'x' is an input"]),
    ("symbolic-batch", _symbolic_batch, npukit.ShapeError,
     ["symbolic.onnx", "input 'image'", "dim 0", "'N'", "input_shapes={'image': (1, 3, 8, 8)}",
      "--input-shape image=1,3,8,8"]),
    ("dangling-input", _dangling_input, npukit.ModelError, ["dangling.onnx", "'add_ghost'", "'ghost'"]),
]  # fmt: skip


@pytest.mark.parametrize("case,build,exc,words", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_bad_model_api(tmp_path, case, build, exc, words):
    path = build(tmp_path)
    with pytest.raises(exc) as ei:
        npukit.Study(path, "arm-dsp-dla")
    msg = str(ei.value)
    assert isinstance(ei.value, npukit.NpukitError)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    assert "\n" not in msg.strip()
    # the same through the importer alone
    with pytest.raises(exc):
        npukit.import_model(path)


@pytest.mark.parametrize("case,build,exc,words", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_bad_model_cli(tmp_path, case, build, exc, words):
    path = build(tmp_path)
    msg = assert_cli_error(run_cli("inspect", path), *words)
    assert msg.startswith(str(path)), msg  # the message leads with the file


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(npukit.ModelError, match="no such file"):
        npukit.Study(tmp_path / "nope.onnx", "arm-dsp-dla")
    with pytest.raises(npukit.ModelError, match="is a directory"):
        npukit.import_model(tmp_path)
    assert_cli_error(run_cli("inspect", tmp_path / "nope.onnx"), "nope.onnx", "no such file")


def test_every_truncation_is_a_model_error(tmp_path):
    """Cut the samples at many lengths: each cut is an NpukitError, never a bare parser exception."""
    import warnings

    for src in (DIGITS_ONNX, DIGITS_TFLITE):
        data = src.read_bytes()
        cuts = sorted({1, 4, 8, 16, 64, 512, len(data) - 1, len(data) - 2, len(data) - 4, len(data) - 16,
                       *range(37, len(data), max(1, len(data) // 60))})  # fmt: skip
        for cut in cuts:
            p = tmp_path / f"cut{src.suffix}"
            p.write_bytes(data[:cut])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    npukit.import_model(p)
                except npukit.NpukitError:
                    continue
                except Exception as e:  # noqa: BLE001
                    pytest.fail(f"{src.name} cut at {cut}/{len(data)} bytes: {type(e).__name__}: {e}")
            pytest.fail(f"{src.name} cut at {cut}/{len(data)} bytes imported without an error")


# ---------------------------------------------------------------------------------------------
# symbolic dims: the message says how to fix it, and the fix works


def test_symbolic_dim_fix_works(tmp_path):
    path = _symbolic_batch(tmp_path)
    s = npukit.Study(path, "arm-dsp-dla", input_shapes={"image": (1, 3, 8, 8)})
    assert s.graph.tensors[s.graph.inputs[0]].shape == (1, 3, 8, 8)
    assert [op.name for op in s.graph.ops] == ["conv"]
    r = run_cli("inspect", path, "--input-shape", "image=1,3,8,8")
    assert r.returncode == 0, r.stderr
    assert "input  'image' [1, 3, 8, 8] float32" in r.stdout
    r = run_cli("study", path, "--soc", "arm-dsp-dla", "--input-shape", "image=1,3,8,8", "--json")
    assert r.returncode == 0, r.stderr


def test_symbolic_inner_dim_names_the_dim(tmp_path):
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["seq"], ["y"], name="r")], [tensor_info("seq", [1, "T", 16])],
                   [tensor_info("y", [1, "T", 16])])  # fmt: skip
    path = save_onnx(m, tmp_path / "seq.onnx")
    with pytest.raises(npukit.ShapeError) as ei:
        npukit.import_model(path)
    # a sequence's length is the user's to choose: the hint leaves it open, named after the dim
    assert str(ei.value) == (f"{path}: input 'seq' dim 1 is symbolic ('T') in shape [1, T, 16]; npukit needs static "
                             "shapes: pin it with npukit.Study(..., input_shapes={'seq': (1, T, 16)}) or --input-shape "
                             "seq=1,T,16, with T the size to study (the model leaves it open)")  # fmt: skip


def test_symbolic_image_size_is_left_to_the_user_and_the_batch_is_one(tmp_path):
    """1 is a batch, but no image size: a 3x3 conv of a 1x1 image has no output.  The hint gives the
    batch 1 and names the others (one placeholder per dim name: a square image is S by S); an
    unnamed dim (ONNX's ``unk__``, or none) by its index."""
    from onnx import helper as h

    def msg(dims) -> str:
        node = h.make_node("Conv", ["image", "w"], ["y"], name="conv")
        m = onnx_model([node], [tensor_info("image", dims)], [tensor_info("y", None)], [initializer("w", [4, 3, 3, 3])])
        path = save_onnx(m, tmp_path / "img.onnx", infer_shapes=False)
        with pytest.raises(npukit.ShapeError) as ei:
            npukit.import_model(path)
        return str(ei.value).split("npukit needs static shapes: ")[1]

    assert msg(["N", 3, "h", "w"]) == ("pin it with npukit.Study(..., input_shapes={'image': (1, 3, H, W)}) or "
                                       "--input-shape image=1,3,H,W, with H and W the sizes to study (the model leaves "
                                       "them open; dim 0 is given 1, a batch of one)")  # fmt: skip
    assert msg(["N", 3, "S", "S"]).startswith("pin it with npukit.Study(..., input_shapes={'image': (1, 3, S, S)}) or "
                                              "--input-shape image=1,3,S,S, with S the size to study (")  # fmt: skip
    assert msg([1, 3, "unk__7", ""]).startswith("pin it with npukit.Study(..., input_shapes={'image': (1, 3, D2, D3)})")
    # the dims filled in as the message says, the model imports
    g = npukit.import_model(tmp_path / "img.onnx", {"image": (1, 3, 8, 8)}).graph
    assert g.tensors[g.ops[0].outputs[0]].shape == (1, 4, 6, 6)


def test_an_onnx_dim_named_in_two_inputs_is_pinned_by_either(tmp_path):
    """x [N, 4] + y [N, 4]: N pinned through x left y symbolic, and the hint said to give y (1, 4),
    which then failed in TVM's importer with its operator's repr; two sizes for N are refused by name."""
    from onnx import helper as h

    m = onnx_model([h.make_node("Add", ["x", "y"], ["z"], name="add")], [tensor_info("x", ["N", 4]), tensor_info("y", ["N", 4])],
                   [tensor_info("z", ["N", 4])])  # fmt: skip
    path = save_onnx(m, tmp_path / "two.onnx")
    g = npukit.import_model(path, {"x": (3, 4)}).graph
    assert [g.tensors[t].shape for t in g.inputs] == [(3, 4), (3, 4)]
    with pytest.raises(npukit.ShapeError) as ei:
        npukit.import_model(path, {"x": (3, 4), "y": (5, 4)})
    assert str(ei.value) == (f"{path}: input 'x' dim 0 and input 'y' dim 0 are one size in the model ('N'); "
                             "input_shapes gives it both 3 and 5")  # fmt: skip


def test_a_tvm_operator_is_named_in_an_import_error_not_printed_whole(tmp_path):
    """Sizes TVM's importer refuses (x [N, 4] + y [M, 4] given 3 and 2 rows): its message began 'In
    ir.Op(span=None, ty=ir.Type(span=None), name="relax.add", description="", arguments=(...' and was
    cut at 400 characters before it said why."""
    from onnx import helper as h

    m = onnx_model([h.make_node("Add", ["x", "y"], ["z"], name="add")], [tensor_info("x", ["N", 4]), tensor_info("y", ["M", 4])],
                   [tensor_info("z", ["N", 4])])  # fmt: skip
    path = save_onnx(m, tmp_path / "nm.onnx")
    with pytest.raises(npukit.NpukitError) as ei:
        npukit.import_model(path, {"x": (3, 4), "y": (2, 4)})
    assert str(ei.value) == (f"{path}: TVM's ONNX importer failed at node 'add' (Add; inputs 'x', 'y'): In relax.add, "
                             "the first input shape at dim 0 is 3 and the second input shape at dim 0 is 2, which are "
                             "not broadcastable.")  # fmt: skip


def test_input_shapes_naming_an_unknown_input(tmp_path):
    path = _symbolic_batch(tmp_path)
    with pytest.raises(npukit.ShapeError) as ei:
        npukit.Study(path, "arm-dsp-dla", input_shapes={"imgae": (1, 3, 8, 8)})
    assert "'imgae'" in str(ei.value) and "'image'" in str(ei.value) and "symbolic.onnx" in str(ei.value)
    assert_cli_error(run_cli("inspect", path, "--input-shape", "imgae=1,3,8,8"), "'imgae'", "'image'")


def test_input_shapes_with_the_wrong_rank(tmp_path):
    path = _symbolic_batch(tmp_path)
    with pytest.raises(npukit.ShapeError, match="rank 3 but input 'image' has rank 4"):
        npukit.Study(path, "arm-dsp-dla", input_shapes={"image": (1, 3, 8)})


def test_data_dependent_output_shape(tmp_path):
    from onnx import TensorProto
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("NonZero", ["r"], ["nz"], name="find/nz")]
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info("nz", None, TensorProto.INT64)])
    path = save_onnx(m, tmp_path / "nonzero.onnx")
    with pytest.raises(npukit.ShapeError) as ei:
        npukit.import_model(path)
    # the node that made it, not its neighbour, in the model's words (not TVM's relax.nonzero)
    assert str(ei.value) == f"{path}: output of node 'find/nz' (NonZero) has an unknown shape; npukit needs static shapes"


def test_unsupported_input_objects():
    with pytest.raises(npukit.ModelError, match="cannot import a builtins.dict"):
        npukit.import_model({"not": "a model"})


# ---------------------------------------------------------------------------------------------
# bad SoC profiles


def _edit(old: str, new: str):
    def make(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return make


PROFILE_CASES = [
    ("toml-syntax", _edit("clock_mhz = 1200", "clock_mhz = = 1200"), r"soc\.toml: not valid TOML: .*line \d+"),
    ("typo-field", _edit("clock_mhz = 1200", "clock_mzh = 1200"),
     r"soc\.toml: processors\.arm\.clock_mzh: unknown field; .*'clock_mhz'"),
    ("negative-int4", _edit("macs_per_cycle = { int8 = 1024, fp16 = 512 }", "macs_per_cycle = { int4 = -3, int8 = 1024, fp16 = 512 }"),
     r"soc\.toml: processors\.dla\.macs_per_cycle\.int4: must be a positive number, got -3"),
    ("missing-required", _edit("dram_bytes_per_cycle = 8.0\n", ""),
     r"soc\.toml: processors\.dsp\.dram_bytes_per_cycle: required field is missing"),
    ("two-hosts", _edit('kind = "dsp"\n', 'kind = "dsp"\nhost = true\n'),
     r"soc\.toml: processors: only one processor may set host = true, got arm, dsp"),
    ("link-unknown-processor", _edit('between = ["*", "*"]', 'between = ["arm", "npu"]'),
     r"soc\.toml: links\[0\]\.between\[1\]: no processor named 'npu'; .*'arm', 'dla', 'dsp'"),
    ("missing-link", _edit('between = ["*", "*"]', 'between = ["arm", "dla"]'),
     r"soc\.toml: links: no link between 'arm' and 'dsp'"),
    ("unknown-op", _edit("exp = {}", "expp = {}"), r"soc\.toml: processors\.dsp\.ops\.expp: unknown op 'expp'; .*'exp'"),
    ("bad-kind", _edit('kind = "dla"', 'kind = "tpu"'), r"soc\.toml: processors\.dla\.kind: must be one of 'cpu', 'dsp', 'dla'"),
    ("bad-bit-width", _edit("macs_per_cycle = { int8 = 1024, fp16 = 512 }", "macs_per_cycle = { int3 = 1, int8 = 1024, fp16 = 512 }"),
     r"soc\.toml: processors\.dla\.macs_per_cycle\.int3: unknown bit-width; must be one of int2, int4, int8"),
    ("wrong-type", _edit("clock_mhz = 1000\nmacs_per_cycle = { int8 = 256", 'clock_mhz = "fast"\nmacs_per_cycle = { int8 = 256'),
     r"soc\.toml: processors\.dsp\.clock_mhz: must be a number, got 'fast'"),
    ("order-names-host", _edit('order = ["dla", "dsp"]', 'order = ["dla", "arm"]'),
     r"soc\.toml: placement\.order\[1\]: 'arm' is not an accelerator"),
    ("kernel-library-not-c", _edit('kernel_library = "nvdla"', 'kernel_library = "nv dla; rm -rf"'),
     r"soc\.toml: processors\.dla\.kernel_library: kernel library prefix 'nv dla; rm -rf' is not a C identifier"),
    ("kernel-library-reserved", _edit('kernel_library = "nvdla"', 'kernel_library = "npk_dla"'),
     r"soc\.toml: processors\.dla\.kernel_library: kernel library prefix 'npk_dla' is reserved"),
    ("kernel-library-an-export-header", _edit('kernel_library = "nvdla"', 'kernel_library = "npukit_model"'),
     r"soc\.toml: processors\.dla\.kernel_library: kernel library prefix 'npukit_model' is reserved \(.*npukit_\*\.h"),
    ("names-apart-only-by-case", lambda t: t.replace("[processors.dsp", "[processors.DLA"),
     r"soc\.toml: processors\.dla: differs from processor 'DLA' only in case; the generated code's files and symbols"),
    ("name-starts-with-a-digit", lambda t: t.replace("[processors.dsp", "[processors.3dsp"),
     r"soc\.toml: processors\.3dsp: processor names are C identifiers, .*not starting with a digit$"),
    ("name-with-a-dash", lambda t: t.replace("[processors.dsp", "[processors.dsp-2"),
     r"soc\.toml: processors\.dsp-2: processor names are C identifiers"),
    # a processor's verdicts are a column of study.placement named after it: not one of its other columns
    ("name-a-placement-column", lambda t: t.replace("[processors.dsp", "[processors.reason")
                                           .replace('"dsp"]', '"reason"]').replace("dsp = {", "reason = {"),
     r"soc\.toml: processors\.reason: is a column of study\.placement \(op_id, name, op, processor, partition, "
     r"reason, pattern, source\), beside which each processor has a column of its verdicts: rename the processor$"),
]  # fmt: skip


@pytest.mark.parametrize("case,edit,pattern", PROFILE_CASES, ids=[c[0] for c in PROFILE_CASES])
def test_bad_profile_api(tmp_path, monkeypatch, case, edit, pattern):
    (tmp_path / "soc.toml").write_text(edit(PROFILE.read_text()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(npukit.ProfileError) as ei:
        npukit.load_soc("soc.toml")
    assert re.match(pattern, str(ei.value)), str(ei.value)


def test_negative_macs_message_is_exact(tmp_path, monkeypatch):
    edit = PROFILE_CASES[2][1]
    (tmp_path / "soc.toml").write_text(edit(PROFILE.read_text()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(npukit.ProfileError) as ei:
        npukit.load_soc("soc.toml")
    assert str(ei.value) == "soc.toml: processors.dla.macs_per_cycle.int4: must be a positive number, got -3"
    r = run_cli("study", DIGITS_ONNX, "--soc", "soc.toml", cwd=tmp_path)
    assert r.stderr == "npukit: error: soc.toml: processors.dla.macs_per_cycle.int4: must be a positive number, got -3\n"
    assert r.returncode == 2


@pytest.mark.parametrize("case,edit,pattern", PROFILE_CASES, ids=[c[0] for c in PROFILE_CASES])
def test_bad_profile_cli(tmp_path, case, edit, pattern):
    (tmp_path / "soc.toml").write_text(edit(PROFILE.read_text()))
    msg = assert_cli_error(run_cli("study", DIGITS_ONNX, "--soc", "soc.toml", cwd=tmp_path))
    assert re.match(pattern, msg), msg


def test_unknown_profile_name():
    with pytest.raises(npukit.ProfileError) as ei:
        npukit.load_soc("arm-dsp-dlaa")
    msg = str(ei.value)
    assert "'arm-dsp-dlaa'" in msg
    for name in ("arm-dsp-dla", "tda4vm-like", "vsi-npu", "ethos-u55-256"):
        assert name in msg
    assert_cli_error(run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dlaa"), "'arm-dsp-dlaa'", "arm-dsp-dla")


def test_missing_profile_file(tmp_path):
    with pytest.raises(npukit.ProfileError, match="no such profile file"):
        npukit.load_soc(tmp_path / "nope.toml")


def test_a_binary_file_given_as_a_profile_or_a_grid_is_named_not_a_text_file(tmp_path):
    """A model given where a profile or a sweep grid goes printed Python's codec error ("'utf-8' codec
    can't decode byte 0xab in position 20: invalid start byte"); --config already said what it is."""
    binary = tmp_path / "soc.toml"
    binary.write_bytes(Path(DIGITS_ONNX).read_bytes())
    r = run_cli("study", DIGITS_ONNX, "--soc", binary)
    assert assert_cli_error(r) == f"{binary}: not a text file; a SoC profile is TOML or JSON"
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", binary, "--out", tmp_path / "r.parquet")
    assert assert_cli_error(r) == f"{binary}: not a text file; a grid is TOML (a [grid] table of dotted keys)"
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--config", binary)
    assert assert_cli_error(r) == f"{binary}: not a text file; a config is TOML or JSON (see --save-config)"


def test_profile_dict_errors_name_the_field():
    with pytest.raises(npukit.ProfileError, match=r"<dict>: processors: at least one \[processors.NAME\] table"):
        npukit.load_soc({"name": "x", "description": "y"})


# ---------------------------------------------------------------------------------------------
# bad edits on the command line


EDIT_CASES = [
    ("unknown-node", ["--pin", "/conv9/Conv=dla"], ["unknown node '/conv9/Conv'", "'/conv1/Conv'"]),
    ("unknown-processor", ["--disable", "npu:conv2d"], ["unknown processor 'npu'", "'arm'", "'dla'", "'dsp'"]),
    ("unknown-op", ["--disable", "dla:convv2d"], ["unknown op 'convv2d'", "'conv2d'"]),
    ("impossible-pin", ["--pin", "/softmax/Softmax=dla"], ["/softmax/Softmax", "dla", "softmax is not in processors.dla.ops"]),
    ("bad-bits", ["--bits", "dla=int3"], ["int3"]),
]


@pytest.mark.parametrize("case,args,words", EDIT_CASES, ids=[c[0] for c in EDIT_CASES])
def test_bad_edit_cli(case, args, words):
    assert_cli_error(run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", *args), *words)


def test_one_torch_dim_of_two_inputs_is_pinned_by_either():
    """x and y of one torch.export.Dim: pinning x left y 'symbolic', and the hint's y = (1, 4) was then
    refused as a second size of the Dim (binding the shapes gives the Dim one size everywhere)."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x + y)

    b = torch.export.Dim("batch", max=64)
    ep = torch.export.export(Net(), (torch.randn(2, 4), torch.randn(2, 4)), dynamic_shapes={"x": {0: b}, "y": {0: b}})
    g = npukit.import_model(ep, {"x": (3, 4)}).graph
    assert [g.tensors[t].shape for t in g.inputs] == [(3, 4), (3, 4)]
    assert [(op.name, g.tensors[op.outputs[0]].shape) for op in g.ops] == [("add", (3, 4)), ("relu", (3, 4))]


@pytest.mark.slow
def test_symbolic_dim_of_an_exported_program_and_its_fix(tmp_path):
    """The hint of the message works for a torch program too (its dims are pinned in Relax)."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2

    ep = torch.export.export(Net(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    with pytest.raises(npukit.ShapeError) as ei:
        npukit.import_model(ep)
    # the dim by the name the user gave its Dim (torch calls it s24 or so)
    assert str(ei.value) == ("<ExportedProgram>: input 'x' dim 0 is symbolic (Dim 'batch') in shape [batch, 3]; "
                             "npukit needs static shapes: pin it with npukit.Study(..., input_shapes={'x': (1, 3)}) or "
                             "--input-shape x=1,3")  # fmt: skip
    g = npukit.import_model(ep, {"x": (1, 3)}).graph
    assert [(op.name, g.tensors[op.outputs[0]].shape) for op in g.ops] == [("relu", (1, 3)), ("mul", (1, 3))]
    with pytest.raises(npukit.ShapeError, match=r"input 'x' dim 1 is fixed at 3 in the model; input_shapes asks for 4"):
        npukit.import_model(ep, {"x": (1, 4)})
    # the same program saved as .pt2, fixed on the command line
    path = tmp_path / "dyn.pt2"
    torch.export.save(ep, str(path))
    with pytest.raises(npukit.ShapeError) as ei:  # (torch.export.save keeps no Dim names)
        npukit.import_model(path)
    assert str(ei.value) == (f"{path}: input 'x' dim 0 is symbolic (a torch.export.Dim, whose name the program does "
                             "not keep) in shape [?, 3]; npukit needs static shapes: pin it with "
                             "npukit.Study(..., input_shapes={'x': (1, 3)}) or --input-shape x=1,3")  # fmt: skip
    r = run_cli("inspect", path, "--input-shape", "x=4,3", "--json")
    assert r.returncode == 0, r.stderr
    assert [o["shape"] for o in __import__("json").loads(r.stdout)["ops"]] == [[4, 3], [4, 3]]


def test_symbolic_dim_of_a_relax_module_and_its_fix():
    from npukit.tvm import load

    load()
    from tvm import relax, tirx

    n = tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.relu(x), name_hint="act"))
        bb.emit_func_output(out)
    mod = bb.get()
    with pytest.raises(npukit.ShapeError) as ei:
        npukit.Study(mod, "arm-dsp-dla")
    assert str(ei.value) == ("<IRModule>: input 'x' dim 0 is symbolic ('n') in shape [n, 4]; npukit needs static "
                             "shapes: pin it with npukit.Study(..., input_shapes={'x': (1, 4)}) or --input-shape x=1,4")  # fmt: skip
    s = npukit.Study(mod, "arm-dsp-dla", input_shapes={"x": (1, 4)})
    assert s.graph.tensors[s.graph.ops[0].outputs[0]].shape == (1, 4)


def test_the_shape_hint_can_be_pasted_into_a_shell(tmp_path):
    """An input named with spaces and quotes: the suggested --input-shape argument is shell-quoted."""
    import subprocess
    import sys

    from onnx import helper as h

    name = "my input (RGB) 'x'"
    m = onnx_model([h.make_node("Relu", [name], ["y"], name="r")], [tensor_info(name, ["N", 3])],
                   [tensor_info("y", ["N", 3])])  # fmt: skip
    path = save_onnx(m, tmp_path / "quoted.onnx")
    with pytest.raises(npukit.ShapeError) as ei:
        npukit.import_model(path)
    hint = str(ei.value).split("--input-shape ", 1)[1]
    assert "input_shapes={\"my input (RGB) 'x'\": (1, 3)}" in str(ei.value)
    p = subprocess.run(f"{sys.executable} -m npukit inspect {path} --json --input-shape {hint}", shell=True,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert __import__("json").loads(p.stdout)["inputs"] == [{"name": name, "shape": [1, 3], "dtype": "float32"}]


NOTHING = ("the model computes nothing: it has no ops left after constant folding, every output is one of its "
           "inputs or a constant ({}); npukit has nothing to place, estimate or generate")  # fmt: skip


@pytest.mark.parametrize("build,file,message", [
    (_no_ops, "noops.onnx", "the model has no ops (graph 'g' is empty)"),
    (_only_identity, "identity.onnx", NOTHING.format("'y' is the input 'x'")),
    (_only_constants, "constants.onnx", NOTHING.format("'e' is a constant, 'x' is an input")),
])  # fmt: skip
def test_a_model_with_nothing_to_compute_gets_one_exact_message(tmp_path, build, file, message):
    path = build(tmp_path)
    with pytest.raises(npukit.ModelError) as ei:
        npukit.Study(path, "arm-dsp-dla")
    assert str(ei.value) == f"{path}: {message}"
    assert str(path).endswith(file)


def test_a_model_that_lists_no_outputs_is_refused_as_such(tmp_path):
    """A graph whose ops feed no output (it lists none): every op is unused, and the message says the
    outputs are missing, not that constant folding left no ops or that every output is an input."""
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["r"], name="relu")], [tensor_info("x", [1, 4])], [])
    path = save_onnx(m, tmp_path / "nooutputs.onnx", infer_shapes=False)
    with pytest.raises(npukit.ModelError) as ei:
        npukit.Study(path, "arm-dsp-dla")
    assert str(ei.value) == (f"{path}: the model has no outputs (its graph lists none), so nothing it computes is "
                             "used; npukit has nothing to place, estimate or generate: list the tensors it computes "
                             "as outputs")  # fmt: skip


def _tflite_transpose_conv(tmp: Path) -> Path:
    """One TFLite TRANSPOSE_CONV (NHWC): TVM imports it, but has no lowering to run it."""
    from tflite_builder import Graph, Op, T, build

    w = np.random.default_rng(0).standard_normal((4, 3, 3, 8)).astype(np.float32)  # OHWI
    g = Graph(tensors=[T("x", (1, 4, 4, 8)), T("oshape", (4,), "int32", np.array([1, 8, 8, 4], np.int32)),
                       T("Wt", (4, 3, 3, 8), data=w), T("up", (1, 8, 8, 4))],
              ops=[Op("TRANSPOSE_CONV", ["oshape", "Wt", "x"], ["up"], "TransposeConvOptions",
                      {"Padding": 0, "StrideW": 2, "StrideH": 2})],
              inputs=["x"], outputs=["up"])  # fmt: skip
    path = tmp / "tconv.tflite"
    path.write_bytes(build(g))
    return path


def test_a_model_tvm_cannot_run_names_the_node_when_its_error_is_asked_for(tmp_path):
    """TVM 0.27 imports an NHWC transpose convolution but cannot lower it: the placement and the
    estimates work, and asking for the numeric error says which node cannot run (it was TVM's
    CodeGenVM error, a raw traceback); the Study keeps working."""
    path = _tflite_transpose_conv(tmp_path)
    s = npukit.Study(path, "arm-dsp-dla")
    assert [(op.name, op.kind) for op in s.graph.ops] == [("up", "conv2d_transpose")]
    assert s.totals["macs"] == 1 * 4 * 4 * 8 * 4 * 3 * 3  # every input pixel scatters a 3x3x4 kernel of 8 channels
    with pytest.raises(npukit.UnsupportedOpError) as e:
        s.error_dict()
    msg = str(e.value)
    assert msg == (f"{path}: the model cannot be run to measure its error: TVM has no lowering for node 'up' "
                   "(TRANSPOSE_CONV) (conv2d_transpose) (the placement and the estimates do not need it)")  # fmt: skip
    assert s.totals["latency_us"] > 0
    r = run_cli("study", path, "--soc", "arm-dsp-dla", "--error")
    assert r.returncode == 2, r.stderr
    assert "TVM has no lowering for node 'up' (TRANSPOSE_CONV)" in r.stderr
    assert "Traceback" not in r.stderr


def _fc_relu_tflite(tmp: Path, name: str, *, relu_reads=None, inputs=("x",), int16=False) -> Path:
    from tflite_builder import Graph, Op, T, build

    w = np.ones((4, 4), np.float32)
    if int16:  # TFLite's 16x8 scheme: int16 activations, int8 weights, int64 bias
        q = {"scale": [0.001], "zero_point": [0]}
        g = Graph(tensors=[T("x", (1, 4), "int16", **q), T("W", (4, 4), "int8", np.ones((4, 4), np.int8), scale=[0.01]),
                           T("b", (4,), "int64", np.zeros(4, np.int64), scale=[1e-5]), T("y", (1, 4), "int16", **q)],
                  ops=[Op("FULLY_CONNECTED", ["x", "W", "b"], ["y"], "FullyConnectedOptions")],
                  inputs=["x"], outputs=["y"])  # fmt: skip
    else:
        g = Graph(tensors=[T("x", (1, 4)), T("W", (4, 4), data=w), T("b", (4,), data=np.zeros(4, np.float32)),
                           T("y", (1, 4)), T("z", (1, 4))],
                  ops=[Op("FULLY_CONNECTED", ["x", "W", "b"], ["y"], "FullyConnectedOptions"),
                       Op("RELU", [relu_reads if relu_reads is not None else "y"], ["z"])],
                  inputs=list(inputs), outputs=["z"])  # fmt: skip
    path = tmp / f"{name}.tflite"
    path.write_bytes(build(g))
    return path


def test_tflite_structure_errors_say_what_is_wrong_in_the_models_words(tmp_path):
    """A TFLite file whose op reads a tensor index the subgraph lacks, or whose input is a constant,
    failed deep in TVM's frontend ("bad number -1065352592 for type uint32", "a bytes-like object is
    required"); int16 activations failed with "Unsupported input datatype ... float32"; a constant
    where TVM's frontend wants a computed value, with the bare KeyError "'B'"."""
    from tflite_builder import Graph, Op, T, build

    p = _fc_relu_tflite(tmp_path, "bad_index", relu_reads=99)
    with pytest.raises(npukit.ModelError) as e:
        npukit.import_model(p)
    assert str(e.value) == f"{p}: operator 1 'z' (RELU) reads tensor index 99, but the subgraph has 5 tensors (is the file corrupt?)"
    p = _fc_relu_tflite(tmp_path, "const_input", inputs=("W",))
    with pytest.raises(npukit.ModelError) as e:
        npukit.import_model(p)
    assert str(e.value) == (f"{p}: the model input 'W' is a constant (its buffer holds data): a model input must be "
                            "fed at run time")  # fmt: skip
    p = _fc_relu_tflite(tmp_path, "int16", int16=True)
    with pytest.raises(npukit.UnsupportedOpError) as e:
        npukit.import_model(p)
    assert str(e.value) == (f"{p}: int16 activations (TFLite's 16x8 quantization) are not supported by TVM's TFLite "
                            "importer: 'x', 'y'")  # fmt: skip
    g = Graph(tensors=[T("x", (1, 4, 4, 8)), T("B", (1, 4, 8, 3), data=np.ones((1, 4, 8, 3), np.float32)),
                       T("y", (1, 4, 4, 3))],
              ops=[Op("BATCH_MATMUL", ["x", "B"], ["y"], "BatchMatMulOptions")], inputs=["x"], outputs=["y"])  # fmt: skip
    p = tmp_path / "bmm_const.tflite"
    p.write_bytes(build(g))
    with pytest.raises(npukit.ModelError) as e:
        npukit.import_model(p)
    assert str(e.value) == (f"{p}: TVM's TFLite importer failed at operator 0 'y' (BATCH_MATMUL; inputs 'x', 'B'): it reads "
                            "'B' as a value computed at run time, but 'B' is a constant TVM's frontend cannot take there")  # fmt: skip


@pytest.mark.parametrize("src, wrong, words", [
    (DIGITS_PT2, ".onnx", "the file is a torch.export archive (.pt2, a zip file), not an ONNX model: its extension "
                          "says which importer reads it, so name it model.pt2"),
    (DIGITS_TFLITE, ".onnx", "the file is a TFLite flatbuffer, not an ONNX model: its extension says which importer "
                             "reads it, so name it model.tflite"),
    (DIGITS_TFLITE, ".pt2", "the file is a TFLite flatbuffer, not a torch.export archive (.pt2, a zip file): its "
                            "extension says which importer reads it, so name it model.tflite"),
    (DIGITS_PT2, ".tflite", "the file is a torch.export archive (.pt2, a zip file), not a TFLite flatbuffer: its "
                            "extension says which importer reads it, so name it model.pt2"),
    (DIGITS_PT2, ".bin", "unknown model extension '.bin'; accepted: .onnx, .tflite, .pt2, or pass a "
                         "torch.export.ExportedProgram or a Relax IRModule (the file looks like a torch.export archive "
                         "(.pt2, a zip file): name it .pt2)"),
])  # fmt: skip
def test_a_model_under_another_formats_extension_is_named_for_what_it_is(tmp_path, src, wrong, words):
    """A .pt2 saved as .onnx was "not a readable ONNX model, the file may be truncated"; the first bytes
    say what it is (a zip file; a flatbuffer with TFLite's identifier)."""
    path = tmp_path / f"model{wrong}"
    path.write_bytes(src.read_bytes())
    with pytest.raises(npukit.ModelError) as e:
        npukit.import_model(path)
    assert str(e.value) == f"{path}: {words}"


def test_a_data_path_that_is_a_directory_says_so(tmp_path):
    """``--data DIR`` said "not a readable .npz file: not an .npz (zip) archive of arrays; save one with
    numpy.savez(...)", where every other path option says the path is a directory."""
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--data", tmp_path)
    assert assert_cli_error(r) == f"{tmp_path}: is a directory, expected a data file (.npz)"
    with pytest.raises(npukit.NpukitError, match=r": is a directory, expected a data file \(\.npz\)$"):
        npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_data(tmp_path)
