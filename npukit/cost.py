"""The cost model: per-op figures, boundary figures, each with the trace it came from (no tvm).

Stated model (docs/cost-model.md says the same in prose):

Per op on processor p at bit-width b (the op's MACs and vector ops come from ``graph.work``):

* util_mac = fill(IC/groups, channels_in) * fill(OC, channels_out) * fill(pixels, pixels) where
  fill(n, P) = n / (ceil(n / P) * P): how full the MAC array's lanes are; matmul uses K, N, M.
* util_vec = fill(innermost output dim, vector_lanes).
* compute_cycles = MACs / (macs_per_cycle[b] * util_mac * eff) + vector_ops / (vector_ops_per_cycle[b] * util_vec * eff)
* bytes: every tensor at b bits per element (int4 / int2 packed; int32 bias when b is an integer
  width; index tensors keep their dtype).  A tensor produced and consumed inside one fused
  composite moves nothing.  An activation that stays in one partition and fits in half the
  processor's on-chip memory moves through on-chip memory; everything else moves through DRAM.
  When weights and input do not fit on chip together, the input is streamed once per weight tile
  (half the on-chip memory): dram_in = in_bytes * ceil(w_bytes / (onchip_bytes / 2)).
* memory_cycles = dram_bytes / dram_bytes_per_cycle + onchip_bytes / onchip_bytes_per_cycle
* cycles = max(compute_cycles, memory_cycles) + op_overhead_cycles (once per fused composite)
  + call_overhead_cycles (on the first op of an offloaded partition)
* latency_us = cycles / clock_mhz
* energy_uj = (MACs * pJ_per_mac[b] + vector_ops * pJ_per_op[b] + dram_bytes * pJ_per_byte
  + onchip_bytes * pJ_per_onchip_byte) / 1e6 + static_mw * latency_us / 1e3

Per boundary tensor from processor s to processor d:

* bytes = elements * bits(s) / 8
* transfer_us = latency_us + k * bytes / (bandwidth_gbps * 1000), k = 2 through shared DRAM
  (write, then read), else 1
* layout_us (only when the layouts differ and the tensor has rank >= 3): elements / vector_ops_per_cycle
  + 2 * bytes / dram_bytes_per_cycle, in cycles of the converting processor ([conversion] layout_on)
* quantize_us (only when the bit-widths differ): 2 * elements / vector_ops_per_cycle + bytes moved,
  likewise on [conversion] quantize_on
* energy_uj = bytes * link pJ/byte / 1e6 + the conversions' op and byte energy
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .graph import Op, OpGraph, Tensor, Work, dtype_bits, work
from .plan import Boundary, Plan
from .soc import BIT_WIDTH, Processor, SocProfile

NUMERIC = frozenset({"float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "uint16"})


def fill(n: int, p: int) -> float:
    """Fraction of ``p`` parallel lanes ``n`` items keep busy: n / (ceil(n / p) * p)."""
    if p <= 1 or n <= 0:
        return 1.0
    return n / (math.ceil(n / p) * p)


def elem_bits(t: Tensor, bits: str) -> float:
    """Bits per element of tensor ``t`` when its op runs at ``bits``."""
    if t.dtype not in NUMERIC:
        return dtype_bits(t.dtype)  # indices, masks, int32 accumulators keep their width
    b = BIT_WIDTH[bits]
    if t.kind == "const" and len(t.shape) <= 1 and bits.startswith("int") and t.size > 1:
        return 32  # bias vectors stay int32 in integer kernels
    if "int" in t.dtype:  # an integer tensor of the model keeps its width unless narrowed further
        return min(b, dtype_bits(t.dtype))
    return b


def tensor_bytes(t: Tensor, bits: str) -> float:
    return t.size * elem_bits(t, bits) / 8


@dataclass(frozen=True)
class Trace:
    """How one figure was computed: formula with values, and what it read."""

    figure: str
    formula: str
    fields: tuple[str, ...] = ()  # profile fields used
    attrs: tuple[str, ...] = ()  # op attributes / shapes used


@dataclass(frozen=True)
class OpCost:
    op_id: int
    processor: str
    bits: str
    macs: int
    vector_ops: int
    bytes: float  # all bytes moved (DRAM + on-chip)
    dram_bytes: float
    onchip_bytes: float
    compute_cycles: float
    memory_cycles: float
    cycles: float
    latency_us: float
    energy_uj: float
    trace: tuple[Trace, ...]


@dataclass(frozen=True)
class BoundaryCost:
    tensor: str
    src: str
    dst: str
    bytes: float
    transfer_us: float
    layout_us: float
    quantize_us: float
    energy_uj: float
    conversion: str  # "", "dequantize int8->fp32", "layout NHWC->tiled" ...
    layout_on: str  # processor doing the layout conversion ("" if none)
    quantize_on: str
    link: str
    trace: tuple[Trace, ...]


@dataclass(frozen=True)
class OpContext:
    """What an op's cost depends on beyond (op, processor, bits): where its tensors live."""

    fused_in: tuple[bool, ...]  # per input: produced inside the same composite
    onchip_in: tuple[bool, ...]  # per input: read from on-chip memory
    fused_out: bool  # output only read inside the same composite
    onchip_out: bool  # output stays on chip (read only inside the partition and fits)
    overhead: bool  # pays op_overhead_cycles (first op of its composite, or standalone)
    call: bool  # pays call_overhead_cycles (first op of an offloaded partition)


