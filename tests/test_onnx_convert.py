"""ONNX ops npukit converts itself (npukit/tvm/frontends/onnx_convert.py), where TVM's converter
writes an opaque call_tir kernel or an op the model does not have: each is the Relax op it is, with
the model's name, counted by its formula, and computes what onnxruntime computes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import initializer, onnx_model, save_onnx, tensor_info
from test_canonical import _vm_run

import npukit


def _ort(path, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(str(path)).run(None, feeds)[0]


def _close(got, ref):
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 1e-5 * max(np.abs(ref).max(), 1e-6)


def _conv(mode: str, pads=None):
    from onnx import helper as h

    attrs = {"strides": [2, 2]}
    attrs.update({"auto_pad": mode} if pads is None else {"pads": pads})
    nodes = [h.make_node("Conv", ["x", "w"], ["y"], name="stem/conv_s2", **attrs),
             h.make_node("Relu", ["y"], ["z"], name="stem/relu")]  # fmt: skip
    # 8 x 7 input, 3 x 4 kernel, stride 2: outputs 4 x 4, padded in all H: (4 - 1) * 2 + 3 - 8 = 1,
    # W: (4 - 1) * 2 + 4 - 7 = 3; the odd one at the end (UPPER) or at the start (LOWER)
    return onnx_model(nodes, [tensor_info("x", [1, 3, 8, 7])], [tensor_info("z", [1, 4, 4, 4])],
                      [initializer("w", [4, 3, 3, 4])])  # fmt: skip


@pytest.mark.parametrize(("mode", "pads"), [("SAME_UPPER", [0, 1, 1, 2]), ("SAME_LOWER", [1, 2, 0, 1])])
def test_a_same_padded_conv_is_one_conv_that_pads_itself(tmp_path, mode, pads):
    """TVM padded the input in a call_tir kernel of its own first: an op no accelerator takes, so
    every such conv crossed to the host and back (6 partitions instead of 1 on arm-dsp-dla)."""
    same = save_onnx(_conv(mode), tmp_path / "same.onnx")
    explicit = save_onnx(_conv("", pads), tmp_path / "explicit.onnx")
    imp = npukit.import_model(same)
    assert [(op.name, op.kind) for op in imp.graph.ops] == [("stem/conv_s2", "conv2d"), ("stem/relu", "relu")]
    assert list(imp.graph.ops[0].attrs["padding"]) == pads
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 7)).astype(np.float32)
    _close(_vm_run(imp.mod, x), _ort(same, {"x": x}))
    a, b = (npukit.Study(p, "arm-dsp-dla", placement="first-fit") for p in (same, explicit))
    assert a.plan.processor == b.plan.processor == ("dla", "dla")
    assert len(a.plan.partitions) == 1
    assert a.totals == b.totals


def test_einsum_is_an_einsum_counted_by_its_macs(tmp_path):
    from onnx import helper as h

    nodes = [h.make_node("Einsum", ["q", "k"], ["s"], name="attn/scores", equation="bhid, bhjd -> bhij")]
    path = save_onnx(onnx_model(nodes, [tensor_info("q", [1, 2, 8, 4]), tensor_info("k", [1, 2, 6, 4])],
                                [tensor_info("s", [1, 2, 8, 6])], opset=13), tmp_path / "einsum.onnx")  # fmt: skip
    imp = npukit.import_model(path)
    (op,) = imp.graph.ops
    assert (op.name, op.kind) == ("attn/scores", "einsum")
    s = npukit.Study(path, "arm-dsp-dla")
    assert s.result.ops[0].macs == 2 * 8 * 6 * 4  # b h i j d
    rng = np.random.default_rng(2)
    q, k = rng.standard_normal((1, 2, 8, 4)).astype(np.float32), rng.standard_normal((1, 2, 6, 4)).astype(np.float32)
    _close(_vm_run(imp.mod, q, k), _ort(path, {"q": q, "k": k}))


def test_tile_and_a_reversed_exclusive_cumsum_are_their_own_ops(tmp_path):
    from onnx import helper as h
    from onnx import numpy_helper

    inits = [numpy_helper.from_array(np.asarray([1, 2, 3], np.int64), "reps"),
             numpy_helper.from_array(np.asarray(-1, np.int64), "axis")]  # fmt: skip
    nodes = [h.make_node("Tile", ["x", "reps"], ["t"], name="plumb/tile"),
             h.make_node("CumSum", ["t", "axis"], ["c"], name="odd/cumsum_rev", reverse=1, exclusive=1)]  # fmt: skip
    path = save_onnx(onnx_model(nodes, [tensor_info("x", [2, 3, 2])], [tensor_info("c", [2, 6, 6])], inits, opset=14),
                     tmp_path / "tile.onnx")  # fmt: skip
    imp = npukit.import_model(path)
    assert [(op.name, op.kind) for op in imp.graph.ops] == [
        ("plumb/tile", "tile"), ("odd/cumsum_rev/flip", "flip"), ("odd/cumsum_rev/cumsum", "cumsum"),
        ("odd/cumsum_rev", "flip")]  # fmt: skip
    x = np.random.default_rng(3).standard_normal((2, 3, 2)).astype(np.float32)
    _close(_vm_run(imp.mod, x), _ort(path, {"x": x}))


@pytest.mark.parametrize("bias", [False, True])
def test_a_folded_batch_norm_keeps_the_names_the_model_reads(tmp_path, bias):
    """A batch_norm folded into the conv before it: the conv's last op makes what the model's readers
    read as the batch_norm's output, so it goes by that name (it went by the conv's own output, a
    value that no longer exists); the scaled weight and shift go by the constants they came from."""
    from onnx import helper as h
    from onnx import numpy_helper

    rng = np.random.default_rng(4)
    stats = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in
             (("bn.gamma", rng.uniform(0.5, 1.5, 4)), ("bn.beta", rng.uniform(-1, 1, 4)),
              ("bn.mean", rng.uniform(-1, 1, 4)), ("bn.var", rng.uniform(0.5, 1.5, 4)))]  # fmt: skip
    conv_in = ["x", "conv.w", "conv.b"] if bias else ["x", "conv.w"]
    nodes = [h.make_node("Conv", conv_in, ["conv.out"], name="stem/conv", pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["conv.out", "bn.gamma", "bn.beta", "bn.mean", "bn.var"], ["bn.out"],
                         name="stem/bn"),
             h.make_node("Relu", ["bn.out"], ["y"], name="stem/relu")]  # fmt: skip
    inits = [initializer("conv.w", [4, 3, 3, 3]), *([initializer("conv.b", [4], seed=5)] if bias else []), *stats]
    path = save_onnx(onnx_model(nodes, [tensor_info("x", [1, 3, 6, 6])], [tensor_info("y", [1, 4, 6, 6])], inits),
                     tmp_path / "convbn.onnx")  # fmt: skip
    imp = npukit.import_model(path)
    g = imp.graph
    conv, add, relu = g.ops
    assert [(op.name, op.kind) for op in g.ops] == [("stem/conv", "conv2d"), ("stem/conv/add", "add"),
                                                    ("stem/relu", "relu")]  # fmt: skip
    assert g.tensors[add.outputs[0]].name == "bn.out" == g.tensors[relu.inputs[0]].name
    assert g.tensors[conv.inputs[1]].name == "conv.w"
    assert g.tensors[add.inputs[1]].name == ("conv.b" if bias else "bn.beta")
    assert g.elided["stem/bn"] == ("batch normalization folded into the weights and bias of 'stem/conv' at import "
                                   "(inference form)")  # fmt: skip
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    _close(_vm_run(imp.mod, x), _ort(path, {"x": x}))


def _one_hot(tmp_path, idt, vdt, ddt, axis=1):
    """``OneHot(i, depth 5, values)`` of a [2, 3] index input, the values [off, on] of ``vdt``."""
    from onnx import helper as h
    from onnx import numpy_helper
    from onnx.helper import np_dtype_to_tensor_dtype as tt

    vals = np.asarray([0.25, 3.5] if np.dtype(vdt).kind == "f" else [-7, 9], vdt)
    inits = [numpy_helper.from_array(np.asarray(5, ddt), "depth"), numpy_helper.from_array(vals, "values")]
    out = [2, 5, 3] if axis == 1 else [2, 3, 5]
    nodes = [h.make_node("OneHot", ["i", "depth", "values"], ["y"], name="enc/one_hot", axis=axis)]
    m = onnx_model(nodes, [tensor_info("i", [2, 3], tt(np.dtype(idt)))], [tensor_info("y", out, tt(np.dtype(vdt)))], inits)
    return save_onnx(m, tmp_path / f"onehot_{np.dtype(idt).name}_{np.dtype(vdt).name}_{axis}.onnx")


# negative indices count from the end; 5 and -6 lie outside [-5, 5): a row of off values
ONE_HOT_INDICES = [[-1, 0, 4], [5, -6, 2]]


@pytest.mark.parametrize(("idt", "vdt", "ddt", "axis"), [(np.int64, np.float32, np.int64, 1), (np.int64, np.float32, np.int64, -1),
                                                          (np.int32, np.float32, np.int32, 1), (np.int64, np.int32, np.float32, 1),
                                                          (np.int64, np.int64, np.int64, 1)])  # fmt: skip
def test_one_hot_has_the_dtype_of_its_values(tmp_path, idt, vdt, ddt, axis):
    """TVM's converter read the values as Python numbers: float32 values gave a float64 output (export
    refused the model: "model output 'y' is float64 ...; cast it in the model"), int32 ones int64."""
    path = _one_hot(tmp_path, idt, vdt, ddt, axis)
    imp = npukit.import_model(path)
    g = imp.graph
    oh = g.ops[-1]
    assert (oh.name, oh.kind) == ("enc/one_hot", "one_hot")
    assert g.tensors[oh.outputs[0]].dtype == g.tensors[g.outputs[0]].dtype == np.dtype(vdt).name
    i = np.asarray(ONE_HOT_INDICES, idt)
    got, want = _vm_run(imp.mod, i), _ort(path, {"i": i})
    assert got.dtype == want.dtype == vdt and np.array_equal(got, want), (got, want)


@pytest.mark.slow
def test_the_testers_argmax_one_hot_model_exports_builds_and_matches_onnxruntime(tmp_path):
    """The tester's model (ArgMax -> OneHot with float32 values): float32 out, and its program, built
    with the host compiler, computes what onnxruntime does."""
    import shutil

    from conftest import missing_tool
    from onnx import helper as h
    from onnx import numpy_helper

    from npukit.codegen.build import make, run_program

    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    nodes = [h.make_node("ArgMax", ["x"], ["am"], axis=1, keepdims=0, name="am"),
             h.make_node("OneHot", ["am", "depth", "vals"], ["y"], axis=-1, name="oh")]  # fmt: skip
    inits = [numpy_helper.from_array(np.array(5, np.int64), "depth"), numpy_helper.from_array(np.array([0, 1], np.float32), "vals")]
    path = save_onnx(onnx_model(nodes, [tensor_info("x", [3, 5])], [tensor_info("y", [3, 5])], inits), tmp_path / "oh.onnx")
    s = npukit.Study(path, "arm-dsp-dla")
    assert s.graph.tensors[s.graph.outputs[0]].dtype == "float32"
    x = np.random.default_rng(7).random((4, 3, 5), np.float32)
    s.set_data(x)
    d = tmp_path / "e"
    s.export(d)  # refused before: "model output 'y' is float64"
    make(d)
    (d / ".w").mkdir()
    for k in range(len(x)):
        got = run_program(d, ["./model"], [x[k]], [(3, 5)], d / ".w")[0]
        want = _ort(path, {"x": x[k]})
        assert got.dtype == want.dtype == np.float32 and np.array_equal(got, want), (got, want)
    r = s.build(tmp_path / "b", samples=len(x))
    assert r["outputs_agree"] is True and r["mismatches"] == []
