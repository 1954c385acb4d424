"""Bit-width edit -> new error figures, and an external check of the int8 simulation.

1. Edit latency (issue 7 goals: <= 200 ms on the digits test split, <= 1 s at MobileNet class with
   32 inputs): medians over distinct bit-width configurations; the error-result memo is cleared
   before every edit, so each figure is a real run of the compiled simulation over the data.
2. onnxruntime's static int8 quantization (QDQ, per-channel weights, calibrated on the same 64
   images) of the digits model, its accuracy on the test split, beside npukit's int8 simulation of
   the same model (goal: within +-1 point); npukit's int4 and int2 accuracies are reported too.

    python benchmarks/bits.py [--edits 12] [--placement cost|first-fit]

Under the cost placement (the default) a bit-width edit may also move ops, so each edit re-places
the model too; ``--placement first-fit`` measures the numerics alone.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path

import numpy as np
from _common import SAMPLES, emit, summary, timed

import npukit
from npukit import pipeline

# one host CPU that runs every bit-width: isolates the numerics from placement
NUMERICS = {
    "name": "numerics-only", "description": "one processor running every bit-width (for error studies)",
    "sources": ["illustrative"],
    "processors": {"cpu": {
        "kind": "cpu", "host": True, "clock_mhz": 1000, "dram_bytes_per_cycle": 8,
        "macs_per_cycle": {b: 1 for b in ("int2", "int4", "int8", "int16", "fp16", "fp32")},
        "energy_pj_per_mac": {b: 1 for b in ("int2", "int4", "int8", "int16", "fp16", "fp32")},
        "energy_pj_per_byte": 10, "default_bits": "fp32"}},
}  # fmt: skip


def edit_latency(model: str, soc: str, n: int, placement: str) -> dict:
    study = npukit.Study(SAMPLES / model, soc, placement=placement)
    study.error_dict()  # warm: compile the simulation, reference run, calibration
    # one edit = one set_bits call; walk every (processor, bit-width) the plan's processors support
    edits = [(p, b) for p in study.soc.names if study.plan.ops_on(p) for b in study.soc.processor(p).bits]
    times = []
    for p, b in itertools.islice(itertools.cycle(edits), n):
        def edit(p=p, b=b):
            study.set_bits(b, processor=p)
            pipeline.error_model(study._model, study.data)._results.clear()  # a real run, not a memo hit
            study.error_dict()
            _ = study.error  # the per-op table too
        times.append(timed(edit))
    e = study.error_dict()
    return {"model": model, "soc": soc, "placement": placement, "samples": e["samples"], "per_op_samples": e["per_op_samples"],
            "data": e["data_source"], "distinct_edits": len(edits), "edit_to_error": summary(times)}  # fmt: skip


class _Reader:
    def __init__(self, x: np.ndarray, name: str):
        self.rows = iter([{name: x[i : i + 1]} for i in range(len(x))])

    def get_next(self):
        return next(self.rows, None)


def ort_int8(model: Path, data: Path) -> float:
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    z = np.load(data)
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "q.onnx"
        quantize_static(str(model), str(out), _Reader(z["calib"].reshape(-1, 1, 8, 8), name),
                        quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QInt8,
                        weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)  # fmt: skip
        q = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        x = z["x"]
        pred = np.array([q.run(None, {name: x[i : i + 1]})[0].argmax() for i in range(len(x))])
    return float(np.mean(pred == z["y"]))


def accuracy_vs_ort() -> dict:
    model, data = SAMPLES / "digits_cnn.onnx", SAMPLES / "digits_cnn.npz"
    study = npukit.Study(model, NUMERICS)
    out = {"model": model.name, "ort_int8_accuracy": ort_int8(model, data)}
    for b in ("fp32", "int16", "int8", "int4", "int2"):
        study.set_bits(b, processor="cpu")
        e = study.error_dict()
        out[f"npukit_{b}_accuracy"] = e["accuracy"]
        out[f"npukit_{b}_output_snr_db"] = e["outputs"][0]["snr_db"]
    out["int8_gap_points"] = round(100 * (out["npukit_int8_accuracy"] - out["ort_int8_accuracy"]), 3)
    out["within_1_point"] = abs(out["int8_gap_points"]) <= 1.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=12)
    ap.add_argument("--placement", choices=("cost", "first-fit"), default="cost")
    a = ap.parse_args()
    emit({
        "benchmark": "bits",
        "edit_latency": [edit_latency("digits_cnn.onnx", "arm-dsp-dla", a.edits, a.placement),
                         edit_latency("mobilenet_v1_025_int8.tflite", "arm-dsp-dla", a.edits, a.placement)],
        "goals_ms": {"digits_cnn.onnx": 200, "mobilenet_v1_025_int8.tflite": 1000},
        "accuracy": accuracy_vs_ort(),
    })  # fmt: skip


if __name__ == "__main__":
    main()
