"""Fixed-point parameters for the kernel libraries, computed exactly as their C expects (numpy only).

npk_ref (every vendor prefix) requantizes an integer accumulator with one rounding::

    q = round(acc * multiplier * 2**(shift - 31))      # half away from zero, exact 96-bit product

(:func:`apply_multiplier` is the bit-exact Python twin of ``npk_apply_multiplier``).  CMSIS-NN
(:func:`cmsis_requantize`) rounds twice, as TensorFlow Lite does: a doubling high multiply that
rounds half up, then a right shift rounding half away from zero.  Both take (multiplier, shift)
from :func:`quantize_multiplier`, TensorFlow Lite's ``QuantizeMultiplier``.
"""

from __future__ import annotations

import math

import numpy as np

Q31 = 1 << 31


def quantize_multiplier(real: float) -> tuple[int, int]:
    """``(multiplier, shift)`` with ``real ~= multiplier * 2**(shift - 31)``.

    ``multiplier`` is in ``[2**30, 2**31)`` (Q31 of the mantissa in [0.5, 1), rounded half away
    from zero) and ``shift`` is the power-of-two exponent (positive = left shift), as TensorFlow
    Lite / CMSIS-NN compute it.  ``real == 0`` gives ``(0, 0)``; a real so small that the shift
    would be below -31 flushes to ``(0, 0)``; one of ``2**30`` or more saturates to
    ``(2**31 - 1, 30)``.  For a conv / matmul output channel, ``real = in_scale * w_scale[c] /
    out_scale``.  Raises ValueError for a negative, NaN or infinite ``real``.
    """
    real = float(real)
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"quantize_multiplier: real multiplier must be finite and >= 0, got {real!r}")
    if real == 0.0:
        return 0, 0
    mantissa, exponent = math.frexp(real)  # real = mantissa * 2**exponent, mantissa in [0.5, 1)
    q = math.floor(mantissa * Q31 + 0.5)  # exact in double: mantissa has 53 bits
    if q == Q31:
        q //= 2
        exponent += 1
    if exponent < -31:
        return 0, 0
    if exponent > 30:
        return Q31 - 1, 30
    return int(q), int(exponent)


cmsis_quantize_multiplier = quantize_multiplier  # CMSIS-NN / TFLite use the very same (multiplier, shift)


def quantize_multipliers(reals) -> tuple[np.ndarray, np.ndarray]:
    """:func:`quantize_multiplier` of every entry: ``(multipliers, shifts)`` as int32 arrays."""
    pairs = [quantize_multiplier(r) for r in np.asarray(reals, dtype=np.float64).ravel()]
    mult = np.array([m for m, _ in pairs], dtype=np.int32)
    shift = np.array([s for _, s in pairs], dtype=np.int32)
    return mult, shift


def _apply_one(acc: int, multiplier: int, shift: int) -> int:
    if acc == 0 or multiplier <= 0 or shift < -96:
        return 0
    mag = abs(acc) * multiplier
    r = 31 - shift
    q = (mag + (1 << (r - 1))) >> r if r > 0 else mag << -r
    q = min(q, (1 << 63) - 1)
    return q if acc > 0 else -q


def apply_multiplier(acc, multiplier, shift):
    """``round(acc * multiplier * 2**(shift - 31))`` rounded half away from zero and saturated to
    int64: the exact twin of npk_ref's ``npk_apply_multiplier``.  Scalars give an int; arrays
    broadcast and give an int64 array."""
    if np.ndim(acc) == 0 and np.ndim(multiplier) == 0 and np.ndim(shift) == 0:
        return _apply_one(int(acc), int(multiplier), int(shift))
    a, m, s = np.broadcast_arrays(np.asarray(acc), np.asarray(multiplier), np.asarray(shift))
    out = [_apply_one(int(x), int(y), int(z)) for x, y, z in zip(a.ravel(), m.ravel(), s.ravel())]
    return np.array(out, dtype=np.int64).reshape(a.shape)


# ---------------------------------------------------------------------------------------------
# CMSIS-NN / TensorFlow Lite


