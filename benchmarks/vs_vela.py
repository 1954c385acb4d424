"""Trust check: npukit's ethos-u55-256 estimates held against Arm's Vela on the int8 TFLite samples.

    python benchmarks/vs_vela.py [--vela-repeat 5] [--no-layers] [MODEL.tflite ...]

Vela (``pip install ethos-u-vela``, the ``bench`` extra; a benchmark-only dependency) compiles each
model with ``--accelerator-config ethos-u55-256``, the bundled ``Arm/vela.ini``, system config
``Ethos_U55_High_End_Embedded`` and memory mode ``Shared_Sram`` (the set-up the bundled profile
``ethos-u55-256`` describes), with ``--verbose-performance`` (writes ``<model>_per-layer.csv``) and
``--enable-debug-db`` (writes ``<model>_debug.xml``).  The files read:

* ``<model>_summary_<system>.csv``: ``cycles_total`` (Vela's total), ``cycles_npu``, ...;
* ``<model>_per-layer.csv``: one row per NPU pass ("Op Cycles" = max of the NPU, SRAM and flash
  access cycles of the pass);
* ``<model>_debug.xml``: the same passes in its ``perf`` table with ``source_id``, and the
  ``source`` table whose ``ext_key`` is the operator's index in the input TFLite subgraph; the
  operator's first output tensor name (read with the ``tflite`` flatbuffer package) is the name
  npukit gives the ops that came from it (``Op.source``).

What is compared (per model):

* ``vela_total_cycles``: Vela's ``cycles_total`` (= the sum of the per-pass "Op Cycles", checked).
* ``npukit_total_cycles``: the sum of ``cycles`` of npukit's ops on the ``npu`` processor whose
  source operator Vela also ran on the NPU, less the ``call_overhead_cycles`` of each NPU
  partition (the driver's ``ethosu_invoke`` round trip, which Vela's cycle count does not
  include).  Also printed: ``npukit_latency_cycles`` = ``totals["latency_us"] * clock_mhz`` (the
  whole inference, CPU boundaries and the driver call included) for reference.
* ``spearman_rho``: Spearman rank correlation between Vela's cycles per source operator (its
  passes summed; a softmax is ~29 passes) and npukit's cycles per source operator (the ops of one
  TFLite operator summed: a conv composite's dequantize/conv2d/add/quantize/clip), over the
  operators both ran on the NPU.  ``n_layers`` is how many operators that is.
* ``vela_compile_s``: the median wall time of Vela's plain compile (``vela.main`` in this
  process, no report flags, output to a temporary directory) over ``--vela-repeat`` runs, measured
  in this run; ``vela_report_compile_s`` the one compile with the report flags.

Goal (issue 5): ratio within 1 +- 0.2, rho >= 0.9.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = [ROOT / "sample_models" / "mobilenet_v1_025_int8.tflite", ROOT / "sample_models" / "digits_cnn_int8.tflite"]
ACCEL = "ethos-u55-256"
SYSTEM = "Ethos_U55_High_End_Embedded"
MEMORY = "Shared_Sram"
SOC = "ethos-u55-256"


def vela_version() -> str:
    from ethosu.vela import __version__  # noqa: PLC0415

    return str(__version__)


def vela_args(model: Path, out: Path, reports: bool) -> list[str]:
    args = [str(model), "--accelerator-config", ACCEL, "--config", "Arm/vela.ini", "--system-config", SYSTEM,
            "--memory-mode", MEMORY, "--output-dir", str(out)]  # fmt: skip
    if reports:
        args += ["--verbose-performance", "--enable-debug-db"]
    return args


def run_vela(model: Path, out: Path, reports: bool) -> tuple[float, str]:
    """One Vela compile in this process; returns (seconds, what it printed)."""
    from ethosu.vela.vela import main  # noqa: PLC0415

    buf = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        rc = main(vela_args(model, out, reports))
    dt = time.perf_counter() - t0
    if rc:
        raise RuntimeError(f"vela failed on {model} (exit {rc}):\n{buf.getvalue()[-2000:]}")
    return dt, buf.getvalue()


def vela_compile_seconds(model: Path, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as d:
            times.append(run_vela(model, Path(d), reports=False)[0])
    return times


def _tables(xml_text: str) -> dict[str, list[dict[str, str]]]:
    out = {}
    for m in re.finditer(r'<table name="(\w+)">\s*<!\[CDATA\[(.*?)\]\]>', xml_text, re.S):
        out[m.group(1)] = list(csv.DictReader(io.StringIO(m.group(2).strip())))
    return out


def tflite_output_names(model: Path) -> list[str]:
    """First output tensor name of each operator of subgraph 0, by operator index."""
    import tflite  # noqa: PLC0415

    m = tflite.Model.GetRootAsModel(model.read_bytes(), 0)
    sg = m.Subgraphs(0)
    names = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        names.append(sg.Tensors(op.Outputs(0)).Name().decode() if op.OutputsLength() else f"op{i}")
    return names


def read_vela(model: Path, out: Path) -> dict:
    """Vela's totals and its cycles per source TFLite operator (by output tensor name)."""
    stem = model.stem
    summary = list(csv.DictReader(open(out / f"{stem}_summary_{SYSTEM}.csv", encoding="utf-8")))[0]
    layers = list(csv.DictReader(open(out / f"{stem}_per-layer.csv", encoding="utf-8")))
    tabs = _tables((out / f"{stem}_debug.xml").read_text(encoding="utf-8"))
    names = tflite_output_names(model)
    ext = {r["id"]: int(r["ext_key"]) for r in tabs["source"]}
    per_source: dict[str, dict] = {}
    for r in tabs["perf"]:
        src = names[ext[r["source_id"]]]
        d = per_source.setdefault(src, {"cycles": 0.0, "npu": 0.0, "sram": 0.0, "flash": 0.0, "passes": 0,
                                        "operator": r["operator"]})  # fmt: skip
        d["cycles"] += float(r["op_cycles"])
        d["npu"] += float(r["npu_cycles"])
        d["sram"] += float(r.get("Sram_ac") or 0)
        d["flash"] += float(r.get("OffChipFlash_ac") or 0)
        d["passes"] += 1
    total = float(summary["cycles_total"])
    layer_sum = sum(float(r["Op Cycles"]) for r in layers)
    perf_sum = sum(d["cycles"] for d in per_source.values())
    if len(layers) != len(tabs["perf"]) or not math.isclose(layer_sum, perf_sum, rel_tol=1e-6):
        raise RuntimeError(f"{stem}: per-layer CSV ({len(layers)} rows, {layer_sum}) and debug DB "
                           f"({len(tabs['perf'])} rows, {perf_sum}) disagree")  # fmt: skip
    cpu = [r for r in layers if r.get("Target", "NPU") != "NPU"]
    return {"total_cycles": total, "layer_sum": layer_sum, "per_source": per_source, "summary": summary,
            "cpu_rows": len(cpu), "clock_hz": float(summary["core_clock"])}  # fmt: skip


