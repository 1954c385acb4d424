"""Support toggle -> new Plan, for both placement policies, medians (issues 4 and 13).

Each edit switches one (processor, op) support bit; every edit is a distinct configuration and the
pipeline's partition caches are cleared before it, so each figure is a real BYOC partition (and,
for the cost policy, a real placement search plus the first-fit baseline it is held against).
Also printed: partitions and estimated latency of the 1,161-op transformer on arm-dsp-dla under
first-fit and cost.

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


def bench(model: str, soc: str, n: int, placement: str) -> dict:
    study = npukit.Study(SAMPLES / model, soc, placement=placement)
    _ = study.plan  # warm: import, capability verdicts, pattern objects
    times = []
    for proc, kind, on in toggles(study, n):
        pipeline.PARTS.clear()  # every edit is a real BYOC partition, never a cache hit
        pipeline.CHOICES.clear()
        times.append(timed(lambda proc=proc, kind=kind, on=on: (study.set_support(proc, kind, on), study.plan)))
    study.reset()
    study.set_placement(placement)
    return {"model": model, "soc": soc, "placement": placement, "ops": len(study.graph.ops),
            "partitions": len(study.plan.partitions), "latency_us": round(study.totals["latency_us"], 3),
            "toggle_to_plan": summary(times)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=20)
    a = ap.parse_args()
    res = []
    for placement in ("first-fit", "cost"):
        res += [bench("mobilenet_v1_025_int8.tflite", "arm-dsp-dla", a.edits, placement),
                bench("transformer_encoder.onnx", "arm-dsp-dla", max(4, a.edits // 4), placement)]  # fmt: skip
    emit({"benchmark": "partition", "results": res,
          "goals": {"mobilenet cost-policy edit median_ms": 100.0}})  # fmt: skip


if __name__ == "__main__":
    main()
