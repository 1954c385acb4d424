"""Boundary costs: a tensor crossing from one processor to another (no tvm).

transfer_us = latency_us + k * bytes / (bandwidth_gbps * 1000), k = 2 through shared DRAM; a layout
conversion when the processors' layouts differ (rank-4 numeric image tensors: ``layouts.model_layouts``)
and hold the tensor in different memory orders (none where every byte stays put: C = 1, H = W = 1 -- ``layouts.same_memory``,
which the boundary's trace quotes); a (de/re)quantize when
the tensor is held differently at the two bit-widths (the widths its producer and its first reader
hold it at: ``grouping.bound_keys``); each conversion runs on the processor ``[conversion] layout_on`` /
``quantize_on`` names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ..plan import Boundary
from ..soc import BIT_WIDTH, Link, Processor, SocProfile
from .layouts import same_memory, semantic, tile_block
from .tables import NUMERIC, Tables, elem_bits, held_as, integer
from .trace import Trace, num


class Conversion(NamedTuple):
    """One conversion at a boundary: what, where, and its figures."""

    what: str  # "layout" | "quantize" | "dequantize" | "requantize" | "convert"
    src: str  # layout or bit-width converted from
    dst: str
    on: str  # the processor doing it
    on_bits: str  # the bit-width its vector rate is taken at
    clock_mhz: float
    cycles: float
    us: float
    energy_uj: float
    # the terms the figures were computed from (their trace shows them)
    elems: int = 0
    ops_per_elem: float = 0  # 2 for a (de/re)quantize; a layout copy's 1, or bits(data) / bits(on_bits)
    rate: float = 0.0  # vector ops per cycle at on_bits
    read_bytes: float = 0.0  # the tensor at the width converted from
    dram_bytes_per_cycle: float = 0.0
    pj_per_op: float = 0.0  # energy_pj_per_op[on_bits]
    pj_per_byte: float = 0.0
    static_mw: float = 0.0
    read_bits: str = ""  # the width it reads the tensor at (read_bytes)


class BoundaryCost(NamedTuple):
    tensor: str
    src: str
    dst: str
    src_bits: str
    dst_bits: str
    bytes: float
    transfer_us: float
    layout: Conversion | None
    quantize: Conversion | None
    link: Link
    via_factor: int  # 2 through shared DRAM, else 1
    link_energy_uj: float
    energy_uj: float
    sent_bits: str = ""  # the width it travels at (``bytes``): src_bits, or dst_bits when the sender converts
    same_order: str = ""  # why no layout conversion where the layouts differ: "same memory order: C = 1"

    @property
    def layout_us(self) -> float:
        return self.layout.us if self.layout else 0.0

    @property
    def quantize_us(self) -> float:
        return self.quantize.us if self.quantize else 0.0

    @property
    def layout_on(self) -> str:
        return self.layout.on if self.layout else ""

    @property
    def quantize_on(self) -> str:
        return self.quantize.on if self.quantize else ""

    @property
    def quantize_kind(self) -> str:
        return self.quantize.what if self.quantize else ""

    @property
    def conversion(self) -> str:
        """"layout NCHW->tiled, quantize fp32->int8" (empty when nothing converts)."""
        out = []
        if self.layout:
            out.append(f"layout {self.layout.src}->{self.layout.dst}")
        if self.quantize:
            out.append(f"{self.quantize.what} {self.quantize.src}->{self.quantize.dst}")
        return ", ".join(out)

    @property
    def lane(self) -> str:
        """The link's timeline lane."""
        return "link:" + "-".join(self.link.between)


def qkind(a: str, b: str) -> str:
    ia, ib = a.startswith("int"), b.startswith("int")
    if ia and not ib:
        return "dequantize"
    if ib and not ia:
        return "quantize"
    if ia and ib:
        return "requantize"
    return "convert"


def _copy_width(p: Processor, own: str, data_bits: float) -> tuple[str, float]:
    """(width, ops per element) a layout conversion -- a copy, no arithmetic -- runs at: its data's own
    width, one op per element, unless another width's vector rate moves more bits per cycle (a CPU
    without an FPU copies fp32 data as integers): then bits(data) / bits(width) ops per element.  Only
    the widths the processor runs (its macs_per_cycle) count: a vector rate of another width has no
    energy_pj_per_op figure to go with it."""
    rates = {w: r for w, r in p.vector_ops_per_cycle.items() if w in p.macs_per_cycle}
    best = own if own in rates else p.default_bits if p.default_bits in rates else next(iter(rates))
    for w in rates:
        if rates[w] * BIT_WIDTH[w] > rates[best] * BIT_WIDTH[best] * (1 + 1e-12):
            best = w
    return best, (1 if best == own else data_bits / BIT_WIDTH[best])


