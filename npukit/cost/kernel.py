"""The one kernel formula: every figure of one kernel (a fused composite, or one op alone) on one
processor, as value types with named terms.  ``cycles = max(compute, memory) + overhead`` is
evaluated here and nowhere else; ``npukit.cost.trace`` renders the same terms as text."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from ..opset import KINDS
from ..soc import Processor
from .grouping import OpContext
from .mac_array import Util, fill, util_mac
from .members import anchor_of, inner_width
from .tables import Tables

LOOKUPS = frozenset({"take", "gather_elements", "gather_nd"})  # their first input is the table read from


class Compute(NamedTuple):
    """One member's compute: MAC cycles and vector cycles, with every factor used."""

    mac_cycles: float
    vec_cycles: float
    cls: str  # the kernel class whose efficiency applies
    eff_key: str
    eff: float
    macs_per_cycle: float
    util: Util
    util_red: float  # 1 unless the processor has a ``reduction`` law
    red_k: int  # the reduction length the law was applied to (0: no law)
    vector_ops_per_cycle: float
    util_vec: float
    inner: tuple[int, str] = (1, "")  # the dim util_vec fills: (size, layout letter; "" = the last dim)

    @property
    def cycles(self) -> float:
        return self.mac_cycles + self.vec_cycles


NO_COMPUTE = Compute(0.0, 0.0, "", "", 1.0, 0.0, Util(1.0, ()), 1.0, 0, 0.0, 1.0)


class Memory(NamedTuple):
    """One member's data movement (bytes at its bit-width) and what it was made of."""

    act_dram: float
    onchip: float
    weights: float
    inputs: tuple[tuple[str, float, bool], ...] = ()  # (tensor id, bytes, on chip) of activation inputs read
    reread: tuple[int, float, float] = (0, 0.0, 0.0)  # (extra passes, extra bytes, half on-chip) when weights tile
    out: tuple[float, bool, bool] = (0.0, False, False)  # (bytes, on chip, stays inside the kernel)
    view: bool = False
    table: float = 0.0  # a lookup's constant table, whole (its weights are the rows it reads)
    own: tuple[tuple[str, str], ...] = ()  # (tensor id, width) read or written in its own dtype: a (de)quantize's float side


class KernelCost(NamedTuple):
    """Every term of one kernel's cost.  Figures are reported on the anchor op."""

    ids: tuple[int, ...]
    anchor: int
    p: Processor
    bits: tuple[str, ...]  # per member
    roles: tuple[str, ...]  # per member: anchor | input | view | epilogue | serial
    compute: tuple[Compute, ...]  # per member (NO_COMPUTE where the member does no work of its own)
    memory: tuple[Memory, ...]  # per member
    stage_cycles: float  # anchor output elements / output_elems_per_cycle (0: no output stage used)
    main_cycles: float  # the anchor (with its epilogue), or the output stage when that is slower
    serial_cycles: float
    compute_cycles: float  # main + serial
    act_dram: float
    onchip: float
    weights: float
    act_cycles: float
    weight_cycles: float
    memory_cycles: float
    op_overhead: int
    call_overhead: int
    overhead_cycles: int
    cycles: float  # max(compute, memory) + overhead
    latency_us: float
    macs: int
    vector_ops: int  # vector work actually executed (output stage included)
    stage_ops: int
    e_mac: float  # pJ
    e_op: float
    e_mem: float
    e_static: float  # uJ
    energy_uj: float
    conversions: tuple = ()  # (op, tensor, from width, to width, elements, vector_ops_per_cycle, at width) of each

    @property
    def bytes(self) -> float:
        return self.act_dram + self.weights + self.onchip


CONVERT_OPS = 2  # vector ops per element of a width conversion (scale and round/clamp, as a boundary's)


def role(kind: str, i: int, anchor: int, bits: str) -> str:
    if i == anchor:
        return "anchor"
    k = KINDS[kind]
    if k.view:
        return "view"
    if i < anchor and kind == "dequantize" and bits.startswith("int"):
        return "input"
    if i > anchor and k.epilogue:
        return "epilogue"
    return "serial"


class UtilMemo(dict):
    """MAC-array utilisation per (op, processor name) of one profile (it depends on no edit)."""

    def of(self, i: int, t: Tables, p: Processor) -> Util:
        key = (i, p.name)
        u = self.get(key)
        if u is None:
            u = self[key] = util_mac(t.geometry(i), p)
        return u


