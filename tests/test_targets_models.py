"""Each background system on its own chip (issue 12, code generation part) and fast regeneration
(issue 11): the profile's build target and budgets, Cortex-M7 firmware with CMSIS-NN calls on the
emulated MPS2 AN500 board, riscv-accel at int8 / int4 / int2 under qemu-riscv64, the other profiles
under qemu-aarch64, the memory fit against ``size``, regeneration touching only what an edit
changed, and the memory plan.  Emulator runs are in the slow tier; a missing toolchain skips
locally and fails in CI (``conftest.missing_tool``)."""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
import warnings

import numpy as np
import pytest
from conftest import DIGITS_INT8, DIGITS_ONNX, MOBILENET, SAMPLES, missing_tool

import npukit
from npukit import pipeline
from npukit.codegen import memplan
from npukit.codegen.fit import MemoryBudgetWarning
from npukit.codegen.kernels import cmsis_nn_files, cmsis_requantize, quantize_multiplier
from npukit.codegen.lower_cmsis import conv_buffer_size
from npukit.codegen.memfit import parse_size_berkeley
from npukit.codegen.targets import available, get_target
from npukit.errors import ProfileError
from npukit.soc import bundled

TARGET_OF = {"cortex-m7-cmsis-nn": "cortex-m7-mps2", "riscv-accel": "riscv64-linux", "arm-dsp-dla": "aarch64-linux",
             "vsi-npu": "aarch64-linux", "hexagon-like": "aarch64-linux", "tda4vm-like": "aarch64-linux",
             "ethos-u55-256": "aarch64-linux"}  # fmt: skip


def need(target: str) -> None:
    ok, why = available(target)
    if not ok:
        missing_tool(why)


# ---------------------------------------------------------------------------------------------
# the profile names its target and budgets


def test_bundled_profiles_name_their_target_and_budgets():
    assert sorted(TARGET_OF) == sorted(bundled())
    for name, target in TARGET_OF.items():
        soc = npukit.load_soc(name)
        assert soc.target == target, name
        assert soc.flash_bytes > 0 and soc.sram_bytes > 0, name
    cm = npukit.load_soc("cortex-m7-cmsis-nn")
    assert (cm.flash_bytes, cm.sram_bytes) == (2 * 1024 * 1024, 512 * 1024)  # STM32H743: 2 MB flash, 512 KB AXI SRAM
    assert cm.processor("cmsis_nn").kernel_api == "cmsis-nn" and cm.processor("m7").kernel_api == "npukit"


def test_target_and_kernel_api_are_validated():
    soc = npukit.load_soc("arm-dsp-dla")
    with pytest.raises(ProfileError, match=r"target: must be one of 'aarch64-linux', 'cortex-m7-mps2', 'host', "
                                           r"'riscv64-linux', got 'cortex-m4'"):  # fmt: skip
        soc.with_changes({"target": "cortex-m4"})
    with pytest.raises(ProfileError, match=r"processors\.dla\.kernel_api: must be one of 'npukit', 'cmsis-nn'"):
        soc.with_changes({"processors.dla.kernel_api": "tflm"})
    with pytest.raises(ProfileError, match=r"sram_bytes: must be a positive number"):
        soc.with_changes({"sram_bytes": 0})


def test_the_export_builds_for_the_profiles_target(study_of):
    p = study_of(DIGITS_ONNX, "riscv-accel").project
    assert p.target == "riscv64-linux" and p.manifest["target"] == "riscv64-linux"
    assert "TARGET_CC = riscv64-linux-gnu-gcc" in p.files["Makefile"]
    fw = study_of(DIGITS_INT8, "cortex-m7-cmsis-nn").project.files
    assert "TARGET_CC = arm-none-eabi-gcc" in fw["Makefile"] and "cortex_m7/mps2_an500.ld" in fw
    assert '__attribute__((section(".rodata.npk_weights")' in fw["src/weights.c"]
    assert 'section(".bss.npk_arena")' in fw["src/model.c"]


# ---------------------------------------------------------------------------------------------
# CMSIS-NN calls


