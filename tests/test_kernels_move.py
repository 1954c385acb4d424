"""Data movement kernels: reshape / copy, permute_dims, concat, split, strided_slice, pad and resize2d,
against numpy (and PyTorch's interpolate for the resize coordinate modes), across layouts and
with conversion on the way."""

from __future__ import annotations

import ctypes
import zlib
from ctypes import c_int32

import numpy as np
import pytest
from kernels_lib import (
    ALL_DTYPES,
    PadParams,
    Resize2dParams,
    SliceParams,
    T,
    assert_close,
    call,
    ok,
    out_tensor,
    rand_tensor,
)


def rng_for(*key):
    return np.random.default_rng(zlib.crc32("/".join(map(str, key)).encode()))


def same_grid(t: T, shape, layout="nchw"):
    return T(shape, t.dtype, layout, scale=t.scale, zero=t.zero)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reshape_and_permute(dtype):
    rng = rng_for("rp", dtype)
    x = rand_tensor(rng, (2, 6, 3, 2), dtype, "tiled")
    flat = same_grid(x, (3, 24))
    ok("reshape", x.p, flat.p)
    np.testing.assert_array_equal(flat.raw(), x.raw().reshape(3, 24))
    back = same_grid(x, (2, 6, 3, 2), "nhwc")
    ok("copy", flat.p, back.p)
    np.testing.assert_array_equal(back.raw(), x.raw())
    for axes in [(0, 2, 3, 1), (3, 1, 0, 2), (-1, -2, -3, -4)]:
        want = np.transpose(x.raw(), axes)
        out = same_grid(x, want.shape, "tiled" if want.shape[1] % 4 else "nhwc")
        ok("permute_dims", x.p, out.p, (c_int32 * 4)(*axes))
        np.testing.assert_array_equal(out.raw(), want)
        assert out.padding_ok()
    assert call("permute_dims", x.p, same_grid(x, (2, 6, 3, 2)).p, (c_int32 * 4)(0, 0, 2, 3)) == 6
    assert call("reshape", x.p, same_grid(x, (5, 5)).p) == 3


def test_reshape_converts_on_the_way():
    rng = rng_for("rc")
    x = rand_tensor(rng, (4, 6), "s8")
    out = T((2, 12), "f16")
    ok("reshape", x.p, out.p)
    assert_close(out, x.real().reshape(2, 12).astype(np.float64))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_concat_and_split(dtype):
    rng = rng_for("cs", dtype)
    parts = [rand_tensor(rng, (2, c, 3, 2), dtype, lay) for c, lay in [(3, "nhwc"), (1, "tiled"), (4, "nchw")]]
    # concat converts each input onto the output's grid
    ref = np.concatenate([p.real() for p in parts], axis=1).astype(np.float64)
    out = out_tensor((2, 8, 3, 2), dtype, "tiled", block=3)
    arr = (ctypes.POINTER(type(parts[0].desc)) * 3)(*[ctypes.pointer(p.desc) for p in parts])
    ok("concat", arr, c_int32(3), out.p, c_int32(1))
    assert_close(out, ref)
    # split the output back into sections of 5 and 3 (sizes encode sections / indices)
    a, b = same_grid(out, (2, 5, 3, 2), "nhwc"), same_grid(out, (2, 3, 3, 2), "tiled")
    outs = (ctypes.POINTER(type(a.desc)) * 2)(ctypes.pointer(a.desc), ctypes.pointer(b.desc))
    ok("split", out.p, outs, c_int32(2), c_int32(-3))
    np.testing.assert_array_equal(a.raw(), out.raw()[:, :5])
    np.testing.assert_array_equal(b.raw(), out.raw()[:, 5:])
    assert b.padding_ok()
    # along another axis, rank 3
    x = rand_tensor(rng, (4, 5, 3), dtype)
    ys = [same_grid(x, (4, k, 3)) for k in (2, 0, 3)]
    outs = (ctypes.POINTER(type(x.desc)) * 3)(*[ctypes.pointer(y.desc) for y in ys])
    ok("split", x.p, outs, c_int32(3), c_int32(1))
    np.testing.assert_array_equal(ys[2].raw(), x.raw()[:, 2:])
    assert call("split", x.p, outs, c_int32(2), c_int32(1)) == 3  # sizes do not add up


