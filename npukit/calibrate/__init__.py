"""Host calibration: fit a profile's host processor to this machine's CPU (``npukit calibrate``).

What it does, for the models given (the fit set) and any held-out models:

1. Measure (``npukit.tvm.measure``, the only part that needs TVM): compile each model with TVM's
   default CPU pipeline, run the models in turns (each at least ``repeat`` times in all, plain and
   instrumented runs alternating) and take the fastest time of every kernel (a kernel is what
   FuseOps made: one op, or several fused) and of the whole inference.  The kernels' times are
   scaled by one factor per model so they add up to the uninstrumented inference (the
   difference, a few per cent either way, is the VM's own work between calls and the
   instrument's residual disturbance).
2. Cost every op on the host (one partition, no boundaries) at this machine's clock
   (``/proc/cpuinfo``; the profile's own clock when unknown) with a unit host: efficiency 1,
   no ``reduction`` law, memory bandwidths divided by ``dram_bytes_per_cycle`` (so their ratios
   stay the profile's), ``op_overhead_cycles`` 1.  Per cost-model kernel (its anchor op) this gives
   MAC cycles W_mac, vector cycles W_vec (its epilogue included), memory cycles per byte-per-cycle
   of bandwidth M, whether it pays the per-kernel overhead, its kernel class and its reduction
   length K (``cost.Tables.kernel_class`` / ``reduction_length``).  This is the study pipeline itself
   (``npukit.pipeline.evaluate`` on a host-only profile), not a second composition of its steps.
3. Memory bandwidth B (``dram_bytes_per_cycle``; on-chip and weight bandwidths keep the profile's
   ratios to it) is measured, not fitted: a streaming copy of a buffer larger than the caches
   (``machine_bandwidth_gbps``), bytes read + written per cycle.  (Fitted, it became a knob for
   the loop rate of untuned copies -- about 1.3 B/cycle here -- and made weight-streaming
   matrix-vector kernels falsely memory-bound; on this code a kernel is memory-bound only when
   the memory system itself is the limit.)
4. Fit, on the fit set only, the cost model's own formula for the host:

       cycles = max((W_mac / util_red(K) + W_vec) / eff[key], M / B) + op_overhead_cycles

   with ``eff[key]`` looked up class -> kind -> ``"*"`` as the cost model does, and util_red(K)
   = 1 for K <= unroll, else serial * (unroll / K)^exponent (the ``reduction`` field).  The
   estimate of a TVM kernel is the sum over the cost-model kernels anchored in it.  Free
   parameters: one efficiency per key in the hierarchy ``"*"`` -> op kind -> kernel class (every
   class and kind with measured compute in the fit set, and their parents), one scalar
   ``op_overhead_cycles``, ``serial`` and ``exponent``; ``unroll`` is chosen on the grid of the
   reduction lengths in the fit set (the longest one still run unrolled; or no law), the
   candidate with the least objective kept.  The objective, minimised by Levenberg-Marquardt in
   log-parameters (efficiencies and overhead stay positive, serial in (0, 1), exponent >= 0):

   * per measured kernel, r = t^(1/4) * log(estimate / measured) (t in us: long kernels weigh
     more), under a soft-L1 loss of scale 0.3 (a kernel far off, e.g. a data-dependent one, does
     not drag the shared parameters);
   * per fit model, 3 * sqrt(kernels) * log(estimated total / measured total) (each model's total
     is held);
   * per key but ``"*"``, 0.95 * (log eff[key] - log eff[parent]): a class or kind seen on few
     kernels stays near its parent (shrinkage), so what is fitted generalises.

   ``op_overhead_cycles`` is one scalar: a per-class overhead was tried and over-fitted in
   leave-one-network-out cross-validation.  Efficiency is a fraction of peak, at most 1: if a key
   needs more, ``macs_per_cycle`` and ``vector_ops_per_cycle`` are scaled up by the largest
   efficiency and every efficiency divided by it (``throughput_scale``).  A key whose efficiency
   equals (within 0.5 %) the one its lookup falls back to is left out of the profile.

5. Report per model (fit and held out alike, with the fitted profile through the cost model
   itself): measured and estimated inference time, their ratio, and the median per-op error,
   measured per TVM kernel: |estimate - measured| / measured over the kernels, where a kernel's
   estimate sums its ops (their overheads included) and its measured time is scaled as in 1.

The fitted profile is ``SocProfile.with_changes`` of the given one (every other processor
untouched), so it can be saved (``out``, written atomically) and used as the host lane of any
study.  The fitted host describes this machine running TVM's untuned code, not the profile's
original CPU.  The held-out models are only measured and reported, never fitted to.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import NpukitError
from ..soc import SocProfile, load_soc
from .fit import _fit, _fitted_fields, _round, _rows, _unit_profiles
from .measure import MeasuredModel, _host_only, machine_bandwidth_gbps, machine_clock_mhz, machine_name, measure_models

__all__ = ["MeasuredModel", "calibrate", "machine_bandwidth_gbps", "machine_clock_mhz", "machine_name",
           "measure_models"]  # fmt: skip


def _check_out(out: Path) -> None:
    """The calibrated profile is written as TOML to a file of its own: not over a bundled profile
    (``--soc arm-dsp-dla`` would load the calibrated one from then on) and not into a .json file."""
    from ..soc import bundled  # noqa: PLC0415

    if out.suffix.lower() != ".toml":
        raise NpukitError(f"{out}: calibrate writes the profile as TOML; give the file the suffix .toml")
    mine = {p.resolve() for p in bundled().values()}
    if out.resolve() in mine or out.resolve().parent in {p.parent for p in mine}:
        raise NpukitError(f"{out}: that is npukit's own profile directory; write the calibrated profile elsewhere "
                          "(--soc takes its path)")  # fmt: skip


def calibrate(models: Sequence, soc: str | SocProfile = "arm-dsp-dla", repeat: int = 20, out: str | os.PathLike | None = None,
              holdout: Sequence = (), bandwidth_gbps: float | None = None) -> dict:  # fmt: skip
    """Fit the host processor of ``soc`` to this CPU on ``models``; report on them and on ``holdout``
    (never fitted to).  Models are paths, or ``MeasuredModel`` from ``measure_models``.
    ``bandwidth_gbps``: the memory bandwidth to use (default: ``machine_bandwidth_gbps()``).

    Returns ``{"processor", "soc", "machine", "clock_mhz", "efficiency", "op_overhead_cycles",
    "reduction", "bytes_per_cycle", "throughput_scale", "models": [{"model", "fit", "ops",
    "kernels", "measured_us", "estimated_us", "ratio", "median_op_error", "compile_s", "runs"}],
    "profile": TOML text, "out": path or None}``.
    """
    if not models:
        raise NpukitError("calibrate: give at least one model to fit on")
    if repeat < 1:
        raise NpukitError(f"calibrate: --repeat must be >= 1, got {repeat}")
    if out is not None:  # (checked before the minutes of measuring, as every other argument is)
        _check_out(Path(out))
    base = load_soc(soc)
    host = base.processor(base.host)
    clock = machine_clock_mhz() or host.clock_mhz
    todo = [m for m in [*models, *holdout] if not isinstance(m, MeasuredModel)]
    measured = iter(measure_models(todo, repeat))  # in turns, fit and held-out models alike
    fit_models = [m if isinstance(m, MeasuredModel) else next(measured) for m in models]
    held = [m if isinstance(m, MeasuredModel) else next(measured) for m in holdout]

    unit, twice = _unit_profiles(base, clock)
    rows = _rows(fit_models, unit, twice, clock)
    if not len(rows.meas) or not np.any((rows.wmac + rows.wvec) > 0):
        raise NpukitError("calibrate: no measured kernel with compute work in the fit models")
    if bandwidth_gbps is not None and not bandwidth_gbps > 0:
        raise NpukitError(f"calibrate: bandwidth_gbps must be > 0, got {bandwidth_gbps}")
    fit = _fit(rows, clock, 1e3 * (bandwidth_gbps or machine_bandwidth_gbps()) / clock)
    fitted_fields = _fitted_fields(host, fit, clock)
    efficiency, overhead, red = (
        fitted_fields["efficiency"],
        fitted_fields["op_overhead_cycles"],
        fitted_fields.get("reduction"),
    )
    scale = fitted_fields.pop("throughput_scale")
    bandwidth = {
        k: fitted_fields[k] for k in ("dram_bytes_per_cycle", "onchip_bytes_per_cycle", "weight_bytes_per_cycle")
    }
    fitted_host = _host_only(base, {**fitted_fields, "call_overhead_cycles": 0})

    # the full profile with the fitted host, and the report
    prefix = f"processors.{base.host}."
    changes = {prefix + k: v for k, v in fitted_fields.items()}
    changes[prefix + "description"] = (f"{host.description} -- calibrated on this machine ({machine_name()}, "
                                       f"TVM llvm untuned code): clock, throughput, efficiency by kernel class, "
                                       f"reduction law, bandwidth and overhead fitted by npukit calibrate")  # fmt: skip
    changes["name"] = f"{base.name}-calibrated"
    changes["sources"] = [*base.sources, f"npukit calibrate: {base.host} fitted to {machine_name()} on "
                          + ", ".join(fm.name for fm in fit_models) + f" ({repeat}+ runs)"]  # fmt: skip
    fitted = base.with_changes(changes)
    text = fitted.to_toml()
    report = [_report(fm, fitted_host, True) for fm in fit_models] + [_report(h, fitted_host, False) for h in held]
    if out is not None:
        from ..io import atomic_write_text  # noqa: PLC0415

        atomic_write_text(
            out, "# Calibrated by `npukit calibrate`; the host lane describes the machine it ran on.\n" + text
        )
        load_soc(Path(out))  # what was written loads
    return {
        "processor": base.host,
        "soc": base.name,
        "machine": machine_name(),
        "clock_mhz": _round(clock),
        "efficiency": efficiency,
        "op_overhead_cycles": overhead,
        "reduction": red,
        "bytes_per_cycle": bandwidth,
        "throughput_scale": _round(scale),
        "models": report,
        "profile": text,
        "out": str(out) if out is not None else None,
    }


def _report(model: MeasuredModel, soc: SocProfile, fit: bool) -> dict:
    est, ops = model.estimate_us(soc)
    m = model.m
    errs = []
    for k, meas in model.measured():
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
