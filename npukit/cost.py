"""The cost model: per-op figures, boundary figures, each with the trace it came from (no tvm).

Stated model (docs/cost-model.md says the same in prose):

Kernels.  Each fused composite of the plan (a BYOC pattern match, e.g. dequantize-conv2d-add-
quantize-clip) is one kernel.  Outside composites (the host's ops) a conv / matmul and the
elementwise epilogue chain after it (each op the only reader of the one before, same partition,
not a model output) are one kernel, as the processor's own compiler fuses them (TVM FuseOps,
TFLite fused activations).  Every other op is a kernel of its own.  A kernel is costed as one
unit and its figures are reported on its anchor op: the member with the most MACs (then the most
vector work; on ties the first).  The other members report zero cycles and a trace naming the
anchor and their role:

* input: a ``dequantize`` feeding the anchor at an integer bit-width: no work, the integer kernel
  reads the integer values (the zero point folds into the bias);
* view (reshape, squeeze, ...): no work, no data;
* epilogue: an elementwise op after the anchor (add, multiply, quantize, clip, relu, ...);
* serial: anything else, costed as its own work after the anchor's.

Per op on processor p at bit-width b (the op's MACs and vector ops come from ``graph.work``):

* util_mac = u_in * fill(OC, channels_out) * fill(pixels, pixels) where fill(n, P) =
  n / (ceil(n / P) * P) is how full P lanes (or one step of P) are kept, and
  u_in = fill(IC/groups, channels_in), or with mac_array.kernel_taps = t > 1 the larger of that
  and fill(IC/groups, channels_in / t) * fill(KH*KW, t) (t kernel taps share the input lanes:
  depthwise, few input channels); matmul uses K, N, M.
* util_vec = fill(innermost output dim, vector_lanes).
* util_red = 1, or with the processor's ``reduction`` table (scalar code, e.g. a CPU running
  untuned compiled loops): K = the products accumulated into one output (IC/groups*KH*KW for a
  conv, K for a matmul); util_red = 1 when K <= unroll (the compiler unrolls the reduction and
  vectorises across outputs), else serial * (unroll / K)^exponent (one dependent accumulation
  chain per output, overlapped less with its neighbours the longer it is).
* mac_cycles = MACs / (macs_per_cycle[b] * util_mac * util_red * eff); vec_cycles = vector_ops /
  (vector_ops_per_cycle[b] * util_vec * eff); eff = efficiency[kernel class], else
  efficiency[op kind], else efficiency["*"] (the trace names the key used).  Kernel class:
  KIND.depthwise (a conv with groups > 1 and one input channel per group), KIND.pointwise (a conv
  with a 1-tap kernel and groups 1), matmul.gemv (a matmul with one output row, M * batch = 1),
  else the op kind.

Per kernel:

* compute_cycles: with an output stage (output_elems_per_cycle > 0) and an anchor with MACs,
  max(anchor mac + vec cycles, anchor output elements / output_elems_per_cycle), the epilogue
  running in that stage at no extra cost; with an output stage and a vector anchor, the anchor's
  cycles (the epilogue runs in the same pass); without one, the anchor's cycles + the epilogue
  members' vec_cycles, at the anchor's efficiency (its class's: they run inside its loop nest).
  Plus the serial members' cycles.
* bytes: every tensor at its op's bit-width (int4 / int2 packed; int32 bias when b is an integer
  width; index tensors keep their dtype).  A tensor produced and consumed inside one kernel moves
  nothing.  An activation that stays in one partition and fits in half the processor's on-chip
  memory moves through on-chip memory; other activations move through DRAM; constant weights and
  biases are read at weight_bytes_per_cycle.  When weights and input do not fit on chip together,
  the input is streamed once per weight tile (half the on-chip memory):
  dram_in = in_bytes * ceil(w_bytes / (onchip_bytes / 2)).
* act_cycles = dram_bytes / dram_bytes_per_cycle + onchip_bytes / onchip_bytes_per_cycle;
  weight_cycles = weight_bytes / weight_bytes_per_cycle;
  memory_cycles = act_cycles + weight_cycles (weight_port "shared") or
  max(act_cycles, weight_cycles) (weight_port "separate": weights come over their own bus).
* cycles = max(compute_cycles, memory_cycles) + op_overhead_cycles (once per kernel; none for a
  kernel of views) + call_overhead_cycles (on the kernel holding the first op of an offloaded
  partition)
* latency_us = cycles / clock_mhz
* energy_uj = (MACs * pJ_per_mac[b] + vector_ops * pJ_per_op[b] + (dram_bytes + weight_bytes)
  * pJ_per_byte + onchip_bytes * pJ_per_onchip_byte) / 1e6 + static_mw * latency_us / 1e3, where
  vector_ops counts the work actually executed (an output stage costs one op per output element)

Per boundary tensor from processor s to processor d:

* bytes = elements * bits(s) / 8
* transfer_us = latency_us + k * bytes / (bandwidth_gbps * 1000), k = 2 through shared DRAM
  (write, then read), else 1
* layout_us (only when the layouts differ and the tensor has rank >= 3): elements / vector_ops_per_cycle
  + 2 * bytes / dram_bytes_per_cycle, in cycles of the converting processor ([conversion] layout_on)
* quantize_us (only when the bit-widths differ): 2 * elements / vector_ops_per_cycle + bytes moved,
  likewise on [conversion] quantize_on
* energy_uj = bytes * link pJ/byte / 1e6 + the conversions' op and byte energy

Traces are built on first access of ``OpCost.trace`` (the figures are computed again with the
formulas written out, from the same pure function), so costing many ops stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .graph import VIEW_OPS, Op, OpGraph, Tensor, Work, dtype_bits, work
from .plan import Boundary, Plan
from .soc import BIT_WIDTH, Processor, SocProfile

NUMERIC = frozenset({"float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "uint16"})
# elementwise ops that run as the epilogue of a fused kernel (after its anchor)
EPILOGUE_KINDS = frozenset({
    "add", "subtract", "multiply", "maximum", "minimum", "clip", "relu", "leakyrelu", "prelu",
    "quantize", "dequantize", "astype", "negative", "abs",
})  # fmt: skip
_QDQ = frozenset({"quantize", "dequantize", "astype"})


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
    if t.kind == "const" and bits.startswith("int") and t.size > 1 and sum(d > 1 for d in t.shape) <= 1:
        return 32  # bias vectors (shape (C,) or (1, C, 1, 1)) stay int32 in integer kernels
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


@dataclass(frozen=True, eq=False)
class OpCost:
    op_id: int
    processor: str
    bits: str
    macs: int
    vector_ops: int
    bytes: float  # all bytes moved (DRAM + weights + on-chip)
    dram_bytes: float  # off-chip: activations through DRAM + weights
    onchip_bytes: float
    compute_cycles: float
    memory_cycles: float
    cycles: float
    latency_us: float
    energy_uj: float
    weight_bytes: float = 0.0  # constant weights / biases read (part of dram_bytes)
    kernel: int = -1  # op_id of the anchor of the kernel this op was costed in
    _trace: object = field(default=(), repr=False)

    @property
    def trace(self) -> tuple[Trace, ...]:
        t = self._trace
        if isinstance(t, _KernelTrace):
            t = t.of(self.op_id)
            object.__setattr__(self, "_trace", t)
        return t  # type: ignore[return-value]


_OPCOST_FIELDS = ("op_id", "processor", "bits", "macs", "vector_ops", "bytes", "dram_bytes", "onchip_bytes",
                  "compute_cycles", "memory_cycles", "cycles", "latency_us", "energy_uj", "weight_bytes", "kernel",
                  "_trace")  # fmt: skip


def _opcost(*values) -> OpCost:
    """``OpCost(*values)`` without the frozen dataclass's per-field ``__setattr__`` (same object)."""
    o = object.__new__(OpCost)
    o.__dict__.update(zip(_OPCOST_FIELDS, values))
    return o


