"""The host calibration's fit: the cost model's own host formula fitted to the measured kernels by
Levenberg-Marquardt (the method: ``npukit.calibrate``), and the profile fields it gives."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..soc import SocProfile
from .measure import MeasuredModel, _host_only

_TIME_WEIGHT = 0.25  # a kernel's log error weighs t**this (t in us)
_SOFT_L1 = 0.3  # scale of the soft-L1 loss on the kernels' weighted log errors
_TOTAL_WEIGHT = 3.0  # weight of a fit model's log total error, times sqrt(its kernels)
_SHRINK = 0.95  # weight of log eff[key] - log eff[parent key]
_ITERATIONS = 200


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
    from .. import pipeline  # noqa: PLC0415

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


def _round(x: float) -> float:
    """Four significant digits (profiles stay readable; the fit is not that precise)."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.4g}")