def test_cmsis_nn_processor_calls_the_public_api(study_of):
    files = study_of(MOBILENET, "cortex-m7-cmsis-nn").code
    src = files["src/partitions_m7_nn.c"]
    assert '#include "arm_nnfunctions.h"' in src
    for kernel in ("arm_convolve_wrapper_s8(", "arm_depthwise_conv_wrapper_s8("):
        assert kernel in src
    for struct in ("cmsis_nn_context ", "const cmsis_nn_dims ", "const cmsis_nn_conv_params ", "const cmsis_nn_dw_conv_params ",
                   "const cmsis_nn_per_channel_quant_params "):  # fmt: skip
        assert struct in src
    assert src.count("arm_convolve_wrapper_s8(&") == 15 and src.count("arm_depthwise_conv_wrapper_s8(&") == 13
    # every scratch buffer is in the arena, sized by the reference get_buffer_size and checked at run time
    assert re.search(r"const cmsis_nn_dims in_dims(_\d+)? = \{\.n = 1, \.h = 48, \.w = 48, \.c = 8\};", src)
    ctx = re.findall(r"cmsis_nn_context \w+ = \{\.buf = \(void \*\)\(arena \+ (\d+)\), \.size = (\d+)\};", src)
    arena = pipeline.code(npukit.Study(MOBILENET, "cortex-m7-cmsis-nn").result).arena_bytes
    assert ctx and all(int(off) + int(size) <= arena for off, size in ctx)
    assert str(conv_buffer_size(8, 3, 3)) in {size for _, size in ctx}  # a 3x3 depthwise over 8 channels
    assert src.count("_get_buffer_size(") == len(ctx)
    for rel in cmsis_nn_files():
        assert f"kernels/{rel}" in files
    assert "DEFINES = -DCMSIS_NN_USE_SINGLE_ROUNDING" in files["Makefile"]


def test_cmsis_fully_connected_and_pooling_of_the_int8_tflite(study_of):
    src = study_of(DIGITS_INT8, "cortex-m7-cmsis-nn").code["src/partitions_m7_nn.c"]
    assert "arm_max_pool_s8(&" in src  # same quantization in and out: CMSIS-NN's max pool
    # the file's FULLY_CONNECTED weights are per-channel (64 and 10 scales): a 1x1 convolution, which
    # requantizes per channel (arm_fully_connected_s8 takes one scale)
    assert "matmul with constant weights as a 1x1 convolution" in src
    # the int8 softmax (dequantize -> softmax -> quantize, out at 1/256 and -128) is CMSIS-NN's: it was
    # three reference calls (convert, a float softmax, convert)
    assert "arm_softmax_s8((const int8_t *)" in src and "m7_nn_softmax(" not in src and "m7_nn_convert(" not in src


def test_cmsis_single_rounding_build_option(tmp_path):
    """npk_cmsis_nn.c built with CMSIS-NN's CMSIS_NN_USE_SINGLE_ROUNDING rounds once, half up."""
    for rel, text in cmsis_nn_files().items():
        (tmp_path / rel).write_text(text)
    so = tmp_path / "libcm.so"
    r = subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-DCMSIS_NN_USE_SINGLE_ROUNDING", "-o", str(so),
                        str(tmp_path / "npk_cmsis_nn.c")], capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lib = ctypes.CDLL(str(so))
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, 4096).astype(np.int8)
    b = rng.integers(-128, 128, 4096).astype(np.int8)
    out = np.zeros(4096, np.int8)
    m, s = quantize_multiplier(0.0123457)
    i32 = ctypes.c_int32
    p = lambda x: x.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    assert lib.arm_elementwise_mul_s8(p(a), p(b), i32(3), i32(-7), p(out), i32(5), i32(m), i32(s), i32(-128),
                                      i32(127), i32(4096)) == 0  # fmt: skip
    prod = (a.astype(np.int64) + 3) * (b.astype(np.int64) - 7)
    want = np.clip(cmsis_requantize(prod, m, s, single_rounding=True) + 5, -128, 127)
    np.testing.assert_array_equal(out, want)
    exact = np.floor(prod * (m * 2.0 ** (s - 31)) + 0.5)  # one rounding of the exact product, half up
    np.testing.assert_array_equal(cmsis_requantize(prod, m, s, single_rounding=True), exact)
    assert np.any(cmsis_requantize(prod, m, s) != exact)  # the default double rounding differs somewhere


# ---------------------------------------------------------------------------------------------
# does it fit


