"""Host calibration: fit a profile's host processor to this machine's CPU (``npukit calibrate``).

What it does, for the models given (the fit set) and any held-out models:

1. Measure (``npukit.tvm.measure``, the only part that needs TVM): compile each model with TVM's
   default CPU pipeline, run it ``repeat`` times, and take the median time of every kernel (a
   kernel is what FuseOps made: one op, or several fused) and of the whole inference.
2. Estimate with the cost model, every op on the host (one partition, no boundaries): per op
   compute_cycles at efficiency 1 (C) and memory_cycles (M), at the host's ``clock_mhz`` set to
   this machine's clock (``/proc/cpuinfo``; the profile's own clock when unknown).
3. Fit, on the fit set only:

   * ``efficiency[kind]`` for every op kind with measured compute: the kernel estimate is
     sum over its ops of max(C / efficiency[kind], M); the efficiencies are fitted by a damped
     multiplicative least-squares iteration on log(estimate / measured) over the kernels (each
     kind moves by the time-weighted geometric mean of the ratios of the kernels it is in);
     ``efficiency["*"]`` (kinds never measured) = the time-weighted geometric mean of the fitted
     ones.  Efficiency is a fraction of peak, at most 1: if a kind needs more,
     ``macs_per_cycle`` and ``vector_ops_per_cycle`` are scaled up by the largest efficiency and
     every efficiency divided by it.
   * ``op_overhead_cycles`` (per op, as the cost model charges it): searched on a grid from 0 to
     the smallest measured time per op of a kernel; for each value the efficiencies are fitted
     and the pair with the least squared log error over the kernels is kept.

   A kernel's measured time includes its share (by op count) of the time the inference spent
   outside kernels (the VM's calls and allocations), so the kernels add up to the inference.

4. Report per model: measured and estimated inference time, their ratio, and the median per-op
   error, measured per kernel: |estimate - measured| / measured over the kernels, where a
   kernel's estimate sums its ops (their overheads included) and its measured time includes its
   share (by op count) of the time the inference spent between kernels.

The fitted profile is ``SocProfile.with_changes`` of the given one (every other processor
untouched), so it can be saved (``out``, written atomically) and used as the host lane of any
study.  The fitted host describes this machine running TVM's untuned code, not the profile's
original CPU.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
from collections.abc import Sequence
from pathlib import Path

from .errors import NpukitError
from .soc import SocProfile, load_soc

_ITERATIONS = 60
_TIME_WEIGHT = 0.5  # kernels weigh by time**this in the fit (1: only the totals count; 0: every kernel alike)


def machine_clock_mhz() -> float | None:
    """This CPU's clock from /proc/cpuinfo (the first core's ``cpu MHz``), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("cpu mhz"):
                    v = float(line.split(":", 1)[1])
                    return v if v > 0 else None
    except (OSError, ValueError):
        return None
    return None


def machine_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _host_only(soc: SocProfile, host_fields: dict) -> SocProfile:
    """A profile holding only the host processor (with ``host_fields`` replaced): every op runs on it."""
    doc = {k: v for k, v in _plain(soc.raw).items() if k not in ("processors", "links", "placement", "host")}
    hdoc = dict(_plain(soc.raw["processors"][soc.host]))
    hdoc.update(host_fields)
    hdoc.pop("ops", None)
    hdoc["host"] = True
    doc["processors"] = {soc.host: hdoc}
    doc["links"] = []
    return load_soc(doc)


def _plain(x):
    if hasattr(x, "items"):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


class _Model:
    """One model: its graph, the measurement, and the per-op cost parts at efficiency 1."""

    def __init__(self, path, repeat: int):
        from .tvm.importers import import_model  # noqa: PLC0415 - calibration needs TVM; npukit does not
        from .tvm.measure import measure  # noqa: PLC0415

        self.path = path
        self.name = Path(str(path)).name if isinstance(path, (str, os.PathLike)) else type(path).__name__
        imp = import_model(path)
        self.g = imp.graph
        self.m = measure(imp.mod, self.g, repeat=repeat)

    def parts(self, soc: SocProfile) -> list:
        """OpCost per op with every op on the host of ``soc`` (a host-only profile)."""
        from .cost import CostModel  # noqa: PLC0415
        from .plan import build_plan  # noqa: PLC0415

        g = self.g
        plan = build_plan(g, soc.host, [], [("op", i) for i in range(len(g.ops))])
        bits = [soc.processor(soc.host).default_bits] * len(g.ops)
        ops, bounds = CostModel(g, soc).evaluate(plan, bits)
        self._plan, self._bounds = plan, bounds
        return ops

    def estimate_us(self, soc: SocProfile) -> tuple[float, list]:
        from .timeline import schedule  # noqa: PLC0415

        ops = self.parts(soc)
        return schedule(self.g, self._plan, soc, ops, self._bounds).makespan_us, ops


