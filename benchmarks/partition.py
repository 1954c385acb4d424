"""Support toggle -> new Plan (FuseOpsByPattern + MergeCompositeFunctions + read-back), medians.

Each edit switches one (processor, op) support bit; every edit is a distinct configuration and the
Study's partition cache is cleared before it, so each figure is a real BYOC partition, not a hit.
Goals (issue 4): <= 60 ms at MobileNet class, <= 0.5 s at 1,000 ops.

    python benchmarks/partition.py [--edits 20]
"""

from __future__ import annotations

import argparse

from _common import SAMPLES, emit, summary, timed

import npukit
from npukit import pipeline


def toggles(study, n: int) -> list[tuple[str, str, bool]]:
    """Distinct support edits on ops the model has: disable one kind, re-enable it, next kind..."""
    kinds = sorted({op.kind for op in study.graph.ops})
    pairs = [(p, k) for p in study.soc.accelerators for k in kinds if k in study.soc.processor(p).ops]
    out = []
    i = 0
    while len(out) < n:
        p, k = pairs[i % len(pairs)]
        out += [(p, k, False), (p, k, True)]
        i += 1
    return out[:n]


def bench(model: str, soc: str, n: int) -> dict:
    study = npukit.Study(SAMPLES / model, soc)
    _ = study.plan  # warm: import, capability verdicts, pattern objects
    times = []
    for proc, kind, on in toggles(study, n):
        pipeline.PARTS.clear()  # every edit is a real BYOC partition, never a cache hit
        times.append(timed(lambda proc=proc, kind=kind, on=on: (study.set_support(proc, kind, on), study.plan)))
    return {"model": model, "soc": soc, "ops": len(study.graph.ops), "partitions": len(study.plan.partitions),
            "toggle_to_plan": summary(times)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=20)
    a = ap.parse_args()
    res = [bench("mobilenet_v1_025_int8.tflite", "arm-dsp-dla", a.edits),
           bench("transformer_encoder.onnx", "arm-dsp-dla", a.edits)]  # fmt: skip
    goals = {"mobilenet_v1_025_int8.tflite": 60.0, "transformer_encoder.onnx": 500.0}
    for r in res:
        r["goal_median_ms"] = goals[r["model"]]
        r["meets_goal"] = r["toggle_to_plan"]["median_ms"] <= goals[r["model"]]
    emit({"benchmark": "partition", "results": res})


if __name__ == "__main__":
    main()