class _KernelTrace:
    """The traces of one kernel's ops, built on first access by costing the kernel again with the
    formulas written out (``kernel_cost(..., explain=True)``: the same pure function)."""

    __slots__ = ("args", "done")

    def __init__(self, *args):
        self.args = args
        self.done: dict[int, tuple[Trace, ...]] | None = None

    def of(self, op_id: int) -> tuple[Trace, ...]:
        if self.done is None:
            self.done = {c.op_id: c.trace for c in kernel_cost(*self.args, explain=True)}
        return self.done[op_id]


@dataclass(frozen=True, eq=False)
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
    _trace: object = field(default=(), repr=False)

    @property
    def trace(self) -> tuple[Trace, ...]:
        t = self._trace
        if callable(t):
            t = tuple(t())
            object.__setattr__(self, "_trace", t)
        return t  # type: ignore[return-value]


class OpContext(NamedTuple):
    """What an op's cost depends on beyond (op, processor, bits): where its tensors live."""

    fused_in: tuple[bool, ...]  # per input: produced inside the same composite
    onchip_in: tuple[bool, ...]  # per input: read from on-chip memory
    fused_out: bool  # output only read inside the same composite
    onchip_out: bool  # output stays on chip (read only inside the partition and fits)
    overhead: bool  # first op of its composite, or standalone (its kernel pays op_overhead_cycles)
    call: bool  # pays call_overhead_cycles (first op of an offloaded partition)


class _Static:
    """What the cost model reads from the graph alone (no profile, no plan), built once per OpGraph:
    each op's work, each tensor's size, consumers and model outputs, and a memo of tensor bytes per
    bit-width.  All of it is a pure function of the immutable graph."""

    def __init__(self, g: OpGraph):
        self.work = [work(op, g) for op in g.ops]
        self.size = {tid: t.size for tid, t in g.tensors.items()}
        outs = set(g.outputs)
        self.consumers = [tuple(c for t in op.outputs for c in g.consumers(t)) for op in g.ops]
        self.graph_out = [any(t in outs for t in op.outputs) for op in g.ops]
        self.out_elems = [sum(self.size[t] for t in op.outputs) for op in g.ops]
        self.act_inputs = [tuple(t for t in op.inputs if g.tensors[t].kind != "const") for op in g.ops]
        self._bytes: dict[tuple[str, str], float] = {}
        self._tensors = g.tensors
        self._geo: dict[int, tuple] = {}
        self._cls: dict[int, str] = {}
        self._g = g

    def geometry(self, i: int) -> tuple:
        geo = self._geo.get(i)
        if geo is None:
            geo = self._geo[i] = _geometry(self._g.ops[i], self._g)
        return geo

    def kernel_class(self, i: int) -> str:
        c = self._cls.get(i)
        if c is None:
            c = self._cls[i] = _kernel_class(self._g.ops[i], self.geometry(i))
        return c

    def nbytes(self, tid: str, bits: str) -> float:
        k = (tid, bits)
        b = self._bytes.get(k)
        if b is None:
            b = self._bytes[k] = tensor_bytes(self._tensors[tid], bits)
        return b


def static(g: OpGraph) -> _Static:
    """The graph's static tables (kept on the graph object; the graph is immutable)."""
    st = g.__dict__.get("_npukit_cost_static")
    if st is None:
        st = _Static(g)
        object.__setattr__(g, "_npukit_cost_static", st)
    return st


