"""Support toggle -> new Plan, for both placement policies, medians (issues 4 and 13).

Each edit switches one (processor, op) support bit; every edit is a distinct configuration and the
pipeline's partition caches are cleared before it, so each figure is a real BYOC partition (and,
for the cost policy, a real placement search plus the first-fit baseline it is held against).
Kept across edits, as in a user's session, is what no support toggle or pin changes the content of:
the cost model's kernels, the placement search's evaluated virtual plans and additive figures, the
all-host baseline's partition (it depends only on the ops pinned away from the host) and the costs
of a plan already costed at the same bit-widths.
Also printed: partitions and estimated latency of the 1,161-op transformer on arm-dsp-dla under
first-fit and cost.

    python benchmarks/partition.py [--edits 20] [--big-edits 6] [--big-cost-edits 4] [--no-big]

Every BYOC partition of an edit is npukit's replay of TVM's passes (``npukit.byocsim``, held equal
to TVM's own by tests/test_incremental.py); ``NPUKIT_BYOC=tvm`` runs TVM's passes on every edit
instead (the figures before the replay).  ``--big-edits``: edits on the generated 10,006-op
transformer (``benchmarks/big_model.py``) under first-fit; ``--big-cost-edits`` under the cost
policy (its placement search is not incremental: every edit re-runs it on the whole model).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

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


def bench(model, soc: str, n: int, placement: str) -> dict:
    study = npukit.Study(model if isinstance(model, Path) else SAMPLES / model, soc, placement=placement)
    model = Path(model).name
    _ = study.plan  # warm: import, capability verdicts, pattern objects
    times = []
    for proc, kind, on in toggles(study, n):
        pipeline.clear_partition_caches()  # every edit is a real BYOC partition, never a cache hit
        times.append(timed(lambda proc=proc, kind=kind, on=on: (study.set_support(proc, kind, on), study.plan)))
    study.reset()
    study.set_placement(placement)
    return {"model": model, "soc": soc, "placement": placement, "ops": len(study.graph.ops),
            "partitions": len(study.plan.partitions), "latency_us": round(study.totals["latency_us"], 3),
            "toggle_to_plan": summary(times)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--big-edits", type=int, default=6)
    ap.add_argument("--big-cost-edits", type=int, default=4,
                    help="edits on the 10,006-op model under the cost policy (0: skip; its first placement takes a while)")
    ap.add_argument("--no-big", action="store_true")
    a = ap.parse_args()
    res = []
    for placement in ("first-fit", "cost"):
        res += [bench("mobilenet_v1_025_int8.tflite", "arm-dsp-dla", a.edits, placement),
                bench("transformer_encoder.onnx", "arm-dsp-dla", max(4, a.edits // 4), placement)]  # fmt: skip
    if not a.no_big:
        import big_model  # noqa: PLC0415

        res.append(bench(big_model.path(), "arm-dsp-dla", a.big_edits, "first-fit"))
        if a.big_cost_edits:
            res.append(bench(big_model.path(), "arm-dsp-dla", a.big_cost_edits, "cost"))
    emit({"benchmark": "partition", "byoc": os.environ.get("NPUKIT_BYOC", "replay"), "results": res,
          "goals": {"mobilenet edit median_ms": 5.0, "1161 ops edit median_ms": 30.0,
                    "10k ops edit median_ms": 300.0, "p95 / median": 2.0}})  # fmt: skip


if __name__ == "__main__":
    main()
