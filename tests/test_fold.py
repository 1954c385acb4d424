"""Issue 14, item 7: npukit folds constants without compiling a kernel per constant subgraph, and its
result is TVM's ``FoldConstant``'s, structure and constant bytes alike (``tvm_ffi.structural_equal``
compares tensor contents)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DETECTOR, DIGITS_INT8, DIGITS_ONNX, DIGITS_PT2, DIGITS_TFLITE, MOBILENET, SAMPLES

from npukit.tvm import load

tvm = load()
import tvm_ffi  # noqa: E402
from tvm import relax  # noqa: E402

from npukit.tvm.frontends import fold as F  # noqa: E402
from npukit.tvm.frontends import fold_kernels  # noqa: E402

R = relax.op


def _tvm_fold(func):
    return relax.transform.FoldConstant()(tvm.IRModule({"main": func}))["main"]


def _raw(path):
    p = str(path)
    if p.endswith(".onnx"):
        import onnx
        from tvm.relax.frontend.onnx import from_onnx

        return from_onnx(onnx.load(p), keep_params_in_input=False)["main"]
    if p.endswith(".tflite"):
        import tflite
        from tvm.relax.frontend.tflite import from_tflite

        with open(p, "rb") as f:
            return from_tflite(tflite.Model.GetRootAsModel(f.read(), 0))["main"]
    torch = pytest.importorskip("torch")
    from tvm.relax.frontend.torch import from_exported_program

    return from_exported_program(torch.export.load(p).run_decompositions())["main"]


SAMPLE_FILES = [DIGITS_ONNX, DETECTOR, SAMPLES / "transformer_encoder.onnx", DIGITS_TFLITE, DIGITS_INT8, MOBILENET,
                DIGITS_PT2]  # fmt: skip


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.name for p in SAMPLE_FILES])
def test_samples_fold_exactly_like_fold_constant(path):
    raw = _raw(path)
    mine = F.fold(raw)
    assert tvm_ffi.structural_equal(mine.func, _tvm_fold(raw), map_free_vars=True)
    assert mine.counts["kernel"] == 0, "every constant of the samples folds in numpy"


def test_mobilenet_folds_its_weights_in_numpy():
    mine = F.fold(_raw(MOBILENET))
    assert mine.counts == {"numpy": 69, "kernel": 0, "kept": 146}


def _const(shape, dtype, seed=0, lo=-4, hi=4):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return relax.const(rng.integers(0, 2, shape).astype(bool), "bool")
    if dtype.startswith(("int", "uint")):
        return relax.const(rng.integers(lo, hi, shape).astype(dtype), dtype)
    a = rng.standard_normal(shape).astype(dtype) * 3
    return relax.const(a, dtype)


def _func(make):
    """A function of one input (unused) whose body is ``make()`` on constants, bound in a dataflow block."""
    x = relax.Var("x", relax.TensorType((1,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(make(x)))
        bb.emit_func_output(out)
    return bb.get()["main"]


f32, i64, i32 = "float32", "int64", "int32"
SPECIAL = relax.const(np.array([[0.0, -0.0, np.inf], [-np.inf, np.nan, 1e-39]], dtype=f32), f32)  # fmt: skip
CASES = {
    "reshape": lambda x: R.reshape(_const((2, 3, 4), f32), (6, 4)),
    "permute": lambda x: R.permute_dims(_const((2, 3, 4), f32), [2, 0, 1]),
    "permute-default": lambda x: R.permute_dims(_const((2, 3, 4), i64)),
    "expand_dims": lambda x: R.expand_dims(_const((2, 3), f32), [0, 2]),
    "squeeze": lambda x: R.squeeze(_const((1, 3, 1), f32), [0]),
    "flatten": lambda x: R.flatten(_const((2, 3, 4), f32)),
    "concat": lambda x: R.concat([_const((2, 3), f32, 1), _const((2, 5), f32, 2)], axis=1),
    "strided_slice": lambda x: R.strided_slice(_const((4, 6), f32), axes=[0, 1], begin=[1, -5], end=[3, 100], strides=[1, 2]),
    "strided_slice-reverse": lambda x: R.strided_slice(_const((4, 6), f32), axes=[1], begin=[5], end=[0], strides=[-2]),
    "take": lambda x: R.take(_const((3, 5), f32), relax.const(np.array([4, 0, 2], "int64")), axis=1),
    "take-wrap": lambda x: R.take(_const((3,), i64), relax.const(np.array(-1, "int64")), axis=0, mode="wrap"),
    "broadcast_to": lambda x: R.broadcast_to(_const((1, 4), f32), (3, 4)),
    "tile": lambda x: R.tile(_const((2, 3), f32), [2, 1]),
    "flip": lambda x: R.flip(_const((2, 3), f32), 1),
    "repeat": lambda x: R.repeat(_const((2, 3), f32), 2, 1),
    "add": lambda x: R.add(_const((2, 3), f32, 1), _const((3,), f32, 2)),
    "add-int": lambda x: R.add(_const((2, 3), i64, 1), _const((2, 3), i64, 2)),
    "subtract": lambda x: R.subtract(_const((2, 3), f32, 1), SPECIAL),
    "multiply": lambda x: R.multiply(SPECIAL, _const((2, 3), f32, 3)),
    "multiply-int32": lambda x: R.multiply(_const((4,), i32, 1), _const((4,), i32, 2)),
    "divide": lambda x: R.divide(_const((2, 3), f32, 1), SPECIAL),
    "maximum": lambda x: R.maximum(_const((2, 3), f32, 1), _const((2, 3), f32, 2)),
    "minimum-int": lambda x: R.minimum(_const((2, 3), i64, 1), _const((2, 3), i64, 2)),
    "negative": lambda x: R.negative(SPECIAL),
    "abs": lambda x: R.abs(SPECIAL),
    "sqrt": lambda x: R.sqrt(R.abs(_const((64,), f32))),
    "sqrt-special": lambda x: R.sqrt(SPECIAL),
    "equal": lambda x: R.equal(_const((6,), i64, 1, 0, 2), _const((6,), i64, 2, 0, 2)),
    "less": lambda x: R.less(_const((2, 3), f32, 1), SPECIAL),
    "where": lambda x: R.where(_const((2, 3), "bool"), _const((2, 3), f32, 1), SPECIAL),
    "astype-f2i": lambda x: R.astype(_const((2, 3), f32), "int64"),
    "astype-i2f": lambda x: R.astype(relax.const(np.array([2**40 + 1, -7], "int64")), "float32"),
    "astype-f2h": lambda x: R.astype(_const((8,), f32), "float16"),
    "astype-bool": lambda x: R.astype(SPECIAL, "bool"),
    "astype-i64-i32": lambda x: R.astype(relax.const(np.array([2**40 + 5, -3], "int64")), "int32"),
    "dequantize": lambda x: R.dequantize(_const((4, 3), "int8", 0, -128, 127), relax.const(0.0172, f32),
                                         relax.const(-3, "int8")),  # fmt: skip
    "dequantize-per-channel": lambda x: R.dequantize(_const((4, 3), "int8", 0, -128, 127),
                                                     relax.const(np.array([0.5, 0.25, 0.013, 2.1], f32)),
                                                     relax.const(np.array([0, 1, -2, 3], "int8")), axis=0),  # fmt: skip
    "zeros": lambda x: R.zeros((2, 2), f32),
    "ones-int": lambda x: R.ones((3,), i64),
    "full": lambda x: R.full((2, 2), relax.const(1.5, f32)),
    "zeros_like": lambda x: R.zeros_like(x),
    "full_like": lambda x: R.full_like(x, relax.const(7.0, f32)),
    "clip": lambda x: R.clip(_const((2, 3), f32), 0, 6),
    "divide-by-scalar": lambda x: R.divide(_const((2, 3), f32, 1), relax.const(3.0, f32)),
    "not_equal": lambda x: R.not_equal(_const((2, 3), f32, 1), _const((2, 3), f32, 1)),
    "maximum-int": lambda x: R.maximum(_const((2, 3), i32, 1), _const((2, 3), i32, 2)),
    # NaN in max / min / clip / not_equal: TVM's own kernel decides
    "clip-nan (kernel)": lambda x: R.clip(SPECIAL, 0, 6),
    "maximum-nan (kernel)": lambda x: R.maximum(SPECIAL, _const((2, 3), f32, 1)),
    "not_equal-nan (kernel)": lambda x: R.not_equal(SPECIAL, SPECIAL),
    "shape_to_tensor": lambda x: R.shape_to_tensor(relax.ShapeExpr([2, 3])),
    # not evaluated in numpy: TVM's own kernel, cached by structure
    "exp (kernel)": lambda x: R.exp(_const((2, 3), f32)),
    "matmul (kernel)": lambda x: R.matmul(_const((2, 3), f32, 1), _const((3, 4), f32, 2)),
    "mean (kernel)": lambda x: R.mean(_const((2, 3), f32), [1]),
    "split (kernel)": lambda x: R.split(_const((4, 2), f32), 2),
    # never folded: LegalizeOps makes a float arange a constant itself, so FoldConstant keeps the call
    "arange-float": lambda x: R.arange(0.0, 1.0, 0.25, "float32"),
    "relu of an input": lambda x: R.nn.relu(x),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_each_op_folds_like_fold_constant(case):
    func = _func(CASES[case])
    mine = F.fold(func)
    theirs = _tvm_fold(func)
    assert tvm_ffi.structural_equal(mine.func, theirs, map_free_vars=True), f"{mine.func}\n!=\n{theirs}"
    if "(kernel)" in case:
        assert mine.counts["kernel"] == 1 and mine.counts["numpy"] == 0
    elif case in ("arange-float", "relu of an input"):
        assert mine.counts["numpy"] == mine.counts["kernel"] == 0
    else:
        assert mine.counts["numpy"] >= 1 and mine.counts["kernel"] == 0


def test_an_integer_arange_folds_where_fold_constant_keeps_it():
    """The one rule beyond FoldConstant: an integer arange is a constant (FoldConstant keeps the call,
    which then has nothing to run in generated code); torch's reflect pad reads one through abs and
    subtract, which fold after it."""
    func = _func(lambda x: R.subtract(relax.const(11, i64), R.abs(R.arange(-1, 13, 1, i64))))
    mine = F.fold(func)
    assert mine.counts == {"numpy": 3, "kernel": 0, "kept": 0}
    assert not [b for blk in mine.func.body.blocks for b in blk.bindings]  # the function returns a constant
    np.testing.assert_array_equal(F._array(mine.func.body.body), 11 - np.abs(np.arange(-1, 13, 1)))
    theirs = _tvm_fold(func)
    assert any(isinstance(b.value, relax.Call) for blk in theirs.body.blocks for b in blk.bindings)


def test_kernels_are_compiled_once_per_structure():
    make = lambda seed: _func(lambda x: R.exp(_const((5, 7), f32, seed)))  # noqa: E731
    F.fold(make(1))
    before = sum(len(v) for v in fold_kernels._KERNELS.values())
    again = F.fold(make(2))  # other values, same kernel
    assert sum(len(v) for v in fold_kernels._KERNELS.values()) == before
    assert again.counts["kernel"] == 1
    assert tvm_ffi.structural_equal(again.func, _tvm_fold(make(2)), map_free_vars=True)


def test_chains_fold_and_dead_bindings_go():
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            w = bb.emit(R.permute_dims(_const((3, 2), f32), [1, 0]))
            w2 = bb.emit(R.multiply(w, relax.const(2.0, f32)))
            bb.emit(R.nn.relu(x))  # unused: removed, as RemoveAllUnused does
            s = bb.emit(R.shape_of(x))
            t = bb.emit(R.shape_to_tensor(s))
            r = bb.emit(R.reshape(w2, bb.emit(R.tensor_to_shape(t))))
            out = bb.emit_output(bb.emit(R.add(x, r)))
        bb.emit_func_output(out)
    func = bb.get()["main"]
    mine = F.fold(func)
    assert tvm_ffi.structural_equal(mine.func, _tvm_fold(func), map_free_vars=True)
    calls = [b.value.op.name for blk in mine.func.body.blocks for b in blk.bindings if isinstance(b.value, relax.Call)]
    assert calls == ["relax.add"]
    assert mine.counts == {"numpy": 4, "kernel": 0, "kept": 1}