def compute_of(i: int, t: Tables, p: Processor, bits: str, um: UtilMemo, cls: str = "") -> Compute:
    """MAC and vector cycles of op ``i`` at ``bits``; ``cls``: the kernel class whose efficiency
    applies (an epilogue runs at its anchor's), default the op's own."""
    w = t.work[i]
    if not (w.macs or w.vector_ops):
        return NO_COMPUTE
    cls = cls or t.kernel_class(i)
    key = p.eff_key(cls)
    eff = p.efficiency.get(key, 1.0)
    mac = vec = 0.0
    mpc = vpc = 0.0
    u = NO_COMPUTE.util
    ur, k, uv, inner = 1.0, 0, 1.0, (1, "")
    if w.macs:
        u = um.of(i, t, p)
        mpc = p.macs_per_cycle[bits]
        if p.reduction:
            k = t.reduction_length(i)
            ur = p.util_red(k)
            mac = w.macs / (mpc * u.value * ur * eff)
        else:
            mac = w.macs / (mpc * u.value * eff)
    if w.vector_ops:
        inner = t.inner(p.layout)[i]
        uv = fill(inner[0], p.vector_lanes)
        vpc = p.vector_ops_per_cycle[bits]
        vec = w.vector_ops / (vpc * uv * eff)
    return Compute(mac, vec, cls, key, eff, mpc, u, ur, k, vpc, uv, inner)


def memory_of(i: int, t: Tables, p: Processor, bits: str, ctx: OpContext) -> Memory:
    """Bytes op ``i`` moves at ``bits`` in its memory context."""
    op = t.g.ops[i]
    if KINDS[op.kind].view:  # a view: no kernel, no data
        return Memory(0.0, 0.0, 0.0, view=True)
    tensors = t.g.tensors
    nb = t.nbytes
    act_dram = onchip = w_bytes = in_act = table = 0.0
    ins = []
    lookup = op.kind in LOOKUPS
    conv = ctx.convert_in
    own = t.own
    mine = []  # the float side of a (de)quantize, held in its own dtype (``Tables.held``)
    for k, (tid, fused, on) in enumerate(zip(op.inputs, ctx.fused_in, ctx.onchip_in)):
        if fused:
            continue
        w = conv[k] if conv else ""  # an input converted as it loads: stored at its producer's width
        if not w:
            w = own.get((i, tid)) if own else None
            if w:
                mine.append((tid, w))
            else:
                w = bits
        b = nb(tid, w)
        if tensors[tid].kind == "const":
            if lookup and k == 0:  # a lookup reads the rows it gathers, not the whole table
                table = b
                b = min(b, sum(nb(o, bits) for o in op.outputs))
            w_bytes += b
            continue
        in_act += b
        if on:
            onchip += b
        else:
            act_dram += b
        ins.append((tid, b, on))
    reread = (0, 0.0, 0.0)
    cap = p.onchip_bytes
    if cap and w_bytes and in_act and w_bytes + in_act > cap and not table:  # (a lookup's rows are read once)
        half = cap / 2
        passes = math.ceil(w_bytes / half)
        if passes > 1:
            extra = in_act * (passes - 1)
            act_dram += extra
            reread = (passes - 1, extra, half)
    ob = 0.0
    if not ctx.fused_out:
        for o in op.outputs:
            w = own.get((i, o)) if own else None
            if w:
                mine.append((o, w))
            ob += nb(o, w or bits)
        if ctx.onchip_out:
            onchip += ob
        else:
            act_dram += ob
    return Memory(act_dram, onchip, w_bytes, tuple(ins), reread, (ob, ctx.onchip_out, ctx.fused_out), table=table,
                  own=tuple(mine))  # fmt: skip