MAC_KINDS = frozenset({"conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose", "matmul"})


def kernels(plan: Plan, g: OpGraph | None = None) -> list[tuple[int, ...]]:
    """The plan's kernels in op order: each composite's op ids; outside composites (the host's ops),
    a conv / matmul with the elementwise epilogue chain after it (each link the only reader of the
    one before, on the same partition, not a model output), as the processor's compiler fuses it
    (TVM FuseOps, TFLite fused activations); every other op alone."""
    seen: set[int] = set()
    out: list[tuple[int, ...]] = []
    for part in plan.partitions:
        for _pat, ids in part.patterns:
            k = tuple(sorted(ids))
            out.append(k)
            seen.update(k)
    if g is None:
        out += [(i,) for i in range(len(plan.processor)) if i not in seen]
    else:
        st = static(g)
        ops = g.ops
        partition = plan.partition
        for i in range(len(ops)):
            if i in seen:
                continue
            chain = [i]
            seen.add(i)
            if ops[i].kind in MAC_KINDS:
                cur = i
                while True:
                    cons = st.consumers[cur]
                    if len(cons) != 1 or st.graph_out[cur] or len(ops[cur].outputs) != 1:
                        break
                    nxt = cons[0]
                    if nxt in seen or partition[nxt] != partition[i] or ops[nxt].kind not in EPILOGUE_KINDS:
                        break
                    chain.append(nxt)
                    seen.add(nxt)
                    cur = nxt
            out.append(tuple(chain))
    out.sort(key=lambda k: k[0])
    return out


def contexts(g: OpGraph, plan: Plan, soc: SocProfile, bits_of, kernel_list: list[tuple[int, ...]] | None = None) -> list[OpContext]:
    """Each op's memory context under ``plan``: tensors inside one kernel (``kernels(plan, g)``) move nothing."""
    comp_of: dict[int, int] = {}
    comps = kernel_list if kernel_list is not None else kernels(plan, g)
    for c, ids in enumerate(comps):
        if len(ids) > 1:
            for i in ids:
                comp_of[i] = c
    first_of_part = {part.ops[0] for part in plan.partitions if part.processor != soc.host and part.ops}
    st = static(g)
    tensors = g.tensors
    partition = plan.partition
    half_of = {p.name: p.onchip_bytes / 2 for p in soc.processors}
    nb = st.nbytes
    out = []
    for op in g.ops:
        i = op.op_id
        half = half_of[plan.processor[i]]
        c = comp_of.get(i)
        part_i = partition[i]
        fused_in, onchip_in = [], []
        for t in op.inputs:
            tt = tensors[t]
            if tt.kind != "act":
                fused_in.append(False)
                onchip_in.append(False)
                continue
            p = tt.producer
            same_comp = c is not None and comp_of.get(p) == c
            fused_in.append(same_comp)
            onchip_in.append(not same_comp and half > 0 and partition[p] == part_i and nb(t, bits_of(p)) <= half)
        consumers = st.consumers[i]
        is_graph_out = st.graph_out[i]
        fused_out = bool(consumers) and not is_graph_out and c is not None and all(comp_of.get(cc) == c for cc in consumers)
        onchip_out = False
        if not fused_out and consumers and not is_graph_out and half > 0:
            out_bytes = sum(nb(t, bits_of(i)) for t in op.outputs)
            onchip_out = all(partition[cc] == part_i for cc in consumers) and out_bytes <= half
        overhead = c is None or comps[c][0] == i
        out.append(OpContext(tuple(fused_in), tuple(onchip_in), fused_out, onchip_out, overhead, i in first_of_part))
    return out


# ---------------------------------------------------------------------------------------------
# per-op pieces


def kernel_class(op: Op, g: OpGraph) -> str:
    """The op's kernel class, its finest ``efficiency`` key: ``KIND.depthwise`` (a conv with groups
    > 1 and one input channel per group), ``KIND.pointwise`` (a conv with a 1-tap kernel, groups 1),
    ``matmul.gemv`` (a matmul with one output row: M x batch = 1), else the op kind."""
    return static(g).kernel_class(op.op_id)


def _kernel_class(op: Op, geo: tuple) -> str:
    if not geo:
        return op.kind
    if geo[0] == "conv":
        if "transpose" in op.kind:
            return op.kind
        groups = int(op.attrs.get("groups", 1) or 1)
        if groups > 1 and geo[1] == 1:
            return op.kind + ".depthwise"
        if groups == 1 and geo[4] == 1:
            return op.kind + ".pointwise"
        return op.kind
    return op.kind + ".gemv" if geo[3] == 1 else op.kind


def reduction_length(op: Op, g: OpGraph) -> int:
    """Products accumulated into one output of a conv / matmul (IC/groups*KH*KW, or K); 0 otherwise."""
    geo = static(g).geometry(op.op_id)
    if not geo:
        return 0
    return geo[1] * geo[4] if geo[0] == "conv" else geo[1]


