"""Issue 14, item 10: a long import shows a tqdm progress bar on a terminal (or when forced with
NPUKIT_PROGRESS=1); short imports and non-terminal stderr stay silent."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, SAMPLES

SCRIPT = """
import sys
import npukit.progress as P
P.DELAY_S = float(sys.argv[2])
import npukit
npukit.import_model(sys.argv[1])
print("imported")
"""


def _run(model, delay, **env):
    import os

    e = {k: v for k, v in os.environ.items() if k != "NPUKIT_PROGRESS"}
    e.update(env)
    e["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", SCRIPT, str(model), str(delay)], capture_output=True, text=True,
                          env=e, timeout=120)  # fmt: skip


def test_no_bar_when_stderr_is_not_a_terminal():
    r = _run(SAMPLES / "transformer_encoder.onnx", 0.0)
    assert r.returncode == 0 and r.stdout == "imported\n"
    assert r.stderr == ""


def test_a_long_phase_shows_a_bar_when_forced():
    r = _run(SAMPLES / "transformer_encoder.onnx", 0.0, NPUKIT_PROGRESS="1")
    assert r.returncode == 0 and r.stdout == "imported\n"
    assert "npukit: importing" in r.stderr and "npukit: folding constants" in r.stderr
    assert "1161/1161" in r.stderr or "op/s" in r.stderr


def test_a_short_import_stays_silent_even_when_forced():
    r = _run(SAMPLES / "digits_cnn.onnx", 5.0, NPUKIT_PROGRESS="1")
    assert r.returncode == 0 and r.stdout == "imported\n"
    assert r.stderr == ""


def test_forced_off():
    r = _run(SAMPLES / "transformer_encoder.onnx", 0.0, NPUKIT_PROGRESS="0")
    assert r.stderr == ""


ERROR_SCRIPT = """
import sys
import npukit.progress as P
P.DELAY_S = float(sys.argv[2])
import npukit
s = npukit.Study(sys.argv[1], "arm-dsp-dla")
print(len(s.error))
"""


def test_error_measurement_shows_its_steps(tmp_path):
    """The simulation's compile (a phase with its time), calibration and the measuring runs (counted
    samples) each show a bar when they take long; here every step counts as long (delay 0)."""
    import os

    e = {k: v for k, v in os.environ.items() if k != "NPUKIT_PROGRESS"}
    e.update(PYTHONPATH=str(ROOT), NPUKIT_PROGRESS="1", NPUKIT_CACHE=str(tmp_path))  # a cold compile
    r = subprocess.run([sys.executable, "-c", ERROR_SCRIPT, str(SAMPLES / "digits_cnn.onnx"), "0"],
                       capture_output=True, text=True, env=e, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "13\n"  # one row per op but the flatten (a relabel: nothing to round)
    for step in ("npukit: compiling the simulation", "npukit: calibrating ranges", "npukit: fp32 reference",
                 "npukit: measuring error"):  # fmt: skip
        assert step in r.stderr, step
    assert "sample" in r.stderr
    # the same measurement with the default delay is silent: every step is short on the digits model
    e["NPUKIT_CACHE"] = str(tmp_path)  # now warm
    r = subprocess.run([sys.executable, "-c", ERROR_SCRIPT, str(SAMPLES / "digits_cnn.onnx"), "1.0"],
                       capture_output=True, text=True, env=e, timeout=300)  # fmt: skip
    assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]