def _wrap32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _high_mul_nosat(a: int, b: int) -> int:
    return (a * b + (1 << 30)) >> 31  # Python >> floors


def _div_pot(x: int, e: int) -> int:
    if e <= 0:
        return x
    e = min(e, 31)
    mask = (1 << e) - 1
    rem = x & mask
    res = x >> e
    threshold = (mask >> 1) + (1 if res < 0 else 0)
    return res + (1 if rem > threshold else 0)


def _cmsis_one(val: int, multiplier: int, shift: int) -> int:
    left, right = (shift, 0) if shift > 0 else (0, -shift)
    return _div_pot(_high_mul_nosat(_wrap32(val << left), multiplier), right)


def _cmsis_single(val: int, multiplier: int, shift: int) -> int:
    total = 31 - shift
    return ((val * multiplier >> (total - 1)) + 1) >> 1  # Python >> floors: one rounding, half up


def cmsis_requantize(val, multiplier, shift, single_rounding: bool = False):
    """CMSIS-NN's ``arm_nn_requantize``, bit-exact: scalars or arrays.  Default double rounding (a
    doubling high multiply rounding half up, then a right shift rounding half away from zero);
    ``single_rounding``: CMSIS-NN built with ``CMSIS_NN_USE_SINGLE_ROUNDING`` (one rounding, half
    up, of ``val * multiplier * 2**(shift - 31)``)."""
    one = _cmsis_single if single_rounding else _cmsis_one
    if np.ndim(val) == 0 and np.ndim(multiplier) == 0 and np.ndim(shift) == 0:
        return one(int(val), int(multiplier), int(shift))
    a, m, s = np.broadcast_arrays(np.asarray(val), np.asarray(multiplier), np.asarray(shift))
    out = [one(int(x), int(y), int(z)) for x, y, z in zip(a.ravel(), m.ravel(), s.ravel())]
    return np.array(out, dtype=np.int64).reshape(a.shape)


def cmsis_softmax_params(input_scale: float, beta: float = 1.0) -> tuple[int, int, int]:
    """``(mult, shift, diff_min)`` for ``arm_softmax_s8`` from the input scale, as TensorFlow Lite
    prepares its int8 softmax (5 integer bits for the scaled differences):
    ``mult * 2**(shift - 31) = beta * input_scale * 2**26`` (capped at 2**31 - 1, shift >= 0) and
    ``diff_min = -floor(31 * 2**26 / 2**shift)``.  The output is int8 with scale 1/256, zero -128."""
    real = min(float(beta) * float(input_scale) * (1 << 26), float(Q31 - 1))
    if not real >= 1.0:
        raise ValueError(f"cmsis_softmax_params: beta * input_scale = {beta * input_scale!r} is too small "
                         "(needs >= 2**-26)")  # fmt: skip
    mult, shift = quantize_multiplier(real)
    radius = math.floor(((1 << 5) - 1) * float(1 << 26) / float(1 << shift))
    return mult, shift, -radius


def cmsis_add_params(scale_1: float, scale_2: float, scale_out: float, left_shift: int = 20) -> dict[str, int]:
    """Multipliers and shifts of ``arm_elementwise_add_s8`` (TensorFlow Lite's int8 ADD): both
    inputs are rescaled to twice the larger input scale after a ``left_shift`` (20 for int8), the
    sum to the output scale.  Keys: input_1_mult, input_1_shift, input_2_mult, input_2_shift,
    left_shift, out_mult, out_shift (offsets are -zero points / the output zero point)."""
    twice_max = 2.0 * max(float(scale_1), float(scale_2))
    m1, s1 = quantize_multiplier(float(scale_1) / twice_max)
    m2, s2 = quantize_multiplier(float(scale_2) / twice_max)
    mo, so = quantize_multiplier(twice_max / ((1 << left_shift) * float(scale_out)))
    return {"input_1_mult": m1, "input_1_shift": s1, "input_2_mult": m2, "input_2_shift": s2,
            "left_shift": left_shift, "out_mult": mo, "out_shift": so}  # fmt: skip


