"""How every tensor is stored in the generated program (no tvm): its element type, physical layout
and affine quantization, on every processor it lives on.

* The host (TVM's C) keeps the model's own dtype and axis order.  A float tensor the host stores at
  a narrower bit-width (an int8 host) stays float, rounded to that grid in place, exactly as the
  simulation rounds it (a float16 tensor stays float16: each half rounded in float and stored back
  as the nearest half, ``npk_round_to_bits_f16``).
* An accelerator stores a float model tensor at the bit-width its producer (or, for a boundary
  copy, its first consumer there) runs at: S16 / S8 / S4 / S2 with the tensor's calibrated affine
  range, F16, or F32 -- never wider than the model holds it (a float16 tensor is F16 at fp32, as the
  cost model counts it: ``cost.tables.model_width``); an integer model tensor (an int8 TFLite model's) keeps its dtype and the
  model's own scale and zero point.  Rank-4 tensors take the processor's layout (NCHW, NHWC, or
  TILED with a channel block); other ranks are row-major.

The quantization of an n-bit grid is npukit's (``quant.scheme.act_params``): levels 0 .. 2^n - 1
with an unsigned zero point; the C library stores it signed, shifted by 2^(n-1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cost.layouts import model_layouts, same_memory, semantic, tile_block
from ..cost.tables import model_width
from ..graph import OpGraph, Tensor
from ..quant.scheme import INT_BITS, act_params
from ..soc import Processor

NPK = {"fp32": "F32", "fp16": "F16", "int16": "S16", "int8": "S8", "int4": "S4", "int2": "S2"}
MODEL = {"float32": "F32", "float16": "F16", "int16": "S16", "int8": "S8", "uint8": "U8", "int32": "S32",
         "int64": "S64", "bool": "BOOL"}  # fmt: skip
CTYPE = {"F32": "float", "F16": "uint16_t", "S16": "int16_t", "S8": "int8_t", "S4": "int8_t", "S2": "int8_t",
         "S32": "int32_t", "S64": "int64_t", "U8": "uint8_t", "BOOL": "uint8_t"}  # fmt: skip
ITEMSIZE = {"F32": 4, "F16": 2, "S16": 2, "S8": 1, "S4": 1, "S2": 1, "S32": 4, "S64": 8, "U8": 1, "BOOL": 1}
INTEGER = frozenset({"S16", "S8", "S4", "S2", "S32", "S64", "U8"})
GRID = {"S16": 16, "S8": 8, "S4": 4, "S2": 2}


@dataclass(frozen=True)
class Format:
    """One stored copy of a tensor."""

    dtype: str  # F32 F16 S16 S8 S4 S2 S32 S64 U8 BOOL
    layout: str  # ROW | NCHW | NHWC | TILED (rank 4 only for the last three)
    block: int  # TILED channel block
    scale: float
    zero: int  # signed storage zero point
    shape: tuple[int, ...]  # the npk shape: (N, C, H, W) for a rank-4 spatial tensor, else the model's
    model_shape: tuple[int, ...]
    model_layout: str  # "NCHW" / "NHWC" for a rank-4 tensor, "" otherwise
    grid_bits: str = ""  # a float copy rounded in place to this bit-width's grid ("" / fp32: none)

    @property
    def spatial(self) -> bool:
        return len(self.model_shape) == 4 and bool(self.model_layout)

    @property
    def model_view_ok(self) -> bool:
        """Is the buffer row-major in the model's axis order (so model-axis ops can read it)?  So it
        is when its layout puts every element where the model's order does (``same_memory``: an
        NHWC buffer of an NCHW tensor with C = 1, or with H = W = 1)."""
        return not self.spatial or self.layout == self.model_layout or self.same_memory_as(self.model_layout, 1)

    def same_memory_as(self, layout: str, block: int) -> str:
        """Why this rank-4 buffer and one of ``layout`` hold the tensor in the same memory order
        (``cost.layouts.same_memory``), "" when they do not (or the tensor is not rank-4 spatial)."""
        return same_memory(self.shape, self.layout, layout, self.block, block) if self.spatial else ""

    @property
    def nbytes(self) -> int:
        n = math.prod(self.shape) if self.shape else 1
        if self.layout == "TILED":
            c = self.shape[1]
            n = n // max(c, 1) * (-(-c // self.block) * self.block)
        return int(n * ITEMSIZE[self.dtype])


_KEEPS_QUANT = frozenset({"clip", "max_pool2d", "reshape", "squeeze", "expand_dims", "flatten", "permute_dims",
                          "strided_slice", "split", "concat", "relu"})  # integer in, integer out, same scale


def model_quant(g: OpGraph, tid: str) -> tuple[float, int] | None:
    """(scale, zero point) of an integer model tensor: from the quantize that produces it, else a
    dequantize that reads it (per-tensor quantization only), looking through the ops that keep a
    tensor's quantization (clip, max pooling, reshapes, slices ...).  The quantize that made the
    values comes first: a reader's dequantize need not be the tensor's own grid (TVM reads an int8
    average pool as dequantize(scale 1, zero 0) -> avg_pool2d -> quantize(1, 0), the integers
    averaged as they are: a (de)quantize of scale 1 and zero 0 is taken only when nothing else says)."""
    seen, todo = set(), [tid]
    made, read = [], []  # candidates: producing quantizes, reading dequantizes (in the order met)
    while todo:
        t = todo.pop(0)
        if t in seen:
            continue
        seen.add(t)
        tt = g.tensors[t]
        if tt.producer is not None:
            p = g.ops[tt.producer]
            if p.kind == "quantize":
                made.append(p)
            elif p.kind in _KEEPS_QUANT and p.inputs and "int" in g.tensors[p.inputs[0]].dtype:
                todo.append(p.inputs[0])
        for c in g.consumers(t):
            op = g.ops[c]
            if op.kind == "dequantize" and op.inputs[0] == t:
                read.append(op)
            elif op.kind in _KEEPS_QUANT and op.inputs[0] == t:
                todo += [o for o in op.outputs if "int" in g.tensors[o].dtype]
    unit = None
    for op in made + read:
        if len(op.inputs) >= 3:
            s, z = g.consts.get(op.inputs[1]), g.consts.get(op.inputs[2])
            if s is not None and z is not None and np.size(s) == 1 and np.size(z) == 1:
                sz = float(np.ravel(s)[0]), int(np.ravel(z)[0])
                if sz != (1.0, 0):
                    return sz
                unit = unit or sz  # (1, 0): TVM's mark of integers passed through as they are, not a grid
    return unit


def grid(lo: float, hi: float, bits: str) -> tuple[float, int]:
    """(scale, signed zero) of the n-bit grid of a tensor with calibrated range [lo, hi]."""
    p = act_params(lo, hi, bits)
    return float(p[0]), int(p[1]) - 2 ** (INT_BITS[bits] - 1)


class Storage:
    """Formats of tensors for one (graph, calibration): ``host(tid)``, ``on(tid, processor, bits)``."""

    def __init__(self, g: OpGraph, ranges: dict[str, tuple[float, float]]):
        self.g = g
        self.ranges = ranges
        self.layouts = model_layouts(g)

    def _base(self, t: Tensor, dtype: str, layout: str, block: int, scale: float, zero: int, grid_bits: str = ""):
        ml = self.layouts.get(t.tid, "") if len(t.shape) == 4 else ""
        shape = semantic(t.shape, ml) if ml else tuple(t.shape)
        if not ml:
            layout = "ROW"
        return Format(dtype, layout, block, scale, zero, shape, tuple(t.shape), ml, grid_bits)

    def host(self, tid: str, bits: str = "fp32") -> Format:
        """The host's copy: the model's dtype and axis order; float values on ``bits``' grid."""
        t = self.g.tensors[tid]
        dtype = MODEL.get(t.dtype, "F32")
        scale, zero = 1.0, 0
        if dtype in INTEGER and dtype not in ("S32", "S64"):
            scale, zero = model_quant(self.g, tid) or (1.0, 0)
        ml = self.layouts.get(tid, "")
        gb = bits if (dtype in ("F32", "F16") and bits in INT_BITS or bits == "fp16" and dtype == "F32") else ""
        if gb in INT_BITS:
            scale, zero = grid(*self.ranges.get(tid, (0.0, 0.0)), gb)
        return self._base(t, dtype, ml or "ROW", 1, scale, zero, gb)

    def on(self, tid: str, p: Processor, bits: str) -> Format:
        """An accelerator's copy of tensor ``tid`` stored at ``bits``."""
        if p.host:
            return self.host(tid, bits)
        t = self.g.tensors[tid]
        layout = {"NCHW": "NCHW", "NHWC": "NHWC", "tiled": "TILED"}[p.layout]
        block = tile_block(p)
        if "float" not in t.dtype:  # an integer model tensor keeps its dtype and quantization
            dtype = MODEL.get(t.dtype, "S32")
            scale, zero = (model_quant(self.g, tid) or (1.0, 0)) if dtype in ("S16", "S8", "U8") else (1.0, 0)
            return self._base(t, dtype, layout, block, scale, zero)
        dtype = NPK[model_width(t, bits)]  # (a float16 tensor is never stored wider: the cost model's rule)
        scale, zero = 1.0, 0
        if dtype in GRID:
            scale, zero = grid(*self.ranges.get(tid, (0.0, 0.0)), bits)
        return self._base(t, dtype, layout, block, scale, zero)