def npukit_side(model: Path) -> dict:
    import npukit  # noqa: PLC0415

    study = npukit.Study(str(model), SOC)
    t = study.totals
    r = study.result  # noqa: SLF001 - the per-op figures as data (same as study.costs)
    g = study.graph
    soc = study.soc
    npu = [p.name for p in soc.processors if not p.host]
    per_source: dict[str, dict] = {}
    for c in r.ops:
        src = g.ops[c.op_id].source
        d = per_source.setdefault(src, {"cycles": 0.0, "procs": set(), "ops": 0})
        d["cycles"] += c.cycles
        d["procs"].add(c.processor)
        d["ops"] += 1
    calls = {}
    call_cycles = 0.0
    for part in r.plan.partitions:
        if part.processor in npu and part.ops:
            calls[part.processor] = calls.get(part.processor, 0) + 1
            co = soc.processor(part.processor).call_overhead_cycles
            call_cycles += co
            # the driver call is paid by the kernel holding the partition's first op: take it off that
            # operator too, so per-layer figures compare like with like
            anchor = r.ops[part.ops[0]].kernel
            per_source[g.ops[anchor].source]["cycles"] -= co
    clock = soc.processor(npu[0]).clock_mhz
    return {"per_source": per_source, "npu": set(npu), "call_cycles": call_cycles, "call_partitions": calls,
            "latency_cycles": t["latency_us"] * clock, "latency_us": t["latency_us"]}  # fmt: skip