def cmsis_mul_params(scale_1: float, scale_2: float, scale_out: float) -> tuple[int, int]:
    """``(out_mult, out_shift)`` of ``arm_elementwise_mul_s8``: scale_1 * scale_2 / scale_out."""
    return quantize_multiplier(float(scale_1) * float(scale_2) / float(scale_out))


# ---------------------------------------------------------------------------------------------
# weights and biases of the integer conv / matmul paths

_WEIGHT_BITS = {"int2": 2, "int4": 4, "int8": 8, "int16": 16, 2: 2, 4: 4, 8: 8, 16: 16}


def quantize_weights(w, bits, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """``(q, scale)``: integer weights and their per-output-channel scales, by npukit's scheme
    (the same arithmetic as ``npukit.quant.quantize_weight``, so ``q * scale`` is exactly the
    simulation's fake-quantized weight): ``scale[c] = max|w_c| / qmax`` in float32 (1 for an
    all-zero channel), ``q = clip(round(w / scale), -qmax, qmax)`` with numpy's round, ``qmax =
    2**(bits-1) - 1`` (int2: ternary).  ``bits``: 2, 4, 8, 16 or "int2" ... "int16"; ``axis``: the
    output-channel axis (0 for OHWI / OIHW conv weights, the N axis of matmul weights).
    ``q`` is int8 (int16 for 16 bits) in ``w``'s shape, ``scale`` float32 of length
    ``w.shape[axis]``."""
    if bits not in _WEIGHT_BITS:
        raise ValueError(f"quantize_weights: bits must be one of 2, 4, 8, 16 (or 'int2' ... 'int16'), got {bits!r}")
    n = _WEIGHT_BITS[bits]
    w = np.asarray(w, dtype=np.float32)
    axis = axis % w.ndim if w.ndim else 0
    qmax = 2 ** (n - 1) - 1
    red = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=red, keepdims=True) if red else np.abs(w)
    scale = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
    q = np.clip(np.round(w / scale), -qmax, qmax).astype(np.int16 if n == 16 else np.int8)
    return q, scale.reshape(-1) if w.ndim else scale


BIAS_SHIFT_MAX = 24  # npk_ref_internal.h's NPK__BIAS_SHIFT_MAX


def bias_shift(bias, in_scale: float, w_scale) -> int:
    """The largest ``bias_shift`` (at most ``BIAS_SHIFT_MAX``) whose ``quantize_bias`` fits int32
    without saturating: the finest grid an int32 bias can have (0 when none can)."""
    b = np.abs(np.asarray(bias, dtype=np.float64)).ravel()
    y = b / (np.float64(in_scale) * np.asarray(w_scale, dtype=np.float64)).ravel()
    top = float(np.max(y)) if y.size else 0.0
    if not np.isfinite(top):
        return 0
    k = BIAS_SHIFT_MAX
    while k > 0 and np.floor(top * 2.0**k + 0.5) > 2.0**31 - 1:
        k -= 1
    return k


def quantize_bias(bias, in_scale: float, w_scale, wide: bool = False, shift: int = 0) -> np.ndarray:
    """Integer bias of an integer conv / matmul: ``round(bias * 2^shift / (in_scale * w_scale[c]))``
    in float64, half away from zero, saturated to int32 (int64 with ``wide``, the S16 paths);
    ``shift`` is the kernel's ``bias_shift``.  For activation x activation matmul pass
    ``w_scale = b.scale``."""
    b = np.asarray(bias, dtype=np.float64)
    y = b * np.float64(2.0**shift) / (np.float64(in_scale) * np.asarray(w_scale, dtype=np.float64))
    r = np.where(np.abs(y - np.trunc(y)) == 0.5, np.trunc(y) + np.sign(y), np.round(y))
    lo, hi = (-(2.0**63), 2.0**63 - 1024) if wide else (-(2.0**31), 2.0**31 - 1)  # hi: largest double below int64 max
    return np.clip(r, lo, hi).astype(np.int64 if wide else np.int32)
