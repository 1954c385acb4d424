"""Traces: every figure as formula = values = result, with the profile fields and op attributes it
read, rendered from the terms the cost model computed (``KernelCost``, ``BoundaryCost``) -- never
by computing a figure a second way."""

from __future__ import annotations

from dataclasses import dataclass

from ..graph import Op
from .kernel import CONVERT_OPS, NO_COMPUTE, Compute, KernelCost, Memory
from .mac_array import Util
from .tables import Tables


@dataclass(frozen=True)
class Trace:
    """How one figure was computed: formula with values, and what it read."""

    figure: str
    formula: str
    fields: tuple[str, ...] = ()  # profile fields used
    attrs: tuple[str, ...] = ()  # op attributes / shapes used


ROLE_TEXT = {
    "input": "input dequantize: no work, the integer kernel reads the integer values",
    "view": "view: no work, no data",
    "epilogue": "epilogue after the anchor",
    "serial": "serial: its own work after the anchor's",
}
_ATTRS = ("strides", "padding", "dilation", "groups", "pool_size", "axis", "k", "data_layout", "kernel_layout")


def attr_names(op: Op) -> tuple[str, ...]:
    return tuple(k for k in _ATTRS if k in op.attrs)


def _fills(factors) -> str:
    return " * ".join(f"fill({lbl}={n}, {lanes})" for lbl, n, lanes in factors)


def util_text(u: Util, p) -> str:
    """The MAC-array utilisation formula with its values."""
    if not u.factors:
        return "1 (no MAC array geometry in the profile)"
    first, *rest = u.factors
    ci = p.mac_array["channels_in"]
    kt = p.mac_array.get("kernel_taps", 1)
    if u.alt:
        (_, icg, _), (_, taps, _) = u.alt
        if u.alt_used:
            lead = f"fill(IC/groups={icg}, {ci}/{kt}) * fill(KH*KW={taps}, kernel_taps={kt})"
        else:
            lead = f"max(fill(IC/groups={icg}, {ci}), fill(IC/groups={icg}, {ci}/{kt}) * fill(KH*KW={taps}, {kt}))"
        return f"{lead} * {_fills(rest)} = {num(u.value)}"
    return f"{_fills(u.factors)} = {num(u.value)}"


def compute_text(c: Compute, t: Tables, i: int, p, bits: str) -> tuple[str, str]:
    """(compute formula, utilisation formula) of one member."""
    w = t.work[i]
    if c is NO_COMPUTE or not (w.macs or w.vector_ops):
        return "", ""
    parts = []
    uform = ""
    if w.macs:
        uform = util_text(c.util, p)
        if p.reduction:
            r = p.reduction
            urf = (f"K={c.red_k:,} <= unroll {r['unroll']:,}: 1" if c.util_red == 1.0 else
                   f"K={c.red_k:,} > unroll {r['unroll']:,}: serial * (unroll / K)^exponent = {r['serial']:g} * "
                   f"({r['unroll']:,} / {c.red_k:,})^{r['exponent']:g} = {num(c.util_red)}")  # fmt: skip
            uform = f"{uform}; util_red: {urf}"
            parts.append(f"MACs / (macs_per_cycle[{bits}] * util * util_red * eff) = {w.macs:,} / "
                         f"({c.macs_per_cycle:g} * {num(c.util.value)} * {num(c.util_red)} * {c.eff:g})")  # fmt: skip
        else:
            parts.append(f"MACs / (macs_per_cycle[{bits}] * util * eff) = {w.macs:,} / "
                         f"({c.macs_per_cycle:g} * {num(c.util.value)} * {c.eff:g})")  # fmt: skip
    if w.vector_ops:
        n, letter = c.inner
        dim = f"{letter}={n:,}, innermost in {p.name}'s {p.layout} layout" if letter else f"last dim={n:,}"
        parts.append(f"vector_ops / (vector_ops_per_cycle[{bits}] * util_vec * eff) = "
                     f"{w.vector_ops:,} / ({c.vector_ops_per_cycle:g} * {num(c.util_vec)} * {c.eff:g}) "
                     f"[util_vec = fill({dim}; vector_lanes {p.vector_lanes:g})]")  # fmt: skip
    return " + ".join(parts) + f" [eff = efficiency[{c.eff_key}] = {c.eff:g}, class {c.cls}]", uform