def boundary_cost(b: Boundary, t: Tables, soc: SocProfile, src_bits: str, dst_bits: str,
                  procs: Mapping[str, Processor], link: Link) -> BoundaryCost:  # fmt: skip
    """Figures of one boundary tensor (``procs``: the profile's processors by name; ``link``: the
    link between ``b.src`` and ``b.dst``)."""
    tensor = t.g.tensors[b.tensor]
    ps, pd = procs[b.src], procs[b.dst]
    def converter(where: str) -> Processor:
        return ps if where == "src" else pd if where == "dst" else procs[soc.host]

    def conv(what, frm, to, cp, cb, ops_per_elem, rb: str) -> Conversion:
        """``rb``: the width the conversion reads the tensor at (and writes, in its formula)."""
        read = t.nbytes(b.tensor, rb)
        on_bits = cb if cb in cp.macs_per_cycle else cp.default_bits  # a width it runs: each has every figure
        if what == "layout":
            on_bits, ops_per_elem = _copy_width(cp, on_bits, elem_bits(tensor, cb))
        rate = cp.vector_ops_per_cycle.get(on_bits, min(cp.vector_ops_per_cycle.values()))
        cyc = ops_per_elem * tensor.size / rate + 2 * read / cp.dram_bytes_per_cycle
        us = cyc / cp.clock_mhz
        pj_op = cp.energy_pj_per_op.get(on_bits, min(cp.energy_pj_per_op.values()))  # the ops the time counts
        e = (ops_per_elem * tensor.size * pj_op + 2 * read * cp.energy_pj_per_byte) / 1e6 + cp.static_mw * us / 1e3
        return Conversion(what, frm, to, cp.name, on_bits, cp.clock_mhz, cyc, us, e, tensor.size, ops_per_elem, rate, read,
                          cp.dram_bytes_per_cycle, pj_op, cp.energy_pj_per_byte, cp.static_mw, rb)  # fmt: skip

    numeric = tensor.dtype in NUMERIC
    layout = quant = None
    sent = src_bits  # the width the tensor travels at: converted before it leaves when the sender converts
    if numeric and held_as(tensor, src_bits) != held_as(tensor, dst_bits):
        cp = converter(soc.quantize_on)
        cb = dst_bits if cp is pd else src_bits
        quant = conv(qkind(src_bits, dst_bits), src_bits, dst_bits, cp, cb, 2, src_bits)
        if cp is ps and cp is not pd:
            sent = dst_bits
    # a layout names how a rank-4 tensor is held; any other rank is row-major on every processor
    same = ""
    if ps.layout != pd.layout and len(tensor.shape) == 4 and numeric:
        same = _same_order(b.tensor, t, ps, pd)
    if ps.layout != pd.layout and len(tensor.shape) == 4 and numeric and not same:
        cp = converter(soc.layout_on)
        cb = src_bits if cp is ps else dst_bits if cp is pd else cp.default_bits
        # the receiver converts the tensor as it arrives (quantized first when the sender quantizes)
        layout = conv("layout", ps.layout, pd.layout, cp, cb, 1, sent if cp is pd and cp is not ps else src_bits)
    nbytes = t.nbytes(b.tensor, sent)
    k = 2 if link.via_dram else 1
    transfer = link.latency_us + k * nbytes / (link.bandwidth_gbps * 1000)
    e_link = nbytes * link.energy_pj_per_byte / 1e6
    energy = e_link + sum(c.energy_uj for c in (layout, quant) if c)
    return BoundaryCost(b.tensor, b.src, b.dst, src_bits, dst_bits, nbytes, transfer, layout, quant, link, k, e_link,
                        energy, sent, same)  # fmt: skip


def _same_order(tid: str, t: Tables, ps: Processor, pd: Processor) -> str:
    """Why ``ps`` and ``pd`` hold rank-4 tensor ``tid`` in the same memory order though their layouts
    differ (``layouts.same_memory``, on the tensor's (N, C, H, W) in the model's axis order), else ""."""
    ml = t.model_layouts.get(tid)
    if not ml:  # (an attention's [batch, heads, seq, seq]: no op gives it a layout)
        return ("not an image: no op that has a layout (a convolution, a pool) reaches it, so every processor "
                "holds it row-major in the model's axis order")  # fmt: skip
    nchw = semantic(t.g.tensors[tid].shape, ml)
    why = same_memory(nchw, ps.layout, pd.layout, tile_block(ps), tile_block(pd))
    return why and (f"{why} ({ps.name}'s {ps.layout} and {pd.name}'s {pd.layout} put every element of (N, C, H, W) = "
                    f"({', '.join(map(str, nchw))}) at the same offset)")  # fmt: skip


