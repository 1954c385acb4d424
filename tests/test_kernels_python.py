"""The kernel libraries' Python helpers: (multiplier, shift) round trips and their exact C twin,
S4 / S2 weight packing, and C array literals read back by a real compiler."""

from __future__ import annotations

import ctypes
import math
import subprocess

import numpy as np
import pytest
from kernels_lib import lib

from npukit.codegen.kernels import (
    apply_multiplier,
    bias_shift,
    c_array,
    pack_weights,
    quantize_bias,
    quantize_multiplier,
    quantize_multipliers,
    quantize_weights,
    unpack_weights,
)


def test_quantize_multiplier_round_trip():
    rng = np.random.default_rng(0)
    reals = np.concatenate([10.0 ** rng.uniform(-9, 9, 2000), [0.5, 1.0, 0.75, 2.0**-31, 1e-3, 123.456]])
    for r in reals:
        m, s = quantize_multiplier(r)
        assert 2**30 <= m < 2**31 and -31 <= s <= 30
        assert abs(m * 2.0 ** (s - 31) - r) <= r * 2.0**-31
    assert quantize_multiplier(0.5) == (2**30, 0)
    assert quantize_multiplier(1.0) == (2**30, 1)
    assert quantize_multiplier(0.75) == (3 * 2**29, 0)
    assert quantize_multiplier(1 - 2.0**-40) == (2**30, 1)  # the mantissa rounds up to 1
    assert quantize_multiplier(0.0) == (0, 0)
    assert quantize_multiplier(1e-12) == (0, 0)  # shift below -31 flushes to zero
    assert quantize_multiplier(2.0**40) == (2**31 - 1, 30)
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            quantize_multiplier(bad)
    m, s = quantize_multipliers([[0.5, 0.25], [0.0, 3.0]])
    assert m.dtype == np.int32 and m.tolist() == [2**30, 2**30, 0, 3 * 2**29] and s.tolist() == [0, -1, 0, 2]


def c_apply(acc, m, s):
    f = lib().npk_apply_multiplier
    f.restype = ctypes.c_int64
    f.argtypes = [ctypes.c_int64, ctypes.c_int32, ctypes.c_int32]
    return f(acc, m, s)


def test_apply_multiplier_python_and_c_agree_exactly():
    rng = np.random.default_rng(1)
    accs = [0, 1, -1, 2, -2, 3, -3, 2**31 - 1, -(2**31), 2**47 + 12345, -(2**47) - 7, 2**63 - 1, -(2**63) + 1, -(2**63)]
    accs += [int(v) for v in rng.integers(-(2**62), 2**62, 300)] + [int(v) for v in rng.integers(-5000, 5000, 300)]
    mults = [0, 1, 2**30, 2**31 - 1, 1518500250] + [int(v) for v in rng.integers(2**30, 2**31, 5)]
    shifts = [-97, -96, -63, -40, -31, -12, -1, 0, 1, 7, 30, 31, 40, 62]
    for acc in accs:
        for m in mults:
            for s in shifts:
                assert apply_multiplier(acc, m, s) == c_apply(acc, m, s), (acc, m, s)
    # ties round half away from zero
    assert apply_multiplier(3, 2**30, 0) == 2 and apply_multiplier(-3, 2**30, 0) == -2
    assert apply_multiplier(5, 2**30, -1) == 1 and apply_multiplier(6, 2**30, -1) == 2  # 1.25 -> 1, 1.5 -> 2
    # arrays broadcast
    np.testing.assert_array_equal(apply_multiplier(np.array([[4, -4]]), np.array([2**30]), 0), [[2, -2]])


def test_multiplier_reproduces_the_real_scale():
    rng = np.random.default_rng(2)
    for _ in range(500):
        real = 10.0 ** rng.uniform(-6, 1)
        acc = int(rng.integers(-(2**40), 2**40))
        m, s = quantize_multiplier(real)
        assert abs(apply_multiplier(acc, m, s) - acc * real) <= 0.5 + abs(acc) * real * 2.0**-30