def contexts(g: OpGraph, plan: Plan, soc: SocProfile, bits_of) -> list[OpContext]:
    """Each op's memory context under ``plan``."""
    comp_of: dict[int, int] = {}
    comps: list[tuple[int, ...]] = []
    for part in plan.partitions:
        for _pat, ids in part.patterns:
            for i in ids:
                comp_of[i] = len(comps)
            comps.append(tuple(ids))
    first_of_part = {part.ops[0] for part in plan.partitions if part.processor != soc.host and part.ops}
    out = []
    for op in g.ops:
        i = op.op_id
        proc = soc.processor(plan.processor[i])
        half = proc.onchip_bytes / 2
        c = comp_of.get(i)
        fused_in, onchip_in = [], []
        for t in op.inputs:
            tt = g.tensors[t]
            if tt.kind != "act":
                fused_in.append(False)
                onchip_in.append(False)
                continue
            p = tt.producer
            same_comp = c is not None and comp_of.get(p) == c
            fused_in.append(same_comp)
            onchip_in.append(not same_comp and plan.partition[p] == plan.partition[i]
                             and tensor_bytes(tt, bits_of(p)) <= half)  # fmt: skip
        outs = [t for t in op.outputs]
        consumers = [cc for t in outs for cc in g.consumers(t)]
        is_graph_out = any(t in g.outputs for t in outs)
        fused_out = bool(consumers) and not is_graph_out and c is not None and all(comp_of.get(cc) == c for cc in consumers)
        out_bytes = sum(tensor_bytes(g.tensors[t], bits_of(i)) for t in outs)
        onchip_out = (not fused_out and bool(consumers) and not is_graph_out
                      and all(plan.partition[cc] == plan.partition[i] for cc in consumers) and out_bytes <= half)  # fmt: skip
        overhead = c is None or comps[c][0] == i
        out.append(OpContext(tuple(fused_in), tuple(onchip_in), fused_out, onchip_out, overhead, i in first_of_part))
    return out