def slice_ref(x, axes, begin, end, strides):
    sl = [slice(None)] * x.ndim
    for a, b, e, s in zip(axes, begin, end, strides):
        big = 2**62
        sl[a] = slice(None if abs(b) >= big else b, None if abs(e) >= big else e, s)
    return x[tuple(sl)]


SLICES = [
    ((1,), (1,), (5,), (2,)),
    ((0, 3), (-1, 0), (-3, 100), (-1, 3)),
    ((2,), (2**63 - 1,), (-(2**63),), (-1,)),
    ((3, 1), (-100, 4), (2, -1), (1, -2)),
    ((2,), (3,), (1,), (1,)),  # empty
]


@pytest.mark.parametrize("dtype", ("f32", "s4", "f16"))
def test_strided_slice(dtype):
    rng = rng_for("ss", dtype)
    x = rand_tensor(rng, (3, 6, 4, 5), dtype, "tiled")
    for axes, begin, end, strides in SLICES:
        want = slice_ref(x.raw(), axes, begin, end, strides)
        out = same_grid(x, want.shape, "nhwc")
        p = SliceParams(len(axes))
        for i, (a, b, e, s) in enumerate(zip(axes, begin, end, strides)):
            p.axes[i], p.begin[i], p.end[i], p.strides[i] = a, b, e, s
        ok("strided_slice", x.p, out.p, ctypes.byref(p))
        np.testing.assert_array_equal(out.raw(), want)
    p = SliceParams(1)
    p.axes[0], p.begin[0], p.end[0], p.strides[0] = 1, 0, 6, 0
    assert call("strided_slice", x.p, same_grid(x, (3, 6, 4, 5)).p, ctypes.byref(p)) == 6


def src_coord(mode, x, n_in, n_out):
    scale = np.float32(n_in) / np.float32(n_out)
    x = np.float32(x)
    if mode == 1:
        return np.float32(np.float32(n_in - 1) / np.float32(n_out - 1) * x) if n_out > 1 else np.float32(0)
    if mode == 2:
        return np.float32(x * scale)
    if mode == 3:
        return np.float32((x + np.float32(0.5)) * scale - np.float32(0.5)) if n_out > 1 else np.float32(0)
    if mode == 4:
        return np.float32((x + np.float32(0.5)) * scale)
    return np.float32((x + np.float32(0.5)) * scale - np.float32(0.5))


def nearest(mode, c, n):
    r = {
        0: np.ceil(c - np.float32(0.5)),
        1: np.floor(c + np.float32(0.5)),
        2: np.floor(c),
        3: np.ceil(c),
        4: np.round(c),
    }[mode]
    return int(min(max(r, 0), n - 1))