def test_pack_weights_layout_and_round_trip():
    assert pack_weights(np.array([1, -1]), 4) == bytes([0xF1])
    assert pack_weights(np.array([1, -1, 0, -2]), 2) == bytes([0b10_00_11_01])
    assert pack_weights(np.array([-8, 7, 3]), 4) == bytes([0x78, 0x03])  # last byte zero padded
    assert pack_weights(np.array([[1, 0], [-1, 1]]), 2) == bytes([0b01_11_00_01])  # C order
    assert pack_weights(np.array([-2, 300]), 16) == bytes([0xFE, 0xFF, 0x2C, 0x01])
    rng = np.random.default_rng(3)
    for bits, lo, hi in [(2, -2, 1), (4, -8, 7), (8, -128, 127), (16, -32768, 32767)]:
        for n in (1, 2, 3, 5, 64, 101):
            q = rng.integers(lo, hi + 1, n)
            data = pack_weights(q, bits)
            assert len(data) == -(-n * bits // 8)
            np.testing.assert_array_equal(unpack_weights(data, bits, n), q)
    with pytest.raises(ValueError):
        pack_weights(np.array([2]), 2)
    with pytest.raises(ValueError):
        pack_weights(np.array([0.5]), 4)
    with pytest.raises(ValueError):
        pack_weights(np.array([1]), 3)


def test_packed_weights_are_what_the_kernels_read():
    """S4 / S2 weights packed in Python, unpacked by the C conv: a 1x1 conv that copies them."""
    from kernels_lib import DT, Conv2dParams, T, ok, ptr

    for dtype, bits, lo, hi in [("s4", 4, -8, 7), ("s2", 2, -2, 1)]:
        rng = np.random.default_rng(bits)
        oc = 13
        wq = rng.integers(lo, hi + 1, (oc, 1, 1, 1))
        x = T((1, 1, 1, 1), dtype, scale=1.0).set_raw(np.ones((1, 1, 1, 1)))
        out = T((1, oc, 1, 1), dtype, scale=1.0)
        w = np.frombuffer(pack_weights(wq, bits), np.uint8).copy()
        m, s = np.full(oc, 2**30, np.int32), np.ones(oc, np.int32)  # real multiplier 1
        p = Conv2dParams(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, DT[dtype], ptr(w), None, ptr(m), ptr(s))
        ok("conv2d", x.p, out.p, ctypes.byref(p))
        np.testing.assert_array_equal(out.raw().ravel(), wq.ravel())


def test_c_array_reads_back_exactly(tmp_path):
    rng = np.random.default_rng(4)
    f32 = np.concatenate([
        rng.standard_normal(50).astype(np.float32) * np.float32(10.0) ** rng.integers(-30, 30, 50).astype(np.float32),
        np.array([0.0, -0.0, 1.0, -1.5, 3.4028235e38, 1.17549435e-38, 1.4e-45, 2.0**-130, 16777217.0, 0.1], np.float32),
    ]).astype(np.float32)  # fmt: skip
    arrays = {
        "af": ("static const float", f32),
        "a8": ("const int8_t", np.array([-128, 127, 0, -1], np.int64)),
        "au8": ("uint8_t", np.array([0, 255, 17])),
        "a16": ("int16_t", np.array([-32768, 32767, 5])),
        "a32": ("int32_t", np.array([-(2**31), 2**31 - 1, -7])),
        "au32": ("uint32_t", np.array([2**32 - 1, 0])),
        "a64": ("int64_t", np.array([-(2**63), 2**63 - 1, 3], np.int64)),
        "au64": ("uint64_t", np.array([2**64 - 1, 1], np.uint64)),
        "ab": ("uint8_t", np.array([True, False])),
    }
    src = ["#include <stdint.h>", "#include <stdio.h>", "#include <math.h>"]
    src += [c_array(name, ctype, vals, per_line=7) for name, (ctype, vals) in arrays.items()]
    src.append("int main(void) {")
    src += [f"    fwrite({name}, sizeof({name}), 1, stdout);" for name in arrays]
    src.append("    return 0;\n}\n")
    (tmp_path / "a.c").write_text("\n".join(src))
    subprocess.run(
        ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "a.c", "-o", "a"], cwd=tmp_path, check=True
    )
    got = subprocess.run([str(tmp_path / "a")], capture_output=True, check=True).stdout
    want = b"".join(np.asarray(v).astype(dt).tobytes() for (_, v), dt in zip(
        arrays.values(), [np.float32, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64, np.uint8]))  # fmt: skip
    assert got == want
    assert c_array("x", "float", f32) == c_array("x", "float", f32.copy())  # deterministic
    text = c_array("w", "int8_t", np.arange(20) - 10)
    assert text.startswith("int8_t w[20] = {\n    -10, -9,") and text.endswith("\n};\n")


