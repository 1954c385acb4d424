"""Elementwise kernels (broadcasting binary ops, unary activations), the generic convert and
fake quantization, against numpy on every dtype and several layouts."""

from __future__ import annotations

import ctypes
import math
import zlib
from ctypes import c_float, c_int32

import numpy as np
import pytest
from kernels_lib import (
    ALL_DTYPES,
    QRANGE,
    BinaryParams,
    T,
    UnaryParams,
    assert_close,
    call,
    lib,
    ok,
    out_tensor,
    ptr,
    quantize,
    rand_tensor,
    round_half_away,
)

erf = np.vectorize(math.erf)

BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
          "minimum": np.minimum, "divide": np.divide}  # fmt: skip
BINARY_CODE = {name: i for i, name in enumerate(BINARY)}


def rng_for(*key):
    return np.random.default_rng(zlib.crc32("/".join(map(str, key)).encode()))


def positive_tensor(rng, shape, dtype, layout="nchw"):
    """Values in about [0.5, 1.5], never zero (for divisors)."""
    if dtype in ("f32", "f16"):
        return T(shape, dtype, layout).set_real(rng.uniform(0.5, 1.5, shape))
    qlo, qhi = QRANGE[dtype]
    t = T(shape, dtype, layout, scale=1.5 / (qhi - qlo), zero=qlo)
    return t.set_raw(rng.integers(qlo + 1, qhi + 1, shape))


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_binary_broadcast(dtype, op):
    rng = rng_for("bin", dtype, op)
    a = rand_tensor(rng, (2, 3, 1, 4), dtype, "nhwc")
    b = (positive_tensor if op == "divide" else rand_tensor)(rng, (3, 1, 1), dtype)
    ref = BINARY[op](a.real()[...], b.real()[None])  # float32 arithmetic, as the kernel
    out = out_tensor(ref.shape, dtype, "tiled", lo=float(min(ref.min(), 0)), hi=float(max(ref.max(), 0)) + 1e-3)
    ok(op, a.p, b.p, out.p)
    assert_close(out, ref.astype(np.float64))
    ok(f"nvdla_{op}", a.p, b.p, out.p)  # the vendor-prefixed wrapper is the same function
    assert_close(out, ref.astype(np.float64))


def test_binary_mixed_dtypes_clamp_and_errors():
    rng = rng_for("mixed")
    a = rand_tensor(rng, (4, 1), "s8")
    b = rand_tensor(rng, (3,), "f16")
    out = out_tensor((4, 3), "s16", lo=-2, hi=2)
    p = BinaryParams(BINARY_CODE["add"], 0.0, 0.5)  # fused clamp to [0, 0.5]
    ok("binary", a.p, b.p, out.p, ctypes.byref(p))
    assert_close(out, np.clip(a.real() + b.real(), 0.0, 0.5).astype(np.float64))
    assert call("binary", a.p, b.p, T((4, 4), "f32").p, ctypes.byref(p)) == 3  # not the broadcast shape
    assert call("add", a.p, rand_tensor(rng, (2,), "f32").p, out.p) == 3  # 3 vs 2 do not broadcast
    p.op = 9
    assert call("binary", a.p, b.p, out.p, ctypes.byref(p)) == 6


UNARY = {
    "relu": (lambda x: np.maximum(x, 0), -4, 4),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -6, 6),
    "tanh": (np.tanh, -4, 4),
    "gelu": (lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))), -4, 4),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), -4, 4),
    "exp": (np.exp, -3, 3),
    "silu": (lambda x: x / (1 + np.exp(-x)), -6, 6),
    "hardswish": (lambda x: x * np.clip(x + 3, 0, 6) / 6, -5, 5),
    "negative": (np.negative, -4, 4),
    "abs": (np.abs, -4, 4),
    "sqrt": (np.sqrt, 0.01, 4),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0.05, 4),
}


