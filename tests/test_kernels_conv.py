"""conv2d of the reference kernel library against numpy: every dtype, grouped / depthwise /
strided / dilated / padded convs, fused bias and clamp, every layout pair (float within 1e-6,
fp16 within an fp16 ulp, integers within 1 LSB of the float reference and bit-exact against the
documented integer arithmetic)."""

from __future__ import annotations

import ctypes
import math
import zlib

import numpy as np
import pytest
from kernels_lib import (
    ALL_DTYPES,
    DT,
    QRANGE,
    Conv2dParams,
    T,
    assert_close,
    call,
    ok,
    ptr,
    rand_tensor,
)

from npukit.codegen.kernels import apply_multiplier, pack_weights, quantize_multipliers

WBITS = {"s16": 16, "s8": 8, "s4": 4, "s2": 2}


def conv_ref(x, w, bias, stride, dil, pads, groups):
    """x [N, C, H, W], w OHWI [OC, KH, KW, C/groups]; exact for int64 inputs."""
    n, c, h, wd = x.shape
    oc, kh_n, kw_n, icg = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = stride, dil, pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh_n - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw_n - 1) - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow), dtype=x.dtype)
    ocg = oc // groups
    for g in range(groups):
        for kh in range(kh_n):
            for kw in range(kw_n):
                patch = xp[:, g * icg : (g + 1) * icg, kh * dh : kh * dh + sh * (oh - 1) + 1 : sh,
                           kw * dw : kw * dw + sw * (ow - 1) + 1 : sw]  # fmt: skip
                out[:, g * ocg : (g + 1) * ocg] += np.einsum("nchw,oc->nohw", patch, w[g * ocg : (g + 1) * ocg, kh, kw])
    if bias is not None:
        out += bias[None, :, None, None]
    return out


