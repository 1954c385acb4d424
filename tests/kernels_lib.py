"""Shared helpers of the kernel-library tests: build the reference C library once per session
(gcc -std=c11 -Wall -Wextra -Werror -O2 -fPIC -shared), call it through ctypes, and move numpy
arrays in and out of every physical layout.  Reference numerics (quantize / dequantize) follow
npukit's scheme and the library's documented rounding (half away from zero)."""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from ctypes import c_float, c_int32, c_int64, c_void_p
from functools import lru_cache
from pathlib import Path

import numpy as np

from npukit.codegen.kernels import cmsis_nn_files, library_files

CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2"]
PREFIX = "nvdla"  # the tests call through one generated vendor prefix as well as npk_*

DT = {"f32": 0, "f16": 1, "s16": 2, "s8": 3, "s4": 4, "s2": 5, "s32": 6, "s64": 7, "u8": 8, "bool": 9}
NP = {"f32": np.float32, "f16": np.uint16, "s16": np.int16, "s8": np.int8, "s4": np.int8, "s2": np.int8,
      "s32": np.int32, "s64": np.int64, "u8": np.uint8, "bool": np.uint8}  # fmt: skip
QRANGE = {"s16": (-32768, 32767), "s8": (-128, 127), "s4": (-8, 7), "s2": (-2, 1), "u8": (0, 255),
          "s32": (-(2**31), 2**31 - 1), "s64": (-(2**63), 2**63 - 1), "bool": (0, 1)}  # fmt: skip
LAYOUT = {"nchw": 0, "nhwc": 1, "tiled": 2}
INT_DTYPES = ("s16", "s8", "s4", "s2")
ALL_DTYPES = ("f32", "f16") + INT_DTYPES


def all_sources(prefix: str = PREFIX) -> dict[str, str]:
    return {**library_files(prefix), **cmsis_nn_files()}


def write_sources(d: Path, prefix: str = PREFIX) -> list[Path]:
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in sorted(all_sources(prefix).items()):
        (d / name).write_text(text)
        if name.endswith(".c"):
            out.append(d / name)
    return out


