"""The widget's view of a Study as plain data (no widget, no tvm).

``view_model(study)`` is a pure function of the Study's public state; it returns JSON-ready data in
four parts that change at different rates, so the widget sends only what an edit changed:

    graph       the model and the profile: ops, edges, inputs/outputs, processors   (never changes)
    placement   where every op runs, partitions, reasons, verdicts                   (support / pins)
    values      per-op figures, boundary costs, totals, the timeline                 (any edit)
    controls    the state of the edit controls: support, pins, bit-widths            (any edit)

Per-op data are columns (one list per field, indexed by op_id).  Columns of numbers can be packed
into little-endian binary buffers for transport (``pack=True``; the widget does this): the front
end reads them as typed arrays.  Repeated strings (reasons, verdicts) are interned in a table.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..config import PLACEMENTS
from ..report import LINK_COLOR, processor_colors

# numeric columns and their dtypes when packed (the front end maps them to typed arrays)
PACKED = {
    "proc": "u1", "partition": "<i4", "pattern": "<i4", "reason": "<i4", "pinned": "u1",
    "bits": "u1", "latency_us": "<f8", "energy_uj": "<f8", "macs": "<f8", "bytes": "<f8",
    "cycles": "<f8", "compute_cycles": "<f8", "memory_cycles": "<f8", "edges": "<i4",
    "lane": "u1", "start_us": "<f8", "end_us": "<f8", "kind": "u1", "op_id": "<i4",
}  # fmt: skip


def _col(values, dtype: str, pack: bool):
    """A column as a list (plain JSON) or as bytes of ``dtype`` (binary buffer)."""
    if pack:
        return np.ascontiguousarray(np.asarray(values, dtype=dtype)).tobytes()
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return [float(x) for x in arr.tolist()]
    return [int(x) for x in arr.tolist()]


SEP = "\x1f"  # joins a column of strings into one string when packed (the front end splits it)


def _strs(values: list[str], pack: bool):
    """A column of strings: a list, or one string joined by SEP (no per-item walk when sent)."""
    if not pack:
        return [str(v) for v in values]
    return SEP.join(str(v).replace(SEP, " ") for v in values)


def _num(x) -> float | int | None:
    """A JSON-safe number (NaN and infinities become None)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _jsonable(x):
    """Plain JSON data from nested dicts/lists of numbers, numpy scalars and strings."""
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, str) or x is None:
        return x
    if isinstance(x, (np.ndarray,)):
        return [_jsonable(v) for v in x.tolist()]
    n = _num(x)
    return n if n is not None or isinstance(x, (int, float, np.number)) else str(x)


class _Interner:
    def __init__(self) -> None:
        self.table: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


# ---------------------------------------------------------------------------------------------
# the four parts


def graph_model(study, pack: bool = False) -> dict[str, Any]:
    """The model and the profile: what never changes while the Study lives."""
    g = study.graph
    soc = study.soc
    colors = processor_colors(soc)
    edges: list[int] = []
    for op in g.ops:
        for p in g.producers(op):
            edges += (p, op.op_id)
    inputs = []
    for tid in g.inputs:
        t = g.tensors[tid]
        inputs.append({"tid": tid, "name": t.name or tid, "shape": list(t.shape), "dtype": t.dtype,
                       "consumers": sorted(g.consumers(tid))})  # fmt: skip
    outputs = []
    for k, tid in enumerate(g.outputs):
        t = g.tensors[tid]
        outputs.append({"tid": tid, "name": g.output_name(k), "shape": list(t.shape), "dtype": t.dtype,
                        "producer": t.producer if t.producer is not None else -1})  # fmt: skip
    kinds = sorted({op.kind for op in g.ops})
    procs = []
    for p in soc.processors:
        procs.append({
            "name": p.name, "kind": p.kind, "host": bool(p.host), "color": colors[p.name],
            "bits": list(p.bits), "default_bits": p.default_bits, "clock_mhz": _num(p.clock_mhz),
            "profile_ops": sorted(p.ops) if not p.host else [],
        })  # fmt: skip
    return {
        "model": Path(str(g.path)).name if g.path else "(in-memory model)",
        "format": g.source_format,
        "soc": soc.name,
        "soc_description": soc.description,
        "n_ops": len(g.ops),
        "name": [op.name for op in g.ops],
        "kind": [op.kind for op in g.ops],
        "op": [op.op for op in g.ops],
        "source": [op.source for op in g.ops],
        "edges": _col(edges, PACKED["edges"], pack),
        "inputs": inputs,
        "outputs": outputs,
        "kinds": kinds,
        "processors": procs,
        "host": soc.host,
        "accelerators": list(soc.accelerators),
        "link_color": LINK_COLOR,
    }


def placement_key(study) -> str:
    """What the placement depends on, as a stable string: support edits and pins, and under the
    cost policy the bit-widths too (a narrower width can move an op)."""
    return repr(study.config.partition_key)


