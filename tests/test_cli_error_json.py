"""`npukit study --error --json` prints everything the error measures: the model outputs' figures and
study.error's per-op rows (the same rows the Python API gives)."""

from __future__ import annotations

import json
import math

from conftest import DIGITS_ONNX, run_cli

import npukit


def test_study_error_json_has_the_per_op_rows():
    r = run_cli("study", DIGITS_ONNX, "--soc", "riscv-accel", "--bits", "accel=int4", "--error", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    err = json.loads(r.stdout)["error"]
    rows = npukit.Study(DIGITS_ONNX, "riscv-accel").set_bits("int4", processor="accel").error
    assert [(p["op_id"], p["name"], p["processor"], p["bits"]) for p in err["per_op"]] == [
        (int(x.op_id), x.name, x.processor, x.bits) for x in rows.itertuples()]  # fmt: skip
    for p, x in zip(err["per_op"], rows.itertuples(), strict=True):
        assert p["snr_db"] == (x.snr_db if math.isfinite(x.snr_db) else None)  # JSON has no inf: null
        assert p["max_abs_err"] == x.max_abs_err and p["samples"] == x.samples
    assert [o["name"] for o in err["outputs"]] == ["probs"] and err["per_op_samples"] == 64
