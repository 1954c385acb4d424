"""npukit's CMSIS-NN compatible implementation (arm_nnfunctions.h) against TensorFlow Lite
semantics: bit-exact against a Python model of CMSIS-NN's requantization and within 1 LSB of
the float computation; plus the Python helpers that prepare its parameters."""

from __future__ import annotations

import ctypes
import math
from ctypes import c_int32

import numpy as np
import pytest
from kernels_lib import lib, ptr

from npukit.codegen.kernels import (
    cmsis_add_params,
    cmsis_mul_params,
    cmsis_requantize,
    cmsis_softmax_params,
    quantize_multiplier,
    quantize_multipliers,
)

I32 = ctypes.c_int32


class Dims(ctypes.Structure):
    _fields_ = [("n", I32), ("h", I32), ("w", I32), ("c", I32)]


class Tile(ctypes.Structure):
    _fields_ = [("w", I32), ("h", I32)]


class Act(ctypes.Structure):
    _fields_ = [("min", I32), ("max", I32)]


class Ctx(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("size", I32)]


class ConvParams(ctypes.Structure):
    _fields_ = [("input_offset", I32), ("output_offset", I32), ("stride", Tile), ("padding", Tile),
                ("dilation", Tile), ("activation", Act)]  # fmt: skip


class DwParams(ctypes.Structure):
    _fields_ = [("input_offset", I32), ("output_offset", I32), ("ch_mult", I32), ("stride", Tile),
                ("padding", Tile), ("dilation", Tile), ("activation", Act)]  # fmt: skip


class PerChannel(ctypes.Structure):
    _fields_ = [("multiplier", ctypes.c_void_p), ("shift", ctypes.c_void_p)]


class PerTensor(ctypes.Structure):
    _fields_ = [("multiplier", I32), ("shift", I32)]


class FcParams(ctypes.Structure):
    _fields_ = [("input_offset", I32), ("filter_offset", I32), ("output_offset", I32), ("activation", Act)]


class PoolParams(ctypes.Structure):
    _fields_ = [("stride", Tile), ("padding", Tile), ("activation", Act)]


def fn(name, restype=ctypes.c_int32):
    f = getattr(lib(), name)
    f.restype = restype
    return f


def conv_nhwc_int(x, w, stride, pad, dil, groups, oh, ow):
    """exact int64 conv: x [N, H, W, C] (offset applied), w [OC, KH, KW, C/groups]"""
    n, h, wd, c = x.shape
    oc, kh_n, kw_n, icg = w.shape
    out = np.zeros((n, oh, ow, oc), np.int64)
    ocg = oc // groups
    for i in range(oh):
        for j in range(ow):
            for kh in range(kh_n):
                ih = i * stride[0] - pad[0] + kh * dil[0]
                if not 0 <= ih < h:
                    continue
                for kw in range(kw_n):
                    iw = j * stride[1] - pad[1] + kw * dil[1]
                    if not 0 <= iw < wd:
                        continue
                    for g in range(groups):
                        px = x[:, ih, iw, g * icg : (g + 1) * icg]
                        out[:, i, j, g * ocg : (g + 1) * ocg] += px @ w[g * ocg : (g + 1) * ocg, kh, kw].T
    return out


