"""Weight packing for S4 / S2 and C array literals (numpy only, deterministic text)."""

from __future__ import annotations

import re

import numpy as np

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_BITS_RANGE = {2: (-2, 1), 4: (-8, 7), 8: (-128, 127), 16: (-32768, 32767)}


def pack_weights(q: np.ndarray, bits: int) -> bytes:
    """Integer weights in C (row-major) order as the bytes the kernels read.

    bits 4: two per byte, the first value in the low nibble; bits 2: four per byte, the first in
    the lowest two bits (two's complement, so -1 is 0b11); the last byte is zero-padded.  bits 8 /
    16: plain int8 / little-endian int16.  Values must fit the signed range of ``bits`` (int2:
    [-2, 1]; npukit's ternary weights use {-1, 0, 1}).
    """
    if bits not in _BITS_RANGE:
        raise ValueError(f"pack_weights: bits must be one of 2, 4, 8, 16, got {bits!r}")
    arr = np.asarray(q)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError("pack_weights: values must be integers")
    flat = arr.astype(np.int64).ravel()
    lo, hi = _BITS_RANGE[bits]
    if flat.size and (flat.min() < lo or flat.max() > hi):
        raise ValueError(f"pack_weights: values {flat.min()}..{flat.max()} do not fit int{bits} [{lo}, {hi}]")
    if bits == 8:
        return flat.astype(np.int8).tobytes()
    if bits == 16:
        return flat.astype("<i2").tobytes()
    per = 8 // bits
    u = (flat & ((1 << bits) - 1)).astype(np.uint8)
    pad = (-u.size) % per
    u = np.concatenate([u, np.zeros(pad, np.uint8)]).reshape(-1, per)
    out = np.zeros(u.shape[0], np.uint8)
    for j in range(per):
        out |= (u[:, j] << (j * bits)).astype(np.uint8)
    return out.tobytes()


def unpack_weights(data: bytes, bits: int, count: int) -> np.ndarray:
    """Inverse of :func:`pack_weights`: ``count`` values as an int8 (int16 for bits 16) array."""
    if bits not in _BITS_RANGE:
        raise ValueError(f"unpack_weights: bits must be one of 2, 4, 8, 16, got {bits!r}")
    raw = np.frombuffer(bytes(data), np.uint8)
    if bits == 8:
        return raw[:count].view(np.int8).copy()
    if bits == 16:
        return np.frombuffer(bytes(data), "<i2")[:count].astype(np.int16)
    per = 8 // bits
    vals = np.stack([(raw >> (j * bits)) & ((1 << bits) - 1) for j in range(per)], axis=1).ravel()[:count]
    vals = vals.astype(np.int16)
    vals[vals >= 1 << (bits - 1)] -= 1 << bits
    return vals.astype(np.int8)


_INT_TYPES = {
    "int8_t": (-(1 << 7), (1 << 7) - 1),
    "uint8_t": (0, (1 << 8) - 1),
    "int16_t": (-(1 << 15), (1 << 15) - 1),
    "uint16_t": (0, (1 << 16) - 1),
    "int32_t": (-(1 << 31), (1 << 31) - 1),
    "uint32_t": (0, (1 << 32) - 1),
    "int64_t": (-(1 << 63), (1 << 63) - 1),
    "uint64_t": (0, (1 << 64) - 1),
}


def _float_literal(v: float) -> str:
    f = float(np.float32(v))
    if f != f:
        return "NAN"
    if f in (float("inf"), float("-inf")):
        return "INFINITY" if f > 0 else "-INFINITY"
    s = f"{f:.9g}"
    if "e" not in s and "." not in s:
        s += ".0"
    return s + "f"


def _int_literal(v: int, ctype: str) -> str:
    if ctype == "int64_t" and v == -(1 << 63):
        return "(-9223372036854775807 - 1)"
    if ctype == "int32_t" and v == -(1 << 31):
        return "(-2147483647 - 1)"
    if ctype == "uint64_t" and v > (1 << 63) - 1:
        return f"{v}u"
    if ctype == "uint32_t" and v > (1 << 31) - 1:
        return f"{v}u"
    return str(v)


def c_array(name: str, ctype: str, values, per_line: int | None = None) -> str:
    """A C array definition ``<ctype> <name>[<n>] = { ... };`` ending in a newline.

    ``ctype`` is the element type, optionally with qualifiers before it (``"static const int8_t"``,
    ``"const float"``); the element type (its last word) is one of float, int8_t, uint8_t, int16_t,
    uint16_t, int32_t, uint32_t, int64_t, uint64_t.  ``values`` is any array-like (flattened in C
    order).  Floats are written with 9 significant digits and an ``f`` suffix, which a C compiler
    reads back as the same float32 (non-finite values become INFINITY / NAN, so include
    <math.h>); integers must fit the type (ValueError otherwise).  ``per_line`` values per line
    (default 16 for integers, 8 for floats).  The same input always gives the same text.
    """
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"c_array: {name!r} is not a C identifier")
    words = str(ctype).split()
    if not words:
        raise ValueError("c_array: empty ctype")
    base = words[-1]
    if base != "float" and base not in _INT_TYPES:
        raise ValueError(f"c_array: element type {base!r} is not one of float, {', '.join(_INT_TYPES)}")
    arr = np.asarray(values)
    flat = arr.ravel()
    if flat.size == 0:
        raise ValueError(f"c_array: {name}: no values (C has no zero-length arrays)")
    if base == "float":  # each distinct float32 bit pattern formatted once (quantized weights repeat a lot)
        bits, inv = np.unique(flat.astype(np.float32).view(np.uint32), return_inverse=True)
        lits = np.array([_float_literal(v) for v in bits.view(np.float32).astype(np.float64)], dtype=object)
        items = lits[inv.ravel()].tolist()
        per = per_line or 8
    else:
        if arr.dtype == np.bool_:
            flat = flat.astype(np.int64)
        elif arr.dtype == object:
            flat = np.array([int(v) for v in flat], dtype=object)
        elif not np.issubdtype(arr.dtype, np.integer):
            if not np.all(np.isfinite(flat)) or not np.all(np.mod(flat, 1) == 0):
                raise ValueError(f"c_array: {name}: {base} values must be integers")
        lo, hi = _INT_TYPES[base]
        small, big = int(flat.min()), int(flat.max())  # exact for every integer dtype
        if small < lo or big > hi:
            raise ValueError(f"c_array: {name}: value {small if small < lo else big} does not fit {base} [{lo}, {hi}]")
        ints = flat.astype(np.uint64 if base == "uint64_t" else np.int64).tolist()  # in range: exact
        items = list(map(str, ints))
        if base in ("int32_t", "int64_t", "uint32_t", "uint64_t"):  # the few literals C reads otherwise
            items = [_int_literal(v, base) for v in ints]
        per = per_line or 16
    if per < 1:
        raise ValueError("c_array: per_line must be >= 1")
    lines = ["    " + ", ".join(items[i : i + per]) + "," for i in range(0, len(items), per)]
    return f"{' '.join(words)} {name}[{len(items)}] = {{\n" + "\n".join(lines) + "\n};\n"
