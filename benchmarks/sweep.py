"""Sweep throughput (issue 16), at MobileNet class (``mobilenet_v1_025_int8.tflite``, 146 ops) on
``arm-dsp-dla``; prints one JSON document.

    python benchmarks/sweep.py [--configs 6144] [--partitions 24] [--skip-dask]

(a) ``cost_only``: a fixed support set (one partition), every configuration a new combination of
    DLA MACs/cycle x on-chip memory x clock x link bandwidth x DLA / DSP / host bit-widths, so the
    profile changes every 8 configurations and the DLA's kernels are re-costed on every DLA
    bit-width or profile change.  Measured in this process on one core (``workers=0``):
    ``configs_per_s_per_core`` = configurations / wall time of the whole ``npukit.sweep`` call
    (grid, checks, profile edits, estimates, rows, the Arrow table; the model import and the one
    partition are done before, as a worker does them once), after one run of the same sweep (its
    kernels memoized: a second sweep over the same space, e.g. with more bit-widths);
    ``cost_only_cold`` is the first run, every kernel costed for the first time.
    ``configs_per_cpu_s`` divides by this process's CPU time instead (the machine is shared).
    ``bits_only`` is a grid of bit-widths alone (per processor and for four layers) on one profile.
    Goal >= 2,000 / s per core.  These use ``placement = "first-fit"`` (a fixed support set has one
    partition); ``cost_placement`` is a smaller grid of the same kind under the cost-aware
    placement, which decides the partition again for every profile and bit-width assignment.
(b) ``new_partition``: every configuration pins a different set of nodes to the host (random
    samples of 2^12 pin sets), so each one runs a new BYOC partition (FuseOpsByPattern +
    MergeCompositeFunctions, through npukit's exact replay of the two passes, ``npukit.byocsim``;
    ``NPUKIT_BYOC=tvm`` runs TVM's own) before its estimate.
(c) ``dask``: the grid of (a) on a ``distributed.LocalCluster`` of 1 and of 2 worker processes (one
    thread each), after a warm-up sweep on each (imports, the partition); ``speedup`` = time on 1 /
    time on 2.  Goal >= 1.8x.  The machine's load average is reported beside it (2 cores shared).
"""

from __future__ import annotations

import argparse
import os
import time

from _common import SAMPLES, emit

MODEL = SAMPLES / "mobilenet_v1_025_int8.tflite"
SOC = "arm-dsp-dla"


def cost_grid(n: int) -> str:
    """A product grid of about ``n`` configurations (a multiple of 8)."""
    macs = [128 * (k + 1) for k in range(max(1, n // 8 // 24))]
    return (
        "[grid]\n"
        f'"soc.processors.dla.macs_per_cycle.int8" = {macs}\n'
        '"soc.processors.dla.onchip_bytes" = [131072, 262144, 524288, 1048576]\n'
        '"soc.processors.dla.clock_mhz" = [600, 800, 1000]\n'
        '"soc.links.0.bandwidth_gbps" = [4.0, 8.0]\n'
        '"bits.dla" = ["int8", "fp16"]\n"bits.dsp" = ["int8", "int16"]\n"bits.arm" = ["int8", "fp32"]\n'
        '"placement" = "first-fit"\n'
    )


BITS_GRID = ('[grid]\n"placement" = "first-fit"\n"bits.dla" = ["int8", "fp16"]\n"bits.dsp" = ["int8", "int16", "fp16", "fp32"]\n'
             '"bits.arm" = ["int8", "int16", "fp16", "fp32"]\n')  # fmt: skip


def pin_grid(model, samples: int) -> str:
    nodes = []
    for op in model.graph.ops:
        if op.kind == "conv2d" and op.source not in nodes:
            nodes.append(op.source)
    body = "".join(f'"pin.{n}" = ["none", "arm"]\n' for n in nodes[:12])
    return f'[grid]\nmode = "random"\nsamples = {samples}\nseed = 16\n"placement" = "first-fit"\n{body}'


def rate(fn, n: int) -> dict:
    t, c = time.perf_counter(), time.process_time()
    df = fn()
    dt, dc = time.perf_counter() - t, time.process_time() - c
    assert len(df) == n and df["failure"].isna().all(), df["failure"].dropna().head()
    return {"configs": n, "seconds": round(dt, 3), "configs_per_s": round(n / dt, 1),
            "cpu_seconds": round(dc, 3), "configs_per_cpu_s": round(n / dc, 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", type=int, default=6144)
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--skip-dask", action="store_true")
    args = ap.parse_args()

    import npukit
    from npukit import pipeline as pl

    m = pl.load(MODEL)
    soc = npukit.load_soc(SOC)
    pl.evaluate(m, soc, npukit.Config())  # the import and the one partition, as a worker does them once
    doc: dict = {"model": MODEL.name, "ops": len(m.graph.ops), "soc": SOC, "cpu_count": os.cpu_count()}

    grid = npukit.load_grid(cost_grid(args.configs))
    npukit.sweep(m, soc, grid, workers=0, progress=False)  # warm: checks, per-plan memos, kernels
    r = rate(lambda: npukit.sweep(m, soc, grid, workers=0, progress=False), len(grid))
    doc["cost_only"] = {**r, "configs_per_s_per_core": r["configs_per_s"], "goal": 2000,
                        "profiles": len(grid) // 8}  # fmt: skip
    pl.clear_caches()  # the same sweep with nothing costed before (new partition, empty kernel memo)
    pl.evaluate(m, soc, npukit.Config())
    doc["cost_only_cold"] = rate(lambda: npukit.sweep(m, soc, grid, workers=0, progress=False), len(grid))
    convs = [op.source for op in m.graph.ops if op.kind == "conv2d"]
    gb = npukit.load_grid(BITS_GRID + "".join(f'"layer_bits.{c}" = ["int8", "fp16"]\n' for c in convs[:4]))
    doc["bits_only"] = rate(lambda: npukit.sweep(m, soc, gb, workers=0, progress=False), len(gb))
    gc = npukit.load_grid(cost_grid(192).replace('"first-fit"', '"cost"'))
    r = rate(lambda: npukit.sweep(m, soc, gc, workers=0, progress=False), len(gc))
    doc["cost_placement"] = {**r, "note": "placement = cost: the partition is decided again for every profile and "
                                          "bit-width assignment (its BYOC runs cached by what they accept)"}  # fmt: skip

    gp = npukit.load_grid(pin_grid(m, args.partitions))
    r = rate(lambda: npukit.sweep(m, soc, gp, workers=0, progress=False), len(gp))
    doc["new_partition"] = {**r, "ms_per_config": round(1000 * r["seconds"] / r["configs"], 2)}

    if not args.skip_dask:
        from distributed import Client, LocalCluster

        warm = npukit.load_grid(cost_grid(8 * 24))
        times = {}
        for n in (1, 2):
            with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
                    Client(cl) as c:  # fmt: skip
                npukit.sweep(m, soc, warm, client=c, progress=False)
                times[n] = rate(lambda c=c: npukit.sweep(m, soc, grid, client=c, progress=False), len(grid))
        doc["dask"] = {"workers_1": times[1], "workers_2": times[2],
                       "speedup": round(times[1]["seconds"] / times[2]["seconds"], 2), "goal": 1.8}  # fmt: skip
    doc["load_average"] = [round(x, 2) for x in os.getloadavg()]
    emit(doc)


if __name__ == "__main__":
    main()
