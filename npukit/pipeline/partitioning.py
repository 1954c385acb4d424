"""The partition step: TVM's BYOC partition under the edits' verdicts (replayed by ``npukit.byocsim``),
and the cost policy's choice among the cost model's placement, first-fit and all on the host."""

from __future__ import annotations

import dataclasses
import os

from ..config import Config
from ..cost import Tables
from ..cost.tables import narrowed, op_model_widths, runs_at
from ..errors import ConfigError, at_field
from ..graph import OpGraph
from ..plan import Plan, over_limits
from ..rules import Verdict
from ..soc import SocProfile
from ..timeline import Schedule, makespan, schedule
from . import limits
from .caches import ADDITIVE, ADDITIVE_MAX, CHOICES, COSTED, HOSTONLY, LRU, PARTS, PREP, SCORES, gc_paused, settle
from .model import (
    Model,
    by_specificity,
    cost_model,
    layer_bits_of,
    pin_of,
    pinned_as,
    pins_of,
    resolve,
    shown,
    tables,
    verdicts,
)
from .widths import op_bits


def _byoc(model: Model, soc: SocProfile, vs, alike=None):
    """The BYOC partition under verdicts ``vs`` (cached by what they accept).  ``alike``: a partition
    whose Plan the replay under ``vs`` may give without running (``byocsim.obeyed_alike``).

    The Plan comes from ``npukit.byocsim``, TVM's FuseOpsByPattern + MergeCompositeFunctions
    replayed on the tagged module's skeleton (milliseconds where TVM takes tenths of a second);
    ``Partitioned.mod`` runs TVM's own passes on the whole module when first asked for and checks
    that its read-back is the same Plan.  With ``NPUKIT_BYOC=tvm`` (or a module the replay does
    not model) TVM runs on every edit."""
    from ..patterns import chain_shapes  # noqa: PLC0415
    from ..tvm.partition import arities, skeleton  # noqa: PLC0415

    accepts, held = [], []
    for (i, p), v in vs.items():  # (the verdicts' order is the same for every config of one model)
        if v.host:
            if not v.ok and v.failed("pinned"):
                held.append(i)
        elif v.ok:
            accepts.append((i, p, v.fused_only))
    accepts, pinned = tuple(accepts), tuple(sorted(held))
    key = (model.key, soc.rules_digest, hash((accepts, pinned)), accepts, pinned)  # costs never enter it
    hit = PARTS.get(key)
    if hit is not None:  # the same acceptance partitions alike; the refusals keep their own words
        pruned = {k: v for k, v in hit.verdicts.items() if v.failed("pruned")}
        words = {**vs, **pruned}
        return hit if words == hit.verdicts else dataclasses.replace(hit, verdicts=words)
    prep = PREP.get(model.key)
    if prep is None:
        mod = model.module
        prep = PREP.put(model.key, (chain_shapes(model.graph), arities(mod), skeleton(mod)))
    shapes, ar, sk = prep
    if sk is None or os.environ.get("NPUKIT_BYOC") == "tvm":
        from ..tvm.partition import partition as byoc  # noqa: PLC0415

        return PARTS.put(key, byoc(model.module, model.graph, soc, vs, shapes=shapes, ar=ar))
    return PARTS.put(key, _replayed(model, soc, vs, sk, shapes, ar, alike))


def _replayed(model: Model, soc: SocProfile, vs, sk, shapes, ar, alike=None):
    from ..byocsim import obeyed_alike  # noqa: PLC0415
    from ..byocsim import partition as replay  # noqa: PLC0415
    from ..tvm.partition import LazyModule, Partitioned  # noqa: PLC0415

    obeyed = None if alike is None else obeyed_alike(model.graph, soc, vs, alike)
    if obeyed is not None:
        plan = alike.plan
    else:
        plan, obeyed = replay(sk, model.graph, soc, vs, shapes, ar)
    return Partitioned(LazyModule(lambda: _tvm_module(model, soc, obeyed, plan, shapes, ar)), plan, obeyed)


