"""The quantization scheme (numpy only, no tvm).

The scheme (docs/quantization.md says the same):

* weights of conv / matmul ops: per output channel, symmetric:
  scale_c = max|w_c| / (2^(b-1) - 1), w_q = clip(round(w / scale_c), -(2^(b-1) - 1), 2^(b-1) - 1) * scale_c
  (int2 is ternary: {-1, 0, 1} * scale); biases and other constants stay in fp32 (int32 in hardware);
* activations: per tensor, affine, range [min, max] over the calibration inputs (widened to
  contain 0) -- but where the model quantizes a float tensor itself (the output of a dequantize,
  the input of a quantize, with one scale and zero point), the range of the model's own grid,
  (qmin - zero) * scale .. (qmax - zero) * scale (``model_ranges``): the values are on that grid
  whatever the data, and at 8 bits the two grids coincide; a selection's values (a top-k's) on the
  grid of the tensor it selects from;
  scale = (max - min) / (2^b - 1), zero = round(-min / scale); rounded where a
  deployment stores them: at the outputs of kernels (a fused composite, or a host op with the
  epilogue its compiler fuses into it), not between the ops inside one kernel (accumulators and
  epilogues stay wide), and not after a dequantize of an integer tensor into an integer width at
  least as wide (exact), nor after the model's output dequantize, whose float output is held in
  its own dtype whatever the op's width (the cost model's rule, ``npukit.cost.tables.own_widths``);
* fp16: round to IEEE half and back at the same places (an inf stays inf, a finite value past
  65504 becomes inf, NaN stays NaN, as IEEE half and the program's half do); fp32: untouched.

What is calibrated on the data (``calibrated_tensors``): the float tensors stored at an integer
width -- the outputs of the ops above whose values a deployment stores, and the boundary copies
converted to one (``quant.boundary.edge_bits``) -- whose range is not the model's own grid
(``model_grid``: the tensors the model quantizes itself, and the reshapes, further outputs and
selections that take their range).  A quantized model (QDQ ONNX, int8 TFLite) placed so that only
its own grids are stored calibrates nothing: ``npukit study`` prints "note: integer scales
calibrated on seeded random inputs ..." only when this set is not empty, and an export's manifest
records ``data.calibrated`` from it (``npukit build`` refuses to compare an export whose calibration
data is gone or changed only when it is true).

A calibrated range is that of the tensor's finite values: where an op's output reaches +-inf on
the calibration data (a division by zero), its integer grid spans the finite values seen and an
inf saturates to the grid's end, as the generated code's quantize saturates it (the op's row of
``study.error`` then shows the infinite error, SNR -inf dB; NaN is left out of the range too).

The width of each op is the one the cost model charges and the generated code uses
(``npukit.pipeline.widths``): a kernel member whose values never leave the kernel runs at the
kernel's anchor's width, so a layer bit-width set on it (a conv's bias add) rounds nothing, and
the cost model charges no conversion for it either; a float16 model's op under an fp32 setting
runs at fp16, and rounds nothing (its values are float16 already: the simulation runs the
model's own float16 ops, the code stores them as float16).

Error figures compare every op output and every model output with the fp32 run on the same inputs:
SNR dB = 10 log10(sum(ref^2) / sum((q - ref)^2)) (inf when identical), max abs error, top-1
agreement, and accuracy when labels are given.

* samples: the per-op figures (``study.error``) are measured on the first 64 samples of the data
  (``quant.error.PER_OP_SAMPLES``; all of them if fewer), the model-output figures
  (``study.error_dict()``: SNR, max abs error, top-1 agreement, accuracy) on every sample;
  ``error_dict()["per_op_samples"]`` and ``["samples"]`` say how many each used;
* top-1 agreement (the share of rows whose argmax agrees with fp32's) is reported for every output
  whose shape has exactly one dimension larger than 1 ([C], [1, C], [1, 1, C] ... with C > 1),
  whatever it holds, and row by row for a float [B, C] output with B > 1 and C > 1; None for any
  other shape.  It means something only where the output is class scores;
* labels (``set_data(x, y)``, an .npz's ``y``) are scored against output 0 and only where it is one
  row of class scores ([C], [1, C] ...): they are refused (a DataError) for any other output 0,
  a batched [B, C] one with B > 1 included.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..cost.tables import own_widths
from ..graph import OpGraph, dtype_bits
from ..opset import KINDS

INT_BITS = {"int2": 2, "int4": 4, "int8": 8, "int16": 16}

def quantize_weight(w: np.ndarray, bits: str, axis: int) -> np.ndarray:
    """``w`` rounded the way a ``bits`` kernel would store it (see module docstring)."""
    w = np.asarray(w, dtype=np.float32)
    if bits == "fp32":
        return w
    if bits == "fp16":
        return w.astype(np.float16).astype(np.float32)
    q, scale = integer_weight(w, bits, axis)
    return (q * scale).astype(np.float32)


def integer_weight(w: np.ndarray, bits: str, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The integers and per-output-channel scales (float32, broadcastable to ``w``) of an integer
    ``bits`` weight: w ~= q * scale (the generated code stores q; the simulation uses q * scale)."""
    w = np.asarray(w, dtype=np.float32)
    qmax = 2 ** (INT_BITS[bits] - 1) - 1
    red = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=red, keepdims=True) if red else np.abs(w)
    scale = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
    return np.clip(np.round(w / scale), -qmax, qmax), scale


