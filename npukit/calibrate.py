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

import math
import os
import platform
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import NpukitError
from .soc import SocProfile, load_soc

_TIME_WEIGHT = 0.25  # a kernel's log error weighs t**this (t in us)
_SOFT_L1 = 0.3  # scale of the soft-L1 loss on the kernels' weighted log errors
_TOTAL_WEIGHT = 3.0  # weight of a fit model's log total error, times sqrt(its kernels)
_SHRINK = 0.95  # weight of log eff[key] - log eff[parent key]
_ITERATIONS = 200


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


def machine_bandwidth_gbps(mbytes: int = 64, repeat: int = 3) -> float:
    """This machine's streaming memory bandwidth in GB/s (bytes read + written per second): the
    fastest of ``repeat`` copies of a ``mbytes`` MB buffer, larger than the caches."""
    a = np.ones(mbytes * (1 << 20) // 8)
    b = np.zeros_like(a)
    best = math.inf
    for i in range(repeat + 1):  # the first copy touches the pages: not counted
        t = time.perf_counter()
        np.copyto(b, a)
        if i:
            best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best / 1e9


def _host_only(soc: SocProfile, host_fields: dict) -> SocProfile:
    """A profile holding only the host processor (with ``host_fields`` replaced; a value None
    removes the field): every op runs on it."""
    doc = {k: v for k, v in _plain(soc.raw).items() if k not in ("processors", "links", "placement", "host")}
    hdoc = dict(_plain(soc.raw["processors"][soc.host]))
    hdoc.update(host_fields)
    hdoc = {k: v for k, v in hdoc.items() if v is not None}
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


# ---------------------------------------------------------------------------------------------
# measured models


@dataclass
class MeasuredModel:
    """One model and its measurement on this machine (``measure_models``); pass it to ``calibrate``
    in place of a path to fit several splits on one measurement."""

    path: object
    name: str
    model: object  # npukit.pipeline.Model
    m: object  # npukit.tvm.measure.Measurement

    @property
    def g(self):
        return self.model.graph

    def result(self, soc: SocProfile):
        """The pipeline's Result with every op on the host of ``soc`` (a host-only profile)."""
        from . import pipeline  # noqa: PLC0415
        from .config import Config  # noqa: PLC0415

        return pipeline.evaluate(self.model, soc, Config())

    def costs(self, soc: SocProfile) -> list:
        """OpCost per op with every op on the host of ``soc`` (a host-only profile)."""
        return list(self.result(soc).ops)

    def estimate_us(self, soc: SocProfile) -> tuple[float, list]:
        r = self.result(soc)
        return r.schedule.makespan_us, list(r.ops)

    def measured(self) -> list[tuple[object, float]]:
        """(kernel, measured us) for the kernels that ran and hold an op that is not a view, scaled
        by one factor so all the kernels add up to the uninstrumented inference."""
        from .opset import is_view  # noqa: PLC0415

        m = self.m
        ksum = sum(k.us for k in m.kernels)
        scale = m.total_us / ksum if ksum > 0 else 1.0
        return [(k, k.us * scale) for k in m.kernels
                if k.us > 0 and any(not is_view(self.g.ops[i].kind) for i in k.ops)]  # fmt: skip


def measure_models(paths: Sequence, repeat: int = 20, rounds: int = 4, seconds: float = 0.1) -> list[MeasuredModel]:
    """Import each of ``paths`` and measure it on this CPU (TVM): the per-kernel times ``calibrate``
    fits to.  The models are compiled first, then run in ``rounds`` turns, each turn at least
    ``ceil(repeat / rounds)`` runs and ``seconds`` per model, so each model's runs are spread over
    the whole measuring time (load from other work on the machine comes in bursts); the fastest
    of all its runs is kept."""
    from . import pipeline  # noqa: PLC0415
    from .tvm.measure import Session  # noqa: PLC0415 - calibration needs TVM; npukit does not

    if repeat < 1:
        raise NpukitError(f"calibrate: --repeat must be >= 1, got {repeat}")
    from .progress import Progress, phase  # noqa: PLC0415

    done = []
    for path in paths:
        name = Path(str(path)).name if isinstance(path, (str, os.PathLike)) else type(path).__name__
        model = pipeline.load(path)
        with phase(f"npukit: compiling {name} to measure it"):
            done.append((path, name, model, Session(model.module, model.graph)))
    per_round = max(1, math.ceil(repeat / max(1, rounds)))
    turns = max(1, rounds)
    with Progress(turns * len(done), "npukit: measuring", unit="run") as bar:
        for r in range(turns):
            for j, (*_x, session) in enumerate(done):
                session.run(per_round, seconds)
                bar(r * len(done) + j)
    return [MeasuredModel(path, name, model, session.result()) for path, name, model, session in done]


# ---------------------------------------------------------------------------------------------
# the fit


def _parent(key: str) -> str:
    return key.split(".", 1)[0] if "." in key else "*"


@dataclass
class _Rows:
    """The fit's data: one row per cost-model kernel (its anchor) inside a measured TVM kernel."""

    key: list[str]  # kernel class of the anchor
    wmac: np.ndarray  # MAC cycles at efficiency 1, util_red 1
    wvec: np.ndarray  # vector cycles at efficiency 1 (epilogue included)
    mem: np.ndarray  # memory cycles at dram_bytes_per_cycle = 1 (the other bandwidths in ratio)
    pays: np.ndarray  # 1 if it pays op_overhead_cycles
    red: np.ndarray  # reduction length K (0: no MACs)
    kid: np.ndarray  # index of its measured TVM kernel
    meas: np.ndarray  # per TVM kernel: measured cycles
    model: np.ndarray  # per TVM kernel: index of its model


def _unit_profiles(base: SocProfile, clock: float) -> tuple[SocProfile, SocProfile]:
    """The unit host (efficiency 1, no reduction law, no output stage, overhead 1, dram 1 B/cycle
    and the other bandwidths in the profile's ratio) and the same with twice the MAC rate (to
    split MAC cycles from vector cycles)."""
    h = base.processor(base.host)
    d = h.dram_bytes_per_cycle
    fields = {"clock_mhz": clock, "efficiency": {"*": 1.0}, "op_overhead_cycles": 1, "call_overhead_cycles": 0,
              "reduction": None, "output_elems_per_cycle": 0, "dram_bytes_per_cycle": 1.0, "onchip_bytes_per_cycle": h.onchip_bytes_per_cycle / d,
              "weight_bytes_per_cycle": h.weight_bytes_per_cycle / d, "macs_per_cycle": dict(h.macs_per_cycle),
              "vector_ops_per_cycle": dict(h.vector_ops_per_cycle)}  # fmt: skip
    unit = _host_only(base, fields)
    twice = _host_only(base, {**fields, "macs_per_cycle": {b: 2 * v for b, v in h.macs_per_cycle.items()}})
    return unit, twice


def _rows(models: Sequence[MeasuredModel], unit: SocProfile, twice: SocProfile, clock: float) -> _Rows:
    from . import pipeline  # noqa: PLC0415

    key, wmac, wvec, mem, pays, red, kid, meas, model = [], [], [], [], [], [], [], [], []
    for mi, mm in enumerate(models):
        c1, c2 = mm.costs(unit), mm.costs(twice)
        t = pipeline.tables(mm.model)
        for k, us in mm.measured():
            anchors = [i for i in k.ops if c1[i].kernel == i]
            if not any(c1[i].cycles > 0 for i in anchors):
                continue  # nothing of the cost model's is costed in this kernel (its anchor is elsewhere)
            j = len(meas)
            meas.append(us * clock)
            model.append(mi)
            for i in anchors:
                c = c1[i]
                wm = 2.0 * (c.compute_cycles - c2[i].compute_cycles)
                key.append(t.kernel_class(i))
                wmac.append(wm)
                wvec.append(max(0.0, c.compute_cycles - wm))
                mem.append(c.memory_cycles)
                pays.append(float(c.overhead_cycles))
                red.append(t.reduction_length(i))
                kid.append(j)
    a = np.asarray
    return _Rows(key, a(wmac, float), a(wvec, float), a(mem, float), a(pays, float), a(red, float), a(kid, int),
                 a(meas, float), a(model, int))  # fmt: skip


class _Fit:
    """The objective of the module docstring for one ``unroll`` (0: no reduction law) and memory
    bandwidth scale ``bandwidth``, minimised by Levenberg-Marquardt on x = [log(1/eff) per key,
    log overhead, log(1/serial - 1), sqrt(exponent)]."""

    def __init__(self, d: _Rows, keys: list[str], unroll: int, clock: float, bandwidth: float):
        self.d, self.keys, self.unroll = d, keys, unroll
        self.mem = d.mem / bandwidth
        index = {k: n for n, k in enumerate(keys)}

        def lookup(k: str) -> int:
            while k not in index:
                k = _parent(k)
            return index[k]

        self.kidx = np.array([lookup(k) for k in d.key], int)
        self.pairs = [(n, index[_parent(k)]) for n, k in enumerate(keys) if k != "*"]
        self.ne = len(keys)
        self.nk = len(d.meas)
        self.nm = int(d.model.max()) + 1 if self.nk else 0
        self.mtot = np.bincount(d.model, weights=d.meas, minlength=self.nm)
        self.mcount = np.bincount(d.model, minlength=self.nm).astype(float)
        self.tw = np.power(d.meas / clock, _TIME_WEIGHT)  # t in us
        self.law = unroll > 0 and bool(np.any((d.red > unroll) & (d.wmac > 0)))

    def parts(self, x: np.ndarray) -> dict:
        ne = self.ne
        x = np.clip(x, -40.0, 40.0)
        return {"ie": np.exp(x[:ne]), "over": math.exp(x[ne]), "iser": 1.0 + math.exp(x[ne + 1]),
                "beta": float(x[ne + 2]) ** 2}  # fmt: skip

    def kernel_cycles(self, x: np.ndarray) -> np.ndarray:
        d, p = self.d, self.parts(x)
        if self.law:
            f = np.where(d.red > self.unroll, p["iser"] * (np.maximum(d.red, 1.0) / self.unroll) ** p["beta"], 1.0)
        else:
            f = 1.0
        cyc = np.maximum((d.wmac * f + d.wvec) * p["ie"][self.kidx], self.mem) + p["over"] * d.pays
        return np.bincount(d.kid, weights=cyc, minlength=self.nk)

    def residuals(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(kernel residuals, for the robust loss; the other terms, squared as they are)."""
        est = np.maximum(self.kernel_cycles(x), 1e-9)
        r = self.tw * np.log(est / self.d.meas)
        tot = np.bincount(self.d.model, weights=est, minlength=self.nm)
        other = [_TOTAL_WEIGHT * np.sqrt(self.mcount) * np.log(tot / self.mtot)]
        other.append(np.array([_SHRINK * (x[a] - x[b]) for a, b in self.pairs]))
        if not self.law:  # serial and exponent are not used: keep them put
            other.append(np.array([x[self.ne + 1], x[self.ne + 2]]) * 1e-3)
        return r, np.concatenate(other)

    @staticmethod
    def loss(r: np.ndarray, o: np.ndarray) -> float:
        z = (r / _SOFT_L1) ** 2
        return float(2 * _SOFT_L1**2 * (np.sqrt(1 + z) - 1).sum() + (o**2).sum())

    def run(self, x0: np.ndarray) -> tuple[np.ndarray, float]:
        x = x0.copy()
        r, o = self.residuals(x)
        cur = self.loss(r, o)
        mu = 1e-3
        for _ in range(_ITERATIONS):
            w = (1 + (r / _SOFT_L1) ** 2) ** -0.25  # IRLS: the soft-L1 loss as weighted least squares
            res = np.concatenate([r * w, o])
            jac = np.empty((len(res), len(x)))
            for j in range(len(x)):
                xx = x.copy()
                xx[j] += 1e-6
                r2, o2 = self.residuals(xx)
                jac[:, j] = (np.concatenate([r2 * w, o2]) - res) / 1e-6
            a = jac.T @ jac
            grad = jac.T @ res
            for _ in range(30):
                step = np.linalg.solve(a + mu * (np.diag(np.diag(a)) + 1e-9 * np.eye(len(x))), -grad)
                xn = x + step
                rn, on = self.residuals(xn)
                new = self.loss(rn, on)
                if new < cur:
                    break
                mu *= 4
            else:
                break
            done = cur - new < 1e-10 * max(1.0, cur)
            x, r, o, cur = xn, rn, on, new
            mu = max(mu / 3, 1e-12)
            if done:
                break
        return x, cur


def _fit(d: _Rows, clock: float, bandwidth: float) -> dict:
    """The fitted host parameters for memory bandwidth ``bandwidth`` (``dram_bytes_per_cycle``):
    {"efficiency": {key: eff}, "overhead", "reduction": {unroll, serial, exponent} or None,
    "loss"}."""
    has = (d.wmac + d.wvec) > 0
    keys = {k for k, h in zip(d.key, has) if h}
    for k in list(keys):
        while k != "*":
            k = _parent(k)
            keys.add(k)
    keys = sorted(keys | {"*"}, key=lambda k: (k != "*", k))
    meas_tot = float(d.meas.sum())
    work = float(((d.wmac + d.wvec) * 1.0).sum()) or 1.0
    small = float(np.min(d.meas)) if len(d.meas) else 1.0
    x0 = np.concatenate([np.full(len(keys), math.log(max(meas_tot / work, 1e-6))),
                         [math.log(max(0.3 * small, 1.0)), math.log(2.0), 0.5]])  # fmt: skip
    unrolls = [0] + sorted({int(k) for k, w in zip(d.red, d.wmac) if k > 0 and w > 0})
    best = None
    for u in unrolls:
        f = _Fit(d, keys, u, clock, bandwidth)
        if u and not f.law:
            continue  # no MAC work with a longer reduction: the same as no law
        x, loss = f.run(x0)
        if best is None or loss < best[0] - 1e-9:
            best = (loss, f, x)
    loss, f, x = best
    p = f.parts(x)
    eff = {k: 1.0 / float(v) for k, v in zip(keys, p["ie"])}
    red = None
    if f.law:
        red = {"unroll": f.unroll, "serial": 1.0 / p["iser"], "exponent": p["beta"]}
    return {"efficiency": eff, "overhead": p["over"], "bytes_per_cycle": bandwidth, "reduction": red, "loss": loss,
            "fit": f, "x": x}  # fmt: skip


def _fitted_fields(host, fit: dict, clock: float, rnd=None) -> dict:
    """The host's profile fields from a fit (``rnd``: rounding of the figures, default four
    significant digits), and ``throughput_scale``.  A key whose efficiency equals (within 0.5 %) the
    one its lookup would fall back to is left out."""
    rnd = rnd or _round
    eff = fit["efficiency"]
    scale = max(1.0, *eff.values())
    kept: dict[str, float] = {}
    for k in sorted(eff, key=lambda k: (k != "*", k)):  # parents first
        up = _parent(k)
        while k != "*" and up not in kept:
            up = _parent(up)
        if k == "*" or abs(math.log(eff[k] / kept[up])) >= 0.005:
            kept[k] = eff[k]
    efficiency = {k: rnd(v / scale) for k, v in kept.items()}
    bw = fit["bytes_per_cycle"]
    d = host.dram_bytes_per_cycle
    fields = {"clock_mhz": rnd(clock), "efficiency": efficiency,
              "macs_per_cycle": {b: rnd(v * scale) for b, v in host.macs_per_cycle.items()},
              "vector_ops_per_cycle": {b: rnd(v * scale) for b, v in host.vector_ops_per_cycle.items()},
              "op_overhead_cycles": max(0, int(round(fit["overhead"]))), "dram_bytes_per_cycle": rnd(bw),
              "onchip_bytes_per_cycle": rnd(bw * host.onchip_bytes_per_cycle / d),
              "weight_bytes_per_cycle": rnd(bw * host.weight_bytes_per_cycle / d)}  # fmt: skip
    red = fit["reduction"]
    if red is not None:
        fields["reduction"] = {"unroll": int(red["unroll"]), "serial": min(1.0, rnd(red["serial"])),
                               "exponent": rnd(red["exponent"])}  # fmt: skip
    elif host.reduction is not None:  # the profile had a law the fit does not need: make it neutral
        fields["reduction"] = {"unroll": 1, "serial": 1.0, "exponent": 0.0}
    if host.output_elems_per_cycle:  # a CPU runs its epilogue as vector work, as fitted
        fields["output_elems_per_cycle"] = 0
    fields["throughput_scale"] = rnd(scale)
    return fields


# ---------------------------------------------------------------------------------------------
# calibrate


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
        from .io import atomic_write_text  # noqa: PLC0415

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


def _round(x: float) -> float:
    """Four significant digits (profiles stay readable; the fit is not that precise)."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.4g}")
