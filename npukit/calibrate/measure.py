"""Measuring for host calibration: this machine's clock, name and memory bandwidth, and the models'
per-kernel times on its CPU (``measure_models``; TVM compiles and runs them)."""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import NpukitError
from ..soc import SocProfile, load_soc


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
        from .. import pipeline  # noqa: PLC0415
        from ..config import Config  # noqa: PLC0415

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
        from ..opset import is_view  # noqa: PLC0415

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
    from .. import pipeline  # noqa: PLC0415
    from ..tvm.measure import Session  # noqa: PLC0415 - calibration needs TVM; npukit does not

    if repeat < 1:
        raise NpukitError(f"calibrate: --repeat must be >= 1, got {repeat}")
    from ..progress import Progress, phase  # noqa: PLC0415

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