@pytest.mark.parametrize("groups,dil,stride", [(1, 1, 1), (2, 1, 2), (1, 2, 1)])
def test_convolve_wrapper_s8(groups, dil, stride):
    rng = np.random.default_rng(groups * 10 + dil + stride)
    n, h, w, c, oc, k = 2, 7, 6, 4, 6, 3
    in_scale, in_zero = 0.02, -5
    x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
    wq = rng.integers(-127, 128, (oc, k, k, c // groups)).astype(np.int8)
    wscale = rng.uniform(0.5, 1.5, oc) / 127 * 0.05
    bias = rng.integers(-2000, 2000, oc).astype(np.int32)
    pad = (1, 1)
    oh = (h + 2 - dil * (k - 1) - 1) // stride + 1
    ow = (w + 2 - dil * (k - 1) - 1) // stride + 1
    acc = (
        conv_nhwc_int(
            x.astype(np.int64) - in_zero, wq.astype(np.int64), (stride, stride), pad, (dil, dil), groups, oh, ow
        )
        + bias
    )
    real = acc * in_scale * wscale
    out_scale, out_zero = (real.max() - real.min()) / 255, 3
    mult, shift = quantize_multipliers(in_scale * wscale / out_scale)
    out = np.zeros((n, oh, ow, oc), np.int8)
    p = ConvParams(-in_zero, out_zero, Tile(stride, stride), Tile(*pad), Tile(dil, dil), Act(-128, 100))
    q = PerChannel(ptr(mult), ptr(shift))
    dims = [Dims(n, h, w, c), Dims(oc, k, k, c // groups), Dims(1, 1, 1, oc), Dims(n, oh, ow, oc)]
    size = fn("arm_convolve_wrapper_s8_get_buffer_size")(
        ctypes.byref(p), *(ctypes.byref(d) for d in (dims[0], dims[1], dims[3]))
    )
    assert size >= 0
    st = fn("arm_convolve_wrapper_s8")(ctypes.byref(Ctx(None, 0)), ctypes.byref(p), ctypes.byref(q), ctypes.byref(dims[0]),
                                       ptr(x), ctypes.byref(dims[1]), ptr(wq), ctypes.byref(dims[2]), ptr(bias),
                                       ctypes.byref(dims[3]), ptr(out))  # fmt: skip
    assert st == 0
    want = np.clip(cmsis_requantize(acc, mult, shift) + out_zero, -128, 100)
    np.testing.assert_array_equal(out, want)
    ref = np.clip(np.round(real / out_scale) + out_zero, -128, 100)
    assert np.abs(out.astype(np.int64) - ref).max() <= 1


def test_depthwise_conv_wrapper_s8():
    rng = np.random.default_rng(3)
    n, h, w, c, mult_ch, k = 1, 6, 5, 3, 2, 3
    oc = c * mult_ch
    x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
    f = rng.integers(-127, 128, (1, k, k, oc)).astype(np.int8)  # [1, KH, KW, C_out]
    bias = rng.integers(-500, 500, oc).astype(np.int32)
    in_zero, scales = 7, rng.uniform(1e-4, 3e-4, oc)
    mult, shift = quantize_multipliers(scales)
    oh, ow = h, w
    acc = np.zeros((n, oh, ow, oc), np.int64)
    xo = np.pad(x.astype(np.int64) - in_zero, ((0, 0), (1, 1), (1, 1), (0, 0)))
    for ch in range(oc):
        for kh in range(k):
            for kw in range(k):
                acc[..., ch] += xo[:, kh : kh + oh, kw : kw + ow, ch // mult_ch] * f[0, kh, kw, ch]
    acc += bias
    out = np.zeros((n, oh, ow, oc), np.int8)
    p = DwParams(-in_zero, -2, mult_ch, Tile(1, 1), Tile(1, 1), Tile(1, 1), Act(-128, 127))
    dims = [Dims(n, h, w, c), Dims(1, k, k, oc), Dims(1, 1, 1, oc), Dims(n, oh, ow, oc)]
    st = fn("arm_depthwise_conv_wrapper_s8")(ctypes.byref(Ctx(None, 0)), ctypes.byref(p), ctypes.byref(PerChannel(ptr(mult), ptr(shift))),
                                             ctypes.byref(dims[0]), ptr(x), ctypes.byref(dims[1]), ptr(f), ctypes.byref(dims[2]),
                                             ptr(bias), ctypes.byref(dims[3]), ptr(out))  # fmt: skip
    assert st == 0
    np.testing.assert_array_equal(out, np.clip(cmsis_requantize(acc, mult, shift) - 2, -128, 127))


def test_fully_connected_s8():
    rng = np.random.default_rng(4)
    b, depth, oc = 3, 20, 7
    x = rng.integers(-128, 128, (b, depth)).astype(np.int8)
    wq = rng.integers(-127, 128, (oc, depth)).astype(np.int8)
    bias = rng.integers(-1000, 1000, oc).astype(np.int32)
    m, s = quantize_multiplier(0.0031)
    acc = (x.astype(np.int64) + 12) @ wq.astype(np.int64).T + bias
    out = np.zeros((b, oc), np.int8)
    p = FcParams(12, 0, -9, Act(-120, 127))
    assert fn("arm_fully_connected_s8_get_buffer_size")(ctypes.byref(Dims(depth, 1, 1, oc))) == 0
    st = fn("arm_fully_connected_s8")(ctypes.byref(Ctx(None, 0)), ctypes.byref(p), ctypes.byref(PerTensor(m, s)),
                                      ctypes.byref(Dims(b, 1, 1, depth)), ptr(x), ctypes.byref(Dims(depth, 1, 1, oc)),
                                      ptr(wq), ctypes.byref(Dims(1, 1, 1, oc)), ptr(bias), ctypes.byref(Dims(b, 1, 1, oc)),
                                      ptr(out))  # fmt: skip
    assert st == 0
    np.testing.assert_array_equal(out, np.clip(cmsis_requantize(acc, m, s) - 9, -120, 127))
    sums = np.zeros(oc, np.int32)
    assert fn("arm_vector_sum_s8")(ptr(sums), c_int32(depth), c_int32(oc), ptr(wq), c_int32(12), ptr(bias)) == 0
    np.testing.assert_array_equal(sums, wq.astype(np.int64).sum(1) * 12 + bias)


def test_pooling_s8():
    rng = np.random.default_rng(5)
    n, h, w, c = 2, 7, 6, 3
    x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
    k, s, pad = 3, 2, 1
    oh, ow = (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1
    pp = PoolParams(Tile(s, s), Tile(pad, pad), Act(-100, 110))
    for name in ("arm_max_pool_s8", "arm_avgpool_s8"):
        out = np.zeros((n, oh, ow, c), np.int8)
        st = fn(name)(ctypes.byref(Ctx(None, 0)), ctypes.byref(pp), ctypes.byref(Dims(n, h, w, c)), ptr(x),
                      ctypes.byref(Dims(1, k, k, 1)), ctypes.byref(Dims(n, oh, ow, c)), ptr(out))  # fmt: skip
        assert st == 0
        want = np.zeros_like(out, dtype=np.int64)
        for i in range(oh):
            for j in range(ow):
                h0, w0 = max(i * s - pad, 0), max(j * s - pad, 0)
                win = x[:, h0 : i * s - pad + k, w0 : j * s - pad + k].astype(np.int64)
                if name == "arm_max_pool_s8":
                    want[:, i, j] = win.max(axis=(1, 2))
                else:
                    tot, cnt = win.sum(axis=(1, 2)), win.shape[1] * win.shape[2]
                    want[:, i, j] = np.where(tot > 0, (tot + cnt // 2) // cnt, -((-tot + cnt // 2) // cnt))
        np.testing.assert_array_equal(out, np.clip(want, -100, 110))
    assert fn("arm_avgpool_s8_get_buffer_size")(c_int32(ow), c_int32(c)) >= 0


@pytest.mark.parametrize("in_scale", [1 / 16, 0.1, 0.02, 0.5])
def test_softmax_s8(in_scale):
    rng = np.random.default_rng(int(in_scale * 1000))
    rows, size = 6, 10
    x = rng.integers(-128, 128, (rows, size)).astype(np.int8)
    x[0] = 5  # a row of ties
    mult, shift, diff_min = cmsis_softmax_params(in_scale)
    out = np.zeros_like(x)
    fn("arm_softmax_s8", None)(
        ptr(x), c_int32(rows), c_int32(size), c_int32(mult), c_int32(shift), c_int32(diff_min), ptr(out)
    )
    real = x.astype(np.float64) * in_scale
    e = np.exp(real - real.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    ref = np.clip(np.round(p * 256) - 128, -128, 127)
    assert np.abs(out.astype(np.int64) - ref).max() <= 1
    np.testing.assert_array_equal(out[0], out[0, 0])


def test_elementwise_add_mul_s8():
    rng = np.random.default_rng(6)
    a = rng.integers(-128, 128, 200).astype(np.int8)
    b = rng.integers(-128, 128, 200).astype(np.int8)
    s1, z1, s2, z2 = 0.05, -3, 0.02, 10
    real_sum = (a.astype(np.float64) - z1) * s1 + (b.astype(np.float64) - z2) * s2
    so = (real_sum.max() - real_sum.min()) / 255
    zo = int(round(-128 - real_sum.min() / so))
    prm = cmsis_add_params(s1, s2, so)
    out = np.zeros(200, np.int8)
    st = fn("arm_elementwise_add_s8")(ptr(a), ptr(b), c_int32(-z1), c_int32(prm["input_1_mult"]), c_int32(prm["input_1_shift"]),
                                      c_int32(-z2), c_int32(prm["input_2_mult"]), c_int32(prm["input_2_shift"]),
                                      c_int32(prm["left_shift"]), ptr(out), c_int32(zo), c_int32(prm["out_mult"]),
                                      c_int32(prm["out_shift"]), c_int32(-128), c_int32(127), c_int32(200))  # fmt: skip
    assert st == 0
    ls = prm["left_shift"]
    ra = cmsis_requantize((a.astype(np.int64) - z1) << ls, prm["input_1_mult"], prm["input_1_shift"])
    rb = cmsis_requantize((b.astype(np.int64) - z2) << ls, prm["input_2_mult"], prm["input_2_shift"])
    want = np.clip(cmsis_requantize(ra + rb, prm["out_mult"], prm["out_shift"]) + zo, -128, 127)
    np.testing.assert_array_equal(out, want)
    assert np.abs(out - np.clip(np.round(real_sum / so) + zo, -128, 127)).max() <= 1
    real_prod = (a.astype(np.float64) - z1) * s1 * (b.astype(np.float64) - z2) * s2
    so = (real_prod.max() - real_prod.min()) / 255
    zo = int(round(-128 - real_prod.min() / so))
    m, s = cmsis_mul_params(s1, s2, so)
    st = fn("arm_elementwise_mul_s8")(ptr(a), ptr(b), c_int32(-z1), c_int32(-z2), ptr(out), c_int32(zo), c_int32(m), c_int32(s),
                                      c_int32(-128), c_int32(127), c_int32(200))  # fmt: skip
    assert st == 0
    prod = (a.astype(np.int64) - z1) * (b.astype(np.int64) - z2)
    np.testing.assert_array_equal(out, np.clip(cmsis_requantize(prod, m, s) + zo, -128, 127))
    assert np.abs(out - np.clip(np.round(real_prod / so) + zo, -128, 127)).max() <= 1


def test_cmsis_requantize_rounding_model():
    # doubling high multiply rounds half up, the shift rounds half away from zero
    m = 1 << 30  # 0.5
    assert cmsis_requantize(3, m, 0) == 2  # 1.5 -> 2
    assert cmsis_requantize(-3, m, 0) == -1  # -1.5: high multiply rounds half up to -1
    assert cmsis_requantize(6, m, -1) == 2  # 1.5 -> 2 (shift rounds half away)
    assert cmsis_requantize(-6, m, -1) == -2  # -1.5 -> -2
    assert cmsis_requantize(5, m, 1) == 5  # left shift by 1, times 0.5


def test_softmax_params_follow_tflite():
    mult, shift, diff_min = cmsis_softmax_params(1 / 16)
    real = mult * 2.0 ** (shift - 31)
    assert math.isclose(real, 2**26 / 16, rel_tol=2**-30) and shift >= 0
    assert diff_min == -math.floor(31 * 2**26 / 2**shift)
    with pytest.raises(ValueError):
        cmsis_softmax_params(1e-9)
