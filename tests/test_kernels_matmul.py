"""matmul / dense of the reference kernel library against numpy's matmul: every dtype, constant
weights (per-column quantized, S4 / S2 packed) and activation x activation, batch broadcasting,
rank-1 operands, transposed weights, rank-4 operands in NHWC / TILED layouts."""

from __future__ import annotations

import ctypes
import zlib

import numpy as np
import pytest
from kernels_lib import ALL_DTYPES, DT, QRANGE, MatmulParams, T, assert_close, call, ok, ptr, rand_tensor

from npukit.codegen.kernels import apply_multiplier, pack_weights, quantize_multipliers

WBITS = {"s16": 16, "s8": 8, "s4": 4, "s2": 2}


def out_grid(ref, dtype):
    qlo, qhi = QRANGE[dtype]
    lo, hi = min(float(ref.min()), 0.0), max(float(ref.max()), 0.0)
    scale = (hi - lo) / (qhi - qlo)
    return scale, int(np.clip(round(qlo - lo / scale), qlo, qhi))


def const_weights(rng, dtype, shape, tb):
    """(tensor, real weights as stored, per-column scale or None, q); columns n are the last
    dim, or dim -2 when the weights are stored transposed ([.., N, K])."""
    if dtype in ("f32", "f16"):
        w = rng.uniform(-1, 1, shape).astype(np.float32)
        t = T(shape, dtype).set_real(w)
        return t, t.real().astype(np.float64), None, None
    bits = WBITS[dtype]
    qmax = 2 ** (bits - 1) - 1
    q = rng.integers(-qmax, qmax + 1, shape)
    t = T(shape, dtype)
    t.packed = np.frombuffer(pack_weights(q, bits), np.uint8).copy()
    t.desc.data = ptr(t.packed)
    t.desc.scale = 0.0  # ignored for constant weights
    n = shape[-2] if tb and len(shape) >= 2 else (shape[-1] if len(shape) >= 2 else 1)
    wscale = rng.uniform(0.5, 1.5, n) / qmax
    real = q * (wscale[:, None] if tb and len(shape) >= 2 else wscale)
    return t, real.astype(np.float64), wscale, q


CASES = {
    # name: (a shape, b shape, transpose_b, a layout)
    "dense": ((3, 5), (5, 4), 0, "nchw"),
    "dense_transposed": ((3, 5), (4, 5), 1, "nchw"),
    "batched_broadcast": ((2, 1, 3, 5), (3, 5, 4), 0, "nhwc"),
    "vector_a": ((5,), (2, 5, 3), 0, "nchw"),
    "vector_b": ((2, 3, 5), (5,), 0, "nchw"),
    "tiled_batch": ((1, 6, 2, 5), (5, 3), 0, "tiled"),
}


def run(dtype, case, b_const, bias_shift=0):
    rng = np.random.default_rng(
        zlib.crc32(f"{dtype}/{case}/{b_const}{f'/{bias_shift}' if bias_shift else ''}".encode())
    )
    ashape, bshape, tb, alay = CASES[case]
    a = rand_tensor(rng, ashape, dtype, alay)
    p = MatmulParams()
    p.transpose_b = tb
    p.b_const = b_const
    keep = []
    ar = a.real().astype(np.float64)
    if b_const:
        b, br, wscale, wq = const_weights(rng, dtype, bshape, tb)
    else:
        b = rand_tensor(rng, bshape, dtype)
        br, wscale, wq = b.real().astype(np.float64), None, None
    bl = np.swapaxes(br, -1, -2) if tb and br.ndim >= 2 else br
    n_cols = bl.shape[-1] if bl.ndim >= 2 else 1
    bias = None
    if dtype in ("f32", "f16"):
        bias = rng.uniform(-0.5, 0.5, n_cols).astype(np.float32) if bl.ndim >= 2 else None
    ref = np.matmul(ar, bl)
    olay = "nhwc" if ref.ndim == 4 and alay != "nchw" else "nchw"
    if dtype in ("f32", "f16"):
        if bias is not None:
            ref = ref + bias
        out = T(ref.shape, dtype, olay)
        p.bias = ptr(bias)
        ok("matmul", a.p, b.p, out.p, ctypes.byref(p))
        assert_close(out, ref)
        return
    # integer path
    if b_const:
        cols = wscale
    else:
        cols = np.full(n_cols, np.float64(np.float32(b.scale)))
    lim = min(200 << bias_shift, 2**31 - 1)  # with bias_shift k: 2^k bias steps per product step
    bias_q = rng.integers(-lim, lim, n_cols) if bl.ndim >= 2 else None
    if bias_q is not None:
        ref = ref + bias_q * np.float64(np.float32(a.scale)) * cols / 2.0**bias_shift
    oscale, ozero = out_grid(ref, dtype)
    out = T(ref.shape, dtype, olay, scale=oscale, zero=ozero)
    reals = np.float64(np.float32(a.scale)) * cols / np.float64(np.float32(oscale))
    mult, shift = quantize_multipliers(reals if b_const else reals[:1])
    wide = dtype == "s16"
    bbuf = None if bias_q is None else bias_q.astype(np.int64 if wide else np.int32)
    keep += [mult, shift, bbuf]
    p.multiplier, p.shift, p.bias = ptr(mult), ptr(shift), ptr(bbuf)
    p.bias_shift = bias_shift
    ok("matmul", a.p, b.p, out.p, ctypes.byref(p))
    assert_close(out, ref, lsb=1)
    # bit-exact integer arithmetic
    aq = a.raw().astype(np.int64) - a.zero
    bq = (wq if b_const else b.raw().astype(np.int64) - b.zero).astype(np.int64)
    bq = np.swapaxes(bq, -1, -2) if tb and bq.ndim >= 2 else bq
    acc = np.matmul(aq, bq) << bias_shift
    if bias_q is not None:
        acc = acc + bias_q
    m = mult if b_const else mult[0]
    s = shift if b_const else shift[0]
    r = apply_multiplier(acc, m, s - bias_shift)
    lo, hi = QRANGE[dtype]
    np.testing.assert_array_equal(out.raw().astype(np.int64), np.clip(r + ozero, lo, hi))


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_matmul_const_weights(dtype, case):
    run(dtype, case, 1)


