"""A pipeline Result as users read it (no tvm): DataFrames for the Study's tables, the placement
reasons, and ``explain()``'s text rendered from the cost terms."""

from __future__ import annotations

from .pipeline import Result, resolve
from .pipeline import width_notes as _width_notes
from .rules import winner_reason
from .soc.schema import PLACEMENT_COLUMNS


def esc(name: str) -> str:
    """A model name for a line of text: control characters (newlines ...) escaped, else unchanged."""
    return name.encode("unicode_escape").decode("ascii") if any(ord(c) < 32 or c == "\x7f" for c in name) else name


def reasons(r: Result) -> tuple[str, ...]:
    """Every op's placement reason (what ``placement["reason"]`` shows)."""
    plan = r.plan
    notes = r.partitioned.notes
    return tuple(winner_reason(op, plan.processor[op.op_id], plan.pattern[op.op_id], r.verdicts, r.soc,
                               op.op_id in r.pins, notes.get(op.op_id, "")) for op in r.graph.ops)  # fmt: skip


def placement(r: Result):
    import pandas as pd  # noqa: PLC0415

    rs = reasons(r)
    plan = r.plan
    rows = []
    for op in r.graph.ops:
        i = op.op_id
        row = dict(zip(PLACEMENT_COLUMNS, (i, op.name, op.kind, plan.processor[i], plan.partition[i], rs[i],
                                           plan.pattern[i], op.source)))  # fmt: skip
        for p in r.soc.names:
            row[p] = r.verdicts[(i, p)].text
        rows.append(row)
    return pd.DataFrame(rows)


def partitions(r: Result):
    import pandas as pd  # noqa: PLC0415

    g = r.graph
    rows = []
    for part in r.plan.partitions:
        rows.append({"partition": part.pid, "processor": part.processor, "ops": len(part.ops),
                     "first": g.ops[part.ops[0]].name, "last": g.ops[part.ops[-1]].name, "function": part.function,
                     "latency_us": sum(r.ops[i].latency_us for i in part.ops),
                     "patterns": ", ".join(sorted({p for p, _ in part.patterns}))})  # fmt: skip
    return pd.DataFrame(rows)


COST_COLUMNS = ("op_id", "name", "processor", "bits", "macs", "bytes", "compute_cycles", "memory_cycles",
                "overhead_cycles", "cycles", "latency_us", "energy_uj", "vector_ops", "dram_bytes", "kernel", "role",
                "bits_note")  # fmt: skip


def width_notes(r: Result) -> dict[int, str]:
    """Op id -> why it runs at another width than its setting (``pipeline.width_notes``)."""
    return _width_notes(r.model, r.soc, r.config, r.plan, r.bits)


def costs(r: Result):
    """One row per op; ``cycles = max(compute_cycles, memory_cycles) + overhead_cycles`` in every row
    (a fused kernel's figures are on its anchor; ``kernel`` names it, ``role`` says what the op is in it;
    ``bits_note`` says why ``bits`` is not the op's setting, where it is not)."""
    import pandas as pd  # noqa: PLC0415

    g = r.graph
    notes = width_notes(r)
    return pd.DataFrame(
        [(c.op_id, g.ops[c.op_id].name, c.processor, c.bits, c.macs, c.bytes, c.compute_cycles, c.memory_cycles,
          c.overhead_cycles, c.cycles, c.latency_us, c.energy_uj, c.vector_ops, c.dram_bytes, c.kernel, c.role,
          notes.get(c.op_id, "")) for c in r.ops], columns=list(COST_COLUMNS))  # fmt: skip


def boundaries(r: Result):
    """One row per tensor crossing processors, in ``plan.boundaries`` order (model inputs first, then
    by producing op)."""
    import pandas as pd  # noqa: PLC0415

    g = r.graph
    cols = ["tensor", "src", "dst", "bytes", "transfer_us", "layout_us", "quantize_us", "energy_uj", "conversion",
            "tensor_id", "consumers"]  # fmt: skip
    return pd.DataFrame(
        [(g.tensor_label(b.tensor), b.src, b.dst, b.bytes, b.transfer_us, b.layout_us, b.quantize_us, b.energy_uj,
          b.conversion, b.tensor, ", ".join(g.ops[c].name for c in pb.consumers) or "(model output)")
         for b, pb in zip(r.bounds, r.plan.boundaries)], columns=cols)  # fmt: skip


