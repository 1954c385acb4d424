"""Shared helpers for the acceptance tests of issues 3 (foundation) and 4 (partition).

Everything here is real: models are built with ``onnx.helper`` (or torch / Relax) and go through
TVM's own frontends; nothing is mocked.  Imports of sample models are shared through
``npukit.Study``'s import cache (keyed by file), so a sample is imported once per session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"

ALL_BITS = ("int2", "int4", "int8", "int16", "fp16", "fp32")
# one processor that runs every bit-width: the numerics without placement effects
NUMERICS = {
    "name": "numerics-only", "description": "one processor running every bit-width", "sources": ["illustrative"],
    "processors": {"cpu": {
        "kind": "cpu", "host": True, "clock_mhz": 1000, "dram_bytes_per_cycle": 8,
        "macs_per_cycle": {b: 1 for b in ALL_BITS}, "energy_pj_per_mac": {b: 1 for b in ALL_BITS},
        "energy_pj_per_byte": 10, "default_bits": "fp32"}},
}  # fmt: skip
DIGITS_ONNX = SAMPLES / "digits_cnn.onnx"
DIGITS_PT2 = SAMPLES / "digits_cnn.pt2"
DIGITS_TFLITE = SAMPLES / "digits_cnn_float.tflite"
DIGITS_INT8 = SAMPLES / "digits_cnn_int8.tflite"
DETECTOR = SAMPLES / "tiny_detector.onnx"
MOBILENET = SAMPLES / "mobilenet_v1_025_int8.tflite"

# ---------------------------------------------------------------------------------------------
# ONNX model builders (onnx.helper)


def tensor_info(name: str, shape, elem_type=None):
    from onnx import TensorProto
    from onnx import helper as h

    return h.make_tensor_value_info(name, TensorProto.FLOAT if elem_type is None else elem_type, shape)


def initializer(name: str, shape, seed: int = 0, dtype=np.float32):
    from onnx import numpy_helper

    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def onnx_model(nodes, inputs, outputs, inits=(), *, opset: int = 17, domains=(), name: str = "g"):
    """A ModelProto (IR 8) from nodes and value infos; ``domains`` adds custom opset imports."""
    from onnx import helper as h

    graph = h.make_graph(list(nodes), name, list(inputs), list(outputs), initializer=list(inits))
    opsets = [h.make_opsetid("", opset)] + [h.make_opsetid(d, 1) for d in domains]
    m = h.make_model(graph, opset_imports=opsets)
    m.ir_version = 8
    return m


def save_onnx(model, path: Path, infer_shapes: bool = True) -> Path:
    import onnx

    if infer_shapes:
        model = onnx.shape_inference.infer_shapes(model)
    onnx.save(model, str(path))
    return path


# ---------------------------------------------------------------------------------------------
# the command line, as a user runs it


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_cli(*args, cwd: Path | None = None, timeout: float = 120) -> CliResult:
    """``python -m npukit ARGS`` in a fresh process; returns its exit code, output and wall time."""
    env = dict(os.environ)
    env.pop("PYTHONHASHSEED", None)
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "npukit", *map(str, args)],
        capture_output=True, text=True, cwd=str(cwd or ROOT), env=env, timeout=timeout,
    )  # fmt: skip
    return CliResult(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)


def assert_cli_error(r: CliResult, *needles: str, limit_s: float = 60.0) -> str:
    """Exit 2, one line ``npukit: error: ...`` on stderr, no traceback, within ``limit_s`` (a guard
    against a hang or a whole compile before the check, not a timing: a loaded 2-core machine took
    12 s to start the CLI and refuse a truncated file)."""
    assert r.returncode == 2, f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    assert r.stderr.startswith("npukit: error: "), r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    lines = r.stderr.strip("\n").split("\n")
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{r.stderr}"
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    assert r.seconds < limit_s, f"took {r.seconds:.1f} s"
    return lines[0][len("npukit: error: "):]


# ---------------------------------------------------------------------------------------------
# shared studies / graphs (imports are cached by file inside npukit.Study)


@pytest.fixture(scope="session")
def graph_of():
    """graph_of(path) -> the OpGraph of a model file, imported once per session."""
    import npukit

    cache: dict[str, object] = {}

    def get(path) -> npukit.OpGraph:
        key = str(path)
        if key not in cache:
            cache[key] = npukit.import_model(path).graph
        return cache[key]

    return get


@pytest.fixture
def study_of():
    """study_of(model, soc, config=None) -> a fresh Study (the import itself is cached by file)."""
    import npukit

    def make(model, soc="arm-dsp-dla", config=None, **kw):
        return npukit.Study(model, soc, config, **kw)

    return make


@pytest.fixture
def digits(study_of):
    return study_of(DIGITS_ONNX, "arm-dsp-dla")


# ---------------------------------------------------------------------------------------------
# tiers: `python -m pytest -m "not slow"` is the contributors' fast tier (about a minute on 2 cores);
# the slow tier holds notebooks (nbmake), browser tests, files that compile and run C or compile TVM
# kernels, the property test of the BYOC replay against TVM, the torch-exported families, and every
# test that starts the command line in a new process (each pays TVM's import).
SLOW_FILES = frozenset({"test_families.py", "test_codegen.py", "test_codegen_outputs.py", "test_codegen_moves.py",
                        "test_codegen_layouts.py",
                        "test_hostc.py", "test_fuzz_models.py", "test_incremental.py", "test_progress.py",
                        "test_bits_error.py", "test_kernels_build.py", "test_cli.py"})  # fmt: skip


def _starts_processes(item) -> bool:
    """The test (or a helper it names) runs npukit's command line or another Python in a new process."""
    import inspect

    fn = getattr(item, "function", None)
    try:
        src = inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return False
    return any(k in src for k in ("run_cli(", "assert_cli_error(", "subprocess.run(", "sys.executable"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(getattr(item, "path", "") or item.fspath)
        slow = path.endswith(".ipynb") or "/tests/browser/" in path or item.get_closest_marker("browser")
        if slow or Path(path).name in SLOW_FILES or _starts_processes(item):
            item.add_marker(pytest.mark.slow)


REQUIRE_TOOLCHAINS = bool(os.environ.get("NPUKIT_REQUIRE_TOOLCHAINS"))  # set by .ci/run


def missing_tool(why: str):
    """Skip a test whose compiler / emulator is not installed; in CI (NPUKIT_REQUIRE_TOOLCHAINS) fail."""
    if REQUIRE_TOOLCHAINS:
        pytest.fail(why)
    pytest.skip(why)
