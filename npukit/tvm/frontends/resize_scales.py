"""Resizes by a scale factor whose output size is not a whole multiple of the input's (5 x 5 by 2.7 to
13 x 13, 9 x 9 by 0.6 to 5 x 5).  ONNX Runtime (Resize with ``scales``) and torch
(``interpolate(scale_factor=...)``) map output pixel x to input coordinate x / scale; TVM's
``resize2d`` knows only the sizes and maps it to x * in / out, a different pixel wherever
in * scale is not whole (max |diff| 3.75 on 5 x 5 by 2.7).  Here:

- where both mappings pick the same pixels (every whole scale, and most others on small images),
  the resize stays TVM's ``resize2d``;
- else a nearest-neighbour resize becomes one ``take`` per resized axis, with the source pixel of
  each output pixel computed as the reference computes it (float32 arithmetic, its rounding, clamped
  to the image): the same values, bit for bit;
- a linear or cubic one is refused (``Unmappable``), naming the scale and sizes: its weights follow
  the coordinates, which ``resize2d`` cannot take.
"""

from __future__ import annotations

import numpy as np

_SCALED = ("half_pixel", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")  # modes that read the scale


class Unmappable(Exception):
    """A resize ``resize2d`` cannot compute; the message says why, in the model's words."""


def _coords(n_out: int, step: np.float32, mode: str, divide: bool = False) -> np.ndarray:
    """Input coordinate of every output pixel: ``x * step`` (TVM: step in / out; torch: float(1 / scale)),
    or ``x / step`` with ``divide`` (ONNX Runtime: step the float32 scale), by coordinate ``mode``."""
    x = np.arange(n_out, dtype=np.float32)
    half = np.float32(0.5)
    if mode != "asymmetric":
        x = x + half
    c = x / step if divide else x * step
    if mode in ("half_pixel", "pytorch_half_pixel"):
        c = c - half
    return np.zeros_like(c) if mode == "pytorch_half_pixel" and n_out == 1 else c


def _by_scale(n_in: int, n_out: int, scale: float, mode: str, torch: bool, nearest: bool) -> np.ndarray:
    """The reference's input coordinates: torch's nearest keeps the pixels where the size is unchanged
    and halves them where it doubles, whatever the scale; else x * float(1 / scale)."""
    if torch:
        if nearest and n_out in (n_in, 2 * n_in):
            return _coords(n_out, np.float32(n_in / n_out), mode)
        return _coords(n_out, np.float32(1.0 / scale), mode)
    return _coords(n_out, np.float32(scale), mode, divide=True)


def _nearest(c: np.ndarray, rounding: str, n_in: int) -> np.ndarray:
    f = np.floor(c)
    if rounding == "floor":
        r = f
    elif rounding == "ceil":
        r = np.ceil(c)
    elif rounding == "round_prefer_ceil":
        r = np.floor(c + np.float32(0.5))
    else:  # round_prefer_floor: a tie goes down
        r = np.where(c - f == np.float32(0.5), f, np.floor(c + np.float32(0.5)))
    return np.clip(r, 0, n_in - 1).astype("int32")


def plan(shape, out, scales, method: str, mode: str, rounding, torch: bool = False):
    """None: ``resize2d`` computes this resize of an NCHW ``shape`` to the spatial sizes ``out`` by
    ``scales`` (one per spatial axis) as the reference does; else ``[(axis, source pixel of each output
    pixel)]`` for the axes to take along.  ``rounding`` is the nearest mode, one per axis or one for
    both (Resize-10 rounds up where it shrinks, down where it enlarges).  Raises ``Unmappable``."""
    if mode not in _SCALED:
        return None
    rounds = list(rounding) if isinstance(rounding, (list, tuple)) else [rounding] * len(out)
    takes, differ = [], []
    for axis, (n_in, n_out, s, rnd) in enumerate(zip(shape[2:], out, scales, rounds, strict=True), start=2):
        ref = _by_scale(n_in, n_out, float(s), mode, torch, method == "nearest_neighbor")
        tvm = _coords(n_out, np.float32(n_in) / np.float32(n_out), mode)
        if method == "nearest_neighbor":
            src = _nearest(ref, rnd, n_in)
            if not np.array_equal(src, _nearest(tvm, rnd, n_in)):
                differ.append(axis)
            if n_in != n_out or not np.array_equal(src, np.arange(n_in)):
                takes.append((axis, src))
        elif np.abs(ref - tvm).max(initial=0.0) > 1e-5 * max(n_in, 1):
            differ.append((axis, n_in, n_out, float(s)))
    if not differ:
        return None
    if method != "nearest_neighbor":
        said = ", ".join(f"{('height', 'width')[a - 2]} {i} -> {o} by {s:g}" for a, i, o, s in differ)
        raise Unmappable(f"a {method.replace('_neighbor', '')} resize by a scale whose product with the input size "
                         f"is not whole ({said}): the reference samples input coordinate x / scale, TVM's resize2d "
                         "x * in / out, which gives other values; npukit refuses it rather than study wrong values. "
                         "Give the output size instead of the scale (interpolate(size=...), Resize's sizes), or a "
                         "scale that makes it whole")  # fmt: skip
    return takes


def torch_args(node, linear: bool):
    """(input, output_size, scale_factors, align_corners) of an ``aten.upsample_nearest2d.vec``
    (input, output_size, scale_factors) or ``upsample_bilinear2d.vec`` (input, output_size,
    align_corners, scale_factors) node."""
    names = ("input", "output_size", "align_corners", "scale_factors") if linear else ("input", "output_size",
                                                                                      "scale_factors")  # fmt: skip
    got = {k: (node.args[i] if len(node.args) > i else node.kwargs.get(k)) for i, k in enumerate(names)}
    return got["input"], got["output_size"], got["scale_factors"], bool(got.get("align_corners"))


def torch_plan(shape, scale, method: str):
    """(output size, ``plan``'s answer) of torch's ``upsample_*2d.vec`` of an NCHW ``shape`` by
    ``scale_factors`` (one, or one per spatial axis): the size is floor(in * scale)."""
    shape = [int(d) for d in shape]
    scales = [float(k) for k in scale] if isinstance(scale, (list, tuple)) else [float(scale)] * (len(shape) - 2)
    size = [int(d * k) for d, k in zip(shape[2:], scales, strict=True)]
    mode = "asymmetric" if method == "nearest_neighbor" else "half_pixel"
    return size, plan(shape, size, scales, method, mode, "floor", torch=True)


def torch_linear_refusal(node, shape) -> str | None:
    """Why torch's ``upsample_bilinear2d.vec`` ``node`` of an input of ``shape`` is not TVM's
    ``resize2d`` (None: it is).  Returned, not raised: an exception's context would keep the
    importer's frames (and TVM's BlockBuilder, which logs its release) alive past the import."""
    _, size, scale, align = torch_args(node, linear=True)
    if size or align or scale is None:
        return None
    try:
        torch_plan(shape, scale, "linear")
    except Unmappable as e:
        return str(e)
    return None


def emit(relax, x, takes):
    """The ``take`` ops of ``plan``'s answer, one per axis."""
    for axis, src in takes:
        x = relax.op.take(x, relax.const(src, "int32"), axis=axis)
    return x