@pytest.mark.parametrize("op", list(UNARY))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_unary(dtype, op):
    f, lo, hi = UNARY[op]
    rng = rng_for("un", dtype, op)
    x = rand_tensor(rng, (2, 5, 3, 3), dtype, "tiled", lo=lo, hi=hi)
    xr = x.real().astype(np.float64)
    if dtype not in ("f32", "f16") and op in ("sqrt", "rsqrt"):
        xr = np.maximum(xr, 0)  # the grid may reach slightly below the range
        x.set_real(np.where(xr <= 0, hi, xr))
        xr = x.real().astype(np.float64)
    ref = f(xr)
    out = out_tensor(ref.shape, dtype, "nhwc", lo=float(min(ref.min(), 0)), hi=float(ref.max()) + 1e-3)
    ok(op, x.p, out.p)
    assert_close(out, ref)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_unary_with_parameters(dtype):
    rng = rng_for("unp", dtype)
    x = rand_tensor(rng, (3, 7), dtype, lo=-2, hi=2)
    xr = x.real().astype(np.float64)
    out = out_tensor((3, 7), dtype, lo=-2, hi=2)
    ok("clip", x.p, out.p, c_float(-0.5), c_float(1.25))
    assert_close(out, np.clip(xr, -0.5, 1.25))
    ok("leaky_relu", x.p, out.p, c_float(0.1))
    assert_close(out, np.where(xr >= 0, xr, np.float32(0.1) * xr))
    p = UnaryParams(1, 0.0, -1.0, 0.0)  # NPK_CLIP through the generic entry point
    ok("unary", x.p, out.p, ctypes.byref(p))
    assert_close(out, np.clip(xr, -1.0, 0.0))
    # in place, same tensor in and out
    if dtype in ("f32", "f16"):
        ok("relu", x.p, x.p)
        assert_close(x, np.maximum(xr, 0))


# ---------------------------------------------------------------------------------------------
# convert


CONV_DTYPES = ("f32", "f16", "s16", "s8", "s4", "s2", "u8", "s32")
LAYOUT_CYCLE = ("nchw", "nhwc", "tiled")


def convert_ref(src: T, dst: T) -> np.ndarray:
    """What convert must store in dst (raw values), per the documented rules."""
    if src.dtype == dst.dtype and (src.dtype in ("f32", "f16") or (src.scale, src.zero) == (dst.scale, dst.zero)):
        return src.raw()
    s_int, d_int = src.dtype not in ("f32", "f16"), dst.dtype not in ("f32", "f16")
    if s_int and d_int:
        real = np.float64(np.float32(src.scale)) * (src.raw().astype(np.int64) - src.zero)
        y = real / np.float64(np.float32(dst.scale))
        lo, hi = QRANGE[dst.dtype]
        return np.clip(round_half_away(y) + dst.zero, lo, hi)
    real = src.real()
    if dst.dtype == "f32":
        return real
    if dst.dtype == "f16":
        return real.astype(np.float16).view(np.uint16)
    return quantize(real, dst.scale, dst.zero, dst.dtype)


@pytest.mark.parametrize("dst", CONV_DTYPES)
@pytest.mark.parametrize("src", CONV_DTYPES)
def test_convert_every_dtype_pair(src, dst):
    rng = rng_for("cv", src, dst)
    i = CONV_DTYPES.index(src) + CONV_DTYPES.index(dst)
    shape = (2, 5, 3, 2)
    a = rand_tensor(rng, shape, src, LAYOUT_CYCLE[i % 3], lo=-3, hi=2) if src != "s32" else None
    if a is None:
        a = T(shape, "s32", LAYOUT_CYCLE[i % 3], scale=0.01, zero=7).set_raw(rng.integers(-400, 300, shape))
    b = (
        out_tensor(shape, dst, LAYOUT_CYCLE[(i + 1) % 3], lo=-2, hi=2.5)
        if dst != "s32"
        else T(shape, "s32", "nhwc", scale=0.003, zero=-5)
    )
    if dst == "u8":
        b = T(shape, "u8", "nchw", scale=4.5 / 255, zero=111)
    ok("convert", a.p, b.p)
    assert b.padding_ok()
    np.testing.assert_array_equal(b.raw().astype(np.float64), convert_ref(a, b).astype(np.float64))


def test_named_conversions_check_their_intent():
    rng = rng_for("named")
    f = rand_tensor(rng, (1, 6, 2, 2), "f32")
    q = out_tensor((1, 6, 2, 2), "s8", "tiled")
    q2 = out_tensor((1, 6, 2, 2), "s4", "nhwc")
    ok("quantize", f.p, q.p)
    ok("requantize", q.p, q2.p)
    back = T((1, 6, 2, 2), "f32")
    ok("dequantize", q2.p, back.p)
    np.testing.assert_array_equal(back.raw(), q2.real())
    same = T((1, 6, 2, 2), "s8", "nhwc", scale=q.scale, zero=q.zero)
    ok("layout_convert", q.p, same.p)
    np.testing.assert_array_equal(same.raw(), q.raw())
    assert call("quantize", q.p, q2.p) == 2
    assert call("dequantize", f.p, back.p) == 2
    assert call("requantize", f.p, q.p) == 2
    assert call("layout_convert", q.p, q2.p) == 2
    assert call("layout_convert", q.p, T((1, 6, 2, 2), "s8", scale=0.5).p) == 5
    assert call("convert", f.p, T((1, 6, 2, 3), "f32").p) == 3


