"""Code generation speed, memory plan quality and target builds (issues 11 and 12).  One JSON document.

    python benchmarks/export.py [--repeat 5] [--quick]

* ``cold_export``: in a fresh process per profile (TVM imported and the model loaded first, the
  simulator's compiled artefacts taken from npukit's disk cache as on any second run), the first
  ``study.export(dir)`` of MobileNet-v1-0.25 int8 (146 ops): calibration (the activation ranges the
  integer grids need; its disk-cache entry deleted first) + generation (TVM's host C, the BYOC
  wrappers, weights, memory plan) + the atomic write.  Goal <= 2 s.  ``cold_export_cached_ranges``:
  the same in a later process, the ranges read from npukit's disk cache.
* ``regenerate``: on one study, ``set_bits`` on an accelerator then ``study.code`` (the pipeline's
  project cache is cleared before each, every other cache kept: what an edit really pays), alternating
  two bit-widths; and ``set_support`` toggles: an op moved off an accelerator the first time (TVM
  lowers its host C), and toggled again (host C from the cache).  Goals: bit-width <= 200 ms,
  support toggle <= 1 s.
* ``arena``: for every sample on every bundled profile where it imports, the static arena over the
  live-bytes lower bound.  Goal <= 1.10.
* ``targets``: every sample built as Cortex-M7 firmware (cortex-m7-cmsis-nn, ``make target``) and
  digits on every other profile's target: build seconds, flash / SRAM used (the toolchain's
  ``size``) against the profile's budgets, and one run of the built program under its emulator
  bit-exact against the host build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _common import ROOT, SAMPLES, emit, summary, timed

SAMPLE_FILES = ["digits_cnn.onnx", "digits_cnn.pt2", "digits_cnn_float.tflite", "digits_cnn_int8.tflite",
                "mobilenet_v1_025_int8.tflite", "tiny_detector.onnx", "transformer_encoder.onnx"]  # fmt: skip
MOBILENET = "mobilenet_v1_025_int8.tflite"

COLD = r"""
import json, sys, tempfile, time
import npukit
from npukit import pipeline
import npukit.tvm.byoc, npukit.tvm.hostc  # TVM imported before timing
s = npukit.Study(sys.argv[1], sys.argv[2]); s.result; s.data
t0 = time.perf_counter(); pipeline.simulator(s._model); t1 = time.perf_counter()
f = pipeline._ranges_file(s._model, s.data)
if sys.argv[3] == "fresh" and f is not None and f.exists():
    f.unlink()
cached = f is not None and f.exists()
t1 = time.perf_counter()
pipeline.calibration(s._model, s.data); t2 = time.perf_counter()
p = s.project; t3 = time.perf_counter()
d = tempfile.mkdtemp(); s.export(d + "/export"); t4 = time.perf_counter()
print("NPUKIT_COLD " + json.dumps({"simulator_load_s": t1 - t0, "calibration_s": t2 - t1, "generate_s": t3 - t2,
      "write_s": t4 - t3, "export_s": t4 - t1, "export_with_simulator_s": t4 - t0, "files": len(p.files),
      "ranges_from_disk_cache": cached}))
