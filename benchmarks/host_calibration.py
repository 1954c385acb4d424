"""Host calibration (issue 5): fit the host of ``arm-dsp-dla`` to this CPU, report estimate vs measured.

    python benchmarks/host_calibration.py [--repeat 20] [--soc arm-dsp-dla] [--out fitted.toml]

The sample models hold four networks.  Fit set (``FIT``): one file of each of three networks that
together cover every kernel class and op family of the samples -- tiny_detector.onnx (NCHW 3x3
convs with short and long reductions, a 1x1 conv, detection post-processing: split, sigmoid,
top-k, non-max suppression), transformer_encoder.onnx (matmuls, batched attention matmuls, layer
norm, softmax, GELU, copies) and mobilenet_v1_025_int8.tflite (NHWC depthwise and pointwise convs
with int8 quantize / dequantize epilogues, mean).  Held out (``HOLDOUT``, reported, never fitted
to): the fourth network, digits_cnn, through all four of its importers and layouts (ONNX NCHW,
TFLite NHWC float, TFLite int8 with quantize / dequantize, torch.export), whose matrix-vector
matmuls (``matmul.gemv``) and max-pooling are not in the fit set.

``cross_validation`` then holds out each network in turn (fit on one file of each of the other
three), on the same measurements: where a held-out network has kernel classes no fit model has
(MobileNet's NHWC depthwise / pointwise convs, the transformer's layer norm), this shows how far the
fitted figures carry.

Per model: the fastest whole inference (TVM llvm, this machine; the models are measured in turns,
at least ``--repeat`` runs each), the cost model's estimate with the fitted host (every op on the
host), their ratio, and the median per-op error measured per TVM kernel (see ``npukit.calibrate``).
Goals: total within +-15 %, median per-op error <= 30 %.  Prints one JSON document; ``--out`` also
writes the fitted profile, which loads with ``npukit.load_soc(path)`` and serves as the host lane
of any study.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from _common import SAMPLES, emit

import npukit
from npukit.calibrate import calibrate, measure_models

# network -> its sample files; the first file of a network is the one fitted when it is in a fit set
NETWORKS = {
    "tiny_detector": ["tiny_detector.onnx"],
    "transformer_encoder": ["transformer_encoder.onnx"],
    "mobilenet_v1_025_int8": ["mobilenet_v1_025_int8.tflite"],
    "digits_cnn": ["digits_cnn.onnx", "digits_cnn_float.tflite", "digits_cnn_int8.tflite", "digits_cnn.pt2"],
}
FIT = ["tiny_detector.onnx", "transformer_encoder.onnx", "mobilenet_v1_025_int8.tflite"]
HOLDOUT = NETWORKS["digits_cnn"]
RATIONALE = ("fit: one file of each of three networks covering every kernel class and op family of the samples "
             "(NCHW convs and detection post-processing; matmuls, layer norm, softmax; NHWC depthwise / pointwise "
             "convs with int8 quantize / dequantize); held out: the fourth network, digits_cnn, through all four "
             "importers / layouts, with matmul.gemv and max_pool2d not in the fit set")  # fmt: skip


def _goals(rows: list[dict]) -> None:
    for m in rows:
        m["goal_total_within_15pct"] = abs(m["ratio"] - 1) <= 0.15
        m["goal_median_op_error_le_30pct"] = m["median_op_error"] <= 0.30


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--soc", default="arm-dsp-dla")
    ap.add_argument("--out", help="write the fitted profile here (default: a temporary file, then removed)")
    a = ap.parse_args()
    out = a.out or os.path.join(tempfile.mkdtemp(prefix="npukit-cal-"), "fitted.toml")
    t0 = time.perf_counter()
    files = [f for fs in NETWORKS.values() for f in fs]
    skipped = {}
    try:
        import torch  # noqa: F401, PLC0415 - the .pt2 sample needs torch
    except ImportError:
        skipped["digits_cnn.pt2"] = "torch is not installed"
    files = [f for f in files if f not in skipped]
    measured = dict(zip(files, measure_models([SAMPLES / f for f in files], a.repeat)))  # in turns
    measure_s = time.perf_counter() - t0

    holdout = [f for f in HOLDOUT if f in measured]
    res = calibrate([measured[f] for f in FIT], a.soc, repeat=a.repeat, out=out, holdout=[measured[f] for f in holdout])
    res.pop("profile")
    _goals(res["models"])

    cv = []
    for net, net_files in NETWORKS.items():
        fit = [fs[0] for n, fs in NETWORKS.items() if n != net]
        held = [f for f in net_files if f in measured]
        r = calibrate([measured[f] for f in fit], a.soc, repeat=a.repeat, holdout=[measured[f] for f in held])
        rows = [m for m in r["models"] if not m["fit"]]
        _goals(rows)
        cv.append({"held_out_network": net, "fit_models": fit, "reduction": r["reduction"],
                   "op_overhead_cycles": r["op_overhead_cycles"], "models": rows})  # fmt: skip
    seconds = time.perf_counter() - t0

    fitted = npukit.load_soc(out)  # the saved profile loads, and drives a study with the host as its lane
    study = npukit.Study(SAMPLES / "digits_cnn.onnx", fitted)
    held_rows = [m for m in res["models"] if not m["fit"]]
    doc = {
        "benchmark": "host_calibration",
        **res,
        "fit_models": FIT,
        "holdout_models": holdout,
        "split_rationale": RATIONALE,
        "skipped": skipped,
        "goals": {
            "held_out_all_totals_within_15pct": all(m["goal_total_within_15pct"] for m in held_rows),
            "held_out_all_median_op_error_le_30pct": all(m["goal_median_op_error_le_30pct"] for m in held_rows),
            "fit_models_failing": [
                m["model"]
                for m in res["models"]
                if m["fit"] and not (m["goal_total_within_15pct"] and m["goal_median_op_error_le_30pct"])
            ],
        },  # fmt: skip
        "cross_validation": cv,
        "measure_s": round(measure_s, 1),
        "seconds": round(seconds, 1),
        "profile_loads": fitted.name,
        "study_with_fitted_host_latency_us": round(study.totals["latency_us"], 3),
    }
    if not a.out:
        os.unlink(out)
        os.rmdir(os.path.dirname(out))
        doc["out"] = None
    emit(doc)


if __name__ == "__main__":
    main()