def _kernel_rows(model: _Model, base_ops) -> list[tuple[list[tuple[str, float, float, bool]], float]]:
    """Per measured kernel: [(kind, C, M, pays overhead) per op] and its measured time in us, which
    includes its share (by op count) of the time the inference spent outside kernels."""
    from .graph import VIEW_OPS  # noqa: PLC0415

    out = []
    for k, meas in _measured(model):
        rows = [(model.g.ops[i].kind, base_ops[i].compute_cycles, base_ops[i].memory_cycles,
                 model.g.ops[i].kind not in VIEW_OPS) for i in k.ops]  # fmt: skip
        out.append((rows, meas))
    return out


def _measured(model: _Model) -> list:
    """(kernel, measured us) for the kernels that ran and hold an op that is not a view, the time
    the inference spent outside kernels shared among them by their op count."""
    from .graph import VIEW_OPS  # noqa: PLC0415

    m = model.m
    real = [k for k in m.kernels if k.us > 0 and any(model.g.ops[i].kind not in VIEW_OPS for i in k.ops)]
    gap = max(0.0, m.total_us - sum(k.us for k in m.kernels))
    n_ops = sum(len(k.ops) for k in real) or 1
    return [(k, k.us + gap * len(k.ops) / n_ops) for k in real]


def _est(rows, eff, over: float) -> float:
    return sum((max(c / eff[kd], m) if c > 0 else m) + (over if paid else 0.0) for kd, c, m, paid in rows)


def _fit_eff(data, kinds: list[str], over: float) -> dict[str, float]:
    """Efficiency per kind for a given per-op overhead (cycles): damped multiplicative least squares
    on log(estimate / measured) over the kernels."""
    tot_c = sum(c for rows, _ in data for _, c, _, _ in rows)
    tot_t = sum(t for _, t in data)
    eff = dict.fromkeys(kinds, min(1.0, tot_c / tot_t) if tot_t > 0 else 1.0)
    for _ in range(_ITERATIONS):
        logsum = dict.fromkeys(kinds, 0.0)
        wsum = dict.fromkeys(kinds, 0.0)
        for rows, t in data:
            est = _est(rows, eff, over)
            if est <= 0:
                continue
            r = math.log(est / t)
            for kd, c, m, _paid in rows:
                if c > 0 and c / eff[kd] >= m:
                    w = (c / eff[kd]) / est * t ** _TIME_WEIGHT  # the kind's share of the kernel; long kernels weigh more
                    logsum[kd] += w * r
                    wsum[kd] += w
        moved = 0.0
        for kd in kinds:
            if wsum[kd] > 0:
                step = 0.7 * logsum[kd] / wsum[kd]  # estimate too high (r > 0) -> raise the efficiency
                eff[kd] = min(eff[kd] * math.exp(step), 1e3)
                moved = max(moved, abs(step))
        if moved < 1e-4:
            break
    return eff


