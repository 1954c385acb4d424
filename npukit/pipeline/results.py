"""The estimate step: a partition costed, scheduled and totalled into a ``Result``; ``evaluate``
composes the steps for one configuration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..cost import BoundaryCost, OpCost, Tables
from ..graph import OpGraph
from ..plan import Plan
from ..rules import Verdict
from ..soc import SocProfile
from ..timeline import Schedule
from .caches import RESULTS, gc_paused
from .model import Model, pins_of, tables
from .partitioning import costed, partition
from .widths import op_bits


@dataclass(frozen=True, eq=False)
class Result:
    """Everything derived from one (model, profile, config)."""

    model: Model
    soc: SocProfile
    config: Config
    partitioned: Any  # npukit.tvm.partition.Partitioned
    pins: Mapping[int, str]
    bits: tuple[str, ...]
    ops: tuple[OpCost, ...]
    bounds: tuple[BoundaryCost, ...]
    schedule: Schedule
    totals: Mapping[str, Any]

    @property
    def plan(self) -> Plan:
        return self.partitioned.plan

    @property
    def verdicts(self) -> Mapping[tuple[int, str], Verdict]:
        return self.partitioned.verdicts

    @property
    def graph(self) -> OpGraph:
        return self.model.graph

    @property
    def tables(self) -> Tables:
        return tables(self.model)



def evaluate(model: Model, soc: SocProfile, cfg: Config) -> Result:
    """Partition, cost, schedule and total one configuration (cached by (model, profile, config))."""
    key = (model.key, soc.digest, cfg)
    hit = RESULTS.get(key)
    if hit is not None:
        return hit
    with gc_paused():
        return RESULTS.put(key, estimate(model, soc, cfg, partition(model, soc, cfg)))



def estimate(model: Model, soc: SocProfile, cfg: Config, part) -> Result:
    """The estimate step alone (not cached): costs, schedule and totals of ``cfg`` on an existing
    partition ``part`` (sweeps reuse one partition for every configuration that cannot move an op)."""
    plan = part.plan
    bits = op_bits(model, soc, cfg, plan)
    c = costed(model, soc, plan, bits)
    ops, bounds, sched = c.ops, c.bounds, c.schedule
    return Result(model, soc, cfg, part, pins_of(model.graph, cfg), bits, ops, bounds, sched,
                  totals(soc, plan, ops, bounds, sched))  # fmt: skip


def totals(soc: SocProfile, plan: Plan, ops, bounds, sched: Schedule) -> dict[str, Any]:
    """The study's totals: latency (the schedule's makespan), energy, per-processor busy time,
    utilisation and energy, transfers, conversions, MACs, op and partition counts.  A processor's
    busy time and energy count the same work: its ops and the boundary conversions it runs (the
    links' energy is in ``boundary_energy_uj`` alone)."""
    names = soc.names
    busy = dict.fromkeys(names, 0.0)
    energy_by = dict.fromkeys(names, 0.0)
    for c in ops:
        p = c.processor
        busy[p] += c.latency_us
        energy_by[p] += c.energy_uj
    for b in bounds:
        for cv in (b.layout, b.quantize):
            if cv is not None:
                energy_by[cv.on] += cv.energy_uj
    conv_busy = sched.conv_us
    lat = sched.makespan_us
    ops_e = sum(c.energy_uj for c in ops)
    b_e = sum(b.energy_uj for b in bounds)
    return {
        "latency_us": lat,
        "energy_uj": ops_e + b_e,
        "ops_energy_uj": ops_e,
        "boundary_energy_uj": b_e,
        "busy_us": {p: busy[p] + conv_busy.get(p, 0.0) for p in names},
        "utilisation": {p: ((busy[p] + conv_busy.get(p, 0.0)) / lat if lat else 0.0) for p in names},
        "energy_by_processor_uj": energy_by,
        "transfer_us": sum(b.transfer_us for b in bounds),
        "layout_us": sum(b.layout_us for b in bounds),
        "quantize_us": sum(b.quantize_us for b in bounds),
        "lanes_sum_us": sum(sched.busy_us.values()),
        "macs": sum(c.macs for c in ops),
        "ops": {p: plan.processor.count(p) for p in names},  # (every op runs where its plan puts it)
        "partitions": len(plan.partitions),
        "boundaries": len(bounds),
    }