@lru_cache(maxsize=1)
def lib() -> ctypes.CDLL:
    """The library as a shared object, compiled at most once per session (cached by content)."""
    src = all_sources()
    key = hashlib.sha256(repr((sorted(src.items()), CFLAGS)).encode()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / f"npukit-kernels-{key}"
    so = d / "libnpk.so"
    if not so.exists():
        cfiles = write_sources(d)
        tmp = d / f"libnpk.{os.getpid()}.so"
        subprocess.run(["gcc", *CFLAGS, "-fPIC", "-shared", *map(str, cfiles), "-o", str(tmp), "-lm"],
                       check=True, capture_output=True, text=True)  # fmt: skip
        os.replace(tmp, so)
    return ctypes.CDLL(str(so))


# ---------------------------------------------------------------------------------------------
# ctypes structures (must match npk_ref.h)


class NpkTensor(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("dtype", c_int32), ("rank", c_int32), ("shape", c_int32 * 6),
                ("layout", c_int32), ("block", c_int32), ("scale", c_float), ("zero", c_int32)]  # fmt: skip


def _struct(name, fields):
    return type(name, (ctypes.Structure,), {"_fields_": fields})


I32 = c_int32
Conv2dParams = _struct("Conv2dParams", [(n, I32) for n in (
    "stride_h", "stride_w", "dilation_h", "dilation_w", "pad_top", "pad_left", "pad_bottom", "pad_right",
    "groups", "kernel_h", "kernel_w", "weight_dtype")] + [("weights", c_void_p), ("bias", c_void_p),
    ("multiplier", c_void_p), ("shift", c_void_p), ("act_min", c_float), ("act_max", c_float),
    ("bias_shift", I32)])  # fmt: skip
MatmulParams = _struct("MatmulParams", [("b_const", I32), ("transpose_b", I32), ("bias", c_void_p),
    ("multiplier", c_void_p), ("shift", c_void_p), ("act_min", c_float), ("act_max", c_float),
    ("bias_shift", I32)])  # fmt: skip
BinaryParams = _struct("BinaryParams", [("op", I32), ("act_min", c_float), ("act_max", c_float)])
UnaryParams = _struct("UnaryParams", [("op", I32), ("alpha", c_float), ("lo", c_float), ("hi", c_float)])
Pool2dParams = _struct("Pool2dParams", [(n, I32) for n in (
    "kernel_h", "kernel_w", "stride_h", "stride_w", "dilation_h", "dilation_w", "pad_top", "pad_left",
    "pad_bottom", "pad_right", "ceil_mode", "count_include_pad")])  # fmt: skip
LayerNormParams = _struct("LayerNormParams", [("num_axes", I32), ("eps", c_float), ("gamma", c_void_p),
                                               ("beta", c_void_p)])  # fmt: skip
BatchNormParams = _struct("BatchNormParams", [("axis", I32), ("eps", c_float), ("mean", c_void_p),
    ("var", c_void_p), ("gamma", c_void_p), ("beta", c_void_p)])  # fmt: skip
GroupNormParams = _struct("GroupNormParams", [("num_groups", I32), ("eps", c_float), ("gamma", c_void_p),
                                               ("beta", c_void_p)])  # fmt: skip
SliceParams = _struct("SliceParams", [("num_axes", I32), ("axes", I32 * 6), ("begin", c_int64 * 6),
                                       ("end", c_int64 * 6), ("strides", c_int64 * 6)])  # fmt: skip
Resize2dParams = _struct("Resize2dParams", [("method", I32), ("coord_mode", I32), ("nearest_mode", I32)])
PadParams = _struct("PadParams", [("mode", I32), ("before", I32 * 6), ("after", I32 * 6), ("value", c_float)])
TopkParams = _struct("TopkParams", [("axis", I32), ("largest", I32)])
NmsParams = _struct("NmsParams", [("center_point_box", I32), ("max_output_boxes_per_class", c_int64),
    ("iou_threshold", c_float), ("score_threshold", c_float), ("workspace", c_void_p)])  # fmt: skip


def ptr(a: np.ndarray | None):
    return None if a is None else a.ctypes.data_as(c_void_p)


def call(name: str, *args) -> int:
    """Call npk_<name> (or any full symbol) with ctypes args; returns the status."""
    f = getattr(lib(), name if name.startswith(("npk_", "arm_", PREFIX + "_")) else "npk_" + name)
    f.restype = ctypes.c_int32
    return f(*args)


def ok(name: str, *args) -> None:
    st = call(name, *args)
    assert st == 0, f"{name} returned status {st}"


# ---------------------------------------------------------------------------------------------
# numerics of the scheme


def round_half_away(y: np.ndarray) -> np.ndarray:
    """Round half away from zero, exact for float32 / float64 input."""
    y = np.asarray(y)
    with np.errstate(invalid="ignore"):  # inf - inf for infinite inputs
        r = np.round(y)
        tie = np.abs(y - np.trunc(y)) == 0.5
    return np.where(tie, np.trunc(y) + np.sign(y), r)


def quantize(x, scale: float, zero: int, dtype: str) -> np.ndarray:
    """npk's store: round(float32(x) / float32(scale)) + zero, saturated (int64 result)."""
    with np.errstate(over="ignore"):  # huge values saturate below
        y = np.asarray(x, np.float32) / np.float32(scale)
    lo, hi = QRANGE[dtype]
    return np.clip(round_half_away(y.astype(np.float64)) + zero, lo, hi).astype(np.int64)


def dequantize(q, scale: float, zero: int) -> np.ndarray:
    return (np.asarray(q, np.int64) - zero).astype(np.float32) * np.float32(scale)


def f16(x) -> np.ndarray:
    """Values rounded to fp16 and back (float32)."""
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# tensors in any layout


class T:
    """A logical tensor stored in a physical buffer of one layout, with its npk_tensor."""

    def __init__(self, shape, dtype="f32", layout="nchw", block=4, scale=1.0, zero=0, fill=0x5A):
        self.shape = tuple(int(s) for s in shape)
        self.dtype, self.layout, self.block = dtype, layout, block if layout == "tiled" else 0
        self.scale, self.zero = float(scale), int(zero)
        if layout != "nchw":
            assert len(self.shape) == 4
        n = int(np.prod(self.physical_shape(), dtype=np.int64))
        raw = np.full(max(n, 1) * np.dtype(NP[dtype]).itemsize, fill, np.uint8)  # garbage until written
        self.buf = raw.view(NP[dtype])
        self.desc = NpkTensor()
        self.desc.data = self.buf.ctypes.data_as(c_void_p)
        self.desc.dtype, self.desc.rank = DT[dtype], len(self.shape)
        for i, s in enumerate(self.shape):
            self.desc.shape[i] = s
        self.desc.layout, self.desc.block = LAYOUT[layout], self.block
        self.desc.scale, self.desc.zero = self.scale, self.zero
        self.desc.owner = self  # a temporary T(...).p must keep its buffer alive during the call

    def physical_shape(self):
        if self.layout == "nchw":
            return self.shape
        n, c, h, w = self.shape
        if self.layout == "nhwc":
            return (n, h, w, c)
        b = self.block
        return (n, -(-c // b), h, w, b)

    def _to_physical(self, logical: np.ndarray, pad_value) -> np.ndarray:
        if self.layout == "nchw":
            return logical
        if self.layout == "nhwc":
            return logical.transpose(0, 2, 3, 1)
        n, c, h, w = self.shape
        b = self.block
        cb = -(-c // b)
        padded = np.full((n, cb * b, h, w), pad_value, logical.dtype)
        padded[:, :c] = logical
        return padded.reshape(n, cb, b, h, w).transpose(0, 1, 3, 4, 2)

    def _from_physical(self, phys: np.ndarray) -> np.ndarray:
        if self.layout == "nchw":
            return phys
        if self.layout == "nhwc":
            return phys.transpose(0, 3, 1, 2)
        n, c, h, w = self.shape
        cb, b = phys.shape[1], phys.shape[4]
        return phys.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)[:, :c]

    def set_raw(self, raw) -> T:
        """Store raw values (q for integers, floats for f32, fp16 bits or floats for f16)."""
        raw = np.asarray(raw)
        assert raw.shape == self.shape, (raw.shape, self.shape)
        if self.dtype == "f16" and raw.dtype != np.uint16:
            raw = np.asarray(raw, np.float32).astype(np.float16).view(np.uint16)
        pad = 0 if self.dtype.startswith("f") or self.dtype == "bool" else self.zero
        phys = self._to_physical(raw.astype(NP[self.dtype]), pad)
        n = phys.size
        self.buf[:n] = np.ascontiguousarray(phys).ravel()
        return self

    def set_real(self, x) -> T:
        x = np.asarray(x, np.float32)
        if self.dtype in ("f32", "f16"):
            return self.set_raw(x if self.dtype == "f32" else x.astype(np.float16).view(np.uint16))
        return self.set_raw(quantize(x, self.scale, self.zero, self.dtype))

    def raw(self) -> np.ndarray:
        phys = self.buf[: int(np.prod(self.physical_shape(), dtype=np.int64))].reshape(self.physical_shape())
        return np.ascontiguousarray(self._from_physical(phys))

    def real(self) -> np.ndarray:
        r = self.raw()
        if self.dtype == "f32":
            return r.astype(np.float32)
        if self.dtype == "f16":
            return r.view(np.float16).astype(np.float32)
        if self.dtype == "bool":
            return (r != 0).astype(np.float32)
        return dequantize(r, self.scale, self.zero)

    def padding_ok(self) -> bool:
        """The channel padding of a TILED tensor holds zero (the zero point)."""
        if self.layout != "tiled" or self.shape[1] % self.block == 0:
            return True
        n, c, h, w = self.shape
        phys = self.buf[: int(np.prod(self.physical_shape()))].reshape(self.physical_shape())
        full = phys.transpose(0, 1, 4, 2, 3).reshape(n, -1, h, w)
        want = 0 if self.dtype in ("f32", "f16", "bool") else self.zero
        return bool(np.all(full[:, c:] == want))

    @property
    def p(self):
        return ctypes.byref(self.desc)


def rand_tensor(rng, shape, dtype, layout="nchw", block=4, lo=-1.0, hi=1.0):
    """A random tensor whose real range is about [lo, hi]: integer dtypes get an affine grid."""
    if dtype in ("f32", "f16"):
        return T(shape, dtype, layout, block).set_real(rng.uniform(lo, hi, shape))
    qlo, qhi = QRANGE[dtype]
    scale = (hi - lo) / (qhi - qlo)
    zero = int(np.clip(round(qlo - lo / scale), qlo, qhi))
    t = T(shape, dtype, layout, block, scale=scale, zero=zero)
    return t.set_raw(rng.integers(qlo, qhi + 1, shape))


def out_tensor(shape, dtype, layout="nchw", block=4, lo=-1.0, hi=1.0):
    """An output tensor with an affine grid covering about [lo, hi]."""
    if dtype in ("f32", "f16"):
        return T(shape, dtype, layout, block)
    qlo, qhi = QRANGE[dtype]
    scale = (hi - lo) / (qhi - qlo)
    zero = int(np.clip(round(qlo - lo / scale), qlo, qhi))
    return T(shape, dtype, layout, block, scale=scale, zero=zero)


def assert_close(out: T, ref_real: np.ndarray, rtol: float = 1e-6, lsb: int = 1) -> None:
    """F32 within rtol, F16 within one fp16 ulp of the rounded reference, integers within `lsb`
    steps of the reference rounded to the output grid."""
    ref = np.asarray(ref_real, np.float64)
    assert out.padding_ok()
    if out.dtype == "f32":
        got = out.real().astype(np.float64)
        tol = rtol * np.abs(ref) + 1e-9 * max(1.0, float(np.max(np.abs(ref), initial=0.0)))
        bad = ~(np.abs(got - ref) <= tol) & ~(np.isnan(got) & np.isnan(ref)) & ~(got == ref)
        assert not bad.any(), f"f32 mismatch at {np.argwhere(bad)[:5].tolist()}: got {got[bad][:5]} want {ref[bad][:5]}"
    elif out.dtype == "f16":
        got = out.real().astype(np.float64)
        with np.errstate(over="ignore"):
            r16 = ref.astype(np.float16)
            ulp = np.spacing(np.abs(r16)).astype(np.float64)
        bad = ~(np.abs(got - r16.astype(np.float64)) <= ulp) & ~(got == ref)
        assert not bad.any(), f"f16 mismatch at {np.argwhere(bad)[:5].tolist()}: got {got[bad][:5]} want {ref[bad][:5]}"
    else:
        got = out.raw().astype(np.int64)
        want = quantize(ref, out.scale, out.zero, out.dtype)
        diff = np.abs(got - want)
        assert diff.max(initial=0) <= lsb, (
            f"{out.dtype}: max |q - ref| = {diff.max()} at {np.argwhere(diff > lsb)[:5].tolist()}"
        )