def _fit(kernels, clock: float) -> tuple[dict[str, float], float]:
    """(efficiency per kind, op_overhead_cycles) from (ops rows, measured us) per kernel: the per-op
    overhead is searched on a grid (0 .. the smallest per-op kernel time), the efficiencies fitted
    for each, and the pair with the least squared log error over the kernels kept."""
    data = [(rows, us * clock) for rows, us in kernels if us > 0 and any(c > 0 for _, c, _, _ in rows)]
    if not data:
        return {}, 0.0
    kinds = sorted({kd for rows, _ in data for kd, c, _, _ in rows if c > 0})
    per_op = sorted(t / max(1, sum(1 for r in rows if r[3])) for rows, t in data)
    top = per_op[0]
    grid = [0.0] + [top * f for f in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    best = None
    for over in grid:
        eff = _fit_eff(data, kinds, over)
        err = sum(math.log(_est(rows, eff, over) / t) ** 2 for rows, t in data)
        if best is None or err < best[0] - 1e-12:
            best = (err, eff, over)
    return best[1], best[2]


def calibrate(models: Sequence, soc: str | SocProfile = "arm-dsp-dla", repeat: int = 20, out: str | os.PathLike | None = None,
              holdout: Sequence = ()) -> dict:  # fmt: skip
    """Fit the host processor of ``soc`` to this CPU on ``models``; report on them and on ``holdout``.

    Returns ``{"processor", "soc", "machine", "clock_mhz", "efficiency", "op_overhead_cycles",
    "throughput_scale", "models": [{"model", "fit", "measured_us", "estimated_us", "ratio",
    "median_op_error", "kernels", "compile_s"}], "profile": TOML text, "out": path or None}``.
    """
    if not models:
        raise NpukitError("calibrate: give at least one model to fit on")
    if repeat < 1:
        raise NpukitError(f"calibrate: --repeat must be >= 1, got {repeat}")
    base = load_soc(soc)
    host = base.processor(base.host)
    clock = machine_clock_mhz() or host.clock_mhz
    fit_models = [_Model(m, repeat) for m in models]
    held = [_Model(m, repeat) for m in holdout]

    # 1. parts at efficiency 1, no overhead, this machine's clock
    unit = _host_only(base, {"clock_mhz": clock, "efficiency": {"*": 1.0}, "op_overhead_cycles": 0,
                             "call_overhead_cycles": 0})  # fmt: skip
    kernels = []
    for fm in fit_models:
        kernels += _kernel_rows(fm, fm.parts(unit))
    eff, over = _fit(kernels, clock)
    if not eff:
        raise NpukitError("calibrate: no measured kernel with compute work in the fit models")
    weights: dict[str, float] = {}
    for rows, us in kernels:
        for kd, c, _m, _p in rows:
            if c > 0 and kd in eff:
                weights[kd] = weights.get(kd, 0.0) + us
    wtot = sum(weights.values()) or 1.0
    star = math.exp(sum(weights.get(k, 0.0) * math.log(v) for k, v in eff.items()) / wtot)
    scale = max(1.0, star, *eff.values())
    efficiency = {"*": _round(star / scale)}
    for k in sorted(eff):
        efficiency[k] = _round(eff[k] / scale)
    macs = {b: _round(v * scale) for b, v in host.macs_per_cycle.items()}
    vec = {b: _round(v * scale) for b, v in host.vector_ops_per_cycle.items()}
    overhead = max(0, int(round(over)))
    fitted_fields = {"clock_mhz": _round(clock), "efficiency": efficiency, "macs_per_cycle": macs,
                     "vector_ops_per_cycle": vec, "op_overhead_cycles": overhead, "call_overhead_cycles": 0}  # fmt: skip
    fitted_host = _host_only(base, fitted_fields)

    # 3. the full profile with the fitted host, and the report
    prefix = f"processors.{base.host}."
    changes = {prefix + k: v for k, v in fitted_fields.items() if k != "call_overhead_cycles"}
    changes[prefix + "description"] = (f"{host.description} -- calibrated on this machine ({machine_name()}, "
                                       f"TVM llvm untuned code): clock, throughput, efficiency and overhead fitted "
                                       f"by npukit calibrate")  # fmt: skip
    changes["name"] = f"{base.name}-calibrated"
    changes["sources"] = [*base.sources, f"npukit calibrate: {base.host} fitted to {machine_name()} on "
                          + ", ".join(fm.name for fm in fit_models) + f" ({repeat} runs)"]  # fmt: skip
    fitted = base.with_changes(changes)
    text = fitted.to_toml()
    rows = [_report(fm, fitted_host, clock, True) for fm in fit_models] + [_report(h, fitted_host, clock, False) for h in held]
    if out is not None:
        from .io import atomic_write_text  # noqa: PLC0415

        atomic_write_text(out, "# Calibrated by `npukit calibrate`; the host lane describes the machine it ran on.\n" + text)
        load_soc(Path(out))  # what was written loads
    return {
        "processor": base.host,
        "soc": base.name,
        "machine": machine_name(),
        "clock_mhz": _round(clock),
        "efficiency": efficiency,
        "op_overhead_cycles": overhead,
        "throughput_scale": _round(scale),
        "models": rows,
        "profile": text,
        "out": str(out) if out is not None else None,
    }


def _report(model: _Model, soc: SocProfile, clock: float, fit: bool) -> dict:
    est, ops = model.estimate_us(soc)
    m = model.m
    errs = []
    for k, meas in _measured(model):
        e = sum(ops[i].latency_us for i in k.ops)
        errs.append(abs(e - meas) / meas)
    return {
        "model": model.name,
        "fit": fit,
        "ops": len(model.g.ops),
        "kernels": len(m.kernels),
        "measured_us": round(m.total_us, 3),
        "estimated_us": round(est, 3),
        "ratio": round(est / m.total_us, 4) if m.total_us > 0 else float("nan"),
        "median_op_error": round(statistics.median(errs), 4) if errs else float("nan"),
        "compile_s": round(m.compile_s, 2),
        "runs": m.runs,
    }


def _round(x: float) -> float:
    """Four significant digits (profiles stay readable; the fit is not that precise)."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.4g}")