def placement_model(study, pack: bool = False) -> dict[str, Any]:
    """Where every op runs and why: changes only when what the partition depends on changes."""
    soc = study.soc
    names = list(soc.names)
    pidx = {p: i for i, p in enumerate(names)}
    plan = study.plan
    strings = _Interner()
    reason = [strings(s) for s in study.reasons()]
    verdicts = {p: _col([strings(s) for s in study.verdict_texts(p)], PACKED["reason"], pack) for p in names}
    pattern = [strings(s) for s in plan.pattern]
    pinned = [0] * len(plan.processor)
    for node, _proc in study.config.pins:
        for i in study.graph.resolve(node):
            pinned[i] = 1
    parts = [{"pid": p.pid, "proc": pidx[p.processor], "n": len(p.ops), "function": p.function}
             for p in plan.partitions]  # fmt: skip
    return {
        "key": placement_key(study),
        "proc": _col([pidx[p] for p in plan.processor], PACKED["proc"], pack),
        "partition": _col(list(plan.partition), PACKED["partition"], pack),
        "pattern": _col(pattern, PACKED["pattern"], pack),
        "reason": _col(reason, PACKED["reason"], pack),
        "verdicts": verdicts,
        "pinned": _col(pinned, PACKED["pinned"], pack),
        "partitions": parts,
        "strings": strings.table,
        "limits": list(study.partition_limits),  # accelerators given more partitions than their runtime takes
    }


TIMELINE_KINDS = ("op", "transfer", "layout", "quantize")


def values_model(study, pack: bool = False) -> dict[str, Any]:
    """Per-op figures, boundary costs, totals and the schedule: change with every edit."""
    from ..soc import BITS  # noqa: PLC0415

    soc = study.soc
    g = study.graph
    r = study.result
    ops = r.ops  # the rows of ``study.costs``, read directly (no DataFrame on every edit)
    bits_index = {b: i for i, b in enumerate(BITS)}
    out: dict[str, Any] = {"bits_names": list(BITS)}
    out["bits"] = _col([bits_index[c.bits] for c in ops], PACKED["bits"], pack)
    for col in ("latency_us", "energy_uj", "macs", "bytes", "cycles", "compute_cycles", "memory_cycles"):
        out[col] = _col(np.array([getattr(c, col) for c in ops], dtype="f8"), PACKED[col], pack)

    # boundaries (columns): study.boundaries rows are in study.plan.boundaries order (consumer op ids there)
    bdf = study.boundaries
    pidx = {p: i for i, p in enumerate(soc.names)}
    input_index = {tid: i for i, tid in enumerate(g.inputs)}
    output_index = {tid: i for i, tid in enumerate(g.outputs)}
    producer, inp, outp, consumers, at = [], [], [], [], [0]
    for tid, dst, pb in zip(bdf["tensor_id"].tolist(), bdf["dst"].tolist(), study.plan.boundaries):
        t = g.tensors[tid]
        producer.append(t.producer if t.kind == "act" and t.producer is not None else -1)
        inp.append(input_index.get(tid, -1))
        outp.append(output_index.get(tid, -1) if dst == soc.host else -1)
        consumers += pb.consumers
        at.append(len(consumers))
    cost = (
        bdf["transfer_us"].to_numpy(dtype="f8")
        + bdf["layout_us"].to_numpy(dtype="f8")
        + bdf["quantize_us"].to_numpy(dtype="f8")
    )
    out["boundaries"] = {
        "n": len(bdf),
        "tensor": _strs(bdf["tensor"].tolist(), pack),
        "conversion": _strs(bdf["conversion"].tolist(), pack),
        "src": _col([pidx[x] for x in bdf["src"].tolist()], "u1", pack),
        "dst": _col([pidx[x] for x in bdf["dst"].tolist()], "u1", pack),
        "producer": _col(producer, "<i4", pack),
        "input": _col(inp, "<i4", pack),
        "output": _col(outp, "<i4", pack),
        "consumers": _col(consumers, "<i4", pack),
        "consumers_at": _col(at, "<i4", pack),
        "cost_us": _col(cost, "<f8", pack),
        **{c: _col(bdf[c].to_numpy(dtype="f8"), "<f8", pack)
           for c in ("bytes", "transfer_us", "layout_us", "quantize_us", "energy_uj")},
    }  # fmt: skip

    items = r.schedule.items  # the rows of ``study.timeline``
    lanes = list(soc.names) + sorted({it.lane for it in items if it.lane not in soc.names})
    lane_index = {ln: i for i, ln in enumerate(lanes)}
    kind_index = {k: i for i, k in enumerate(TIMELINE_KINDS)}
    out["timeline"] = {
        "lanes": lanes,
        "kinds": list(TIMELINE_KINDS),
        "lane": _col([lane_index[it.lane] for it in items], PACKED["lane"], pack),
        "kind": _col([kind_index.get(it.kind, 0) for it in items], PACKED["kind"], pack),
        "start_us": _col(np.array([it.start_us for it in items], dtype="f8"), PACKED["start_us"], pack),
        "end_us": _col(np.array([it.end_us for it in items], dtype="f8"), PACKED["end_us"], pack),
        "op_id": _col(np.array([it.op_id for it in items], dtype="i8"), PACKED["op_id"], pack),
        "item": _strs([it.item for it in items], pack),
    }
    out["totals"] = _jsonable(study.totals)
    return out