def timeline(r: Result):
    import pandas as pd  # noqa: PLC0415

    return pd.DataFrame([(it.lane, it.item, it.start_us, it.end_us, it.kind, it.op_id, it.tensor) for it in r.schedule.items],
                        columns=["lane", "item", "start_us", "end_us", "kind", "op_id", "tensor_id"])  # fmt: skip


def error(r: Result, res):
    import pandas as pd  # noqa: PLC0415

    g = r.graph
    return pd.DataFrame([(i, g.ops[i].name, r.plan.processor[i], r.bits[i], snr, mx, res.per_op_samples)
                         for i, snr, mx in res.per_op],
                        columns=["op_id", "name", "processor", "bits", "snr_db", "max_abs_err", "samples"])  # fmt: skip


def _as_held(t) -> str:
    """A weight the op reads in another form than the model holds it (transposed, a part of it)."""
    if t.model_shape is None:
        return ""
    return f" (the model holds {t.name} as {list(t.model_shape)})"


def explain(r: Result, node) -> str:
    """The placement reason and every figure of a node's ops with formula, values and sources."""
    from .cost import boundary_trace  # noqa: PLC0415

    g = r.graph
    if not g.resolve(node) and str(node) in g.elided:
        return f"{esc(str(node))}: a model node without an op of its own: {g.elided[str(node)]}"
    ids = resolve(g, node)
    plan = r.plan
    t = r.tables
    notes = width_notes(r)
    lines = []
    for i in ids:
        op = g.ops[i]
        proc = plan.processor[i]
        c = r.ops[i]
        lines.append(f"{esc(op.name)}  (op_id {i}, {op.op}, from {g.source_format} node {op.source!r} {op.source_op})")
        ins = ", ".join(f"{g.tensor_label(x)} {list(g.tensors[x].shape)} {g.tensors[x].dtype}{_as_held(g.tensors[x])}"
                        for x in op.inputs)  # fmt: skip
        outs = ", ".join(f"{list(g.tensors[x].shape)} {g.tensors[x].dtype}" for x in op.outputs)
        lines.append(f"  inputs: {ins}")
        lines.append(f"  output: {outs}")
        if op.attrs:
            lines.append("  attrs: " + ", ".join(f"{k}={v}" for k, v in op.attrs.items()))
        lines.append(f"  placed on {proc}, partition {plan.partition[i]}"
                     + (f", composite {plan.pattern[i]}" if plan.pattern[i] else ""))  # fmt: skip
        lines.append(f"  reason: {winner_reason(op, proc, plan.pattern[i], r.verdicts, r.soc, i in r.pins, r.partitioned.notes.get(i, ''))}")
        for p in r.soc.names:
            lines.append(f"    {p}: {r.verdicts[(i, p)].text}")
        if i in notes:
            lines.append(f"  bit-width: {notes[i]}")
        lines.append(f"  figures on {proc} at {c.bits} (profile {r.soc.name}, processors.{proc}.*):")
        for tr in c.trace:
            src = ""
            if tr.fields:
                src += " [profile: " + ", ".join(tr.fields) + "]"
            if tr.attrs:
                src += " [op: " + ", ".join(tr.attrs) + "]"
            lines.append(f"    {tr.figure}: {tr.formula}{src}")
        for b, pb in zip(r.bounds, plan.boundaries):
            if i in pb.consumers or g.tensors[b.tensor].producer == i:
                lines.append(f"  boundary {esc(g.tensor_label(b.tensor))} {b.src}->{b.dst}:")
                for tr in boundary_trace(b, t):
                    lines.append(f"    {tr.figure}: {tr.formula}")
    return "\n".join(lines)