def num(x: float) -> str:
    """A figure as a trace shows it: enough digits to compute with (1,024.0; 344.125; 5.0025; 0.003125),
    so the terms of a sum add up to its total as the tables hold them."""
    if abs(x) < 100:
        return f"{x:.6g}"
    s = f"{x:,.3f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def memory_terms(m: Memory, op: Op, label=str) -> list[str]:
    """``label``: a tensor id as the model names it (``OpGraph.tensor_label``)."""
    if m.view:
        return [f"{op.kind}: view, no data moves"]
    own = dict(m.own)  # a (de)quantize's float side: in its own dtype, whatever the op's width

    def mine(tid) -> str:
        return f" ({own[tid]}: {op.kind}'s float side, in its own dtype)" if tid in own else ""

    terms = [f"in {label(tid)} {b:,.0f} B" + mine(tid) + (" on chip" if on else "") for tid, b, on in m.inputs]
    if m.table:
        terms.append(f"weights {m.weights:,.0f} B (the rows a lookup reads of its {m.table:,.0f} B table)")
    elif m.weights:
        terms.append(f"weights {m.weights:,.0f} B")
    passes, extra, half = m.reread
    if passes:
        terms.append(f"input re-read {passes}x: weights {m.weights:,.0f} B > onchip_bytes/2 {half:,.0f} B (+{extra:,.0f} B)")
    ob, on, fused = m.out
    if not fused:
        terms.append(f"out {ob:,.0f} B" + "".join(mine(o) for o in op.outputs) + (" on chip" if on else ""))
    elif op.outputs:
        terms.append(f"{op.kind} out stays inside the kernel")
    return terms


def member_trace(k: KernelCost, i: int, t: Tables) -> tuple[Trace, ...]:
    """The trace of a member that is not the anchor: which kernel carries its figures, its role."""
    op, aop = t.g.ops[i], t.g.ops[k.anchor]
    w = t.work[i]
    r = k.roles[k.ids.index(i)]
    return (Trace("fused", f"costed with {aop.name} (op {k.anchor}, {aop.kind}), which carries the kernel's figures; "
                           f"this op: {ROLE_TEXT[r]}", (), ()),
            Trace("work", w.formula + (f" [{w.model}]" if w.model else ""), (), attr_names(op)))  # fmt: skip