CONFIGS = {
    # name: (C, OC, K, stride, dilation, pads (t, l, b, r), groups)
    "regular_pad1": (4, 6, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    "strided_asym": (3, 5, (3, 2), (2, 2), (1, 1), (0, 1, 2, 0), 1),
    "dilated": (4, 4, (3, 3), (1, 2), (2, 2), (2, 2, 2, 2), 1),
    "depthwise_mult2": (4, 8, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 4),
    "grouped": (6, 4, (1, 3), (1, 1), (1, 1), (0, 1, 0, 1), 2),
}


def run_conv(rng, dtype, cfg, in_layout="nchw", out_layout="nchw", act=None, bias=True, block=4, bias_shift=0):
    c, oc, (kh, kw), stride, dil, pads, groups = cfg
    shape = (2, c, 7, 6)
    x = rand_tensor(rng, shape, dtype, in_layout, block)
    icg = c // groups
    oh = (shape[2] + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (shape[3] + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    p = Conv2dParams(stride[0], stride[1], dil[0], dil[1], *pads, groups, kh, kw)
    keep = []
    if dtype in ("f32", "f16"):
        w = rng.uniform(-1, 1, (oc, kh, kw, icg)).astype(np.float32)
        if dtype == "f16":
            w = w.astype(np.float16).astype(np.float32)
            wbuf, p.weight_dtype = w.astype(np.float16).view(np.uint16), DT["f16"]
        else:
            wbuf, p.weight_dtype = w, DT["f32"]
        b = rng.uniform(-0.5, 0.5, oc).astype(np.float32) if bias else None
        ref = conv_ref(x.real().astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
                       stride, dil, pads, groups)  # fmt: skip
        out = T((2, oc, oh, ow), dtype, out_layout, block)
        keep += [wbuf, b]
        p.weights, p.bias = ptr(wbuf), ptr(b)
        if act is not None:
            p.act_min, p.act_max = act
            ref = np.clip(ref, act[0], act[1])
        ok("conv2d", x.p, out.p, ctypes_byref(p))
        assert_close(out, ref)
        return
    bits = WBITS[dtype]
    qmax = 2 ** (bits - 1) - 1
    wq = rng.integers(-qmax, qmax + 1, (oc, kh, kw, icg))
    wscale = rng.uniform(0.5, 1.5, oc) / qmax
    wbuf = np.frombuffer(pack_weights(wq, bits), np.uint8).copy()
    p.weight_dtype = DT[dtype]
    wide = dtype == "s16"
    xr = x.real().astype(np.float64)
    wr = wq * wscale[:, None, None, None]
    # with bias_shift k the bias has 2^k steps per product step: its fraction of a step is random
    lim = min(300 << bias_shift, 2**31 - 1)  # an int32 bias
    bq = rng.integers(-lim, lim, oc) if bias else None
    breal = None if bq is None else bq * x.scale * wscale / 2.0**bias_shift
    ref = conv_ref(xr, wr, breal, stride, dil, pads, groups)
    lo, hi = min(ref.min(), 0.0), max(ref.max(), 0.0)
    if act is not None:
        ref = np.clip(ref, act[0], act[1])
    qlo, qhi = QRANGE[dtype]
    oscale = (hi - lo) / (qhi - qlo)
    ozero = int(np.clip(round(qlo - lo / oscale), qlo, qhi))
    out = T((2, oc, oh, ow), dtype, out_layout, block, scale=oscale, zero=ozero)
    mult, shift = quantize_multipliers(np.float64(np.float32(x.scale)) * wscale / np.float64(np.float32(oscale)))
    bbuf = None if bq is None else bq.astype(np.int64 if wide else np.int32)
    keep += [wbuf, bbuf, mult, shift]
    p.weights, p.bias, p.multiplier, p.shift = ptr(wbuf), ptr(bbuf), ptr(mult), ptr(shift)
    p.bias_shift = bias_shift
    if act is not None:
        p.act_min, p.act_max = act
    ok("conv2d", x.p, out.p, ctypes_byref(p))
    assert_close(out, ref, lsb=1)
    # bit-exact against the documented integer arithmetic
    acc = (
        conv_ref(x.raw().astype(np.int64) - x.zero, wq.astype(np.int64), None, stride, dil, pads, groups) << bias_shift
    )
    if bq is not None:
        acc = acc + bq.astype(np.int64)[None, :, None, None]
    r = apply_multiplier(acc, mult[None, :, None, None], shift[None, :, None, None] - bias_shift)
    qa, qb = qlo, qhi
    if act is not None:
        qa = (
            max(qlo, int(round_away(np.float32(act[0]) / np.float32(out.scale))) + ozero) if act[0] > -math.inf else qlo
        )
        qb = min(qhi, int(round_away(np.float32(act[1]) / np.float32(out.scale))) + ozero) if act[1] < math.inf else qhi
    want = np.clip(r + ozero, qa, qb)
    np.testing.assert_array_equal(out.raw().astype(np.int64), want)


def round_away(v):
    v = float(v)
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def ctypes_byref(p):
    return ctypes.byref(p)


@pytest.mark.parametrize("cfg", sorted(CONFIGS))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_conv2d_configs(dtype, cfg):
    rng = np.random.default_rng(zlib.crc32(f"{dtype}/{cfg}".encode()))
    run_conv(rng, dtype, CONFIGS[cfg], "nhwc" if dtype in ("s8", "f16") else "nchw", "nchw")


LAYOUTS = ("nchw", "nhwc", "tiled")


@pytest.mark.parametrize("out_layout", LAYOUTS)
@pytest.mark.parametrize("in_layout", LAYOUTS)
@pytest.mark.parametrize("dtype", ("f32", "s8"))
def test_conv2d_layout_pairs(dtype, in_layout, out_layout):
    rng = np.random.default_rng(7)
    # C = 6 with block 4: the tiled tensors carry channel padding that must read / write as zero
    run_conv(rng, dtype, (6, 6, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 2), in_layout, out_layout)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_conv2d_fused_clamp(dtype):
    rng = np.random.default_rng(11)
    run_conv(rng, dtype, CONFIGS["regular_pad1"], act=(0.0, math.inf))  # relu
    run_conv(rng, dtype, CONFIGS["strided_asym"], act=(-0.25, 0.5), bias=False, out_layout="tiled")


@pytest.mark.parametrize("bias_shift", [1, 12, 24])
@pytest.mark.parametrize("dtype", ("s8", "s4", "s2"))
def test_conv2d_bias_shift(dtype, bias_shift):
    """A bias on a grid 2^bias_shift times finer than the products': bit-exact against
    (acc * 2^k + bias) requantized with shift - k, and within 1 LSB of the float conv."""
    rng = np.random.default_rng(zlib.crc32(f"{dtype}/{bias_shift}".encode()))
    run_conv(rng, dtype, CONFIGS["regular_pad1"], act=(0.0, math.inf), bias_shift=bias_shift)
    run_conv(rng, dtype, CONFIGS["depthwise_mult2"], out_layout="tiled", bias_shift=bias_shift)


def test_conv2d_bad_arguments():
    rng = np.random.default_rng(0)
    x = rand_tensor(rng, (1, 4, 5, 5), "s8")
    out = T((1, 4, 5, 5), "s8", scale=0.1)
    w = np.zeros(4 * 9 * 4, np.int8)
    m = np.full(4, 1 << 30, np.int32)
    s = np.zeros(4, np.int32)
    p = Conv2dParams(1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, DT["s8"], ptr(w), None, ptr(m), ptr(s))
    assert call("conv2d", x.p, out.p, ctypes_byref(p)) == 0
    p.stride_h = 0
    assert call("conv2d", x.p, out.p, ctypes_byref(p)) == 6  # NPK_ERR_PARAM
    p.stride_h, p.pad_top = 1, 0
    assert call("conv2d", x.p, out.p, ctypes_byref(p)) == 3  # output height no longer matches
    p.pad_top, p.weight_dtype = 1, DT["f32"]
    assert call("conv2d", x.p, out.p, ctypes_byref(p)) == 2  # float weights with int8 input
    p.weight_dtype, p.multiplier = DT["s8"], None
    assert call("conv2d", x.p, out.p, ctypes_byref(p)) == 1
    p.multiplier = ptr(m)
    for k in (-1, 25):
        p.bias_shift = k
        assert call("conv2d", x.p, out.p, ctypes_byref(p)) == 6  # bias_shift outside 0 .. 24
    p.bias_shift = 0
    out.desc.scale = 0.0
    assert call("conv2d", x.p, out.p, ctypes_byref(p)) == 5  # integer tensor without a scale
    out.desc.scale, out.desc.layout = 0.1, 2
    out.desc.block = 0
    assert call("conv2d", x.p, out.p, ctypes_byref(p)) == 4  # tiled without a block