def _between(ln) -> str:
    """A link as its profile entry writes it: ``["nn_X", "*"]``."""
    return "[" + ", ".join(f'"{n}"' for n in ln.between) + "]"


def boundary_trace(c: BoundaryCost, t: Tables) -> tuple[Trace, ...]:
    tensor = t.g.tensors[c.tensor]
    ln = c.link
    sent = c.sent_bits or c.src_bits
    done = {"quantize": "quantized", "dequantize": "dequantized", "requantize": "requantized"}.get(c.quantize_kind, "converted")
    held = tensor.dtype if integer(tensor) else sent
    how = f"{held} on {c.src}" if sent == c.src_bits else f"{sent}: {done} on {c.src} before it is sent"
    if c.quantize is None and any(tid == c.tensor for _i, tid in t.own):
        how += (f", held alike on {c.dst}: the float side of the model's own (de)quantize stays in its own dtype, "
                "the op converts it itself")
    eb = elem_bits(tensor, sent)
    size = (f"elements * bits/8 = {tensor.size:,} * {eb:g}/8" if tensor.size * eb % 8 == 0 else
            f"ceil(elements * bits/8) = ceil({tensor.size:,} * {eb:g}/8)")  # (packed values fill whole bytes)
    tr = [Trace("bytes", f"{size} = {c.bytes:,.0f} B "
                         f"({how})", ("conversion.quantize_on",) if sent != c.src_bits else (), ("shape",)),
          Trace("transfer_us", f"over the link {_between(ln)}: "  # (a pair names one [[links]] entry)
                f"latency_us + {c.via_factor} * bytes / (bandwidth_gbps*1000) = {ln.latency_us:g} + "
                f"{c.via_factor}*{c.bytes:,.0f}/({ln.bandwidth_gbps:g}*1000) = {num(c.transfer_us)} us"
                + (" (via shared DRAM: write + read)" if ln.via_dram else ""),
                ("links.bandwidth_gbps", "links.latency_us", "links.via_dram"), ())]  # fmt: skip
    if c.layout is None and c.same_order:
        tr.append(Trace("layout_us", f"0 us, no layout conversion: {c.same_order}", ("layout",), ("shape",)))
    for name, cv, fields in (("layout_us", c.layout, ("conversion.layout_on", "layout")),
                             ("quantize_us", c.quantize, ("conversion.quantize_on", "default_bits"))):  # fmt: skip
        if cv is None:
            continue
        what = "" if cv.what == "layout" else f"{cv.what} "
        tr.append(Trace(name, f"{what}on {cv.on}: ({cv.ops_per_elem:g}*elements / vector_ops_per_cycle[{cv.on_bits}] + "
                        f"2*bytes({cv.read_bits or c.src_bits}) / dram_bytes_per_cycle) / clock_mhz = ({cv.ops_per_elem:g}*{cv.elems:,} / "
                        f"{cv.rate:g} + 2*{cv.read_bytes:,.0f} / {cv.dram_bytes_per_cycle:g}) / {cv.clock_mhz:g} = "
                        f"{num(cv.cycles)} / {cv.clock_mhz:g} = {num(cv.us)} us"
                        + (f" (a copy: {cv.ops_per_elem:g} {cv.on_bits} moves per element, the width whose vector rate "
                           "moves the most bits per cycle)" if cv.what == "layout" and cv.ops_per_elem != 1 else ""),
                        (*fields, "vector_ops_per_cycle", "dram_bytes_per_cycle", "clock_mhz"), ("shape",)))  # fmt: skip
    convs = [cv for cv in (c.layout, c.quantize) if cv]
    terms = " + ".join(f"{cv.what} on {cv.on} ((ops*elements*pJ_per_op[{cv.on_bits}] + 2*bytes*pJ_per_byte) / 1e6 + "
                       f"static_mw*us/1e3 = ({cv.ops_per_elem:g}*{cv.elems:,}*{cv.pj_per_op:g} + "
                       f"2*{cv.read_bytes:,.0f}*{cv.pj_per_byte:g}) / 1e6 + "
                       f"{cv.static_mw:g}*{num(cv.us)}/1e3 = {num(cv.energy_uj)})" for cv in convs)  # fmt: skip
    link = f"bytes*link pJ/byte/1e6 = {c.bytes:,.0f}*{ln.energy_pj_per_byte:g}/1e6 = {num(c.link_energy_uj)}"
    tr.append(Trace("energy_uj", link + (f" + {terms}" if convs else "") + f" = {num(c.energy_uj)} uJ",
                    ("links.energy_pj_per_byte", *(("energy_pj_per_op", "energy_pj_per_byte", "static_mw") if convs else ())),
                    ()))  # fmt: skip
    return tuple(tr)