def controls_model(study) -> dict[str, Any]:
    """The state the edit controls show (a per-node edit's ``label``: its node as the model names it)."""
    from ..pipeline import shown  # noqa: PLC0415

    soc = study.soc
    cfg = study.config
    g = study.graph
    kinds = sorted({op.kind for op in g.ops})
    support: dict[str, dict[str, bool]] = {}
    profile: dict[str, dict[str, bool]] = {}
    for a in soc.accelerators:
        ops = soc.processor(a).ops
        support[a] = {}
        profile[a] = {}
        for k in kinds:
            has = k in ops
            profile[a][k] = has
            support[a][k] = ((a, k) in cfg.enabled) or (has and (a, k) not in cfg.disabled)
    pins = [{"node": node, "label": shown(g, node), "processor": proc, "ops": ops}
            for (node, proc), ops in zip(cfg.pins, _deciding(g, cfg.pins))]  # fmt: skip
    layer_bits = [{"node": node, "label": shown(g, node), "bits": b, "ops": ops}
                  for (node, b), ops in zip(cfg.layer_bits, _deciding(g, cfg.layer_bits))]  # fmt: skip
    return {
        "support": support,
        "profile": profile,
        "edited": sorted(f"{p}:{o}" for p, o in (*cfg.disabled, *cfg.enabled)),
        "pins": pins,
        "bits": {p: dict(cfg.bits).get(p, "") for p in soc.names},
        "layer_bits": layer_bits,
        "placement": cfg.placement,
        "placements": list(PLACEMENTS),
        "rules": support_rules(study),
        "config": cfg.to_dict(),
    }


def _deciding(g, entries) -> list[list[int]]:
    """For each per-node edit (pin, layer width), the ops it decides: those of its node that no more
    specific edit (one op of a node pinned whole) takes over, as ``pipeline.per_op`` applies them."""
    from ..pipeline import per_op  # noqa: PLC0415

    won = per_op(g, [(node, k) for k, (node, _value) in enumerate(entries)])
    return [[i for i in g.resolve(node) if won.get(i) == k] for k, (node, _value) in enumerate(entries)]


def support_rules(study) -> dict[str, dict[str, dict[str, Any]]]:
    """Where the profile's shape and dtype rules, not the user, keep ops of a kind off an
    accelerator: ``{proc: {kind: {"n", "ok", "text"}}}`` for the kinds some of whose ops a rule
    refuses, e.g. "matmul: 0 of 96 ops accepted: rank-3 tensor, supports ranks [2, 4]" (the most
    common refusal among them, in the rule's own words; ties go to the first op)."""
    from ..pipeline import capabilities_of  # noqa: PLC0415

    g = study.graph
    model = study.result.model
    enabled = study.config.enabled
    key = (model.key, study.soc.digest, enabled)
    hit = _RULES.get(key)
    if hit is not None:
        _RULES.move_to_end(key)
        return hit
    caps = capabilities_of(model, study.soc)
    by_kind: dict[str, list[int]] = {}
    for op in g.ops:
        by_kind.setdefault(op.kind, []).append(op.op_id)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for a in study.soc.accelerators:
        out[a] = {}
        for kind in sorted(by_kind):
            ids = by_kind[kind]
            ok, why = 0, {}
            for i in ids:
                v = caps[(i, a)]
                if v.ok or (v.rule == "unsupported" and (a, kind) in enabled):
                    ok += 1
                elif v.rule != "unsupported":
                    why[v.failures[0].text] = why.get(v.failures[0].text, 0) + 1
            if not why:
                continue
            top = max(why, key=lambda t: why[t])  # dict order is op order: the first op wins a tie
            more = len(why) - 1
            text = f"{kind}: {ok} of {len(ids)} op{'' if len(ids) == 1 else 's'} accepted: {top}"
            if more:
                text += f" (and {more} other reason{'' if more == 1 else 's'})"
            out[a][kind] = {"n": len(ids), "ok": ok, "text": text}
    _RULES[key] = out
    while len(_RULES) > 16:
        _RULES.popitem(last=False)
    return out


_RULES: OrderedDict = OrderedDict()  # (model, profile, user-enabled kinds) -> support_rules()


def view_model(study) -> dict[str, Any]:
    """Everything the widget shows, as plain JSON data (lists, dicts, strings, numbers)."""
    return {
        "graph": graph_model(study),
        "placement": placement_model(study),
        "values": values_model(study),
        "controls": controls_model(study),
    }