def test_convert_s64_and_bool_exact():
    big = np.array([[-(2**62) - 3, 2**53 + 1, 7], [0, -1, 2**63 - 1]], np.int64)
    a = T((2, 3), "s64").set_raw(big)
    b = T((2, 3), "s64")
    ok("convert", a.p, b.p)
    np.testing.assert_array_equal(b.raw(), big)
    m = T((2, 3), "bool")
    ok("convert", T((2, 3), "f32").set_real([[0, 0.5, -1], [0, float("nan"), 0]]).p, m.p)
    np.testing.assert_array_equal(m.raw(), [[0, 1, 1], [0, 1, 0]])


# ---------------------------------------------------------------------------------------------
# fp16 and fake quantization


def test_fp16_all_bit_patterns_and_rounding():
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    src = T((65536,), "f16").set_raw(bits)
    dst = T((65536,), "f32")
    ok("convert", src.p, dst.p)
    want = bits.view(np.float16).astype(np.float32)
    same = (dst.raw() == want) | (np.isnan(dst.raw()) & np.isnan(want))
    assert same.all()
    rng = np.random.default_rng(5)
    x = np.concatenate([
        rng.standard_normal(20000).astype(np.float32) * np.float32(10.0) ** rng.integers(-9, 6, 20000),
        want[np.isfinite(want)],                                     # every half exactly
        (want[np.isfinite(want)][:-1].astype(np.float64) + np.diff(want[np.isfinite(want)].astype(np.float64)) / 2)
        .astype(np.float32),                                         # halfway points: ties to even
        np.array([65504, 65519.996, 65520, 1e9, -1e9, 5.96e-8, 2.98e-8, 2.9802322e-08, 1e-30, 0.0, -0.0,
                  np.inf, -np.inf, np.nan], np.float32),
    ]).astype(np.float32)  # fmt: skip
    x = x[np.isfinite(x) | np.isnan(x)]
    got = x.copy()
    ok("round_to_fp16", got.ctypes.data_as(ctypes.c_void_p), c_int32(got.size))
    with np.errstate(over="ignore"):
        want2 = x.astype(np.float16).astype(np.float32)
    same = (got.view(np.uint32) == want2.view(np.uint32)) | (np.isnan(got) & np.isnan(want2))
    assert same.all(), x[~same][:10]


@pytest.mark.parametrize("bits", [2, 4, 8, 16])
def test_round_to_bits(bits):
    rng = np.random.default_rng(bits)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    scale, zero = 0.37 / (2**bits - 1), lo + (2**bits - 1) // 3
    x = np.concatenate([rng.uniform(-0.3, 0.3, 5000), (np.arange(lo - 3, hi + 4) - zero + 0.5) * scale]).astype(
        np.float32
    )
    got = x.copy()
    ok(
        "round_to_bits",
        got.ctypes.data_as(ctypes.c_void_p),
        c_int32(got.size),
        c_int32(bits),
        c_float(scale),
        c_int32(zero),
    )
    q = np.clip(round_half_away((x / np.float32(scale)).astype(np.float64)) + zero, lo, hi)
    want = (q - zero).astype(np.float32) * np.float32(scale)
    np.testing.assert_array_equal(got, want)
    assert call("round_to_bits", ptr(got), c_int32(1), c_int32(3), c_float(scale), c_int32(0)) == 6
    assert call("round_to_bits", ptr(got), c_int32(1), c_int32(bits), c_float(0.0), c_int32(0)) == 5
    assert call("round_to_bits", ptr(got), c_int32(1), c_int32(bits), c_float(scale), c_int32(hi + 1)) == 5