@pytest.mark.parametrize("case", ["dense", "batched_broadcast", "vector_b", "tiled_batch"])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_matmul_activations(dtype, case):
    run(dtype, case, 0)


@pytest.mark.parametrize("b_const", [1, 0])
@pytest.mark.parametrize("bias_shift", [1, 12, 24])
@pytest.mark.parametrize("dtype", ("s8", "s4", "s2"))
def test_matmul_bias_shift(dtype, bias_shift, b_const):
    """The bias on a grid 2^bias_shift times finer than the products' (conv2d's rule)."""
    run(dtype, "dense_transposed" if b_const else "dense", b_const, bias_shift)


def test_matmul_bias_shift_range():
    rng = np.random.default_rng(5)
    a, b = rand_tensor(rng, (2, 3), "s8"), rand_tensor(rng, (3, 4), "s8")
    out = T((2, 4), "s8", scale=0.1)
    m, s = np.full(1, 1 << 30, np.int32), np.zeros(1, np.int32)
    p = MatmulParams(0, 0, None, ptr(m), ptr(s))
    for k, status in ((0, 0), (24, 0), (-1, 6), (25, 6)):
        p.bias_shift = k
        assert call("matmul", a.p, b.p, out.p, ctypes.byref(p)) == status
    a16, b16 = rand_tensor(rng, (2, 3), "s16"), rand_tensor(rng, (3, 4), "s16")
    p.bias_shift = 1
    assert call("matmul", a16.p, b16.p, T((2, 4), "s16", scale=0.1).p, ctypes.byref(p)) == 6  # not with S16


def test_matmul_fused_relu_and_shape_errors():
    rng = np.random.default_rng(3)
    a = rand_tensor(rng, (4, 6), "f32")
    b = rand_tensor(rng, (6, 5), "f32")
    out = T((4, 5), "f32")
    p = MatmulParams(0, 0, None, None, None, 0.0, float("inf"))
    ok("matmul", a.p, b.p, out.p, ctypes.byref(p))
    assert_close(out, np.maximum(a.real().astype(np.float64) @ b.real().astype(np.float64), 0.0))
    bad = T((4, 4), "f32")
    assert call("matmul", a.p, b.p, bad.p, ctypes.byref(p)) == 3
    b2 = rand_tensor(rng, (5, 5), "f32")
    assert call("matmul", a.p, b2.p, out.p, ctypes.byref(p)) == 3  # K mismatch
    i8 = rand_tensor(rng, (6, 5), "s8")
    assert call("matmul", a.p, i8.p, out.p, ctypes.byref(p)) == 2  # float x int8
    p.b_const = 1
    tiled = T((1, 6, 1, 5), "f32", "tiled")
    a4 = rand_tensor(rng, (1, 1, 1, 6), "f32")
    assert call("matmul", a4.p, tiled.p, T((1, 6, 1, 5), "f32").p, ctypes.byref(p)) == 4  # const b not row-major
    assert DT["s4"] == 4
