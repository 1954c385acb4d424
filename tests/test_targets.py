"""Build targets of exported C projects: the .npy runtime, the runner, the Makefile, the Cortex-M7
firmware support, section sizes and memory fit.

A small project with a hand-written ``npukit_model_run`` (y = 2*x + w[...], s = 3*q - 1 + w[...],
a 1 MB const weights array in ``.rodata.npk_weights``, a 512 KB arena in ``.bss.npk_arena``) is
built by the generated Makefile with the host compiler, for aarch64 and riscv64 Linux (run under
qemu user mode) and as Cortex-M7 firmware (run on qemu-system-arm -M mps2-an500 via semihosting);
its outputs must equal NumPy's exactly.  Tests needing a missing tool skip, naming it.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import missing_tool

from npukit.codegen import targets as tg
from npukit.codegen.makefile import makefile
from npukit.codegen.memfit import fit_report, fit_text, parse_size_berkeley, section_sizes
from npukit.codegen.runner import TensorSpec, c_comment, c_string, runner_c
from npukit.errors import ConfigError, ProfileError

NW = 262144  # float32 weights: 1 MB
ARENA = 131072  # float32 arena: 512 KB
X_SHAPE, Q_SHAPE = (1, 4, 8, 8), (3, 5)
INPUTS = (TensorSpec("image/x*/", "x", "float32", X_SHAPE), TensorSpec("q", "q", "int8", Q_SHAPE))
OUTPUTS = (TensorSpec("y", "y", "float32", X_SHAPE), TensorSpec("sum:0", "s", "int32", Q_SHAPE))

MODEL_H = """\
#ifndef NPUKIT_MODEL_H
#define NPUKIT_MODEL_H
#include <stdint.h>
typedef struct { const float *x; const int8_t *q; } npukit_model_inputs;
typedef struct { float *y; int32_t *s; } npukit_model_outputs;
int32_t npukit_model_run(const npukit_model_inputs *inputs, npukit_model_outputs *outputs);
extern const char *npukit_model_failed_step;
#endif
"""

MODEL_C = f"""\
#include <string.h>
#include "npukit_model.h"
#define NW {NW}
extern const float npk_weights[NW];
__attribute__((section(".bss.npk_arena"))) float npk_arena[{ARENA}];
const char *npukit_model_failed_step = 0;