@pytest.mark.parametrize("bits", [2, 4, 8, 16])
def test_round_to_bits_f16_rounds_every_half_as_the_simulation_does(bits):
    """A float16 tensor stored at an integer width (an int8 host running a float16 model): every
    half bit pattern widened to float, put on the grid as round_to_bits does, and stored back to
    the nearest half (ties to even) -- the simulation's ``fake_quant`` on a float16 tensor (rounded
    in fp32, ``astype`` back to float16).  It touches exactly ``count`` halves (2 bytes each): the
    generated code used to pass the halves to round_to_bits as floats, reading and writing twice
    the tensor's bytes."""
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    scale, zero = 0.37 / (2**bits - 1), lo + (2**bits - 1) // 3
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    n = halves.size
    buf = np.full(n + 16, 0xABCD, np.uint16)
    buf[:n] = halves
    ok("round_to_bits_f16", ptr(buf), c_int32(n), c_int32(bits), c_float(scale), c_int32(zero))
    assert (buf[n:] == 0xABCD).all()  # nothing past the tensor
    x = halves.view(np.float16).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.clip(round_half_away((x / np.float32(scale)).astype(np.float64)), lo - zero, hi - zero)
    # an integer times the scale (so -0.0 rounds to +0.0); NaN -> 0, as in the float version
    want = np.where(np.isnan(x), 0.0, r).astype(np.int64).astype(np.float32) * np.float32(scale)
    np.testing.assert_array_equal(buf[:n], want.astype(np.float16).view(np.uint16))
    # the same as round_to_bits on the widened values, then the nearest half
    wide = x.copy()
    ok("round_to_bits", ptr(wide), c_int32(n), c_int32(bits), c_float(scale), c_int32(zero))
    np.testing.assert_array_equal(buf[:n], wide.astype(np.float16).view(np.uint16))
    assert call("round_to_bits_f16", ptr(buf), c_int32(1), c_int32(3), c_float(scale), c_int32(0)) == 6
    assert call("round_to_bits_f16", ptr(buf), c_int32(1), c_int32(bits), c_float(0.0), c_int32(0)) == 5
    assert call("round_to_bits_f16", ptr(buf), c_int32(1), c_int32(bits), c_float(scale), c_int32(hi + 1)) == 5
    assert call("round_to_bits_f16", ptr(buf), c_int32(-1), c_int32(bits), c_float(scale), c_int32(0)) == 3
    assert call("round_to_bits_f16", None, c_int32(1), c_int32(bits), c_float(scale), c_int32(0)) == 1
    assert call("round_to_bits_f16", None, c_int32(0), c_int32(bits), c_float(scale), c_int32(0)) == 0


def test_tensor_helpers():
    t = T((2, 5, 3, 3), "s8", "tiled", block=4, scale=0.1)
    f = lib().npk_tensor_bytes
    f.restype = ctypes.c_int32
    assert f(t.p) == 2 * 2 * 3 * 3 * 4
    n = lib().npk_tensor_numel
    n.restype = ctypes.c_int32
    assert n(t.p) == 2 * 5 * 3 * 3
    assert f(T((3, 4), "f16").p) == 24
    assert f(T((2, 3, 1, 1), "s64", "nhwc").p) == 48


LAYOUTS = ("nchw", "nhwc", "tiled")


@pytest.mark.parametrize("out_layout", LAYOUTS)
@pytest.mark.parametrize("in_layout", LAYOUTS)
def test_layout_pairs_add_and_sigmoid(in_layout, out_layout):
    rng = rng_for("lp", in_layout, out_layout)
    for dtype in ("f32", "s8"):
        a = rand_tensor(rng, (2, 5, 3, 4), dtype, in_layout)
        b = rand_tensor(rng, (2, 5, 3, 4), dtype, LAYOUTS[(LAYOUTS.index(in_layout) + 1) % 3])
        out = out_tensor(a.shape, dtype, out_layout, lo=-2, hi=2)
        ok("add", a.p, b.p, out.p)
        assert_close(out, (a.real() + b.real()).astype(np.float64))
        ok("sigmoid", a.p, out.p)
        assert_close(out, 1 / (1 + np.exp(-a.real().astype(np.float64))))


# ---------------------------------------------------------------------------------------------
# the model's own integer arithmetic (npk_binary_int / npk_unary_int): exact, wrapping, scale and
# zero ignored -- what ONNX, onnxruntime, TVM and C compute for an int8 Add with no quantization

PLAIN_INT = ("s8", "s16", "s32", "s64", "u8")
BITS = {"s8": 8, "s16": 16, "s32": 32, "s64": 64, "u8": 8}


def wrap(v: int, dtype: str) -> int:
    """v modulo 2^bits as ``dtype``'s value (two's complement for the signed ones)."""
    b = BITS[dtype]
    return v % (1 << b) if dtype == "u8" else (v + (1 << (b - 1))) % (1 << b) - (1 << (b - 1))


def _int_ref(op: str, x: int, y: int) -> int:
    if op == "divide":
        return 0 if y == 0 else (abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1)  # truncates toward zero
    return {"add": x + y, "subtract": x - y, "multiply": x * y, "maximum": max(x, y), "minimum": min(x, y)}[op]