def _tvm_module(model: Model, soc: SocProfile, obeyed, plan: Plan, shapes, ar):
    """TVM's own passes on the whole tagged module under the verdicts the replayed Plan obeyed; its
    read-back must be that Plan."""
    from ..tvm.partition import run_once  # noqa: PLC0415

    res = run_once(model.module, model.graph, soc, obeyed, shapes, ar)
    if res.plan != plan:
        diff = next((i for i in range(len(plan.processor))
                     if (plan.processor[i], plan.partition[i], plan.pattern[i])
                     != (res.plan.processor[i], res.plan.partition[i], res.plan.pattern[i])), None)  # fmt: skip
        raise AssertionError(f"{model.graph.path}: npukit's replay of TVM's BYOC passes disagrees with TVM "
                             f"(first at op {diff}); please report this with the model and the edits")  # fmt: skip
    return res.mod


def bits_policy(soc: SocProfile, cfg: Config, g: OpGraph):
    """``bits_of(op, processor)``: the bit-width an op runs at on a processor (layer override, else the
    processor's setting, else its default; fp16 where the model holds the op's values as float16,
    ``widths``), and ``runs(op, processor)``: can it run there at all.  For the placement search,
    which reads them for every op: ``bits_of.table`` holds every answer (processor -> per op) and
    ``runs.layered`` the only ops ``runs`` can refuse.  (A kernel member whose values never leave
    its kernel runs at its anchor's width: the cost model sees to that, ``cost.members``.)"""
    pb = dict(cfg.bits)
    lb = layer_bits_of(g, cfg)
    procs = {p.name: p for p in soc.processors}
    mw = op_model_widths(g)
    half = "fp16" in mw

    table = {}  # processor -> every op's bit-width there
    for p, pr in procs.items():
        col = table[p] = [pb.get(p) or pr.default_bits] * len(g.ops)
        for i, b in lb.items():
            if runs_at(mw[i], b, pr):  # (a layer that cannot run here is refused later)
                col[i] = b
        if half:
            table[p] = col = [narrowed(c, b, pr) for c, b in zip(mw, col)]

    def bits_of(i, p):
        return table[p][i] if i is not None else pb.get(p) or procs[p].default_bits

    def runs(i, p):
        return i not in lb or runs_at(mw[i], lb[i], procs[p])

    bits_of.table = table
    runs.layered = lb  # the ops runs() can refuse
    return bits_of, runs


def partition_cached(model: Model, soc: SocProfile, cfg: Config) -> bool:
    """Is the partition of ``cfg`` at hand (``partition`` would answer from its cache)?"""
    return CHOICES.get((model.key, soc.digest, cfg.partition_key)) is not None


def partition(model: Model, soc: SocProfile, cfg: Config):
    """The BYOC partition of a config (TVM's FuseOpsByPattern + MergeCompositeFunctions, read back
    as a Plan).  "first-fit": under the verdicts of the user's support edits and pins.  "cost": the
    cost model chooses among the accepting processors first (``npukit.placement``), and its choice
    becomes verdicts the same passes obey; of the cost plan, the first-fit plan and the all-host plan
    the one with the lowest estimated latency is kept, so the policy is never worse than either."""
    key = (model.key, soc.digest, cfg.partition_key)
    hit = CHOICES.get(key)
    if hit is not None:
        return hit
    with gc_paused():
        return _partition(model, soc, cfg, key)