"""


def cold_export(model: str, soc: str, fresh: bool = True) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    mode = "fresh" if fresh else "cached"
    r = subprocess.run([sys.executable, "-c", COLD, str(SAMPLES / model), soc, mode], capture_output=True, text=True,
                       cwd=str(ROOT), env=env, timeout=900)  # fmt: skip
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("NPUKIT_COLD ")), None)
    if line is None:
        return {"model": model, "profile": soc, "error": (r.stderr or r.stdout)[-800:]}
    d = {k: round(v, 3) if isinstance(v, float) else v for k, v in json.loads(line[len("NPUKIT_COLD ") :]).items()}
    return {"model": model, "profile": soc, **d, "goal_s": 2.0, "meets_goal": d["export_with_simulator_s"] <= 2.0}


def regenerate(model: str, soc: str, accel: str, bits: tuple[str, str], toggle: list[str], repeat: int) -> dict:
    import npukit
    from npukit import pipeline

    s = npukit.Study(SAMPLES / model, soc)
    s.code  # noqa: B018 - warm: calibration, host C, weights text
    times = []
    for k in range(repeat):
        pipeline.CODE.clear()
        b = bits[k % 2]
        times.append(timed(lambda b=b: (s.set_bits(b, processor=accel), s.code)))
    s.set_bits(None, processor=accel)
    out = {"model": model, "profile": soc, "bit_width_edit": {"processor": accel, "bits": list(bits), **summary(times),
                                                              "goal_ms": 200}}  # fmt: skip
    out["bit_width_edit"]["meets_goal"] = out["bit_width_edit"]["median_ms"] <= 200
    tog = {}
    for op in toggle:
        pipeline.CODE.clear()
        first = timed(lambda op=op: (s.set_support(accel, op, False), s.code))
        moved = sum(1 for p in s.plan.processor if p == s.soc.host)
        again = []
        for _ in range(max(1, repeat // 2)):
            pipeline.CODE.clear()
            again.append(timed(lambda op=op: (s.set_support(accel, op, True), s.code)))
            pipeline.CODE.clear()
            again.append(timed(lambda op=op: (s.set_support(accel, op, False), s.code)))
        s.set_support(accel, op, True)
        tog[op] = {"ops_on_host_after": moved, "first_ms": round(first * 1000, 1), "repeat": summary(again),
                   "goal_ms": 1000, "meets_goal": first <= 1.0 and statistics.median(again) <= 1.0}  # fmt: skip
    out["support_toggle"] = tog
    return out


def arena_all() -> list[dict]:
    import npukit
    from npukit.soc import bundled

    rows = []
    for model in SAMPLE_FILES:
        for soc in sorted(bundled()):
            try:
                p = npukit.Study(SAMPLES / model, soc).project
            except Exception as e:  # noqa: BLE001 - a sample that does not import or lower is reported
                rows.append({"model": model, "profile": soc, "error": f"{type(e).__name__}: {str(e)[:200]}"})
                continue
            rows.append({"model": model, "profile": soc, "arena_bytes": p.arena_bytes, "lower_bound_bytes": p.lower_bound,
                         "ratio": round(p.arena_bytes / max(p.lower_bound, 1), 4), "weight_bytes": p.weight_bytes})  # fmt: skip
    return rows


def target_build(model: str, soc: str) -> dict:
    import numpy as np

    import npukit
    from npukit.codegen.build import run_program
    from npukit.codegen.targets import available, get_target

    s = npukit.Study(SAMPLES / model, soc)
    tgt = get_target(s.soc.target)
    ok, why = available(tgt)
    if not ok:
        return {"model": model, "profile": soc, "target": tgt.name, "skipped": why}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = Path(tmp) / "export"
        t0 = time.perf_counter()
        r = s.fit(d)
        fit_s = time.perf_counter() - t0
        g = s.graph
        shapes = [g.tensors[t].shape for t in g.inputs]
        host_s = timed(lambda: subprocess.run(["make", "-s"], cwd=d, check=True, capture_output=True))
        x = list(s.data.samples[0])
        (d / "w").mkdir()
        t1 = time.perf_counter()
        got_t = run_program(d, lambda a: tgt.run_argv(tgt.program_name("model"), a), x, shapes, d / "w")
        run_s = time.perf_counter() - t1
        got_h = run_program(d, ["./model"], x, shapes, d / "w")
    return {"model": model, "profile": soc, "target": tgt.name, "build_s": round(r["build_s"], 3),
            "export_and_build_s": round(fit_s, 3), "host_build_s": round(host_s, 3), "run_s": round(run_s, 3),
            "bit_exact_with_host": all(np.array_equal(a, b) for a, b in zip(got_t, got_h)),
            "flash_used": r["flash_used"], "flash_bytes": r["flash_bytes"], "sram_used": r["sram_used"],
            "sram_bytes": r["sram_bytes"], "over_budget": r["over_budget"], "sizes": r["sizes"],
            "weights_section_bytes": r["weights_section_bytes"], "arena_section_bytes": r["arena_section_bytes"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one cold profile, no per-profile target builds")
    a = ap.parse_args()
    from npukit.soc import bundled

    cold_profiles = ["cortex-m7-cmsis-nn"] if a.quick else ["cortex-m7-cmsis-nn", "ethos-u55-256", "arm-dsp-dla"]
    doc = {"benchmark": "export", "cold_export": [cold_export(MOBILENET, p) for p in cold_profiles]}
    # a later process: the calibrated ranges come from npukit's disk cache
    doc["cold_export_cached_ranges"] = [cold_export(MOBILENET, p, fresh=False) for p in cold_profiles]
    doc["regenerate"] = [
        regenerate(MOBILENET, "cortex-m7-cmsis-nn", "cmsis_nn", ("int16", "int8"), ["softmax", "conv2d"], a.repeat),
        regenerate(MOBILENET, "ethos-u55-256", "npu", ("int16", "int8"), ["avg_pool2d"], a.repeat),
    ]
    arena = arena_all()
    ratios = [r["ratio"] for r in arena if "ratio" in r]
    doc["arena"] = {"max_ratio": max(ratios), "goal": 1.10, "meets_goal": max(ratios) <= 1.10, "rows": arena}
    builds = [target_build(m, "cortex-m7-cmsis-nn") for m in SAMPLE_FILES]
    if not a.quick:
        builds += [target_build("digits_cnn.onnx", p) for p in sorted(bundled()) if p != "cortex-m7-cmsis-nn"]
    doc["targets"] = builds
    emit(doc)


if __name__ == "__main__":
    main()