def kernel_trace(k: KernelCost, t: Tables) -> tuple[Trace, ...]:
    """The anchor's trace: every term of the kernel."""
    p = k.p
    g = t.g
    a = k.anchor
    aop = g.ops[a]
    ab = k.bits[k.ids.index(a)]
    stage = p.output_elems_per_cycle
    ops = [g.ops[i] for i in k.ids]
    texts = {i: compute_text(c, t, i, p, b) for i, c, b in zip(k.ids, k.compute, k.bits)}
    tr: list[Trace] = []
    if len(ops) > 1:
        desc = ", ".join(f"{op.kind}={r}" for op, r in zip(ops, k.roles))
        tr.append(Trace("kernel", f"{len(ops)} ops fused into one kernel, costed here: {desc}", (), ()))
    w = t.work[a]
    a_form, a_util = texts[a]
    if w.macs and a_util:
        tr.append(Trace("util_mac", a_util, ("mac_array", "reduction") if p.reduction else ("mac_array",), ("shapes",)))
    tr.append(Trace("work", w.formula + (f" [{w.model}]" if w.model else ""), (), attr_names(aop)))
    ca = k.compute[k.ids.index(a)]
    terms = [f"{aop.kind}: {a_form} = {num(ca.mac_cycles + ca.vec_cycles)}" if a_form else f"{aop.kind}: 0 (no work)"]
    fields = [f"macs_per_cycle.{ab}", f"vector_ops_per_cycle.{ab}", "vector_lanes", "efficiency"]
    if k.stage_cycles:
        terms = [f"max({terms[0]}, output stage: out_elems / output_elems_per_cycle = {t.out_elems[a]:,} / {stage:g} "
                 f"= {num(k.stage_cycles)}) = {num(k.main_cycles)}"]  # fmt: skip
        fields.append("output_elems_per_cycle")
    for op, r, c, b in zip(ops, k.roles, k.compute, k.bits):
        i = op.op_id
        if r == "epilogue":
            if stage > 0:
                terms.append(f"{op.kind}: 0 (epilogue in the output stage)")
            else:
                form = compute_text(c, t, i, p, b)[0]
                terms.append(f"{op.kind} (epilogue): {form or '0'} = {num(c.mac_cycles + c.vec_cycles)}")
        elif r == "serial":
            terms.append(f"{op.kind} (serial): {texts[i][0] or '0'} = {num(c.mac_cycles + c.vec_cycles)}")
        elif r in ("input", "view"):
            terms.append(f"{op.kind}: 0 ({r})")
    if stage > 0 and "output_elems_per_cycle" not in fields:
        fields.append("output_elems_per_cycle")
    for i, tid, frm, to, n, rate, at in k.conversions:  # (a layer bit-width: the producer wrote another width)
        terms.append(f"{g.ops[i].kind} converts its input {t.g.tensor_label(tid)} {frm} -> {to} as it loads it: "
                     f"{CONVERT_OPS} * {n:,} / vector_ops_per_cycle[{at}] {rate:g} = {num(CONVERT_OPS * n / rate)}")  # fmt: skip
        if f"vector_ops_per_cycle.{at}" not in fields:
            fields.append(f"vector_ops_per_cycle.{at}")
    total = f" = {num(k.compute_cycles)}"
    ctext = terms[0] if len(terms) == 1 and terms[0].endswith(total) else " + ".join(terms) + total  # (one term: its own sum)
    tr.append(Trace("compute_cycles", ctext, tuple(fields), ("shapes",)))
    bterms = [x for op, m in zip(ops, k.memory) for x in memory_terms(m, op, t.g.tensor_label)]
    half = " (the model's float16 tensors at 16 bits: never held wider)" if ab == "fp32" and any(
        x in t.half for op in ops for x in (*op.inputs, *op.outputs)) else ""  # fmt: skip
    tr.append(Trace("bytes", " + ".join(bterms) + f" = {k.bytes:,.0f} B (DRAM {k.act_dram:,.0f}, "
                    f"weights {k.weights:,.0f}, on chip {k.onchip:,.0f}) at {ab}{half}", ("onchip_bytes",),
                    ("shapes", "dtypes")))  # fmt: skip
    wbpc = p.weight_bytes_per_cycle or p.dram_bytes_per_cycle
    act_f = (f"dram_bytes / dram_bytes_per_cycle + onchip / onchip_bytes_per_cycle = {k.act_dram:,.0f} / "
             f"{p.dram_bytes_per_cycle:g} + {k.onchip:,.0f} / {p.onchip_bytes_per_cycle:g} = {num(k.act_cycles)}")  # fmt: skip
    w_f = f"weight_bytes / weight_bytes_per_cycle = {k.weights:,.0f} / {wbpc:g} = {num(k.weight_cycles)}"
    if p.weight_port == "separate":
        mform = f"max(act: {act_f}, weights (separate port): {w_f}) = {num(k.memory_cycles)}"
    else:
        mform = f"act: {act_f} + weights: {w_f} = {num(k.memory_cycles)}"
    tr.append(Trace("memory_cycles", mform, ("dram_bytes_per_cycle", "onchip_bytes_per_cycle", "weight_bytes_per_cycle",
                                             "weight_port"), ()))  # fmt: skip
    ov = []
    if k.op_overhead:
        ov.append(f"op_overhead {k.op_overhead:,}")
    if k.call_overhead:
        ov.append(f"call_overhead {k.call_overhead:,} (first op of the partition)")
    tr.append(Trace("overhead_cycles", (" + ".join(ov) if ov else "none") + f" = {k.overhead_cycles:,}",
                    ("op_overhead_cycles", "call_overhead_cycles"), ()))  # fmt: skip
    tr.append(Trace("cycles", f"max(compute, memory) + overhead = max({num(k.compute_cycles)}, {num(k.memory_cycles)})"
                    + (" + " + " + ".join(ov) if ov else "") + f" = {num(k.cycles)}",
                    ("op_overhead_cycles", "call_overhead_cycles"), ()))  # fmt: skip
    tr.append(Trace("latency_us", f"cycles / clock_mhz = {num(k.cycles)} / {p.clock_mhz:g} = {num(k.latency_us)} us", ("clock_mhz",), ()))
    tr.append(Trace("energy_uj",
                    f"(MACs*pJ_per_mac + vector_ops*pJ_per_op + (DRAM + weight) B*{p.energy_pj_per_byte:g}"
                    f" + on-chip B*{p.energy_pj_per_onchip_byte:g}) pJ / 1e6 + static_mw*latency/1e3 = "
                    f"({num(k.e_mac)} + {num(k.e_op)} + {num(k.e_mem)}) / 1e6 + {p.static_mw:g}*{num(k.latency_us)}/1e3 = "
                    f"{num(k.energy_uj)} uJ (MACs {k.macs:,}, vector ops {k.vector_ops - k.stage_ops:,}"
                    + (f" + output stage {k.stage_ops:,}" if k.stage_ops else "") + ")",
                    (f"energy_pj_per_mac.{ab}", f"energy_pj_per_op.{ab}", "energy_pj_per_byte",
                     "energy_pj_per_onchip_byte", "static_mw"), ()))  # fmt: skip
    return tuple(tr)
