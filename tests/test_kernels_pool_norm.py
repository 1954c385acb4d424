"""Pooling, reductions and normalization of the reference kernel library against numpy (and
PyTorch for the pooling window semantics: ceil_mode, count_include_pad, dilation, adaptive bins)."""

from __future__ import annotations

import ctypes
import zlib
from ctypes import c_int32, c_uint32

import numpy as np
import pytest
from kernels_lib import (
    ALL_DTYPES,
    BatchNormParams,
    GroupNormParams,
    LayerNormParams,
    Pool2dParams,
    T,
    assert_close,
    call,
    ok,
    out_tensor,
    ptr,
    rand_tensor,
)


def rng_for(*key):
    return np.random.default_rng(zlib.crc32("/".join(map(str, key)).encode()))


def pool_size(n, k, s, d, p0, p1, ceil_mode):
    span = n + p0 + p1 - d * (k - 1) - 1
    o = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= n + p0:
        o -= 1
    return o


def pool_ref(x, k, s, d, pads, ceil_mode, include_pad, is_max):
    n, c, h, w = x.shape
    pt, pl, pb, pr = pads
    oh = pool_size(h, k[0], s[0], d[0], pt, pb, ceil_mode)
    ow = pool_size(w, k[1], s[1], d[1], pl, pr, ceil_mode)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs = [i * s[0] - pt + a * d[0] for a in range(k[0])]
            ws = [j * s[1] - pl + b * d[1] for b in range(k[1])]
            vh = [v for v in hs if 0 <= v < h]
            vw = [v for v in ws if 0 <= v < w]
            win = x[:, :, vh][:, :, :, vw]
            if not vh or not vw:  # the window lies in the padding
                out[:, :, i, j] = -np.finfo(np.float32).max if is_max else 0.0
            elif is_max:
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = (sum(v < h + pb for v in hs) * sum(v < w + pr for v in ws)) if include_pad else len(vh) * len(vw)
                out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return out


POOLS = {
    # name: (kernel, stride, dilation, pads (t, l, b, r), ceil_mode, count_include_pad)
    "k3s2": ((3, 3), (2, 2), (1, 1), (0, 0, 0, 0), 0, 0),
    "k3s2_pad_ceil": ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, 0),
    "k3s2_pad_ceil_incl": ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, 1),
    "k2_dilated_asym": ((2, 3), (1, 2), (2, 1), (1, 0, 0, 2), 0, 1),
    "window_in_padding": ((2, 3), (2, 2), (1, 1), (1, 0, 3, 1), 0, 0),  # the last row of windows
}


@pytest.mark.parametrize("is_max", [1, 0])
@pytest.mark.parametrize("cfg", sorted(POOLS))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_pool2d(dtype, cfg, is_max):
    rng = rng_for("pool", dtype, cfg, is_max)
    k, s, d, pads, ceil_mode, incl = POOLS[cfg]
    x = rand_tensor(rng, (2, 5, 8, 7), dtype, "nhwc" if is_max else "tiled")
    ref = pool_ref(x.real().astype(np.float64), k, s, d, pads, ceil_mode, incl, is_max)
    if dtype == "f16":  # the lowest finite half
        ref[ref == -np.finfo(np.float32).max] = -65504.0
    out = out_tensor(ref.shape, dtype, "tiled" if is_max else "nchw")
    p = Pool2dParams(*k, *s, *d, *pads, ceil_mode, incl)
    ok("max_pool2d" if is_max else "avg_pool2d", x.p, out.p, ctypes.byref(p))
    assert_close(out, ref)