def kernel_cost(ids: Sequence[int], t: Tables, p: Processor, bits: Sequence[str], ctxs: Sequence[OpContext],
                um: UtilMemo | None = None) -> KernelCost:
    """Every figure of one kernel on ``p``; ``bits`` and ``ctxs`` are indexed by op id."""
    ids = tuple(ids)
    um = UtilMemo() if um is None else um
    ops = t.g.ops
    a = anchor_of(ids, t)
    # a member whose values never leave the kernel runs at the anchor's width (``inner_width``)
    eb = {i: bits[a] if i != a and inner_width(t, i, a, ctxs[i].fused_out) else bits[i] for i in ids}
    ab = eb[a]
    stage = p.output_elems_per_cycle
    a_cls = t.kernel_class(a)
    roles, comps, mems = [], [], []
    epi = ser = act_dram = onchip = weights = 0.0
    for i in ids:
        r = role(ops[i].kind, i, a, eb[i])
        roles.append(r)
        if r == "anchor" or r == "serial":
            c = compute_of(i, t, p, eb[i], um)
            if r == "serial":
                ser += c.vec_cycles + c.mac_cycles
        elif r == "epilogue" and stage <= 0:  # in the anchor's loop nest: at the anchor's efficiency
            c = compute_of(i, t, p, eb[i], um, a_cls)
            epi += c.vec_cycles + c.mac_cycles
        else:
            c = NO_COMPUTE
        comps.append(c)
        m = memory_of(i, t, p, eb[i], ctxs[i])
        mems.append(m)
        act_dram += m.act_dram
        onchip += m.onchip
        weights += m.weights
    conv_cycles, conv_ops, convs = 0.0, 0, []
    for i in ids:  # inputs at another width than the op holds them at (a layer bit-width), converted as they load
        cv = ctxs[i].convert_in
        for tid, frm in zip(ops[i].inputs, cv) if cv else ():
            if frm:
                n = t.g.tensors[tid].size
                rate = p.vector_ops_per_cycle[eb[i]]  # (at the op's own width, even into a (de)quantize's float side)
                conv_cycles += CONVERT_OPS * n / rate
                conv_ops += CONVERT_OPS * n
                convs.append((i, tid, frm, t.held(i, tid, eb[i]), n, rate, eb[i]))
    ca = comps[ids.index(a)]
    wa = t.work[a]
    stage_cycles = 0.0
    if stage > 0 and wa.macs:
        stage_cycles = t.out_elems[a] / stage
        main = max(ca.mac_cycles + ca.vec_cycles, stage_cycles)
    elif stage > 0:
        main = ca.mac_cycles + ca.vec_cycles
    else:
        main = ca.mac_cycles + ca.vec_cycles + epi
    compute = main + ser + conv_cycles
    wbpc = p.weight_bytes_per_cycle or p.dram_bytes_per_cycle
    act_cyc = act_dram / p.dram_bytes_per_cycle + onchip / p.onchip_bytes_per_cycle
    w_cyc = weights / wbpc
    memory = max(act_cyc, w_cyc) if p.weight_port == "separate" else act_cyc + w_cyc
    op_over = 0 if all(KINDS[ops[i].kind].view for i in ids) else p.op_overhead_cycles
    call_over = p.call_overhead_cycles if any(ctxs[i].call for i in ids) else 0
    overhead = op_over + call_over
    cycles = (compute if compute > memory else memory) + overhead
    lat = cycles / p.clock_mhz
    macs = vec_ops = 0
    e_mac = e_op = 0.0
    pj_mac, pj_op = p.energy_pj_per_mac, p.energy_pj_per_op
    for i, r in zip(ids, roles):
        w = t.work[i]
        if w.macs:
            macs += w.macs
            e_mac += w.macs * pj_mac[eb[i]]
        if w.vector_ops and (r == "anchor" or r == "serial" or (r == "epilogue" and stage <= 0)):
            vec_ops += w.vector_ops
            e_op += w.vector_ops * pj_op[eb[i]]
    stage_ops = t.out_elems[a] if stage_cycles else 0
    e_op += stage_ops * pj_op[ab]
    for _i, _tid, _frm, _to, n, _rate, at in convs:
        e_op += CONVERT_OPS * n * pj_op[at]
    e_mem = (act_dram + weights) * p.energy_pj_per_byte + onchip * p.energy_pj_per_onchip_byte
    e_static = p.static_mw * lat / 1e3
    energy = (e_mac + e_op + e_mem) / 1e6 + e_static
    return KernelCost(ids, a, p, tuple(eb[i] for i in ids), tuple(roles), tuple(comps), tuple(mems), stage_cycles,
                      main, ser, compute, act_dram, onchip, weights, act_cyc, w_cyc, memory, op_over, call_over,
                      overhead, cycles, lat, macs, vec_ops + stage_ops + conv_ops, stage_ops, e_mac, e_op, e_mem, e_static,
                      energy, tuple(convs))  # fmt: skip