def _geometry(op: Op, g: OpGraph) -> tuple:
    """("conv", IC/groups, OC, output pixels, KH*KW) or ("matmul", K, N, M) or () (graph-static)."""
    y = g.tensors[op.outputs[0]]
    if op.kind.startswith("conv") and len(op.inputs) >= 2:
        from .rules import _channels, _kernel_hw  # noqa: PLC0415

        ic, oc, groups = _channels(op, g)
        return ("conv", ic // max(groups, 1), oc, max(1, y.size // max(oc, 1)), math.prod(_kernel_hw(op, g)) or 1)
    if op.kind == "matmul" and len(op.inputs) >= 2:
        xs = g.tensors[op.inputs[0]].shape
        k = xs[-1] if xs else 1
        n = y.shape[-1] if y.shape else 1
        return ("matmul", k, n, max(1, y.size // max(n, 1)))
    return ()


def _util_mac(op: Op, g: OpGraph, p: Processor, ex: bool) -> tuple[float, str]:
    arr = p.mac_array
    ci, co, px, kt = arr["channels_in"], arr["channels_out"], arr["pixels"], arr.get("kernel_taps", 1)
    if ci == co == px == 1:
        return 1.0, "1 (no MAC array geometry in the profile)"
    geo = static(g).geometry(op.op_id)
    if geo and geo[0] == "conv":
        _, icg, oc, pixels, taps = geo
        u_depth = fill(icg, ci)
        u_in, form_in = u_depth, f"fill(IC/groups={icg}, {ci})"
        if kt > 1:
            u_part = fill(icg, ci // kt) * fill(taps, kt)
            if u_part > u_depth:
                u_in = u_part
                form_in = f"fill(IC/groups={icg}, {ci}/{kt}) * fill(KH*KW={taps}, kernel_taps={kt})"
            elif ex:
                form_in = f"max(fill(IC/groups={icg}, {ci}), fill(IC/groups={icg}, {ci}/{kt}) * fill(KH*KW={taps}, {kt}))"
        u = u_in * fill(oc, co) * fill(pixels, px)
        return u, (f"{form_in} * fill(OC={oc}, {co}) * fill(pixels={pixels}, {px}) = {u:.3f}" if ex else "")
    if geo:
        _, k, n, m = geo
        u = fill(k, ci) * fill(n, co) * fill(m, px)
        return u, (f"fill(K={k}, {ci}) * fill(N={n}, {co}) * fill(M={m}, {px}) = {u:.3f}" if ex else "")
    return 1.0, "1"


class _Piece:
    """One op's share of a kernel (scratch, never leaves this module)."""

    __slots__ = ("mac", "vec", "act_dram", "onchip", "weights", "terms", "compute_form", "util_form")

    def __init__(self):
        self.mac = self.vec = self.act_dram = self.onchip = self.weights = 0.0
        self.terms: list[str] = []
        self.compute_form = self.util_form = ""


def _compute(op: Op, g: OpGraph, p: Processor, bits: str, w: Work, ex: bool, pc: _Piece, eff_cls: str = "") -> None:
    """``eff_cls``: the kernel class whose efficiency applies (an epilogue member runs at its
    anchor's); default the op's own class."""
    if not (w.macs or w.vector_ops):
        return
    cls = eff_cls or static(g).kernel_class(op.op_id)
    eff = p.eff(cls)
    parts = []
    if w.macs:
        u, uform = _util_mac(op, g, p, ex)
        mpc = p.macs_per_cycle[bits]
        if p.reduction:
            k = reduction_length(op, g)
            ur = p.util_red(k)
            pc.mac = w.macs / (mpc * u * ur * eff)
            if ex:
                r = p.reduction
                urf = (f"K={k:,} <= unroll {r['unroll']:,}: 1" if ur == 1.0 else
                       f"K={k:,} > unroll {r['unroll']:,}: serial * (unroll / K)^exponent = {r['serial']:g} * "
                       f"({r['unroll']:,} / {k:,})^{r['exponent']:g} = {ur:.4f}")  # fmt: skip
                uform = f"{uform}; util_red: {urf}"
                parts.append(f"MACs / (macs_per_cycle[{bits}] * util * util_red * eff) = {w.macs:,} / "
                             f"({mpc:g} * {u:.3f} * {ur:.4f} * {eff:g})")  # fmt: skip
        else:
            pc.mac = w.macs / (mpc * u * eff)
            if ex:
                parts.append(
                    f"MACs / (macs_per_cycle[{bits}] * util * eff) = {w.macs:,} / ({mpc:g} * {u:.3f} * {eff:g})"
                )
        if ex:
            pc.util_form = uform
    if w.vector_ops:
        shape = g.tensors[op.outputs[0]].shape
        uv = fill(shape[-1] if shape else 1, p.vector_lanes)
        vpc = p.vector_ops_per_cycle[bits]
        pc.vec = w.vector_ops / (vpc * uv * eff)
        if ex:
            parts.append(f"vector_ops / (vector_ops_per_cycle[{bits}] * util_vec * eff) = "
                         f"{w.vector_ops:,} / ({vpc:g} * {uv:.3f} * {eff:g})")  # fmt: skip
    if ex:
        pc.compute_form = " + ".join(parts) + f" [eff = efficiency[{p.eff_key(cls)}] = {eff:g}, class {cls}]"


def _memory(op: Op, g: OpGraph, st: _Static, p: Processor, bits: str, ctx: OpContext, ex: bool, pc: _Piece) -> None:
    if op.kind in VIEW_OPS:  # a view: no kernel, no data
        if ex:
            pc.terms.append(f"{op.kind}: view, no data moves")
        return
    tensors = g.tensors
    nb = st.nbytes
    w_bytes = in_act = 0.0
    terms = pc.terms
    for t, fused, on in zip(op.inputs, ctx.fused_in, ctx.onchip_in):
        if fused:
            continue
        b = nb(t, bits)
        if tensors[t].kind == "const":
            w_bytes += b
            continue
        in_act += b
        if on:
            pc.onchip += b
        else:
            pc.act_dram += b
        if ex:
            terms.append(f"in {t} {b:,.0f} B" + (" on chip" if on else ""))
    if w_bytes:
        pc.weights += w_bytes
        if ex:
            terms.append(f"weights {w_bytes:,.0f} B")
    onchip_cap = p.onchip_bytes
    if onchip_cap and w_bytes and in_act and w_bytes + in_act > onchip_cap:
        half = onchip_cap / 2
        passes = math.ceil(w_bytes / half)
        if passes > 1:
            extra = in_act * (passes - 1)
            pc.act_dram += extra
            if ex:
                terms.append(f"input re-read {passes - 1}x: weights {w_bytes:,.0f} B > onchip_bytes/2 {half:,.0f} B (+{extra:,.0f} B)")
    if not ctx.fused_out:
        ob = 0.0
        for t in op.outputs:
            ob += nb(t, bits)
        if ctx.onchip_out:
            pc.onchip += ob
        else:
            pc.act_dram += ob
        if ex:
            terms.append(f"out {ob:,.0f} B" + (" on chip" if ctx.onchip_out else ""))
    elif op.outputs and ex:
        terms.append(f"{op.kind} out stays inside the kernel")


def _role(op: Op, anchor: int, bits: str) -> str:
    if op.op_id == anchor:
        return "anchor"
    if op.kind in VIEW_OPS:
        return "view"
    if op.op_id < anchor and op.kind == "dequantize" and bits.startswith("int"):
        return "input"
    if op.op_id > anchor and op.kind in EPILOGUE_KINDS:
        return "epilogue"
    return "serial"


_ROLE_TEXT = {
    "input": "input dequantize: no work, the integer kernel reads the integer values",
    "view": "view: no work, no data",
    "epilogue": "epilogue after the anchor",
    "serial": "serial: its own work after the anchor's",
}


def _anchor(ids: Sequence[int], g: OpGraph, works: Sequence[Work]) -> int:
    def key(i: int):
        w = works[i]
        k = g.ops[i].kind
        return (w.macs, k not in _QDQ and k not in VIEW_OPS, w.vector_ops, -i)

    return max(ids, key=key)


def kernel_cost(ids: Sequence[int], g: OpGraph, p: Processor, bits: Sequence[str], ctxs: Sequence[OpContext],
                works: Sequence[Work], explain: bool = False) -> list[OpCost]:  # fmt: skip
    """Figures of one kernel (a fused composite, or one op alone) on ``p``: one OpCost per member, the
    kernel's figures on its anchor.  ``bits``, ``ctxs`` and ``works`` are indexed by op id."""
    ex = explain
    lazy = None if ex else _KernelTrace(ids, g, p, bits, ctxs, works)
    if len(ids) == 1 and not ex:
        return [_single_cost(ids[0], g, p, bits[ids[0]], ctxs[ids[0]], works[ids[0]], lazy)]
    st = static(g)
    gops = g.ops
    a = ids[0] if len(ids) == 1 else _anchor(ids, g, works)
    aop = gops[a]
    ab = bits[a]
    roles: dict[int, str] = {}
    pieces: dict[int, _Piece] = {}
    stage = p.output_elems_per_cycle
    epi_vec = ser_cyc = act_dram = onchip = weights = 0.0
    for i in ids:
        op = gops[i]
        r = roles[i] = _role(op, a, bits[i])
        pc = pieces[i] = _Piece()
        if r == "anchor" or r == "serial":
            _compute(op, g, p, bits[i], works[i], ex, pc)
            if r == "serial":
                ser_cyc += pc.vec + pc.mac
        elif r == "epilogue" and (stage <= 0 or ex):  # in the anchor's loop nest: at the anchor's efficiency
            _compute(op, g, p, bits[i], works[i], ex, pc, st.kernel_class(a))
            epi_vec += pc.vec + pc.mac
        _memory(op, g, st, p, bits[i], ctxs[i], ex, pc)
        act_dram += pc.act_dram
        onchip += pc.onchip
        weights += pc.weights
    pa = pieces[a]
    out_elems = st.out_elems[a]
    stage_cycles = 0.0
    wa = works[a]
    if stage > 0 and wa.macs:
        stage_cycles = out_elems / stage
        main = max(pa.mac + pa.vec, stage_cycles)
    elif stage > 0:
        main = pa.mac + pa.vec
    else:
        main = pa.mac + pa.vec + epi_vec
    compute = main + ser_cyc
    wbpc = p.weight_bytes_per_cycle or p.dram_bytes_per_cycle
    act_cyc = act_dram / p.dram_bytes_per_cycle + onchip / p.onchip_bytes_per_cycle
    w_cyc = weights / wbpc
    memory = max(act_cyc, w_cyc) if p.weight_port == "separate" else act_cyc + w_cyc
    all_views = all(gops[i].kind in VIEW_OPS for i in ids)
    call = any(ctxs[i].call for i in ids)
    over = (0 if all_views else p.op_overhead_cycles) + (p.call_overhead_cycles if call else 0)
    cycles = (compute if compute > memory else memory) + over
    lat = cycles / p.clock_mhz
    macs = vec_ops = 0
    e_mac = e_op = 0.0
    pj_mac, pj_op = p.energy_pj_per_mac, p.energy_pj_per_op
    for i in ids:
        w = works[i]
        if w.macs:
            macs += w.macs
            e_mac += w.macs * pj_mac[bits[i]]
        r = roles[i]
        if w.vector_ops and (r == "anchor" or r == "serial" or (r == "epilogue" and stage <= 0)):
            vec_ops += w.vector_ops
            e_op += w.vector_ops * pj_op[bits[i]]
    stage_ops = out_elems if stage_cycles else 0
    e_op += stage_ops * pj_op[ab]
    e_mem = (act_dram + weights) * p.energy_pj_per_byte + onchip * p.energy_pj_per_onchip_byte
    e_static = p.static_mw * lat / 1e3
    energy = (e_mac + e_op + e_mem) / 1e6 + e_static

    out: list[OpCost] = []
    for i in ids:
        if i == a:
            tr = lazy
            if ex:
                tr = tuple(_anchor_trace(aop, [gops[j] for j in ids], roles, pieces, p, ab, works, stage, stage_cycles,
                                         out_elems, main, compute, act_dram, onchip, weights, act_cyc, w_cyc, memory,
                                         over, call, cycles, lat, macs, vec_ops, stage_ops, e_mac, e_op, e_mem,
                                         e_static, energy))  # fmt: skip
            out.append(_opcost(i, p.name, bits[i], macs, vec_ops + stage_ops, act_dram + weights + onchip,
                              act_dram + weights, onchip, compute, memory, cycles, lat, energy, weights, a, tr))  # fmt: skip
        else:
            tr = lazy
            if ex:
                op = gops[i]
                tr = (Trace("fused", f"costed with {aop.name} (op {a}, {aop.kind}), which carries the kernel's figures; "
                                     f"this op: {_ROLE_TEXT[roles[i]]}", (), ()),
                      Trace("work", works[i].formula + (f" [{works[i].model}]" if works[i].model else ""), (), _attr_names(op)))  # fmt: skip
            out.append(_opcost(i, p.name, bits[i], 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, a, tr))
    return out


def _single_cost(i: int, g: OpGraph, p: Processor, b: str, ctx: OpContext, w: Work, lazy=()) -> OpCost:
    """``kernel_cost`` of a kernel of one op without its trace: the same formulas, fewer steps."""
    op = g.ops[i]
    pc = _Piece()
    _compute(op, g, p, b, w, False, pc)
    _memory(op, g, static(g), p, b, ctx, False, pc)
    stage = p.output_elems_per_cycle
    compute = pc.mac + pc.vec
    stage_ops = 0
    if stage > 0 and w.macs:
        stage_ops = static(g).out_elems[i]
        compute = max(compute, stage_ops / stage)
    act_cyc = pc.act_dram / p.dram_bytes_per_cycle + pc.onchip / p.onchip_bytes_per_cycle
    w_cyc = pc.weights / (p.weight_bytes_per_cycle or p.dram_bytes_per_cycle)
    memory = max(act_cyc, w_cyc) if p.weight_port == "separate" else act_cyc + w_cyc
    over = (0 if op.kind in VIEW_OPS else p.op_overhead_cycles) + (p.call_overhead_cycles if ctx.call else 0)
    cycles = (compute if compute > memory else memory) + over
    lat = cycles / p.clock_mhz
    energy = ((w.macs * p.energy_pj_per_mac[b] if w.macs else 0.0)
              + (w.vector_ops + stage_ops) * p.energy_pj_per_op[b]
              + (pc.act_dram + pc.weights) * p.energy_pj_per_byte + pc.onchip * p.energy_pj_per_onchip_byte) / 1e6 \
        + p.static_mw * lat / 1e3  # fmt: skip
    return _opcost(i, p.name, b, w.macs, w.vector_ops + stage_ops, pc.act_dram + pc.weights + pc.onchip,
                  pc.act_dram + pc.weights, pc.onchip, compute, memory, cycles, lat, energy, pc.weights, i, lazy)  # fmt: skip


def _anchor_trace(aop, ops, roles, pieces, p, ab, works, stage, stage_cycles, out_elems, main, compute, act_dram,
                  onchip, weights, act_cyc, w_cyc, memory, over, call, cycles, lat, macs, vec_ops, stage_ops,
                  e_mac, e_op, e_mem, e_static, energy) -> list[Trace]:  # fmt: skip
    a = aop.op_id
    pa = pieces[a]
    tr: list[Trace] = []
    if len(ops) > 1:
        desc = ", ".join(f"{op.kind}={roles[op.op_id]}" for op in ops)
        tr.append(Trace("kernel", f"{len(ops)} ops fused into one kernel, costed here: {desc}", (), ()))
    w = works[a]
    if w.macs and pa.util_form:
        tr.append(
            Trace("util_mac", pa.util_form, ("mac_array", "reduction") if p.reduction else ("mac_array",), ("shapes",))
        )
    tr.append(Trace("work", w.formula + (f" [{w.model}]" if w.model else ""), (), _attr_names(aop)))
    terms = [f"{aop.kind}: {pa.compute_form} = {pa.mac + pa.vec:,.1f}" if pa.compute_form else f"{aop.kind}: 0 (no work)"]
    fields = [f"macs_per_cycle.{ab}", f"vector_ops_per_cycle.{ab}", "vector_lanes", "efficiency"]
    if stage_cycles:
        terms = [f"max({terms[0]}, output stage: out_elems / output_elems_per_cycle = {out_elems:,} / {stage:g} "
                 f"= {stage_cycles:,.1f}) = {main:,.1f}"]  # fmt: skip
        fields.append("output_elems_per_cycle")
    for op in ops:
        i = op.op_id
        r = roles[i]
        pc = pieces[i]
        if r == "epilogue":
            if stage > 0:
                terms.append(f"{op.kind}: 0 (epilogue in the output stage)")
            else:
                terms.append(f"{op.kind} (epilogue): {pc.compute_form or '0'} = {pc.mac + pc.vec:,.1f}")
        elif r == "serial":
            terms.append(f"{op.kind} (serial): {pc.compute_form or '0'} = {pc.mac + pc.vec:,.1f}")
        elif r in ("input", "view"):
            terms.append(f"{op.kind}: 0 ({r})")
    if stage > 0 and "output_elems_per_cycle" not in fields:
        fields.append("output_elems_per_cycle")
    tr.append(Trace("compute_cycles", " + ".join(terms) + f" = {compute:,.1f}", tuple(fields), ("shapes",)))
    bterms = [t for op in ops for t in pieces[op.op_id].terms]
    tr.append(Trace("bytes", " + ".join(bterms) + f" = {act_dram + weights + onchip:,.0f} B (DRAM {act_dram:,.0f}, "
                    f"weights {weights:,.0f}, on chip {onchip:,.0f}) at {ab}", ("onchip_bytes",), ("shapes", "dtypes")))  # fmt: skip
    wbpc = p.weight_bytes_per_cycle or p.dram_bytes_per_cycle
    act_f = (f"dram_bytes / dram_bytes_per_cycle + onchip / onchip_bytes_per_cycle = {act_dram:,.0f} / "
             f"{p.dram_bytes_per_cycle:g} + {onchip:,.0f} / {p.onchip_bytes_per_cycle:g} = {act_cyc:,.1f}")  # fmt: skip
    w_f = f"weight_bytes / weight_bytes_per_cycle = {weights:,.0f} / {wbpc:g} = {w_cyc:,.1f}"
    if p.weight_port == "separate":
        mform = f"max(act: {act_f}, weights (separate port): {w_f}) = {memory:,.1f}"
    else:
        mform = f"act: {act_f} + weights: {w_f} = {memory:,.1f}"
    tr.append(Trace("memory_cycles", mform, ("dram_bytes_per_cycle", "onchip_bytes_per_cycle", "weight_bytes_per_cycle",
                                             "weight_port"), ()))  # fmt: skip
    ov = []
    if over - (p.call_overhead_cycles if call else 0):
        ov.append(f"op_overhead {p.op_overhead_cycles:,}")
    if call and p.call_overhead_cycles:
        ov.append(f"call_overhead {p.call_overhead_cycles:,} (first op of the partition)")
    tr.append(Trace("cycles", f"max(compute, memory) + overhead = max({compute:,.1f}, {memory:,.1f})"
                    + (" + " + " + ".join(ov) if ov else "") + f" = {cycles:,.1f}",
                    ("op_overhead_cycles", "call_overhead_cycles"), ()))  # fmt: skip
    tr.append(Trace("latency_us", f"cycles / clock_mhz = {cycles:,.1f} / {p.clock_mhz:g} = {lat:,.3f} us", ("clock_mhz",), ()))
    tr.append(Trace("energy_uj",
                    f"(MACs*pJ_per_mac + vector_ops*pJ_per_op + (DRAM + weight) B*{p.energy_pj_per_byte:g}"
                    f" + on-chip B*{p.energy_pj_per_onchip_byte:g}) pJ / 1e6 + static_mw*latency/1e3 = "
                    f"({e_mac:,.0f} + {e_op:,.0f} + {e_mem:,.0f}) / 1e6 + {p.static_mw:g}*{lat:.3f}/1e3 = {energy:.4f} uJ"
                    f" (MACs {macs:,}, vector ops {vec_ops:,}" + (f" + output stage {stage_ops:,}" if stage_ops else "") + ")",
                    (f"energy_pj_per_mac.{ab}", f"energy_pj_per_op.{ab}", "energy_pj_per_byte",
                     "energy_pj_per_onchip_byte", "static_mw"), ()))  # fmt: skip
    return tr


def _attr_names(op: Op) -> tuple[str, ...]:
    return tuple(k for k in ("strides", "padding", "dilation", "groups", "pool_size", "axis", "k",
                             "data_layout", "kernel_layout") if k in op.attrs)  # fmt: skip


def _conversion_cycles(p: Processor, bits: str, elems: int, nbytes: float, ops_per_elem: int) -> float:
    return ops_per_elem * elems / p.vector_ops_per_cycle.get(bits, min(p.vector_ops_per_cycle.values())) \
        + 2 * nbytes / p.dram_bytes_per_cycle  # fmt: skip


def boundary_cost(b: Boundary, g: OpGraph, soc: SocProfile, src_bits: str, dst_bits: str, explain: bool = False,
                  _procs: Mapping[str, Processor] | None = None, _links: dict | None = None) -> BoundaryCost:  # fmt: skip
    """Figures of one boundary tensor; its trace is built on first access of ``.trace``.
    (``_procs`` / ``_links``: lookups a CostModel passes in to save searching the profile.)"""
    ex = explain
    t = g.tensors[b.tensor]
    if _procs is None:
        ps, pd = soc.processor(b.src), soc.processor(b.dst)
        link = soc.link(b.src, b.dst)
    else:
        ps, pd = _procs[b.src], _procs[b.dst]
        link = _links.get((b.src, b.dst)) if _links is not None else None
        if link is None:
            link = soc.link(b.src, b.dst)
            if _links is not None:
                _links[(b.src, b.dst)] = link
    nbytes = static(g).nbytes(b.tensor, src_bits)
    k = 2 if link.via_dram else 1
    transfer = link.latency_us + k * nbytes / (link.bandwidth_gbps * 1000)
    tr = []
    if ex:
        tr = [Trace("bytes", f"elements * bits/8 = {t.size:,} * {elem_bits(t, src_bits):g}/8 = {nbytes:,.0f} B ({src_bits} on {b.src})", (), ("shape",)),
              Trace("transfer_us", f"latency_us + {k} * bytes / (bandwidth_gbps*1000) = {link.latency_us:g} + {k}*{nbytes:,.0f}/"
                    f"({link.bandwidth_gbps:g}*1000) = {transfer:.3f} us" + (" (via shared DRAM: write + read)" if link.via_dram else ""),
                    ("links.bandwidth_gbps", "links.latency_us", "links.via_dram"), ())]  # fmt: skip

    def converter(where: str) -> Processor:
        return ps if where == "src" else pd if where == "dst" else (_procs or {}).get(soc.host) or soc.processor(soc.host)

    layout_us = 0.0
    layout_on = ""
    conv = []
    numeric = t.dtype in NUMERIC
    if ps.layout != pd.layout and len(t.shape) >= 3 and numeric:
        cp = converter(soc.layout_on)
        cb = src_bits if cp is ps else dst_bits if cp is pd else cp.default_bits
        cyc = _conversion_cycles(cp, cb if cb in cp.vector_ops_per_cycle else cp.default_bits, t.size, nbytes, 1)
        layout_us = cyc / cp.clock_mhz
        layout_on = cp.name
        conv.append(f"layout {ps.layout}->{pd.layout}")
        if ex:
            tr.append(Trace("layout_us", f"on {cp.name}: (elements / vector_ops_per_cycle + 2*bytes / dram_bytes_per_cycle) / clock_mhz = "
                            f"{cyc:,.1f} / {cp.clock_mhz:g} = {layout_us:.3f} us", ("layout", "vector_ops_per_cycle", "dram_bytes_per_cycle"), ()))  # fmt: skip
    quant_us = 0.0
    quant_on = ""
    if src_bits != dst_bits and numeric:
        cp = converter(soc.quantize_on)
        cb = dst_bits if cp is pd else src_bits
        cyc = _conversion_cycles(cp, cb if cb in cp.vector_ops_per_cycle else cp.default_bits, t.size, nbytes, 2)
        quant_us = cyc / cp.clock_mhz
        quant_on = cp.name
        what = _qkind(src_bits, dst_bits)
        conv.append(f"{what} {src_bits}->{dst_bits}")
        if ex:
            tr.append(Trace("quantize_us", f"{what} on {cp.name}: (2*elements / vector_ops_per_cycle + 2*bytes / dram_bytes_per_cycle) / clock_mhz"
                            f" = {cyc:,.1f} / {cp.clock_mhz:g} = {quant_us:.3f} us", ("default_bits", "vector_ops_per_cycle"), ()))  # fmt: skip
    e_link = nbytes * link.energy_pj_per_byte / 1e6
    e_conv = 0.0
    for us, on in ((layout_us, layout_on), (quant_us, quant_on)):
        if us:
            cp = ps if on == ps.name else pd if on == pd.name else soc.processor(on)
            e_conv += (t.size * min(cp.energy_pj_per_op.values()) + 2 * nbytes * cp.energy_pj_per_byte) / 1e6 + cp.static_mw * us / 1e3
    energy = e_link + e_conv
    if ex:
        tr.append(Trace("energy_uj", f"bytes*link pJ/byte/1e6 + conversions = {e_link:.4f} + {e_conv:.4f} = {energy:.4f} uJ",
                        ("links.energy_pj_per_byte",), ()))  # fmt: skip
    lname = "link:" + "-".join(link.between)
    trace = tuple(tr) if ex else (lambda: boundary_cost(b, g, soc, src_bits, dst_bits, explain=True).trace)
    return BoundaryCost(b.tensor, b.src, b.dst, nbytes, transfer, layout_us, quant_us, energy, ", ".join(conv),
                        layout_on, quant_on, lname, trace)  # fmt: skip


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
    """Per-kernel and per-boundary costs with a memo: only kernels whose inputs to the model changed
    (members, processor, bits, memory contexts) are recomputed after an edit."""

    def __init__(self, g: OpGraph, soc: SocProfile):
        self.g = g
        self.soc = soc
        self._work = static(g).work
        self._kernels: dict[tuple, list[OpCost]] = {}
        self._bounds: dict[tuple, BoundaryCost] = {}
        self._procs = {p.name: p for p in soc.processors}
        self._links: dict[tuple[str, str], object] = {}
        self.recomputed = 0  # ops recomputed by the last evaluate()

    def work(self, i: int) -> Work:
        return self._work[i]

    def evaluate(self, plan: Plan, bits: Mapping[int, str] | Sequence[str]) -> tuple[list[OpCost], list[BoundaryCost]]:
        g, soc = self.g, self.soc
        bits_l = [bits[i] for i in range(len(g.ops))]
        klist = kernels(plan, g)
        ctxs = contexts(g, plan, soc, bits_l.__getitem__, klist)
        works = self._work
        procs = self._procs
        out: list[OpCost | None] = [None] * len(g.ops)
        n = 0
        for ids in klist:
            proc = plan.processor[ids[0]]
            if len(ids) == 1:
                i = ids[0]
                key = (ids, proc, bits_l[i], ctxs[i])
            else:
                key = (ids, proc, tuple(bits_l[i] for i in ids), tuple(ctxs[i] for i in ids))
            cs = self._kernels.get(key)
            if cs is None:
                p = procs[proc]
                cs = kernel_cost(ids, g, p, bits_l, ctxs, works)
                self._kernels[key] = cs
                n += len(ids)
            for c in cs:
                out[c.op_id] = c
        self.recomputed = n
        bout = []
        for b in plan.boundaries:
            sb = bits_l[g.tensors[b.tensor].producer] if g.tensors[b.tensor].kind == "act" else _input_bits(g.tensors[b.tensor])
            db = bits_l[b.consumers[0]] if b.consumers else _input_bits(g.tensors[b.tensor])
            key = (b, sb, db)
            c = self._bounds.get(key)
            if c is None:
                c = boundary_cost(b, g, soc, sb, db, _procs=procs, _links=self._links)
                self._bounds[key] = c
            bout.append(c)
        return out, bout  # type: ignore[return-value]


def _input_bits(t: Tensor) -> str:
    """Bit-width of a model input / output as stored by the host program (its own dtype)."""
    return {"float16": "fp16", "int8": "int8", "uint8": "int8", "int16": "int16"}.get(t.dtype, "fp32")