def _grid(g: OpGraph, op, int_dtype: str) -> tuple[float, float] | None:
    """[lo, hi] of the float values a per-tensor (de)quantize ``op`` maps to the integers of
    ``int_dtype`` (None: per-channel, or parameters that are not constants)."""
    if len(op.inputs) < 3 or not int_dtype.startswith(("int", "uint")):
        return None
    s, z = g.consts.get(op.inputs[1]), g.consts.get(op.inputs[2])
    if s is None or z is None or np.size(s) != 1 or np.size(z) != 1:
        return None
    s, z = float(np.ravel(s)[0]), float(np.ravel(z)[0])
    info = np.iinfo(int_dtype)
    if not (s > 0 and np.isfinite(s)):
        return None
    return (info.min - z) * s, (info.max - z) * s


def model_ranges(g: OpGraph) -> dict[str, tuple[float, float]]:
    """The float tensors the model quantizes itself, with the range of its own grid: a
    dequantize's float output (the grid its integers came from; this first), a quantize's float
    input (the grid it is stored on)."""
    out: dict[str, tuple[float, float]] = {}
    for op in g.ops:
        if op.kind == "dequantize" and op.inputs:
            r = _grid(g, op, g.tensors[op.inputs[0]].dtype)
            for t in op.outputs:
                if r is not None and "float" in g.tensors[t].dtype:
                    out[t] = r
    for op in g.ops:
        if op.kind == "quantize" and op.inputs and op.outputs and "float" in g.tensors[op.inputs[0]].dtype:
            r = _grid(g, op, g.tensors[op.outputs[0]].dtype)
            if r is not None:
                out.setdefault(op.inputs[0], r)
    return out


def model_grid(g: OpGraph) -> frozenset[str]:
    """The float tensors whose integer grid is the model's own whatever the data: those the model
    quantizes itself (``model_ranges``), and what takes its range from one of them -- a relabel's
    output (a reshape's), a further output of a multi-output op, a selection's values -- the
    inheritance ``quant.error.ErrorModel`` gives the ranges.  Every other float tensor an integer
    width stores is on a range calibrated on the data (``calibrated_tensors``)."""
    grid = set(model_ranges(g))
    own = frozenset(grid)
    inputs = set(g.inputs)
    for op in g.ops:
        kind = KINDS[op.kind]
        select = kind.role == "sort" and len(op.outputs) > 1
        for k, t in enumerate(op.outputs):
            if not op.inputs or "float" not in g.tensors[t].dtype:
                continue
            # measured by the calibration itself: the simulation's rounded outputs (not a relabel's; of
            # a multi-output norm or selection, the first), the model's inputs, the model's own grids
            first = len(op.outputs) == 1 or (k == 0 and kind.role in ("norm", "sort"))
            measured = t in own or t in inputs or (not kind.relabel and first)
            if measured and not select:
                continue
            src = op.inputs[0]
            if src in grid:
                grid.add(t)
            elif "float" in g.tensors[src].dtype and src not in g.consts:
                grid.discard(t)  # (a selection's values take their input's range, calibrated or not)
    return frozenset(grid)


def stored_on_grid(g: OpGraph, rounded: frozenset[int], bits: Sequence[str], edge_bits) -> frozenset[str]:
    """The float tensors the simulation and the generated code store on an integer grid: the
    outputs of the ops in ``rounded`` (``rounded_ops``) at an integer width, and the boundary copies ``edge_bits`` (``quant.boundary.edge_bits``) rounds to one.
    Not the tensors inside a fused kernel: they are never rounded."""
    out = set()
    for i in rounded:
        if bits[i] in INT_BITS:
            out.update(t for t in g.ops[i].outputs if "float" in g.tensors[t].dtype)
    out.update(t for (_, t), b in edge_bits.items() if b in INT_BITS and "float" in g.tensors[t].dtype)
    return frozenset(out)


def calibrated_tensors(g: OpGraph, rounded: frozenset[int], bits: Sequence[str], edge_bits) -> frozenset[str]:
    """The tensors stored on an integer grid (``stored_on_grid``) whose range is calibrated on the
    data, not the model's own grid (``model_grid``): empty when the data changed nothing the
    simulation or the generated code computes, whatever the widths."""
    return stored_on_grid(g, rounded, bits, edge_bits) - model_grid(g)


def act_params(lo: float, hi: float, bits: str) -> np.ndarray:
    """The 6 fake-quantize parameters (scale, zero, qmin, qmax, a, b) of one op output."""
    if bits == "fp32":
        return np.array([1, 0, 0, 0, 0, 0], np.float32)
    if bits == "fp16":
        return np.array([1, 0, 0, 0, 0, 1], np.float32)
    n = INT_BITS[bits]
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    levels = 2**n - 1
    scale = (hi - lo) / levels if hi > lo else 1.0
    zero = round(-lo / scale)
    return np.array([scale, zero, 0, levels, 1, 0], np.float32)


def rounded_ops(g: OpGraph, kernels: Sequence[Sequence[int]], bits: Sequence[str]) -> frozenset[int]:
    """The ops whose outputs a deployment stores at the op's bit-width (see the module docstring)."""
    out: set[int] = set()
    own = own_widths(g)
    for k in kernels:
        ks = set(k)
        for i in k:
            op = g.ops[i]
            leaves = any(t in g.outputs or any(c not in ks for c in g.consumers(t)) for t in op.outputs)
            if not leaves:
                continue
            if op.kind == "dequantize" and op.inputs:
                if all((i, t) in own for t in op.outputs):
                    continue  # the model's output, in its own dtype at any width (exact)
                b = bits[i]
                if b == "fp32" or (b in INT_BITS and INT_BITS[b] >= dtype_bits(g.tensors[op.inputs[0]].dtype)):
                    continue  # an integer tensor into a width at least as wide (exact)
            out.add(i)
    return frozenset(out)