def ranks(xs: list[float]) -> list[float]:
    """Average ranks (ties share the mean of their positions), 1-based."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    try:
        from scipy.stats import spearmanr  # noqa: PLC0415

        return float(spearmanr(a, b).statistic)
    except ImportError:
        ra, rb = ranks(a), ranks(b)
        ma, mb = statistics.fmean(ra), statistics.fmean(rb)
        cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
        va = math.sqrt(sum((x - ma) ** 2 for x in ra))
        vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
        return cov / (va * vb) if va and vb else float("nan")


def compare(model: Path, vela_repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        report_s, _ = run_vela(model, out, reports=True)
        v = read_vela(model, out)
    compile_s = vela_compile_seconds(model, vela_repeat)
    n = npukit_side(model)
    rows = []
    unmatched_vela = []
    for src, vd in v["per_source"].items():
        nd = n["per_source"].get(src)
        if nd is None:
            unmatched_vela.append(src)
            continue
        if not nd["procs"] <= n["npu"]:
            continue  # npukit ran (part of) it on the CPU: not comparable
        rows.append({"source": src, "operator": vd["operator"], "vela": vd["cycles"], "npukit": nd["cycles"],
                     "vela_npu": vd["npu"], "vela_sram": vd["sram"], "vela_flash": vd["flash"],
                     "vela_passes": vd["passes"]})  # fmt: skip
    # npukit operators Vela has no pass for (a RESHAPE is a no-op for Vela): listed, and their cycles
    # count on npukit's side of the total only if npukit gives them any.
    extra = [s for s, nd in n["per_source"].items() if s not in v["per_source"] and nd["procs"] <= n["npu"]]
    extra_cycles = sum(n["per_source"][s]["cycles"] for s in extra)
    vela_total = sum(r["vela"] for r in rows)
    npukit_total = sum(r["npukit"] for r in rows) + extra_cycles  # call overheads already taken off
    rho = spearman([r["vela"] for r in rows], [r["npukit"] for r in rows])
    return {
        "model": model.name,
        "vela_version": vela_version(),
        "vela_config": {"accelerator": ACCEL, "system_config": SYSTEM, "memory_mode": MEMORY, "config": "Arm/vela.ini"},
        "vela_total_cycles": v["total_cycles"],
        "vela_npu_ops_cycles": vela_total,
        "npukit_total_cycles": round(npukit_total, 1),
        "ratio": round(npukit_total / v["total_cycles"], 4),
        "spearman_rho": round(rho, 4),
        "n_layers": len(rows),
        "npukit_latency_cycles": round(n["latency_cycles"], 1),
        "npukit_latency_us": round(n["latency_us"], 3),
        "npukit_call_overhead_cycles_excluded": n["call_cycles"],
        "vela_cpu_rows": v["cpu_rows"],
        "npukit_only_sources": extra,
        "vela_unmatched_sources": unmatched_vela,
        "vela_compile_s": round(statistics.median(compile_s), 4),
        "vela_compile_s_all": [round(x, 4) for x in compile_s],
        "vela_report_compile_s": round(report_s, 4),
        "layers": [{k: (round(x, 1) if isinstance(x, float) else x) for k, x in r.items()} for r in rows],
        "goal_met": {"ratio_within_20pct": abs(npukit_total / v["total_cycles"] - 1) <= 0.2, "rho_ge_0_9": rho >= 0.9},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", type=Path, default=MODELS)
    ap.add_argument("--vela-repeat", type=int, default=5, help="plain Vela compiles timed per model")
    ap.add_argument("--no-layers", action="store_true", help="leave the per-layer rows out of the JSON")
    args = ap.parse_args(argv)
    try:
        vela_version()
    except ImportError:
        print("vs_vela: Vela is not installed: pip install 'ethos-u-vela>=5.2,<6' (or pip install -e '.[bench]')",
              file=sys.stderr)  # fmt: skip
        return 2
    res = [compare(m, args.vela_repeat) for m in args.models]
    if args.no_layers:
        for r in res:
            r.pop("layers")
    print(json.dumps({"benchmark": "vs_vela", "soc": SOC, "models": res}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