def test_pool2d_window_semantics_match_pytorch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    for h, w, kk, ss, pp, dd in [(9, 8, 3, 2, 1, 1), (10, 10, 2, 3, 1, 1), (7, 9, 3, 2, 1, 2), (6, 6, 4, 3, 2, 1)]:
        x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
        xt = torch.from_numpy(x)
        for ceil_mode in (False, True):
            want = F.max_pool2d(xt, kk, ss, pp, dd, ceil_mode=ceil_mode).numpy()
            out = T(want.shape, "f32")
            ok(
                "max_pool2d",
                T(x.shape).set_real(x).p,
                out.p,
                ctypes.byref(Pool2dParams(kk, kk, ss, ss, dd, dd, pp, pp, pp, pp, int(ceil_mode), 0)),
            )
            np.testing.assert_array_equal(out.raw(), want)
            if dd != 1:
                continue
            for incl in (False, True):
                want = F.avg_pool2d(xt, kk, ss, pp, ceil_mode=ceil_mode, count_include_pad=incl).numpy()
                out = T(want.shape, "f32")
                p = Pool2dParams(kk, kk, ss, ss, 1, 1, pp, pp, pp, pp, int(ceil_mode), int(incl))
                ok("avg_pool2d", T(x.shape).set_real(x).p, out.p, ctypes.byref(p))
                np.testing.assert_allclose(out.raw(), want, rtol=1e-6, atol=1e-7)
    for (h, w), (oh, ow) in [((7, 5), (3, 2)), ((8, 8), (1, 1)), ((5, 9), (5, 4))]:
        x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
        want = F.adaptive_avg_pool2d(torch.from_numpy(x), (oh, ow)).numpy()
        out = T(want.shape, "f32")
        ok("adaptive_avg_pool2d", T(x.shape).set_real(x).p, out.p)
        np.testing.assert_allclose(out.raw(), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_adaptive_and_global_avg_pool(dtype):
    rng = rng_for("gap", dtype)
    x = rand_tensor(rng, (2, 6, 5, 7), dtype, "tiled")
    xr = x.real().astype(np.float64)
    g4 = out_tensor((2, 6, 1, 1), dtype, "nhwc", lo=-0.5, hi=0.5)
    ok("global_avg_pool2d", x.p, g4.p)
    assert_close(g4, xr.mean(axis=(2, 3), keepdims=True))
    g2 = out_tensor((2, 6), dtype, lo=-0.5, hi=0.5)
    ok("global_avg_pool2d", x.p, g2.p)
    assert_close(g2, xr.mean(axis=(2, 3)))
    a = out_tensor((2, 6, 2, 3), dtype)
    ok("adaptive_avg_pool2d", x.p, a.p)
    ref = np.zeros((2, 6, 2, 3))
    for i in range(2):
        for j in range(3):
            h0, h1 = (i * 5) // 2, -(-((i + 1) * 5) // 2)
            w0, w1 = (j * 7) // 3, -(-((j + 1) * 7) // 3)
            ref[:, :, i, j] = xr[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    assert_close(a, ref)


REDUCE = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min}


@pytest.mark.parametrize("keepdims", [True, False])
@pytest.mark.parametrize("op", list(REDUCE))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reductions(dtype, op, keepdims):
    rng = rng_for("red", dtype, op, keepdims)
    x = rand_tensor(rng, (2, 5, 3, 4), dtype, "nhwc")
    xr = x.real().astype(np.float64)
    for axes in [(1,), (2, 3), (0, 1, 2, 3), (0, 3)]:
        ref = REDUCE[op](xr, axis=axes, keepdims=keepdims)
        lo, hi = float(min(ref.min(), 0)), float(max(ref.max(), 0)) + 1e-3
        out = out_tensor(np.shape(ref), dtype, "tiled" if keepdims and dtype == "s8" else "nchw", lo=lo, hi=hi)
        mask = sum(1 << a for a in axes)
        ok(op, x.p, out.p, c_uint32(mask))
        assert_close(out, np.asarray(ref))
    bad = T((2, 5), "f32")
    assert call(op, x.p, bad.p, c_uint32(1 << 1)) == 3
    assert call(op, x.p, bad.p, c_uint32(1 << 5)) == 6


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_softmax_and_log_softmax(dtype):
    rng = rng_for("sm", dtype)
    x = rand_tensor(rng, (2, 6, 3, 2), dtype, "tiled", lo=-4, hi=3)
    xr = x.real().astype(np.float64)
    for axis in (1, -1, 2):
        e = np.exp(xr - xr.max(axis=axis, keepdims=True))
        ref = e / e.sum(axis=axis, keepdims=True)
        out = out_tensor(x.shape, dtype, "nhwc", lo=0, hi=1)
        ok("softmax", x.p, out.p, c_int32(axis))
        assert_close(out, ref)
        lref = np.log(ref)
        out = out_tensor(x.shape, dtype, "tiled", lo=float(lref.min()), hi=0)
        ok("log_softmax", x.p, out.p, c_int32(axis))
        assert_close(out, lref)
    assert call("softmax", x.p, out.p, c_int32(4)) == 6


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_layer_norm(dtype):
    rng = rng_for("ln", dtype)
    x = rand_tensor(rng, (2, 3, 4, 5), dtype, "nhwc", lo=-2, hi=3)
    xr = x.real().astype(np.float64)
    for k in (1, 2):
        inner = xr.shape[-k:]
        gamma = rng.uniform(0.5, 1.5, inner).astype(np.float32)
        beta = rng.uniform(-0.5, 0.5, inner).astype(np.float32)
        axes = tuple(range(4 - k, 4))
        mean, var = xr.mean(axis=axes, keepdims=True), xr.var(axis=axes, keepdims=True)
        ref = (xr - mean) / np.sqrt(var + np.float64(np.float32(1e-5))) * gamma + beta
        out = out_tensor(x.shape, dtype, "tiled", lo=float(ref.min()), hi=float(ref.max()))
        p = LayerNormParams(k, 1e-5, ptr(gamma), ptr(beta))
        ok("layer_norm", x.p, out.p, ctypes.byref(p))
        assert_close(out, ref)
    p = LayerNormParams(1, 1e-5, None, None)
    out = out_tensor(x.shape, dtype, lo=-3, hi=3)
    ok("layer_norm", x.p, out.p, ctypes.byref(p))
    assert_close(
        out, (xr - xr.mean(-1, keepdims=True)) / np.sqrt(xr.var(-1, keepdims=True) + np.float64(np.float32(1e-5)))
    )
    assert call("layer_norm", x.p, out.p, ctypes.byref(LayerNormParams(5, 1e-5, None, None))) == 6


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_batch_norm(dtype):
    rng = rng_for("bn", dtype)
    x = rand_tensor(rng, (2, 5, 3, 3), dtype, "tiled", lo=-2, hi=2)
    xr = x.real().astype(np.float64)
    mean, var, gamma, beta = (
        rng.uniform(a, b, 5).astype(np.float32) for a, b in [(-1, 1), (0.2, 2), (0.5, 1.5), (-1, 1)]
    )
    c = (slice(None), None, None)
    ref = (xr - mean[c]) / np.sqrt(var[c].astype(np.float64) + np.float64(np.float32(1e-3))) * gamma[c] + beta[c]
    out = out_tensor(x.shape, dtype, "nchw", lo=float(ref.min()), hi=float(ref.max()))
    p = BatchNormParams(1, 1e-3, ptr(mean), ptr(var), ptr(gamma), ptr(beta))
    ok("batch_norm", x.p, out.p, ctypes.byref(p))
    assert_close(out, ref)
    p.var = None
    assert call("batch_norm", x.p, out.p, ctypes.byref(p)) == 1


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_group_norm(dtype):
    """Statistics per (sample, group of consecutive channels) over the group's channels and every
    later axis, then gamma / beta per channel; an instance norm is as many groups as channels."""
    rng = rng_for("gn", dtype)
    x = rand_tensor(rng, (2, 6, 3, 4), dtype, "nhwc", lo=-2, hi=3)
    xr = x.real().astype(np.float64)
    gamma = rng.uniform(0.5, 1.5, 6).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, 6).astype(np.float32)
    c = (slice(None), None, None)
    for groups in (1, 3, 6):
        xg = xr.reshape(2, groups, -1)
        mean, var = xg.mean(-1, keepdims=True), xg.var(-1, keepdims=True)
        ref = ((xg - mean) / np.sqrt(var + np.float64(np.float32(1e-5)))).reshape(xr.shape) * gamma[c] + beta[c]
        out = out_tensor(x.shape, dtype, "tiled", lo=float(ref.min()), hi=float(ref.max()))
        ok("group_norm", x.p, out.p, ctypes.byref(GroupNormParams(groups, 1e-5, ptr(gamma), ptr(beta))))
        assert_close(out, ref)
    out = out_tensor(x.shape, dtype, lo=-3, hi=3)
    ok("group_norm", x.p, out.p, ctypes.byref(GroupNormParams(6, 1e-5, None, None)))
    axes = (2, 3)
    assert_close(out, (xr - xr.mean(axes, keepdims=True)) / np.sqrt(xr.var(axes, keepdims=True) + np.float64(np.float32(1e-5))))
    assert call("group_norm", x.p, out.p, ctypes.byref(GroupNormParams(4, 1e-5, None, None))) == 6  # 6 channels, 4 groups
    assert call("group_norm", x.p, out.p, None) == 1


LAYOUTS = ("nchw", "nhwc", "tiled")


@pytest.mark.parametrize("out_layout", LAYOUTS)
@pytest.mark.parametrize("in_layout", LAYOUTS)
def test_pool_and_softmax_layout_pairs(in_layout, out_layout):
    rng = rng_for("plp", in_layout, out_layout)
    k, s, d, pads, ceil_mode, incl = POOLS["k3s2_pad_ceil"]
    for dtype in ("f16", "s4"):
        x = rand_tensor(rng, (1, 6, 7, 7), dtype, in_layout)
        ref = pool_ref(x.real().astype(np.float64), k, s, d, pads, ceil_mode, incl, False)
        out = out_tensor(ref.shape, dtype, out_layout)
        ok("avg_pool2d", x.p, out.p, ctypes.byref(Pool2dParams(*k, *s, *d, *pads, ceil_mode, incl)))
        assert_close(out, ref)
        e = np.exp(x.real().astype(np.float64))
        out = out_tensor(x.shape, dtype, out_layout, lo=0, hi=1)
        ok("softmax", x.p, out.p, c_int32(1))
        assert_close(out, e / e.sum(axis=1, keepdims=True))
