"""An integer average pool written in a Relax module (``R.nn.avg_pool2d`` of int8, no scale).

TVM 0.27 legalizes it into a kernel that sums the window in int8 (wrapping past 127), truncates
toward zero and writes int64.  The generated program runs the kernel library's call on every
processor (the host's C refuses TVM's kernel), which rounds the average to the nearest integer, ties
away from zero; the simulation ran TVM's kernel, so ``build()`` said ``outputs_agree=False`` (relative
RMS 2.25 on random int8 inputs) and the simulated output was int64.  The simulation now computes
the kernel library's rule in the op's own dtype (``npukit.tvm.intpool``): bit for bit the program's.

The reference: the window's average as TVM's own ``relax.build`` + VM computes it on the input
widened to float64 (padding, ``count_include_pad``, ``ceil_mode`` and the adaptive bins as TVM
defines them), rounded half away from zero.  (TVM's build of the integer op itself is no reference:
its sum wraps.)"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool

import npukit
from npukit import pipeline

SHAPE = (1, 3, 6, 6)

# name -> (op builder, what it exercises)
POOLS = {
    "2x2": lambda r, x: r.op.nn.avg_pool2d(x, pool_size=(2, 2), strides=(2, 2)),
    "3x3_pad": lambda r, x: r.op.nn.avg_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1)),
    "3x3_pad_count": lambda r, x: r.op.nn.avg_pool2d(x, pool_size=(3, 3), strides=(1, 1), padding=(1, 1, 1, 1),
                                                     count_include_pad=True),  # fmt: skip
    "ceil": lambda r, x: r.op.nn.avg_pool2d(x, pool_size=(4, 4), strides=(4, 4), ceil_mode=True),
    "adaptive": lambda r, x: r.op.nn.adaptive_avg_pool2d(x, (4, 4)),
}


def _module(pool: str, dtype: str, then=None):
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPE, dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(POOLS[pool](relax, x))
            if then is not None:
                y = bb.emit(relax.op.astype(y, then))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


def _inputs(dtype: str, n: int, seed: int = 0) -> np.ndarray:
    info = np.iinfo(dtype)
    lo, hi = (max(info.min, -(2**30)), min(info.max, 2**30)) if info.bits > 16 else (info.min, info.max)
    x = np.random.default_rng(seed).integers(lo, hi, (n, *SHAPE), endpoint=True)
    x[0, 0, 0, :2, :2] = [[1, 2], [3, 4]]  # a tie: 2.5
    x[0, 0, 0, :2, 2:4] = [[-1, -2], [-3, -4]] if info.min < 0 else [[0, 0], [0, 2]]  # -2.5 / 0.5
    return x.astype(dtype)


def _tvm_average(pool: str, x: np.ndarray) -> np.ndarray:
    """TVM's own build of the pool on the input loaded as the kernel loads it (a float: an int32 past
    2^24 is the nearest float) and widened to float64 (exact sums)."""
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(tvm.compile(_module(pool, "float64"), target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x.astype(np.float32).astype(np.float64))).numpy()


def _round_half_away(y: np.ndarray, dtype: str) -> np.ndarray:
    y = y.astype(np.float32).astype(np.float64)  # (the kernel stores the quotient as a float)
    return (np.sign(y) * np.floor(np.abs(y) + 0.5)).astype(dtype)


def _simulated(s, n: int) -> list[np.ndarray]:
    return [np.asarray(pipeline.simulate(s.result, s.data, [k])[0][0]) for k in range(n)]


@pytest.mark.parametrize("pool", sorted(POOLS))
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32"])
def test_the_simulation_rounds_an_integer_average_half_away_from_zero(pool, dtype):
    x = _inputs(dtype, 2)
    s = npukit.Study(_module(pool, dtype), "arm-dsp-dla")
    s.set_data(x)
    for k, got in enumerate(_simulated(s, 2)):
        want = _round_half_away(_tvm_average(pool, x[k]), dtype)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)


def test_the_simulated_ties_are_the_documented_ones():
    s = npukit.Study(_module("2x2", "int8"), "arm-dsp-dla")
    x = np.zeros((1, *SHAPE), np.int8)
    x[0, 0, 0, :2, :6] = [[1, 2, -1, -2, -3, -2], [3, 4, -3, -4, 0, 0]]
    x[0, 0, 0, 2:4, :2] = [[1, 2], [0, 0]]
    x[0, 0, 0, 4:6, :2] = [[127, 127], [127, 126]]  # 507: an int8 sum wraps to -5 (TVM's own kernel: -1)
    s.set_data(x)
    (got,) = _simulated(s, 1)
    assert got[0, 0].tolist() == [[3, -3, -1], [1, 0, 0], [127, 0, 0]]


def test_the_host_refuses_tvms_integer_pool_even_where_the_groups_result_type_matches():
    """A host kernel of the pool and an astype to float32 reading it: the group's result type is the
    declared float32, so TVM's kernel (its int8 sum wrapping, truncated) passed the check of the
    group's result type and would have run."""
    from npukit.tvm import hostc

    imp = npukit.import_model(_module("2x2", "int8", then="float32"))
    assert [op.kind for op in imp.graph.ops] == ["avg_pool2d", "astype"]
    hc = hostc.host_kernels(imp.mod, imp.graph, [(0, 1)])
    assert hc.kernels == (None,)
    assert hc.unsupported[0] == ("TVM's average pool of int8 sums in int8 (wrapping) and truncates; npukit rounds "
                                 "the average to the nearest integer, ties away from zero, as the kernel library's "
                                 "call does")  # fmt: skip


def _bit_exact(tmp_path, mod, soc, proc, dtype, samples=3):
    from npukit.codegen.build import make, run_program

    s = npukit.Study(mod, soc)
    s.pin(s.placement["name"].iloc[0], proc)
    assert s.placement["processor"].iloc[0] == proc
    x = _inputs(dtype, samples, seed=5)
    s.set_data(x)
    d = tmp_path / f"{soc}-{proc}"
    s.export(d)
    make(d)
    (d / ".w").mkdir()
    sim = _simulated(s, samples)
    for k in range(samples):
        (got,) = run_program(d, ["./model"], [x[k]], [SHAPE], d / ".w")
        assert got.dtype == sim[k].dtype
        np.testing.assert_array_equal(got, sim[k], err_msg=f"{soc} {proc} sample {k}")
    r = s.build(tmp_path / f"b-{soc}-{proc}", samples=samples)
    assert r["outputs_agree"] is True and r["mismatches"] == []


@pytest.mark.slow
@pytest.mark.parametrize(("soc", "proc", "dtype", "pool"), [
    ("arm-dsp-dla", "arm", "int8", "3x3_pad"),
    ("arm-dsp-dla", "arm", "int8", "adaptive"),
    ("arm-dsp-dla", "dla", "int8", "2x2"),
    ("cortex-m7-cmsis-nn", "cmsis_nn", "int8", "3x3_pad"),
    ("cortex-m7-cmsis-nn", "cmsis_nn", "int16", "2x2"),
    ("tda4vm-like", "c7x", "uint8", "3x3_pad_count"),
])  # fmt: skip
def test_the_program_and_the_simulation_agree_bit_for_bit(tmp_path, soc, proc, dtype, pool):
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    _bit_exact(tmp_path, _module(pool, dtype), soc, proc, dtype)


@pytest.mark.slow
def test_a_pool_read_by_an_astype_on_the_host_agrees_bit_for_bit(tmp_path):
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make / cc is not installed")
    _bit_exact(tmp_path, _module("2x2", "int8", then="float32"), "arm-dsp-dla", "arm", "int8")
