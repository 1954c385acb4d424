"""Host calibration (issue 5): fit the host of ``arm-dsp-dla`` to this CPU, report estimate vs measured.

    python benchmarks/host_calibration.py [--repeat 20] [--soc arm-dsp-dla] [--out fitted.toml]

Fit set: tiny_detector.onnx, digits_cnn.onnx, transformer_encoder.onnx (convs NCHW, matmuls,
layer norm, softmax, NMS / top-k).  Held out (reported, never fitted to): digits_cnn_float.tflite
(the digits network in NHWC, through the TFLite importer) and mobilenet_v1_025_int8.tflite
(depthwise / pointwise NHWC convolutions with int8 dequantize / quantize, on the host in fp32).

Per model: the fastest of ``--repeat`` whole inferences (TVM llvm, this machine), the cost
model's estimate with the fitted host (every op on the host), their ratio, and the median per-op
error measured per TVM kernel (see ``npukit.calibrate``).  Goals: total within +-15 %, median
per-op error <= 30 %.  Prints one JSON document; ``--out`` also writes the fitted profile, which
loads with ``npukit.load_soc(path)`` and serves as the host lane of any study.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from _common import SAMPLES, emit

import npukit
from npukit.calibrate import calibrate

FIT = ["tiny_detector.onnx", "digits_cnn.onnx", "transformer_encoder.onnx"]
HOLDOUT = ["digits_cnn_float.tflite", "mobilenet_v1_025_int8.tflite"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--soc", default="arm-dsp-dla")
    ap.add_argument("--out", help="write the fitted profile here (default: a temporary file, then removed)")
    a = ap.parse_args()
    out = a.out or os.path.join(tempfile.mkdtemp(prefix="npukit-cal-"), "fitted.toml")
    t0 = time.perf_counter()
    res = calibrate([SAMPLES / m for m in FIT], a.soc, repeat=a.repeat, out=out, holdout=[SAMPLES / m for m in HOLDOUT])
    seconds = time.perf_counter() - t0
    fitted = npukit.load_soc(out)  # the saved profile loads, and drives a study with the host as its lane
    study = npukit.Study(SAMPLES / "digits_cnn.onnx", fitted)
    res.pop("profile")
    for m in res["models"]:
        m["goal_total_within_15pct"] = abs(m["ratio"] - 1) <= 0.15
        m["goal_median_op_error_le_30pct"] = m["median_op_error"] <= 0.30
    res["fit_models"] = FIT
    res["holdout_models"] = HOLDOUT
    res["seconds"] = round(seconds, 1)
    res["profile_loads"] = fitted.name
    res["study_with_fitted_host_latency_us"] = round(study.totals["latency_us"], 3)
    if not a.out:
        os.unlink(out)
        os.rmdir(os.path.dirname(out))
        res["out"] = None
    emit({"benchmark": "host_calibration", **res})


if __name__ == "__main__":
    main()
