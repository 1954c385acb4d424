"""The kernel libraries as files: deterministic text, prefix validation, the generated vendor
APIs of every bundled profile compile and link together, and the whole library builds for
Cortex-M7 (arm-none-eabi), aarch64 and riscv64, where a program over it prints the same results
as on this machine (bit-identical integer results)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from kernels_lib import CFLAGS

from npukit.codegen.kernels import KernelLibraryError, check_prefix, cmsis_nn_files, core_files, library_files
from npukit.codegen.kernels.library import api
from npukit.errors import NpukitError

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "npukit" / "profiles"
M7_FLAGS = ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"]


def profile_prefixes() -> list[str]:
    out = set()
    for f in sorted(PROFILES.glob("*.toml")):
        for proc in tomllib.loads(f.read_text()).get("processors", {}).values():
            if "kernel_library" in proc:
                out.add(proc["kernel_library"])
    return sorted(out)


def write(d: Path, files: dict[str, str]) -> list[str]:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)
    return sorted(n for n in files if n.endswith(".c"))


def test_files_are_deterministic_across_processes():
    code = ("import hashlib, json; from npukit.codegen.kernels import library_files, cmsis_nn_files;"
            "f = {**library_files('tidl_c7x'), **cmsis_nn_files()};"
            "print(hashlib.sha256(json.dumps(f, sort_keys=True).encode()).hexdigest())")  # fmt: skip
    digests = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        digests.add(
            subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        )
    assert len(digests) == 1
    a, b = library_files("nvdla"), library_files("xi_dsp")
    assert {k: v for k, v in a.items() if not k.startswith("nvdla")} == core_files()
    assert {k: v for k, v in b.items() if not k.startswith("xi_dsp")} == core_files()
    assert set(a) - set(core_files()) == {"nvdla.h", "nvdla.c"}
    assert set(cmsis_nn_files()) == {"arm_nn_types.h", "arm_nnfunctions.h", "npk_cmsis_nn.c"}


@pytest.mark.parametrize(
    "bad", ["", "1dla", "my-dla", "dla x", "_dla", "npk", "npk_x", "math", "stdint", "arm_nnfunctions", 3,
            "npukit", "npukit_model", "NPK", "Math"]  # docs/kernel-library.md: npukit*, any letter case
)
def test_bad_prefixes_are_refused(bad):
    with pytest.raises(ValueError):
        library_files(bad)
    with pytest.raises(KernelLibraryError):
        check_prefix(bad)
    with pytest.raises(NpukitError):
        check_prefix(bad)


def test_generated_api_covers_every_declaration():
    header = core_files()["npk_ref.h"]
    declared = [ln for ln in header.splitlines() if ln.split("(")[0].split(" ")[-1].lstrip("*").startswith("npk_") and "(" in ln
                and not ln.startswith((" ", "#", "/"))]  # fmt: skip
    consts, types, funcs = api()
    assert len(funcs) == len(declared) == 66  # (+ npk_round_to_bits_f16, npk_binary_int, npk_unary_int)
    h, c = library_files("hwlib")["hwlib.h"], library_files("hwlib")["hwlib.c"]
    for _, name, _ in funcs:
        short = name[len("npk") :]
        assert re.search(rf"[ *]hwlib{short}\(", h) and f"return {name}(" in c
    for t in types:
        assert f"typedef {t} hwlib{t[3:]};" in h
    assert "#define HWLIB_S4 NPK_S4" in h and "#define HWLIB_TILED NPK_TILED" in h and len(consts) > 40


def test_every_profile_library_compiles_and_links_together(tmp_path):
    """All bundled kernel_library prefixes in one program over one copy of the core."""
    prefixes = profile_prefixes()
    assert {"nvdla", "xi_dsp", "hwlib", "ethosu", "tidl_c7x", "vsi_nn"} <= set(prefixes)
    files = dict(cmsis_nn_files())
    for p in prefixes:
        files.update(library_files(p))
    calls = []
    for p in prefixes:
        up = p.upper()
        calls.append(f"""    {{
        static float buf[2 * 3];
        {p}_tensor t = {{buf, {up}_F32, 2, {{2, 3}}, {up}_ROW_MAJOR, 0, 1.0f, 0}};
        {p}_unary_params up = {{{up}_CLIP, 0.0f, -1.0f, 1.0f}};
        buf[0] = 5.0f;
        if ({p}_unary(&t, &t, &up) != {up}_OK || buf[0] != 1.0f) return 1;
    }}""")
    files["main.c"] = "\n".join([f'#include "{p}.h"' for p in prefixes] + ['#include "arm_nnfunctions.h"', "",
                                 "int main(void)", "{", *calls, "    return 0;", "}", ""])  # fmt: skip
    cfiles = write(tmp_path, files)
    subprocess.run(
        ["gcc", *CFLAGS, *cfiles, "-o", "prog", "-lm"], cwd=tmp_path, check=True, capture_output=True, text=True
    )
    assert subprocess.run([str(tmp_path / "prog")]).returncode == 0


STRICT = ["-pedantic", "-Wshadow", "-Wmissing-prototypes", "-Wstrict-prototypes", "-Wundef", "-Wdouble-promotion"]


def test_compiles_with_stricter_warnings(tmp_path):
    cfiles = write(tmp_path, all_files())
    r = subprocess.run(["gcc", *CFLAGS, *STRICT, "-c", *cfiles], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def all_files() -> dict[str, str]:
    return {**library_files("nvdla"), **library_files("xi_dsp"), **cmsis_nn_files()}


@pytest.mark.skipif(
    shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc (gcc-arm-none-eabi) not installed"
)
def test_cortex_m7_compile(tmp_path):
    cfiles = write(tmp_path, all_files())
    for f in cfiles:  # -c only: the firmware glue (startup, linker script) is the export's job
        r = subprocess.run(["arm-none-eabi-gcc", *CFLAGS, *M7_FLAGS, "-c", f, "-o", f + ".o"], cwd=tmp_path,
                           capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr


def run_smoke(tmp_path: Path, cc: str, runner: list[str]) -> str:
    files = all_files()
    files["kernels_smoke.c"] = (Path(__file__).parent / "kernels_smoke.c").read_text()
    d = tmp_path / cc
    cfiles = write(d, files)
    extra = ["-static"] if runner else []
    r = subprocess.run([cc, *CFLAGS, *extra, *cfiles, "-o", "smoke", "-lm"], cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([*runner, str(d / "smoke")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def compare_smoke(native: str, other: str) -> None:
    a, b = native.splitlines(), other.splitlines()
    assert len(a) == len(b) and a[-1] == b[-1] == "failures 0"
    for la, lb in zip(a, b):
        if la.startswith("f "):
            xa, xb = la.split()[2:], lb.split()[2:]
            assert la.split()[1] == lb.split()[1] and len(xa) == len(xb)
            for u, v in zip(map(float, xa), map(float, xb)):
                assert abs(u - v) <= 1e-6 * max(abs(u), abs(v), 1e-30), (la, lb)
        else:
            assert la == lb  # integer paths: bit-identical


@pytest.mark.slow
@pytest.mark.parametrize(
    "cc,qemu", [("aarch64-linux-gnu-gcc", "qemu-aarch64"), ("riscv64-linux-gnu-gcc", "qemu-riscv64")]
)
def test_cross_target_runs_like_native(tmp_path, cc, qemu):
    if shutil.which(cc) is None or shutil.which(qemu) is None:
        pytest.skip(f"{cc} or {qemu} not installed (gcc-aarch64-linux-gnu / gcc-riscv64-linux-gnu, qemu-user)")
    native = run_smoke(tmp_path, "gcc", [])
    assert not any(ln.startswith("error") for ln in native.splitlines()) and native.count("\n") == 12
    compare_smoke(native, run_smoke(tmp_path, cc, [qemu]))


def test_docs_describe_every_function_and_type():
    doc = (ROOT / "docs" / "kernel-library.md").read_text()
    consts, types, funcs = api()
    missing = [name for _, name, _ in funcs if name not in doc] + [t for t in types if t not in doc]
    assert not missing, f"docs/kernel-library.md does not mention {missing}"