@pytest.mark.slow  # two firmware builds
def test_fit_equals_size_and_warns_over_budget(tmp_path):
    need("cortex-m7-mps2")
    s = npukit.Study(DIGITS_INT8, "cortex-m7-cmsis-nn")
    assert s.memory["measured"] is None
    assert s.totals["memory"] == {"target": "cortex-m7-mps2", "flash_bytes": 2 * 1024 * 1024, "sram_bytes": 512 * 1024}
    d = tmp_path / "fw"
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryBudgetWarning)
        r = s.fit(d)  # fits: no warning
    berkeley = parse_size_berkeley(subprocess.run(["arm-none-eabi-size", str(d / "model.elf")], capture_output=True,
                                                  text=True, check=True).stdout)  # fmt: skip
    assert r["flash_used"] == berkeley["text"] + berkeley["data"]
    assert r["sram_used"] == berkeley["data"] + berkeley["bss"]
    assert r["arena_section_bytes"] == s.project.arena_bytes and not r["over_budget"]
    assert r["weights_section_bytes"] >= s.project.weight_bytes
    mem = s.memory
    assert mem["measured"]["flash_used"] == r["flash_used"] and mem["estimate"]["arena_bytes"] == s.project.arena_bytes
    small = npukit.Study(DIGITS_INT8, s.soc.with_changes({"sram_bytes": s.project.arena_bytes - 16}))
    assert small.memory["estimate"]["sram_over"] is True  # the arena alone is over
    with pytest.warns(MemoryBudgetWarning, match=r"does not fit: sram: needs [\d,]+ bytes, the profile has [\d,]+"):
        r2 = small.fit(tmp_path / "small")
    assert r2["sram_over"] and not r2["flash_over"] and r2["over_budget"]
    assert "OVER by" in r2["text"].splitlines()[1] and "OVER" not in r2["text"].splitlines()[0]
    html = (small.report(tmp_path / "r.html")).read_text()
    assert "memory: does it fit?" in html and "<b style='color:#c00'>OVER</b>" in html


# ---------------------------------------------------------------------------------------------
# fast regeneration


def test_a_bit_width_edit_regenerates_only_that_processors_code():
    from npukit.tvm import hostc

    s = npukit.Study(MOBILENET, "cortex-m7-cmsis-nn")
    before = s.code
    assert any(k.startswith("host/") for k in before)  # the host's reshape and quantize glue: TVM's C
    misses = hostc.cache_info()["misses"]
    s.set_bits("int16", processor="cmsis_nn")
    after = s.code
    assert hostc.cache_info()["misses"] == misses  # no host op lowered again
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert changed == ["README.md", "include/npukit_weights.h", "manifest.json", "src/model.c",
                       "src/partitions_m7_nn.c", "src/weights.c"]  # fmt: skip
    s.set_bits(None, processor="cmsis_nn")
    assert s.code == before  # back to the first config: the same bytes


def test_a_support_toggle_reuses_the_host_code_it_had():
    from npukit.tvm import hostc

    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla", placement="first-fit")  # softmax on the DSP by default
    s.set_support("dsp", "softmax", False)
    first = s.code
    assert "host/npk_host_tvm.c" in first  # the softmax now runs on the host, in TVM's C
    s.set_support("dsp", "softmax", True)
    assert "host/npk_host_tvm.c" not in s.code
    pipeline.CODE.clear()
    entries, misses = len(pipeline.HOSTC.d), hostc.cache_info()["misses"]
    s.set_support("dsp", "softmax", False)
    assert s.code == first  # regenerated, the same bytes
    assert len(pipeline.HOSTC.d) == entries and hostc.cache_info()["misses"] == misses  # host C from the cache


# ---------------------------------------------------------------------------------------------
# the memory plan


def test_memory_plan_reaches_the_lower_bound_on_a_chain():
    # sizes of a MobileNet-like chain where placing the largest first leaves a hole: 64512 vs 55296
    sizes = [27648, 18432, 18432, 36864, 9216, 18432]
    bufs = [memplan.Buffer(f"b{i}", n, i, i + 1) for i, n in enumerate(sizes)]
    offsets, arena, lower = memplan.plan(bufs)
    assert lower == 18432 + 36864 and arena == lower
    for a in bufs:
        for b in bufs:
            if a.key < b.key and not (a.last < b.first or b.last < a.first):  # live together: disjoint
                assert offsets[a.key] + a.nbytes <= offsets[b.key] or offsets[b.key] + b.nbytes <= offsets[a.key]