int32_t npukit_model_run(const npukit_model_inputs *inputs, npukit_model_outputs *outputs) {{
  const int n = {int(np.prod(X_SHAPE))}, m = {int(np.prod(Q_SHAPE))};
  if (inputs->x[0] != inputs->x[0]) {{ /* NaN: the model's error path */
    npukit_model_failed_step = "partition 0 on npu (nms)";
    return 7;
  }}
  float *t = npk_arena + {ARENA} - n;         /* the far end of the arena */
  memcpy(t, inputs->x, (size_t)n * sizeof *t);
  for (int i = 0; i < n; i++) outputs->y[i] = 2.0f * t[i] + npk_weights[(i * 1021) % NW];
  for (int j = 0; j < m; j++) outputs->s[j] = 3 * (int32_t)inputs->q[j] - 1 + (int32_t)npk_weights[(j * 4099) % NW];
  return 0;
}}
"""


def weights() -> np.ndarray:
    i = np.arange(NW)
    return ((i * 37) % 255 - 127).astype(np.float32)


def weights_c() -> str:
    body = ",".join(str(int(v)) for v in weights())
    return ('__attribute__((section(".rodata.npk_weights"))) const float npk_weights[' + str(NW) + "] = {"
            + body + "};\n")


def expected(x: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = weights()
    y = np.float32(2) * x + w[(np.arange(x.size) * 1021) % NW].reshape(x.shape)
    s = 3 * q.astype(np.int32) - 1 + w[(np.arange(q.size) * 4099) % NW].astype(np.int32).reshape(q.shape)
    return y, s


SOURCES = ["main.c", "model.c", "npk_npy.c", "weights.c"]


def write_project(root: Path, target: str) -> Path:
    files = {"main.c": runner_c(INPUTS, OUTPUTS), "model.c": MODEL_C, "npukit_model.h": MODEL_H,
             "weights.c": weights_c(), "Makefile": makefile(target, SOURCES), **tg.runtime_files(target)}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def need(target: str):
    ok, why = tg.available(target)
    if not ok:
        missing_tool(why)


def make(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=root, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(7)
    x = rng.standard_normal(X_SHAPE).astype(np.float32)
    q = rng.integers(-128, 128, Q_SHAPE, dtype=np.int8)
    bad = np.zeros((1, 4, 8, 9), np.float32)
    nan = x.copy()
    nan.flat[0] = np.nan
    for name, arr in (("x", x), ("q", q), ("bad", bad), ("nan", nan)):
        np.save(d / f"{name}.npy", arr)
    return {"dir": d, "x": x, "q": q}


def check_outputs(out: Path, data: dict):
    y, s = expected(data["x"], data["q"])
    got_y, got_s = np.load(out / "0.npy"), np.load(out / "1.npy")
    assert got_y.dtype == np.float32 and got_y.shape == X_SHAPE
    assert got_s.dtype == np.int32 and got_s.shape == Q_SHAPE
    assert np.array_equal(got_y.view(np.uint32), y.view(np.uint32))  # bit-exact
    assert np.array_equal(got_s, s)
    buf = io.BytesIO()
    np.save(buf, got_y)
    assert (out / "0.npy").read_bytes() == buf.getvalue()  # the runner writes what np.save writes


BAD_SHAPE = "input 0 'image/x*/': {}: expected float32 '<f4' shape (1, 4, 8, 8), found float32 '<f4' shape (1, 4, 8, 9)"


# ---- the host build ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def host_project(tmp_path_factory) -> Path:
    need("host")
    root = write_project(tmp_path_factory.mktemp("host"), "cortex-m7-mps2")
    r = make(root)
    assert r.returncode == 0, r.stderr
    return root


def test_host_build_runs_and_matches_numpy(host_project, data):
    d, out = data["dir"], data["dir"] / "out_host"
    r = make(host_project, "run", f"IN={d / 'x.npy'} {d / 'q.npy'}", f"OUT={out}")
    assert r.returncode == 0, r.stderr
    check_outputs(out, data)


def test_host_runner_errors(host_project, data):
    d, prog = data["dir"], str(host_project / "model")
    r = subprocess.run([prog, str(d / "x.npy")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == f"usage: {prog} IN0.npy IN1.npy OUTDIR"
    assert "  IN0.npy  input 0 'image/x*/' float32 (1, 4, 8, 8)" in r.stderr
    r = subprocess.run([prog, str(d / "bad.npy"), str(d / "q.npy"), str(d)], capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (2, f"{prog}: " + BAD_SHAPE.format(d / "bad.npy") + "\n")
    r = subprocess.run([prog, str(d / "x.npy"), str(d / "x.npy"), str(d)], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr == f"{prog}: input 1 'q': {d / 'x.npy'}: expected int8 '|i1' shape (3, 5), " \
                       "found float32 '<f4' shape (1, 4, 8, 8)\n"
    r = subprocess.run([prog, str(d / "nan.npy"), str(d / "q.npy"), str(d)], capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (1, f"{prog}: npukit_model_run failed with status 7 in partition 0 on npu (nms)\n")
    r = subprocess.run([prog, str(d / "x.npy"), str(d / "q.npy"), str(d / "no" / "dir")], capture_output=True,
                       text=True)
    assert (r.returncode, r.stderr) == (
        2, f"{prog}: output 0 'y': {d / 'no' / 'dir' / '0.npy'}: cannot open for writing: No such file or directory\n")
    r = make(host_project, "run", f"OUT={d}")
    assert r.returncode == 2 and "usage: make run IN=" in r.stderr


@pytest.mark.slow
def test_host_build_is_valgrind_clean(host_project, data):
    if shutil.which("valgrind") is None:
        missing_tool("valgrind not installed (Debian package valgrind)")
    d, out = data["dir"], data["dir"] / "out_valgrind"
    out.mkdir()
    for args, status in (([d / "x.npy", d / "q.npy", out], 0), ([d / "bad.npy", d / "q.npy", out], 2)):
        r = subprocess.run(["valgrind", "-q", "--error-exitcode=99", "--leak-check=full", str(host_project / "model"),
                            *map(str, args)], capture_output=True, text=True, timeout=60)
        assert r.returncode == status, r.stderr
        assert "==" not in r.stderr  # no valgrind report at all
    check_outputs(out, data)


# ---- cross builds under emulators --------------------------------------------------------------


@pytest.mark.slow
def test_make_cc_aarch64_static(tmp_path, data):
    """The brief's literal command: the default build with another compiler, run by qemu-aarch64."""
    need("aarch64-linux")
    root = write_project(tmp_path, "host")
    r = make(root, "CC=aarch64-linux-gnu-gcc", "LDFLAGS=-static")
    assert r.returncode == 0, r.stderr
    d, out = data["dir"], tmp_path / "out"
    out.mkdir()
    r = subprocess.run(["qemu-aarch64", str(root / "model"), str(d / "x.npy"), str(d / "q.npy"), str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    check_outputs(out, data)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["aarch64-linux", "riscv64-linux", "cortex-m7-mps2"])
def test_target_build_run_and_sizes(target, tmp_path, data):
    need(target)
    t = tg.get_target(target)
    root = write_project(tmp_path, target)
    r = make(root, "target")
    assert r.returncode == 0, r.stderr
    d, out = data["dir"], tmp_path / "out"
    r = make(root, "run-target", f"IN={d / 'x.npy'} {d / 'q.npy'}", f"OUT={out}", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    check_outputs(out, data)

    elf = root / t.program_name()
    bad = subprocess.run(t.run_argv(str(elf), [d / "bad.npy", d / "q.npy", out]), capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert bad.returncode == 2
    assert bad.stderr.endswith(": " + BAD_SHAPE.format(d / "bad.npy") + "\n"), bad.stderr
    nan = subprocess.run(t.run_argv(str(elf), [d / "nan.npy", d / "q.npy", out]), capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert nan.returncode == 1 and nan.stderr.endswith("npukit_model_run failed with status 7 in partition 0 on npu (nms)\n")

    sizes = section_sizes(elf, t.size_tool)
    sysv = subprocess.run([t.size_tool, "-A", "-d", str(elf)], capture_output=True, text=True).stdout
    berkeley = parse_size_berkeley(subprocess.run([t.size_tool, str(elf)], capture_output=True, text=True).stdout)
    for name, size in sizes["sections"].items():
        assert any(line.split()[:2] == [name, str(size)] for line in sysv.splitlines()), name
    assert sizes["text"] + sizes["rodata"] == berkeley["text"]
    assert sizes["data"] == berkeley["data"]
    assert sizes["bss"] + sizes["heap"] + sizes["stack"] == berkeley["bss"]
    assert sizes["rodata"] >= NW * 4 and sizes["bss"] >= ARENA * 4
    if t.bare_metal:
        assert sizes["sections"][".rodata.npk_weights"] == NW * 4
        assert sizes["sections"][".bss.npk_arena"] == ARENA * 4
        assert (sizes["heap"], sizes["stack"]) == (0x10000, 0x10000)
        fit = fit_report(sizes, t.flash_bytes, t.sram_bytes)
        assert not fit["over_budget"] and fit["weights_bytes"] == NW * 4 and fit["arena_bytes"] == ARENA * 4
        small = fit_report(sizes, t.flash_bytes, 512 * 1024)  # the arena alone fills 512 KB
        assert small["sram_over"] and small["over_budget"] and not small["flash_over"]
        assert small["sram_used"] == sizes["data"] + sizes["bss"] + 0x20000
        assert "OVER by" in fit_text(small).splitlines()[1]


@pytest.mark.slow
def test_firmware_fault_reports_and_exits(tmp_path):
    """An unexpected exception on the M7 prints the fault registers and exits 3 instead of hanging."""
    need("cortex-m7-mps2")
    t = tg.get_target("cortex-m7-mps2")
    for rel, text in tg.runtime_files(t).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "fault.c").write_text(
        "#include <stdint.h>\nint main(void) { return (int)*(volatile uint32_t *)0xF0000000u; }\n")
    cmd = [t.cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", *t.cflags, "-o", "fault.elf", "fault.c",
           *t.extra_sources, *t.ldflags]
    assert subprocess.run(cmd, cwd=tmp_path).returncode == 0
    r = subprocess.run(t.run_argv("fault.elf", []), cwd=tmp_path, capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 3
    assert r.stderr == "\nnpukit firmware: fault HardFault CFSR=0x00008200 HFSR=0x40000000 MMFAR=0x00000000 " \
                       "BFAR=0xf0000000\n"  # a precise bus fault at the address read, escalated


# ---- the .npy runtime on the host ------------------------------------------------------------------

NPYCOPY_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "npk_npy.h"
static unsigned char buf[1 << 16];
/* npycopy --table | npycopy DTYPE NDIM D0 .. IN OUT: read IN expecting that array, write it to OUT. */
int main(int argc, char **argv) {
  char err[NPK_NPY_ERR_LEN];
  size_t shape[NPK_NPY_MAX_DIMS], n;
  int dt = -1, ndim;
  if (argc == 2 && strcmp(argv[1], "--table") == 0) {
    for (int i = 0; i <= NPK_BOOL; i++)
      printf("%s %s %u\n", npk_dtype_name((npk_dtype)i), npk_dtype_descr((npk_dtype)i),
             (unsigned)npk_dtype_size((npk_dtype)i));
    return 0;
  }
  for (int i = 0; i <= NPK_BOOL; i++)
    if (strcmp(argv[1], npk_dtype_name((npk_dtype)i)) == 0) dt = i;
  ndim = atoi(argv[2]);
  n = npk_dtype_size((npk_dtype)dt);
  for (int i = 0; i < ndim; i++) n *= shape[i] = strtoul(argv[3 + i], NULL, 10);
  int rc = npk_npy_read(argv[3 + ndim], (npk_dtype)dt, ndim, shape, buf, n, err, sizeof err);
  if (rc) { puts(err); return 10 + rc; }
  rc = npk_npy_write(argv[4 + ndim], (npk_dtype)dt, ndim, shape, buf, err, sizeof err);
  if (rc) { puts(err); return 20 + rc; }
  return 0;
}
"""


@pytest.fixture(scope="module")
def npycopy(tmp_path_factory) -> Path:
    need("host")
    d = tmp_path_factory.mktemp("npycopy")
    for rel, text in tg.runtime_files("host").items():
        (d / rel).write_text(text)
    (d / "npycopy.c").write_text(NPYCOPY_C)
    r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-o", "npycopy", "npycopy.c",
                        "npk_npy.c"], cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d / "npycopy"


def copy(tool: Path, src: Path, dtype: str, shape) -> tuple[int, str, bytes | None]:
    dst = src.with_suffix(".out.npy")
    dst.unlink(missing_ok=True)
    r = subprocess.run([str(tool), dtype, str(len(shape)), *map(str, shape), str(src), str(dst)],
                       capture_output=True, text=True, timeout=10)
    return r.returncode, r.stdout.strip(), dst.read_bytes() if dst.exists() else None


ENUMS = ["NPK_F32", "NPK_F16", "NPK_I8", "NPK_U8", "NPK_I16", "NPK_I32", "NPK_I64", "NPK_BOOL"]  # npk_npy.h order


def test_npy_dtype_table_matches_numpy_and_runner(npycopy):
    from npukit.codegen.runner import DTYPES

    rows = subprocess.run([str(npycopy), "--table"], capture_output=True, text=True).stdout.split("\n")[:-1]
    assert len(rows) == len(DTYPES)
    for i, row in enumerate(rows):
        name, descr, size = row.split()
        assert (np.dtype(name).str, np.dtype(name).itemsize) == (descr, int(size))
        assert DTYPES[name][2] == int(size)
        assert DTYPES[name][1] == ENUMS[i]  # the runner's enumerator is the C enum's value i


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint8", "int16", "int32", "int64", "bool"])
def test_npy_roundtrip_is_np_save(npycopy, tmp_path, dtype):
    rng = np.random.default_rng(1)
    for k, shape in enumerate([(), (5,), (2, 3), (0, 3), (1,) * 12, (123456789012, 0)]):
        arr = (rng.standard_normal(shape) * 50).astype(dtype)
        src = tmp_path / f"a{k}.npy"
        np.save(src, arr)
        rc, msg, out = copy(npycopy, src, dtype, shape)
        assert (rc, msg) == (0, "")
        assert out == src.read_bytes(), shape  # byte-identical to np.save
        for version in ((2, 0), (3, 0)):
            with open(src, "wb") as f:
                np.lib.format.write_array(f, arr, version=version)
            assert copy(npycopy, src, dtype, shape)[2] == out


def test_npy_read_errors(npycopy, tmp_path):
    a = tmp_path / "a.npy"
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)

    def case(data: bytes, dtype="float32", shape=(2, 3)):
        a.write_bytes(data)
        rc, msg, out = copy(npycopy, a, dtype, shape)
        assert out is None
        return rc, msg.replace(str(a), "a.npy")

    buf = io.BytesIO()
    np.save(buf, arr)
    good = buf.getvalue()
    found = "found float32 '<f4' shape (2, 3)"
    assert case(good, shape=(3, 2)) == (13, "a.npy: expected float32 '<f4' shape (3, 2), " + found)
    assert case(good, "int8", (2, 3)) == (13, "a.npy: expected int8 '|i1' shape (2, 3), " + found)
    assert case(good, shape=(6,)) == (13, "a.npy: expected float32 '<f4' shape (6,), found float32 '<f4' shape (2, 3)")
    assert case(good[:-1]) == (12, "a.npy: truncated: expected 24 data bytes, found 23")
    assert case(good + b"\0") == (12, "a.npy: unexpected bytes after the 24 data bytes")
    assert case(good[:50]) == (12, "a.npy: truncated .npy header")
    assert case(b"PK\3\4" + good) == (12, "a.npy: not a .npy file (no \\x93NUMPY magic)")
    assert case(good[:6] + b"\4\0" + good[8:]) == (
        12, "a.npy: .npy format version 4.0 is not supported (1.0, 2.0, 3.0 are)")
    buf = io.BytesIO()
    np.save(buf, np.asfortranarray(arr))
    assert case(buf.getvalue()) == (
        12, "a.npy: Fortran-order arrays are not supported (save np.ascontiguousarray(x) instead)")
    buf = io.BytesIO()
    np.save(buf, arr.astype(">f4"))
    assert case(buf.getvalue()) == (13, "a.npy: expected float32 '<f4' shape (2, 3), found '>f4' shape (2, 3)")
    buf = io.BytesIO()
    np.save(buf, np.zeros(2, dtype=[("a", "<f4")]))
    assert case(buf.getvalue(), shape=(2,)) == (
        12, "a.npy: malformed .npy header at byte 10 (key 'descr'): only simple dtypes are supported, "
            "not structured ones")
    assert case(good.replace(b"'shape'", b"'shapf'")) == (12, "a.npy: malformed .npy header at byte 41 "
                                                               "(key 'shapf'): unknown or repeated key")
    assert case(good.replace(b"(2, 3)", b"(2; 3)")) == (12, "a.npy: malformed .npy header at byte 52 "
                                                             "(key 'shape'): expected ',' or ')' in shape")
    a.unlink()
    rc, msg, _ = copy(npycopy, a, "float32", (2, 3))
    assert (rc, msg.replace(str(a), "a.npy")) == (11, "a.npy: cannot open for reading: No such file or directory")


def test_npy_reads_other_byte_order_marks_for_bytes(npycopy, tmp_path):
    src = tmp_path / "q.npy"
    arr = np.arange(-3, 3, dtype=np.int8)
    np.save(src, arr)
    std = src.read_bytes()
    src.write_bytes(std.replace(b"'|i1'", b"'<i1'"))  # the same array, another valid descr
    assert copy(npycopy, src, "int8", (6,)) == (0, "", std)


# ---- pure Python: targets, Makefile, runner text, memory fit ------------------------------------


def test_target_table_and_validation():
    assert tg.target_names() == ("aarch64-linux", "cortex-m7-mps2", "host", "riscv64-linux")
    with pytest.raises(ConfigError, match=r"^unknown target 'cortex-m7'; did you mean 'cortex-m7-mps2'\? valid names: 'aarch64-linux', "
                                          r"'cortex-m7-mps2', 'host', 'riscv64-linux'$"):
        tg.get_target("cortex-m7")
    with pytest.raises(ProfileError, match=r"^soc.toml: target: unknown target 'm7'; valid targets: aarch64-linux, "):
        tg.check_target("m7", "soc.toml: target", ProfileError)
    assert tg.check_target("host") == "host"
    m7 = tg.get_target("cortex-m7-mps2")
    assert m7.packages == ("binutils-arm-none-eabi", "gcc-arm-none-eabi", "libnewlib-arm-none-eabi", "qemu-system-arm")
    assert m7.run_argv("fw.elf", ["in,1.npy", "out"]) == [
        "qemu-system-arm", "-M", "mps2-an500", "-nographic", "-semihosting-config",
        "enable=on,target=native,arg=fw.elf,arg=in,,1.npy,arg=out", "-kernel", "fw.elf"]
    with pytest.raises(ConfigError, match="argument 'my in.npy' cannot pass the semihosting command line"):
        m7.run_argv("fw.elf", ["my in.npy", "out"])
    assert tg.get_target("riscv64-linux").run_argv("./m", ["a", "b"]) == ["qemu-riscv64", "./m", "a", "b"]
    assert tg.get_target("host").run_argv("./m", ["a", "b"]) == ["./m", "a", "b"]


def test_available_names_what_is_missing():
    import dataclasses

    t = dataclasses.replace(tg.get_target("aarch64-linux"), name="fake", cc="npukit-no-such-gcc",
                            requires=(tg.Requirement("program", "npukit-no-such-gcc", "gcc-fake"),
                                      tg.Requirement("file", "libc.a", "libc-fake-dev"),
                                      tg.Requirement("program", "sh", "dash")))
    assert tg.available(t) == (False, "target fake: missing npukit-no-such-gcc (Debian package gcc-fake), "
                                      "libc.a for npukit-no-such-gcc (Debian package libc-fake-dev)")
    if shutil.which("cc"):
        t = dataclasses.replace(tg.get_target("host"), requires=(tg.Requirement("file", "libnpukit-none.a", "x"),))
        assert tg.available(t) == (False, "target host: missing libnpukit-none.a for cc (Debian package x)")


def test_makefile_text():
    text = makefile("cortex-m7-mps2", ["main.c", "model/conv.c", "npk_npy.c"])
    assert text == makefile("cortex-m7-mps2", ["main.c", "model/conv.c", "npk_npy.c"])
    lines = text.splitlines()
    for line in ("SRCS = main.c model/conv.c npk_npy.c", "INCLUDES = -I. -Imodel",
                 "NPK_CFLAGS = -std=c11 -Wall -Wextra -Werror -O2", "TARGET_PROGRAM = model.elf",
                 "\t$(CC) $(NPK_CFLAGS) $(INCLUDES) $(CPPFLAGS) $(CFLAGS) -o $@ $(SRCS) $(LDFLAGS) $(LDLIBS)",
                 "TARGET_LDFLAGS = --specs=rdimon.specs -T cortex_m7/mps2_an500.ld -Wl,--gc-sections"):
        assert line in lines
    host = makefile("host", ["main.c"], program="net").splitlines()
    assert "target: $(PROGRAM)" in host and "run-target: run" in host and "PROGRAM = net" in host
    assert not any(line.startswith("TARGET_") for line in host)
    for bad in (["a b.c"], ["/abs.c"], ["../up.c"], ["x$(shell rm).c"], []):
        with pytest.raises(ValueError):
            makefile("host", bad)
    with pytest.raises(ConfigError):
        makefile("nope", ["main.c"])


def test_runner_text_and_escapes(tmp_path):
    assert runner_c(INPUTS, OUTPUTS) == runner_c(INPUTS, OUTPUTS)
    text = runner_c(INPUTS, OUTPUTS)
    assert " *   0: 'image/x*\\/' float32 (1, 4, 8, 8)" in text  # the name cannot close the comment
    assert "static _Alignas(16) int8_t npk_in1[15];" in text
    assert c_comment("a*/b/*c??/é\x01") == "a*\\/b/\\*c?\\?/\\xe9\\x01"
    with pytest.raises(ValueError, match="field 'x-1' is not a C identifier"):
        TensorSpec("x", "x-1", "float32", (1,))
    with pytest.raises(ValueError, match="dtype 'float64'; valid: bool, float16"):
        TensorSpec("x", "x", "float64", (1,))
    nasty = 'q"\\??/ é\n%s\t7'
    if shutil.which("cc") is None:
        missing_tool("cc not installed")
    (tmp_path / "s.c").write_text('#include <stdio.h>\nint main(void) { fputs(' + c_string(nasty) +
                                  ', stdout); return 0; }\n')
    assert subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", "s", "s.c"],
                          cwd=tmp_path).returncode == 0
    assert subprocess.run([str(tmp_path / "s")], capture_output=True).stdout == nasty.encode()


def test_fit_report_flags_over_budget():
    sizes = {"text": 1000, "rodata": 3000, "data": 100, "bss": 5000, "heap": 400, "stack": 500,
             "sections": {".rodata.npk_weights": 2048, ".bss.npk_arena": 4096}}
    ok = fit_report(sizes, 4100, 6000)
    assert ok == {"flash_bytes": 4100, "flash_used": 4100, "flash_free": 0, "flash_over": False,
                  "sram_bytes": 6000, "sram_used": 6000, "sram_free": 0, "sram_over": False,
                  "weights_bytes": 2048, "arena_bytes": 4096, "over_budget": False}
    over = fit_report(sizes, 4100, 6000, reserve_bytes=1)
    assert (over["sram_over"], over["sram_free"], over["flash_over"], over["over_budget"]) == (True, -1, False, True)
    assert fit_text(over) == ("flash       4100 / 4100 bytes (100.0%)\n"
                              "sram        6001 / 6000 bytes (100.0%)  OVER by 1 bytes")
    with pytest.raises(ValueError):
        fit_report(sizes, -1, 10)


def test_section_sizes_rejects_non_elf(tmp_path):
    from npukit.codegen.memfit import BuildError

    f = tmp_path / "model"
    f.write_text("#!/bin/sh\n")
    with pytest.raises(BuildError, match="not an ELF file"):
        section_sizes(f, "size")


def test_targets_page_lists_every_target_and_package():
    page = (Path(__file__).resolve().parent.parent / "docs" / "targets.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in page.splitlines() if line.startswith("| `")}
    for name in tg.target_names():
        t = tg.get_target(name)
        assert name in rows, name
        assert t.program_name() in rows[name] and t.cc in rows[name]
        assert all(p in rows[name] for p in t.packages), name