def _util_mac(op: Op, g: OpGraph, p: Processor) -> tuple[float, str]:
    arr = p.mac_array
    ci, co, px = arr["channels_in"], arr["channels_out"], arr["pixels"]
    if ci == co == px == 1:
        return 1.0, "1 (no MAC array geometry in the profile)"
    kind = op.kind
    y = g.tensors[op.outputs[0]]
    if kind.startswith("conv") and len(op.inputs) >= 2:
        from .rules import _channels  # noqa: PLC0415

        ic, oc, groups = _channels(op, g)
        pixels = max(1, y.size // max(oc, 1))
        u = fill(ic // max(groups, 1), ci) * fill(oc, co) * fill(pixels, px)
        return u, (f"fill(IC/groups={ic // max(groups, 1)}, {ci}) * fill(OC={oc}, {co}) * "
                   f"fill(pixels={pixels}, {px}) = {u:.3f}")  # fmt: skip
    if kind == "matmul" and len(op.inputs) >= 2:
        k = g.tensors[op.inputs[0]].shape[-1] if g.tensors[op.inputs[0]].shape else 1
        n = y.shape[-1] if y.shape else 1
        m = max(1, y.size // max(n, 1))
        u = fill(k, ci) * fill(n, co) * fill(m, px)
        return u, f"fill(K={k}, {ci}) * fill(N={n}, {co}) * fill(M={m}, {px}) = {u:.3f}"
    return 1.0, "1"


def op_cost(op: Op, g: OpGraph, p: Processor, bits: str, ctx: OpContext, w: Work | None = None) -> OpCost:
    """All figures of ``op`` on ``p`` at ``bits`` in memory context ``ctx``, with traces."""
    w = w or work(op, g)
    tr: list[Trace] = []
    eff = p.eff(op.kind)
    # --- compute
    mac_cycles = vec_cycles = 0.0
    parts = []
    if w.macs:
        u, uform = _util_mac(op, g, p)
        mpc = p.macs_per_cycle[bits]
        mac_cycles = w.macs / (mpc * u * eff)
        parts.append(f"MACs / (macs_per_cycle[{bits}] * util * eff) = {w.macs:,} / ({mpc:g} * {u:.3f} * {eff:g})")
        tr.append(Trace("util_mac", uform, ("mac_array",), ("shapes",)))
    if w.vector_ops:
        y = g.tensors[op.outputs[0]]
        inner = y.shape[-1] if y.shape else 1
        uv = fill(inner, p.vector_lanes)
        vpc = p.vector_ops_per_cycle[bits]
        vec_cycles = w.vector_ops / (vpc * uv * eff)
        parts.append(f"vector_ops / (vector_ops_per_cycle[{bits}] * util_vec * eff) = {w.vector_ops:,} / ({vpc:g} * {uv:.3f} * {eff:g})")
    compute = mac_cycles + vec_cycles
    tr.append(Trace("work", w.formula + (f" [{w.model}]" if w.model else ""), (), _attr_names(op)))
    tr.append(Trace("compute_cycles", (" + ".join(parts) or "0 (no work)") + f" = {compute:,.1f}",
                    (f"macs_per_cycle.{bits}", f"vector_ops_per_cycle.{bits}", "vector_lanes", "efficiency"), ()))  # fmt: skip
    # --- memory
    half = p.onchip_bytes / 2
    dram = onchip = 0.0
    terms = []
    w_bytes = sum(tensor_bytes(g.tensors[t], bits) for t in op.inputs if g.tensors[t].kind == "const")
    in_act = 0.0
    for t, fused, on in zip(op.inputs, ctx.fused_in, ctx.onchip_in):
        tt = g.tensors[t]
        if tt.kind == "const" or fused:
            continue
        b = tensor_bytes(tt, bits)
        in_act += b
        if on:
            onchip += b
            terms.append(f"in {tt.tid} {b:,.0f} B on chip")
        else:
            dram += b
            terms.append(f"in {tt.tid} {b:,.0f} B")
    if w_bytes:
        dram += w_bytes
        terms.append(f"weights {w_bytes:,.0f} B")
    if p.onchip_bytes and w_bytes and in_act and w_bytes + in_act > p.onchip_bytes and half > 0:
        passes = math.ceil(w_bytes / half)
        if passes > 1:
            extra = in_act * (passes - 1)
            dram += extra
            terms.append(f"input re-read {passes - 1}x: weights {w_bytes:,.0f} B > onchip_bytes/2 {half:,.0f} B (+{extra:,.0f} B)")
    if not ctx.fused_out:
        ob = sum(tensor_bytes(g.tensors[t], bits) for t in op.outputs)
        if ctx.onchip_out:
            onchip += ob
            terms.append(f"out {ob:,.0f} B on chip")
        else:
            dram += ob
            terms.append(f"out {ob:,.0f} B")
    elif op.outputs:
        terms.append("out stays inside the fused composite")
    if op.kind in ("reshape", "squeeze", "expand_dims", "flatten"):  # a view: no kernel, no data
        dram = onchip = 0.0
        terms = ["view: no data moves"]
    memory = dram / p.dram_bytes_per_cycle + onchip / p.onchip_bytes_per_cycle
    tr.append(Trace("bytes", " + ".join(terms) + f" = {dram + onchip:,.0f} B (DRAM {dram:,.0f}, on chip {onchip:,.0f}) at {bits}",
                    ("onchip_bytes",), ("shapes", "dtypes")))  # fmt: skip
    tr.append(Trace("memory_cycles", f"dram_bytes / dram_bytes_per_cycle + onchip / onchip_bytes_per_cycle = "
                    f"{dram:,.0f} / {p.dram_bytes_per_cycle:g} + {onchip:,.0f} / {p.onchip_bytes_per_cycle:g} = {memory:,.1f}",
                    ("dram_bytes_per_cycle", "onchip_bytes_per_cycle"), ()))  # fmt: skip
    view = op.kind in ("reshape", "squeeze", "expand_dims", "flatten")
    over = (p.op_overhead_cycles if ctx.overhead and not view else 0) + (p.call_overhead_cycles if ctx.call else 0)
    cycles = max(compute, memory) + over
    ov = []
    if ctx.overhead and p.op_overhead_cycles and not view:
        ov.append(f"op_overhead {p.op_overhead_cycles:,}")
    if ctx.call and p.call_overhead_cycles:
        ov.append(f"call_overhead {p.call_overhead_cycles:,} (first op of the partition)")
    tr.append(Trace("cycles", f"max(compute, memory) + overhead = max({compute:,.1f}, {memory:,.1f})"
                    + (" + " + " + ".join(ov) if ov else "") + f" = {cycles:,.1f}",
                    ("op_overhead_cycles", "call_overhead_cycles"), ()))  # fmt: skip
    lat = cycles / p.clock_mhz
    tr.append(Trace("latency_us", f"cycles / clock_mhz = {cycles:,.1f} / {p.clock_mhz:g} = {lat:,.3f} us", ("clock_mhz",), ()))
    e_mac = w.macs * p.energy_pj_per_mac[bits]
    e_op = w.vector_ops * p.energy_pj_per_op[bits]
    e_mem = dram * p.energy_pj_per_byte + onchip * p.energy_pj_per_onchip_byte
    e_static = p.static_mw * lat / 1e3
    energy = (e_mac + e_op + e_mem) / 1e6 + e_static
    tr.append(Trace("energy_uj",
                    f"(MACs*{p.energy_pj_per_mac[bits]:g} + vector_ops*{p.energy_pj_per_op[bits]:g} + DRAM B*{p.energy_pj_per_byte:g}"
                    f" + on-chip B*{p.energy_pj_per_onchip_byte:g}) pJ / 1e6 + static_mw*latency/1e3 = "
                    f"({e_mac:,.0f} + {e_op:,.0f} + {e_mem:,.0f}) / 1e6 + {p.static_mw:g}*{lat:.3f}/1e3 = {energy:.4f} uJ",
                    (f"energy_pj_per_mac.{bits}", f"energy_pj_per_op.{bits}", "energy_pj_per_byte",
                     "energy_pj_per_onchip_byte", "static_mw"), ()))  # fmt: skip
    return OpCost(op.op_id, p.name, bits, w.macs, w.vector_ops, dram + onchip, dram, onchip, compute, memory,
                  cycles, lat, energy, tuple(tr))  # fmt: skip


def _attr_names(op: Op) -> tuple[str, ...]:
    return tuple(k for k in ("strides", "padding", "dilation", "groups", "pool_size", "axis", "k",
                             "data_layout", "kernel_layout") if k in op.attrs)  # fmt: skip


def _conversion_cycles(p: Processor, bits: str, elems: int, nbytes: float, ops_per_elem: int) -> float:
    return ops_per_elem * elems / p.vector_ops_per_cycle.get(bits, min(p.vector_ops_per_cycle.values())) \
        + 2 * nbytes / p.dram_bytes_per_cycle  # fmt: skip


def boundary_cost(b: Boundary, g: OpGraph, soc: SocProfile, src_bits: str, dst_bits: str) -> BoundaryCost:
    t = g.tensors[b.tensor]
    ps, pd = soc.processor(b.src), soc.processor(b.dst)
    link = soc.link(b.src, b.dst)
    nbytes = tensor_bytes(t, src_bits)
    k = 2 if link.via_dram else 1
    transfer = link.latency_us + k * nbytes / (link.bandwidth_gbps * 1000)
    tr = [Trace("bytes", f"elements * bits/8 = {t.size:,} * {elem_bits(t, src_bits):g}/8 = {nbytes:,.0f} B ({src_bits} on {b.src})", (), ("shape",)),
          Trace("transfer_us", f"latency_us + {k} * bytes / (bandwidth_gbps*1000) = {link.latency_us:g} + {k}*{nbytes:,.0f}/"
                f"({link.bandwidth_gbps:g}*1000) = {transfer:.3f} us" + (" (via shared DRAM: write + read)" if link.via_dram else ""),
                ("links.bandwidth_gbps", "links.latency_us", "links.via_dram"), ())]  # fmt: skip

    def converter(where: str) -> Processor:
        return {"src": ps, "dst": pd}.get(where, soc.processor(soc.host))

    layout_us = 0.0
    layout_on = ""
    conv = []
    if ps.layout != pd.layout and len(t.shape) >= 3 and t.dtype in NUMERIC:
        cp = converter(soc.layout_on)
        cb = src_bits if cp is ps else dst_bits if cp is pd else cp.default_bits
        cyc = _conversion_cycles(cp, cb if cb in cp.vector_ops_per_cycle else cp.default_bits, t.size, nbytes, 1)
        layout_us = cyc / cp.clock_mhz
        layout_on = cp.name
        conv.append(f"layout {ps.layout}->{pd.layout}")
        tr.append(Trace("layout_us", f"on {cp.name}: (elements / vector_ops_per_cycle + 2*bytes / dram_bytes_per_cycle) / clock_mhz = "
                        f"{cyc:,.1f} / {cp.clock_mhz:g} = {layout_us:.3f} us", ("layout", "vector_ops_per_cycle", "dram_bytes_per_cycle"), ()))  # fmt: skip
    quant_us = 0.0
    quant_on = ""
    if src_bits != dst_bits and t.dtype in NUMERIC:
        cp = converter(soc.quantize_on)
        cb = dst_bits if cp is pd else src_bits
        cyc = _conversion_cycles(cp, cb if cb in cp.vector_ops_per_cycle else cp.default_bits, t.size, nbytes, 2)
        quant_us = cyc / cp.clock_mhz
        quant_on = cp.name
        what = _qkind(src_bits, dst_bits)
        conv.append(f"{what} {src_bits}->{dst_bits}")
        tr.append(Trace("quantize_us", f"{what} on {cp.name}: (2*elements / vector_ops_per_cycle + 2*bytes / dram_bytes_per_cycle) / clock_mhz"
                        f" = {cyc:,.1f} / {cp.clock_mhz:g} = {quant_us:.3f} us", ("default_bits", "vector_ops_per_cycle"), ()))  # fmt: skip
    e_link = nbytes * link.energy_pj_per_byte / 1e6
    e_conv = 0.0
    for us, on in ((layout_us, layout_on), (quant_us, quant_on)):
        if us:
            cp = soc.processor(on)
            e_conv += (t.size * min(cp.energy_pj_per_op.values()) + 2 * nbytes * cp.energy_pj_per_byte) / 1e6 + cp.static_mw * us / 1e3
    energy = e_link + e_conv
    tr.append(Trace("energy_uj", f"bytes*link pJ/byte/1e6 + conversions = {e_link:.4f} + {e_conv:.4f} = {energy:.4f} uJ",
                    ("links.energy_pj_per_byte",), ()))  # fmt: skip
    lname = "link:" + "-".join(link.between)
    return BoundaryCost(b.tensor, b.src, b.dst, nbytes, transfer, layout_us, quant_us, energy, ", ".join(conv),
                        layout_on, quant_on, lname, tuple(tr))  # fmt: skip


def _qkind(a: str, b: str) -> str:
    ia, ib = a.startswith("int"), b.startswith("int")
    if ia and not ib:
        return "dequantize"
    if ib and not ia:
        return "quantize"
    if ia and ib:
        return "requantize"
    return "convert"


class CostModel:
    """Per-op and per-boundary costs with a memo: only ops whose inputs to the model changed
    (processor, bits, memory context) are recomputed after an edit."""

    def __init__(self, g: OpGraph, soc: SocProfile):
        self.g = g
        self.soc = soc
        self._work = [work(op, g) for op in g.ops]
        self._ops: dict[tuple, OpCost] = {}
        self._bounds: dict[tuple, BoundaryCost] = {}
        self.recomputed = 0  # ops recomputed by the last evaluate()

    def work(self, i: int) -> Work:
        return self._work[i]

    def evaluate(self, plan: Plan, bits: Mapping[int, str] | list[str]) -> tuple[list[OpCost], list[BoundaryCost]]:
        g, soc = self.g, self.soc

        def bits_of(i: int) -> str:
            return bits[i]

        ctxs = contexts(g, plan, soc, bits_of)
        out = []
        n = 0
        for op, ctx in zip(g.ops, ctxs):
            i = op.op_id
            key = (i, plan.processor[i], bits[i], ctx)
            c = self._ops.get(key)
            if c is None:
                c = op_cost(op, g, soc.processor(plan.processor[i]), bits[i], ctx, self._work[i])
                self._ops[key] = c
                n += 1
            out.append(c)
        self.recomputed = n
        bout = []
        for b in plan.boundaries:
            sb = bits[g.tensors[b.tensor].producer] if g.tensors[b.tensor].kind == "act" else _input_bits(g.tensors[b.tensor])
            db = bits[b.consumers[0]] if b.consumers else _input_bits(g.tensors[b.tensor])
            key = (b, sb, db)
            c = self._bounds.get(key)
            if c is None:
                c = boundary_cost(b, g, soc, sb, db)
                self._bounds[key] = c
            bout.append(c)
        return out, bout


def _input_bits(t: Tensor) -> str:
    """Bit-width of a model input / output as stored by the host program (its own dtype)."""
    return {"float16": "fp16", "int8": "int8", "uint8": "int8", "int16": "int16"}.get(t.dtype, "fp32")