@pytest.mark.parametrize("model", [MOBILENET, DIGITS_INT8], ids=["mobilenet", "digits_int8"])
def test_arena_within_ten_percent_of_the_lower_bound(model):
    for soc in ("cortex-m7-cmsis-nn", "ethos-u55-256", "vsi-npu", "tda4vm-like"):
        p = npukit.Study(model, soc).project
        assert p.arena_bytes <= 1.10 * p.lower_bound, (soc, p.arena_bytes, p.lower_bound)


# ---------------------------------------------------------------------------------------------
# on the emulated boards (slow)


def _built(study, tmp_path, samples):
    r = study.build(tmp_path / "export", samples=samples, target=True)
    tgt = study.soc.target
    assert tgt in r["runs"] and "skipped" not in r["runs"][tgt], r["runs"]
    assert r["runs"][tgt]["bit_exact_with_host"] is True
    return r


@pytest.mark.slow
@pytest.mark.parametrize("model", [DIGITS_ONNX, DIGITS_INT8], ids=["digits_onnx", "digits_int8"])
def test_digits_firmware_on_mps2_an500(model, tmp_path):
    need("cortex-m7-mps2")
    s = npukit.Study(model, "cortex-m7-cmsis-nn")
    r = _built(s, tmp_path, 12)
    host = r["runs"]["host"]["outputs"]
    assert all(o["argmax_agreement"] == 1.0 for o in host.values())
    assert all(o["max_abs"] <= 1.0 / 255 + 1e-6 for o in host.values())  # within one LSB of the int8 output
    assert r["fit"]["target"] == "cortex-m7-mps2" and not r["fit"]["over_budget"]
    assert json.loads((tmp_path / "export" / "manifest.json").read_text())["target"] == "cortex-m7-mps2"


@pytest.mark.slow
def test_mobilenet_firmware_on_mps2_an500_within_one_lsb(tmp_path):
    need("cortex-m7-mps2")
    s = npukit.Study(MOBILENET, "cortex-m7-cmsis-nn")
    r = _built(s, tmp_path, 3)
    (out,) = r["runs"]["host"]["outputs"].values()
    assert out["max_abs"] <= 1.0  # int8 output: one step of its grid
    assert r["fit"]["flash_used"] <= s.soc.flash_bytes and r["fit"]["sram_used"] <= s.soc.sram_bytes


@pytest.mark.slow
@pytest.mark.parametrize("bits", ["int8", "int4", "int2"])
def test_riscv_accel_under_qemu_riscv64(bits, tmp_path):
    need("riscv64-linux")
    s = npukit.Study(DIGITS_ONNX, "riscv-accel")
    s.set_bits(bits, processor="accel")
    src = s.code["src/partitions_hwlib.c"]
    assert "hwlib_conv2d(" in src and "hwlib_matmul(" in src and f"HWLIB_S{bits[3:]}" in src
    if bits != "int8":
        assert f"S{bits[3:]} weights, packed" in s.code["src/weights.c"]
    assert "hwlib_layout_convert(" in s.code["src/model.c"] or "hwlib_quantize(" in s.code["src/model.c"]
    r = _built(s, tmp_path, 4)
    # int4 / int2 too: their biases are stored on a grid 2^bias_shift finer than in_scale * w_scale
    assert r["runs"]["host"]["outputs"]["probs"]["max_abs"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("soc", ["arm-dsp-dla", "vsi-npu", "hexagon-like", "tda4vm-like", "ethos-u55-256"])
def test_other_profiles_under_qemu_aarch64(soc, tmp_path):
    need("aarch64-linux")
    s = npukit.Study(DIGITS_ONNX, soc)
    assert get_target(s.soc.target).name == "aarch64-linux"
    r = _built(s, tmp_path, 2)
    assert r["fit"]["target"] == "aarch64-linux"


@pytest.mark.slow
def test_transformer_on_vsi_npu_runs(tmp_path):
    """An int8 matmul kernel whose output stays float inside the kernel (matmul + bias + gelu): its
    integer input is dequantized by an explicit call (it used to stop with NPK_ERR_DTYPE)."""
    s = npukit.Study(SAMPLES / "transformer_encoder.onnx", "vsi-npu")
    assert "integer input of a float kernel" in s.code["src/partitions_vsi_nn.c"]
    r = s.build(tmp_path / "tr", samples=2)
    (out,) = r["runs"]["host"]["outputs"].values()
    assert out["argmax_agreement"] >= 0.5 and out["max_rel"] < 0.2