def resize_ref(x, oh, ow, method, cmode, nmode):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow), np.float32)
    for i in range(oh):
        y = src_coord(cmode, i, h, oh)
        for j in range(ow):
            xx = src_coord(cmode, j, w, ow)
            if method == 0:
                out[:, :, i, j] = x[:, :, nearest(nmode, y, h), nearest(nmode, xx, w)]
                continue
            fy, fx = np.floor(y), np.floor(xx)
            ly, lx = np.float32(y - fy), np.float32(xx - fx)
            y0, y1 = min(max(int(fy), 0), h - 1), min(max(int(fy) + 1, 0), h - 1)
            x0, x1 = min(max(int(fx), 0), w - 1), min(max(int(fx) + 1, 0), w - 1)
            top = x[:, :, y0, x0] + (x[:, :, y0, x1] - x[:, :, y0, x0]) * lx
            bot = x[:, :, y1, x0] + (x[:, :, y1, x1] - x[:, :, y1, x0]) * lx
            out[:, :, i, j] = top + (bot - top) * ly
    return out


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_resize2d_modes(dtype):
    rng = rng_for("rs", dtype)
    x = rand_tensor(rng, (1, 5, 4, 6), dtype, "nhwc")
    xr = x.real()
    for method in (0, 1):
        for cmode in range(5):
            for nmode in range(5) if method == 0 else (0,):
                for oh, ow in [(8, 9), (3, 4), (1, 1)]:
                    ref = resize_ref(xr, oh, ow, method, cmode, nmode)
                    out = out_tensor((1, 5, oh, ow), dtype, "tiled")
                    if method == 0:
                        out = same_grid(x, (1, 5, oh, ow), "tiled") if dtype not in ("f32", "f16") else out
                    ok("resize2d", x.p, out.p, ctypes.byref(Resize2dParams(method, cmode, nmode)))
                    assert_close(out, ref.astype(np.float64), lsb=1)
    assert call("resize2d", x.p, out.p, ctypes.byref(Resize2dParams(2, 0, 0))) == 6


def test_resize2d_matches_pytorch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 5, 7)).astype(np.float32)
    xt = torch.from_numpy(x)
    cases = [  # (torch kwargs, method, coordinate mode, nearest mode)
        ({"mode": "bilinear", "align_corners": False}, 1, 3, 0),
        ({"mode": "bilinear", "align_corners": True}, 1, 1, 0),
        ({"mode": "nearest"}, 0, 2, 2),
        ({"mode": "nearest-exact"}, 0, 4, 2),
    ]
    for kwargs, method, cmode, nmode in cases:
        for size in [(10, 14), (3, 4), (7, 3)]:
            want = F.interpolate(xt, size=size, **kwargs).numpy()
            out = T(want.shape, "f32")
            ok("resize2d", T(x.shape).set_real(x).p, out.p, ctypes.byref(Resize2dParams(method, cmode, nmode)))
            np.testing.assert_allclose(out.raw(), want, rtol=1e-5, atol=1e-6, err_msg=str(kwargs))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_pad_modes_match_numpy(dtype):
    """Every mode against numpy's pad (ONNX constant / edge / reflect / wrap), across layouts, with
    conversion on the way (the output on a grid of its own); the constant lands on the output's
    grid; widths a mode cannot take are refused."""
    rng = rng_for("pad", dtype)
    x = rand_tensor(rng, (1, 3, 4, 5), dtype, "nhwc")
    xr = x.real().astype(np.float64)
    before, after = (0, 1, 2, 0), (0, 2, 3, 4)
    shape = tuple(b + n + a for b, n, a in zip(before, x.shape, after))
    modes = {0: "constant", 1: "edge", 2: "reflect", 3: "wrap"}
    for mode, np_mode in modes.items():
        kw = {"constant_values": 0.25} if mode == 0 else {}
        ref = np.pad(xr, list(zip(before, after)), mode=np_mode, **kw)
        out = out_tensor(shape, dtype, "tiled")
        b6, a6 = (c_int32 * 6)(*before), (c_int32 * 6)(*after)
        ok("pad", x.p, out.p, ctypes.byref(PadParams(mode, b6, a6, 0.25)))
        assert_close(out, ref, lsb=1)
    out = out_tensor(shape, dtype, "tiled")
    too_wide = (c_int32 * 6)(0, 1, 4, 0)  # reflect needs < 4 on an axis of 4
    assert call("pad", x.p, out.p, ctypes.byref(PadParams(2, too_wide, (c_int32 * 6)(0, 2, 1, 4), 0.0))) == 6
    assert call("pad", x.p, out.p, ctypes.byref(PadParams(4, b6, a6, 0.0))) == 6  # no such mode
    wrong = out_tensor((1, 3, 9, 9), dtype)
    assert call("pad", x.p, wrong.p, ctypes.byref(PadParams(0, b6, a6, 0.0))) == 3