def _partition(model: Model, soc: SocProfile, cfg: Config, key):
    from ..placement.groups import refuse_widths  # noqa: PLC0415

    # a processor that cannot run an op's layer bit-width refuses it: first-fit takes the next one
    vs = refuse_widths(verdicts(model, soc, cfg), soc, layer_bits_of(model.graph, cfg), tables(model).model_widths)
    ff = _byoc(model, soc, vs)
    settle(model)
    if cfg.placement == "first-fit":
        return CHOICES.put(key, ff)
    from ..placement import constrain, decide, restate  # noqa: PLC0415

    g = model.graph
    bits_of, runs = bits_policy(soc, cfg, g)
    choice = decide(g, soc, tables(model), vs, bits_of, ff.plan.processor, runs, cost_model(model, soc),
                    _scores(model, soc), _additive(model, soc))
    cvs = constrain(vs, soc, choice)
    cost = _byoc(model, soc, cvs, ff if choice.processor == ff.plan.processor else None)
    away = _pinned_away(vs, soc)
    host = _host_only(model, soc, vs, away)
    inf = float("inf")
    layered = layer_bits_of(g, cfg)  # a plan that puts a layer where its bit-width cannot run is out

    def latency(p) -> float:
        return _latency(model, soc, cfg, p) if all(runs(i, p.plan.processor[i]) for i in layered) else inf

    held = " but the pinned ones" if away else ""
    names = ["the cost model's choice", "the profile's first-fit placement", f"every op on the host{held}"]
    labels = ["with the cost model's choice", "first-fit", f"all on {soc.host}{held}"]
    parts, lats, over = [cost, ff, host], [latency(p) for p in (cost, ff, host)], [False] * 3
    if limits.limited(soc):  # an accelerator's runtime takes only so many partitions: plans held to it
        work = tables(model).work
        for n, pvs in ((0, cvs), (1, vs)):
            excess = over_limits(parts[n].plan, soc)
            if not excess:
                continue
            over[n] = True
            h = limits.hold(parts[n], pvs, soc, away, lambda v: _byoc(model, soc, v), latency,
                            lambda ops: sum(work[i].macs for i in ops))
            if h is not None:
                to = ", ".join(f"{a}'s max_partitions = {lim}" for a, lim, _ in excess)
                parts.append(h[0]), lats.append(h[1]), over.append(False)
                names.append(f"{names[n]} held to {to}"), labels.append(f"{labels[n]} held to {to}")
        over[2] = bool(over_limits(host.plan, soc))
    k = min(range(len(parts)), key=lambda n: (over[n], lats[n], n))
    if k == 2:  # kept: with the refusals in this config's words
        parts[2] = _byoc(model, soc, _host_verdicts(vs, soc, away))
    figures = ", ".join(f"{lats[n]:,.1f} us {labels[n]}" + (" (over a partition limit)" if over[n] else "")
                        for n in range(len(parts)))  # fmt: skip
    summary = f"estimated {figures}: kept {names[k]}"
    why = restate(choice.why, choice.latency_us, lats[0]) if k == 0 else ()  # (a held plan: the summary)
    notes = {i: (why[i] if k == 0 else summary) for i in range(len(g.ops))}
    return CHOICES.put(key, dataclasses.replace(parts[k], notes=notes))



def _scores(model: Model, soc: SocProfile) -> LRU:
    """The cost placement's evaluated virtual plans of one model on one profile (latency, energy),
    kept across edits."""
    key = (model.key, soc.digest)
    memo = SCORES.get(key)
    if memo is None:
        memo = SCORES.put(key, LRU(20_000))
    return memo


def _additive(model: Model, soc: SocProfile) -> dict:
    """The cost placement's additive figures of one model on one profile (each group's kernel time
    per processor and bit-widths, each tensor's boundary cost per pair of processors and bit-widths),
    kept across edits; emptied when it grows past ADDITIVE_MAX entries."""
    key = (model.key, soc.digest)
    memo = ADDITIVE.get(key)
    if memo is None or len(memo) > ADDITIVE_MAX:
        memo = ADDITIVE.put(key, {})
    return memo