def _extreme_ints(rng, shape, dtype):
    lo, hi = QRANGE[dtype]
    edges = np.array([lo, lo + 1, -1 if lo < 0 else 1, 0, 1, hi - 1, hi], dtype=object)
    return np.asarray(rng.choice(np.concatenate([edges, rng.integers(lo, hi, 16, dtype=np.int64, endpoint=True)]),
                                 size=shape), dtype=object)  # fmt: skip


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dtype", PLAIN_INT)
def test_binary_int_wraps_like_the_model(dtype, op):
    rng = rng_for("binint", dtype, op)
    xa, xb = _extreme_ints(rng, (2, 3, 1, 4), dtype), _extreme_ints(rng, (3, 1, 1), dtype)
    xb[0, 0, 0] = 0  # x / 0 gives 0
    # a scale and zero point that npk_binary would apply: plain integers ignore them
    a = T(xa.shape, dtype, "nhwc", scale=0.37, zero=3).set_raw(xa.astype(np.int64).astype(NP_INT[dtype]))
    b = T(xb.shape, dtype, scale=2.5, zero=-1 if dtype != "u8" else 1).set_raw(xb.astype(np.int64).astype(NP_INT[dtype]))
    out = T(xa.shape, dtype, "tiled", scale=0.5, zero=0)
    want = np.vectorize(lambda x, y: wrap(_int_ref(op, int(x), int(y)), dtype), otypes=[object])(xa, xb[None])
    ok("binary_int", a.p, b.p, out.p, c_int32(BINARY_CODE[op]))
    assert out.padding_ok()
    assert out.raw().astype(object).tolist() == want.tolist()
    ok("nvdla_binary_int", a.p, b.p, out.p, c_int32(BINARY_CODE[op]))  # the vendor-prefixed wrapper
    assert out.raw().astype(object).tolist() == want.tolist()


NP_INT = {"s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64, "u8": np.uint8}


def test_binary_int_the_testers_int8_add_and_errors():
    x = np.array([[-128, -100, -64, -1], [0, 63, 64, 127]], np.int8)
    a, out = T(x.shape, "s8").set_raw(x), T(x.shape, "s8")
    ok("binary_int", a.p, a.p, out.p, c_int32(BINARY_CODE["add"]))
    assert out.raw().tolist() == [[0, 56, -128, -2], [0, 126, -128, -2]]  # onnxruntime's, wrapped
    ok("add", a.p, a.p, out.p)  # the quantized-value add saturates, as documented
    assert out.raw().tolist() == [[-128, -128, -128, -2], [0, 126, 127, 127]]
    for bad in ("f32", "f16", "s4", "s2", "bool"):  # plain integer dtypes only
        assert call("binary_int", T(x.shape, bad).p, a.p, out.p, c_int32(0)) == 2
        assert call("binary_int", a.p, a.p, T(x.shape, bad).p, c_int32(0)) == 2
    assert call("binary_int", a.p, a.p, out.p, c_int32(6)) == 6
    assert call("binary_int", a.p, T((3,), "s8").p, out.p, c_int32(0)) == 3


@pytest.mark.parametrize("dtype", PLAIN_INT)
def test_unary_int_wraps_like_the_model(dtype):
    from ctypes import c_int64

    rng = rng_for("unint", dtype)
    xs = _extreme_ints(rng, (2, 5, 3, 3), dtype)
    x = T(xs.shape, dtype, "tiled", scale=0.25, zero=2).set_raw(xs.astype(np.int64).astype(NP_INT[dtype]))
    lo, hi = QRANGE[dtype]
    cl, ch = (lo // 3, hi // 3) if dtype != "u8" else (10, 200)
    refs = {"relu": lambda v: max(v, 0), "clip": lambda v: min(max(v, cl), ch), "negative": lambda v: -v, "abs": abs}
    codes = {"relu": 0, "clip": 1, "negative": 10, "abs": 11}
    for op, f in refs.items():
        out = T(xs.shape, dtype, "nhwc")
        ok("unary_int", x.p, out.p, c_int32(codes[op]), c_int64(cl), c_int64(ch))
        want = np.vectorize(lambda v: wrap(f(int(v)), dtype), otypes=[object])(xs)  # noqa: B023
        assert out.raw().astype(object).tolist() == want.tolist(), op
    assert call("unary_int", x.p, T(xs.shape, dtype, "nhwc").p, c_int32(3), c_int64(0), c_int64(0)) == 6  # sigmoid
    assert call("unary_int", T(xs.shape, "f32").p, x.p, c_int32(0), c_int64(0), c_int64(0)) == 2