def test_c_array_errors():
    with pytest.raises(ValueError):
        c_array("1x", "float", [1.0])
    with pytest.raises(ValueError):
        c_array("x", "double", [1.0])
    with pytest.raises(ValueError):
        c_array("x", "int8_t", [128])
    with pytest.raises(ValueError):
        c_array("x", "int32_t", [0.5])
    with pytest.raises(ValueError):
        c_array("x", "float", [])
    assert "INFINITY, -INFINITY, NAN" in c_array("x", "float", [np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("bits", ["int2", "int4", "int8", "int16"])
def test_quantize_weights_is_the_simulation_scheme(bits):
    from npukit.quant import quantize_weight

    rng = np.random.default_rng(len(bits))
    w = rng.standard_normal((6, 3, 3, 4)).astype(np.float32)
    w[2] = 0.0  # an all-zero channel keeps scale 1
    for axis in (0, 3):
        q, scale = quantize_weights(w, bits, axis)
        shape = [1] * 4
        shape[axis] = -1
        fake = (q.astype(np.float32) * scale.reshape(shape)).astype(np.float32)
        np.testing.assert_array_equal(fake, quantize_weight(w, bits, axis))
        qmax = 2 ** (int(bits[3:]) - 1) - 1
        assert np.abs(q).max() <= qmax and scale.shape == (w.shape[axis],)
    assert set(np.unique(quantize_weights(w, 2, 0)[0])) <= {-1, 0, 1}
    with pytest.raises(ValueError):
        quantize_weights(w, 3, 0)


def test_quantize_bias_rounding_and_saturation():
    np.testing.assert_array_equal(
        quantize_bias([1.5, -2.5, 0.49, 1e12, -1e12], 0.5, 1.0), [3, -5, 1, 2**31 - 1, -(2**31)]
    )
    b = quantize_bias([1e30, 3.0], 1.0, [1.0, 0.25], wide=True)
    assert b.dtype == np.int64 and b[1] == 12 and b[0] > 2**62
    np.testing.assert_array_equal(quantize_bias([1.5, -0.3], 0.5, 1.0, shift=3), [24, -5])  # -4.8 -> -5


def test_bias_shift_is_the_finest_grid_that_fits_int32():
    assert bias_shift([0.3, -0.2], 0.05, [0.1, 0.2]) == 24  # 60 * 2^24 < 2^31
    k = bias_shift([-1000.0, 1.0], 0.01, [0.01, 1.0])  # 1e7 steps: 2^7 more fit, not 2^8
    assert k == 7 and quantize_bias([-1000.0], 0.01, [0.01], shift=k)[0] == -1_280_000_000
    assert bias_shift([1e12], 1.0, [1.0]) == 0 and bias_shift([0.0], 1.0, [1.0]) == 24


def test_integer_conv_from_the_helpers_matches_the_fake_quantized_float_conv():
    """The exporter's recipe end to end: quantize_weights, quantize_bias, quantize_multipliers,
    pack_weights -> npk_conv2d, within 1 LSB of the float conv on the simulation's values."""
    from kernels_lib import DT, Conv2dParams, T, ok, ptr, quantize

    from npukit.quant import act_params, quantize_weight

    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 2, (1, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)  # OIHW, as models carry it
    bias = rng.uniform(-0.3, 0.3, 5).astype(np.float32)
    for bits, dt in [("int8", "s8"), ("int4", "s4"), ("int2", "s2")]:
        n = int(bits[3:])
        s_in, z_in = act_params(float(x.min()), float(x.max()), bits)[:2]
        q_in = np.clip(np.round(x / s_in) + z_in, 0, 2**n - 1) - 2 ** (n - 1)  # npukit's levels, stored signed
        xin = (q_in + 2 ** (n - 1) - z_in) * s_in
        wf = quantize_weight(w, bits, 0).astype(np.float64)
        xp = np.pad(xin.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        ref = sum(
            np.einsum("nchw,oc->nohw", xp[:, :, i : i + 6, j : j + 6], wf[:, :, i, j])
            for i in range(3)
            for j in range(3)
        )
        ref = ref + bias.astype(np.float64)[None, :, None, None]
        s_out, z_out = act_params(float(ref.min()), float(ref.max()), bits)[:2]
        q, ws = quantize_weights(np.transpose(w, (0, 2, 3, 1)), bits, 0)  # OHWI
        packed = np.frombuffer(pack_weights(q, n), np.uint8).copy()
        k = bias_shift(bias, float(np.float32(s_in)), ws) if n < 8 else 0  # the exporter's rule
        bq = quantize_bias(bias, float(np.float32(s_in)), ws, shift=k)
        m, s = quantize_multipliers(np.float64(np.float32(s_in)) * ws / np.float64(np.float32(s_out)))
        tin = T(x.shape, dt, "nhwc", scale=s_in, zero=int(z_in) - 2 ** (n - 1)).set_raw(q_in)
        out = T(ref.shape, dt, "tiled", scale=s_out, zero=int(z_out) - 2 ** (n - 1))
        p = Conv2dParams(1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, DT[dt], ptr(packed), ptr(bq), ptr(m), ptr(s))
        p.bias_shift = k
        ok("conv2d", tin.p, out.p, ctypes.byref(p))
        want = quantize(ref, out.scale, out.zero, dt)
        assert np.abs(out.raw().astype(np.int64) - want).max() <= 1, bits


def test_c_array_range_checks_do_not_wrap():
    for ctype, values in [("int64_t", np.array([2**64 - 1], np.uint64)), ("int64_t", [2**63]), ("int64_t", [1e20]),
                          ("uint8_t", [-1]), ("int16_t", np.array([40000], np.int32))]:  # fmt: skip
        with pytest.raises(ValueError):
            c_array("x", ctype, values)
    assert "18446744073709551615u" in c_array("x", "uint64_t", np.array([2**64 - 1], np.uint64))
    assert "(-9223372036854775807 - 1)" in c_array("x", "int64_t", [-(2**63)])
    assert "    1, 2,\n    3," in c_array("x", "int32_t", [1.0, 2.0, 3.0], per_line=2)