def _pinned_away(vs, soc: SocProfile) -> set[int]:
    """Ops the user pinned to an accelerator (their host verdict is a pin refusal)."""
    host = soc.host
    return {i for i in range(len(vs) // len(soc.processors)) if vs[(i, host)].failed("pinned")}


def _host_verdicts(vs, soc: SocProfile, away: set[int]):
    """The all-host baseline's verdicts: every accelerator refuses every op, except the ops the user
    pinned to one (``away``: a pin always holds)."""
    return {k: (v if v.host or not v.ok or k[0] in away else _refused_for_host(v)) for k, v in vs.items()}


def _host_only(model: Model, soc: SocProfile, vs, away: set[int]):
    """The all-host baseline's partition.  Every accelerator refuses every op but the pinned ones
    (``away``), so it depends only on the pins to accelerators: cached by those (the same plan for
    every other edit)."""
    pins = tuple((i, p, vs[(i, p)].fused_only) for i in sorted(away) for p in soc.accelerators if vs[(i, p)].ok)
    key = (model.key, soc.digest, tuple(sorted(away)), pins)
    hit = HOSTONLY.get(key)
    if hit is None:
        hit = HOSTONLY.put(key, _byoc(model, soc, _host_verdicts(vs, soc, away)))
    return hit


def _refused_for_host(v: Verdict) -> Verdict:
    from ..rules import fail  # noqa: PLC0415

    return Verdict(v.processor, False, (fail("cost", "cost: the whole model on the host is faster"),))


def _latency(model: Model, soc: SocProfile, cfg: Config, part) -> float:
    return costed(model, soc, part.plan, op_bits(model, soc, cfg, part.plan)).makespan_us


class Costed:
    """Per-op and boundary costs of a plan at given bit-widths; its makespan and its schedule are
    worked out when first read: the cost policy compares three plans by their makespan (one pass,
    ``timeline.makespan``, equal to the schedule's) and schedules only the one it keeps."""

    __slots__ = ("ops", "bounds", "_args", "_sched", "_makespan")

    def __init__(self, t: Tables, plan: Plan, soc: SocProfile, ops, bounds):
        self.ops, self.bounds = tuple(ops), tuple(bounds)
        self._args, self._sched, self._makespan = (t, plan, soc), None, None

    @property
    def schedule(self) -> Schedule:
        if self._sched is None:
            self._sched = schedule(*self._args, self.ops, self.bounds)
        return self._sched

    @property
    def makespan_us(self) -> float:
        if self._sched is not None:
            return self._sched.makespan_us
        if self._makespan is None:
            self._makespan = makespan(*self._args, self.ops, self.bounds)
        return self._makespan


def costed(model: Model, soc: SocProfile, plan: Plan, bits: tuple[str, ...]) -> Costed:
    """The costs of a plan at given bit-widths (cached: the cost policy compares three plans per
    edit, often equal to each other or to an earlier edit's, and the chosen one is then estimated
    in full)."""
    key = (model.key, soc.digest, plan, bits)
    hit = COSTED.get(key)
    if hit is None:
        ops, bounds = cost_model(model, soc).evaluate(plan, bits)
        hit = COSTED.put(key, Costed(tables(model), plan, soc, ops, bounds))
    return hit


def byoc_steps(model: Model, soc: SocProfile, cfg: Config) -> dict:
    """The partition step by step (pattern table, fused module, merged module), for teaching: under
    the verdicts the chosen partition obeyed."""
    from ..tvm.partition import steps  # noqa: PLC0415

    return steps(model.module, model.graph, soc, partition(model, soc, cfg).verdicts)


def layer_width_error(node, p, b: str, g: OpGraph, i: int, soc: SocProfile, vs, pinned: str | None = None) -> ConfigError:
    """A layer whose bit-width ``b`` its processor ``p`` cannot run, with what the user can do: ``i``
    is the op that landed on ``p`` (named when the layer is several ops), ``vs`` the verdicts (the
    processors that run ``b`` and take that op are named).  ``pinned``: the op is on ``p`` because
    a pin put it there (the pin as the user named it; ``vs`` then the verdicts without the pins),
    so the pin is the conflict, and undoing it is one of the ways out."""
    node = shown(g, node)  # (as the user named it: "#12" is an op's own name)
    what, mine = "it", f"layer {node!r}"
    if len(g.resolve(node)) > 1 and g.ops[i].name != str(node):
        what = f"its op {g.ops[i].name!r}"
        mine = f"layer {node!r} (its op {g.ops[i].name!r}, {g.ops[i].kind})"
    lists = f"processors.{p.name}.macs_per_cycle lists {', '.join(p.bits)}"
    takers = [q.name for q in soc.processors if b in q.macs_per_cycle and vs[(i, q.name)].ok]
    kind = g.ops[i].kind
    if pinned is not None:
        by = "" if pinned == repr(node) else f" by the pin of {pinned}"
        head = (f"{mine} has bit-width {b} and is pinned to {p.name}{by}, which cannot run {b} ({lists}): the pin and "
                f"the bit-width conflict")  # fmt: skip
        if takers:
            return ConfigError(f"{head}; unpin {pinned}, pin {what} to a processor that runs {b} and takes {kind} "
                               f"({', '.join(takers)}), or give the layer a width {p.name} runs")  # fmt: skip
        return ConfigError(f"{head}; no processor that runs {b} takes {kind} here, pinned or not: give the layer a "
                           f"width {p.name} runs")  # fmt: skip
    head = f"{mine} would run on {p.name}, which cannot run its bit-width {b} ({lists})"
    if takers:
        return ConfigError(f"{head}; give the layer a width {p.name} runs, or pin {what} to a processor that runs {b} "
                           f"and takes {kind}: {', '.join(takers)}")  # fmt: skip
    alone = ", or set the widths of its ops one by one (layer=<op id>)" if what != "it" else ""
    return ConfigError(f"{head}; no processor that runs {b} takes {kind} here: give the layer a width "
                       f"{p.name} runs{alone}")  # fmt: skip


def width_error(model: Model, soc: SocProfile, cfg: Config, node, p, b: str, i: int) -> ConfigError:
    """``layer_width_error`` of op ``i`` of layer ``node`` on ``p`` under ``cfg``: when a pin of
    ``cfg`` holds the op on ``p``, the error names the pin, and the processors that would take the
    op are those of the verdicts without the pins."""
    g = model.graph
    if pins_of(g, cfg).get(i) == p.name:
        free = verdicts(model, soc, dataclasses.replace(cfg, pins=()))
        e = layer_width_error(node, p, b, g, i, soc, free, pinned=repr(shown(g, pin_of(g, cfg, i))))
    else:
        e = layer_width_error(node, p, b, g, i, soc, verdicts(model, soc, cfg))
    return at_field(e, "layer_bits", node)


def check_placed(model: Model, soc: SocProfile, cfg: Config, plan: Plan) -> None:
    """After partitioning: every pin holds, and every layer bit-width runs where its layer landed."""
    g = model.graph
    lb = layer_bits_of(g, cfg)
    for node, b in by_specificity(g, cfg.layer_bits):
        for i in resolve(g, node):
            p = soc.processor(plan.processor[i])
            if lb[i] == b and not runs_at(tables(model).model_widths[i], b, p):  # (an op a finer edit overrides is checked there)
                raise width_error(model, soc, cfg, node, p, b, i)
    part = partition(model, soc, cfg)
    for i, p in sorted(pins_of(g, cfg).items()):
        if plan.processor[i] != p:
            if part.verdicts[(i, p)].failed("bits") and i in lb:  # the layer's width refused it there: the
                # pin and the width conflict, said as the layer's (the op's most specific width edit)
                node = next(n for n, b in reversed(by_specificity(g, cfg.layer_bits)) if i in resolve(g, n))
                raise width_error(model, soc, cfg, node, soc.processor(p), lb[i], i)
            why = part.verdicts[(i, p)].text
            raise at_field(ConfigError(f"cannot pin {pinned_as(g, cfg, i, kind=False)} to {p}: pinned, it would run "
                                       f"on {plan.processor[i]} ({p}: {why})"), "pins", pin_of(g, cfg, i))  # fmt: skip
