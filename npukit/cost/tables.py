"""What the cost model reads from the graph alone (no profile, no plan), built once per OpGraph:
each op's work, each tensor's size, consumers and model outputs, MAC geometry, kernel classes, and
memos of tensor bytes per bit-width and MAC-array utilisation per processor.  All of it is a pure
function of the immutable graph (and, for the utilisation memo, of the processor); the pipeline
keeps one ``Tables`` per model."""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from functools import cached_property

from ..graph import OpGraph, Tensor, dtype_bits
from ..opset import KINDS, geometry, work
from ..soc import BIT_WIDTH
from .layouts import image_layouts_of, innermost, model_layouts
from .mac_array import kernel_class_of

NUMERIC = frozenset({"float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "uint16"})


def elem_bits(t: Tensor, bits: str, weight: bool = False) -> float:
    """Bits per element of tensor ``t`` when its op runs at ``bits``; ``weight``: ``t`` is a MAC op's
    weight operand (``mac_weights``), held at ``bits`` whatever its shape."""
    if t.dtype not in NUMERIC:
        return dtype_bits(t.dtype)  # indices, masks, int32 accumulators keep their width
    b = BIT_WIDTH[bits]
    if not weight and t.kind == "const" and bits.startswith("int") and t.size > 1 and sum(d > 1 for d in t.shape) <= 1:
        # a bias vector ((C,) or (1, C, 1, 1)) stays int32 in integer kernels; a MAC's weight of
        # that shape -- a 1x1 depthwise conv's [C, 1, 1, 1], a one-output layer's [K, 1] -- does not
        return 32
    if "int" in t.dtype or t.dtype == HALF:  # the model's integer or float16 tensor: never held wider
        return min(b, dtype_bits(t.dtype))
    return b


HALF = "float16"  # the one float dtype narrower than fp32 a bit-width names (fp16)


def model_width(t: Tensor, bits: str) -> str:
    """The width a tensor is held at when its op runs at ``bits``: never wider than the model holds
    it -- a float16 tensor at fp32 is fp16 (the generated code stores it as float16, the simulation
    runs the model's float16 ops), as an integer tensor keeps its own width (``elem_bits``)."""
    return "fp16" if bits == "fp32" and t.dtype == HALF else bits


def op_model_widths(g: OpGraph) -> tuple[str, ...]:
    """Per op: "fp16" when every float tensor it reads from another op or writes is float16 (the
    model holds all its values as float16: an fp32 setting runs it at fp16 where the processor
    runs fp16), else "" (a float32 tensor among them, or no float tensor: its setting stands)."""
    out = g.__dict__.get("_model_widths")
    if out is not None:
        return out
    tensors = g.tensors
    col = []
    for op in g.ops:
        fl = [tensors[x].dtype for x in (*op.inputs, *op.outputs)
              if tensors[x].kind != "const" and tensors[x].dtype.startswith(("float", "bfloat"))]  # fmt: skip
        col.append("fp16" if fl and all(d == HALF for d in fl) else "")
    out = tuple(col)
    object.__setattr__(g, "_model_widths", out)
    return out


def narrowed(cap: str, bits: str, p) -> str:
    """The width an op set to ``bits`` runs at on processor ``p`` when the model holds its values at
    ``cap`` (``op_model_widths``): fp16 for an fp32 setting where ``p`` runs fp16, else ``bits`` (a
    processor without fp16 arithmetic computes in fp32; its tensors are still held as float16)."""
    return "fp16" if cap == "fp16" and bits == "fp32" and "fp16" in p.macs_per_cycle else bits


def runs_at(cap: str, bits: str, p) -> bool:
    """Can processor ``p`` run an op set to ``bits`` whose values the model holds at ``cap``: does it
    run the width the op would run at there (``narrowed``)?"""
    return narrowed(cap, bits, p) in p.macs_per_cycle


def weight_tensors(g: OpGraph) -> list[str]:
    """Const tensors that are weights of MAC ops (rank >= 2, float), in first-use order: the weights
    the simulation and the generated code quantize at their first reader's bit-width."""
    out: list[str] = []
    for op in g.ops:
        if KINDS[op.kind].mac:
            for t in op.inputs[1:]:
                tt = g.tensors[t]
                if tt.kind == "const" and len(tt.shape) >= 2 and "float" in tt.dtype and t not in out:
                    out.append(t)
    return out


def integer(tensor) -> bool:
    """The model's own integer tensor (an int8 reshape's input): it keeps its dtype at any op width."""
    return tensor.dtype.startswith(("int", "uint"))


def held_as(tensor, bits: str) -> tuple[float, bool]:
    """How a tensor is held at an op's bit-width: (bits per element, floating point).  Two widths
    that hold it alike need no conversion between them (a model's integer tensor is never converted),
    whether they meet at a boundary or inside a partition."""
    return elem_bits(tensor, bits), bits.startswith("fp") and not integer(tensor)


def tensor_bytes(t: Tensor, bits: str, weight: bool = False) -> float:
    """Bytes of tensor ``t`` held at ``bits``: whole bytes (seven packed int4 values take 4);
    ``weight`` as in ``elem_bits``."""
    return float(math.ceil(t.size * elem_bits(t, bits, weight) / 8))


def mac_weights(g: OpGraph) -> frozenset[str]:
    """The constants MAC ops read as weights (every operand after the data): held at the op's width
    whatever their shape (``elem_bits``).  Worked out once per graph."""
    got = g.__dict__.get("_mac_weights")
    if got is None:
        got = frozenset(t for op in g.ops if KINDS[op.kind].mac for t in op.inputs[1:] if g.tensors[t].kind == "const")
        object.__setattr__(g, "_mac_weights", got)
    return got


def input_bits(t: Tensor) -> str:
    """Bit-width of a model input / output as stored by the host program (its own dtype)."""
    return {"float16": "fp16", "int8": "int8", "uint8": "int8", "int16": "int16"}.get(t.dtype, "fp32")


def own_widths(g: OpGraph) -> dict[tuple[int, str], str]:
    """(op id, tensor id) -> the width the op holds that tensor at, whatever the op's own bit-width:
    the float side of the model's own input quantize and output dequantize -- a model input a
    quantize reads, a model output a dequantize writes -- is the model's float tensor the op itself
    converts from or to, held in its own dtype (``input_bits``: fp32 for float32).  Read at the op's
    integer width it would be quantized twice: once where it is sent, once by the op.  Inside the
    model a (de)quantize next to an op at an integer width stands for that op's requantisation (an
    int8 deployment folds it), so its float side is held at its width like every other (op,
    tensor) (``Tables.held``).  The pairs inside one kernel are not held anywhere (a fused (de)quantize
    is the integer kernel's requantisation): the cost model asks only of tensors that are stored.
    Worked out once per graph."""
    out = g.__dict__.get("_own_widths")
    if out is not None:
        return out
    out = {}
    tensors = g.tensors
    outs = set(g.outputs)
    for op in g.ops:
        if op.kind == "quantize" and op.inputs:
            sides = [t for t in op.inputs[:1] if tensors[t].kind == "input"]
        elif op.kind == "dequantize":
            sides = [t for t in op.outputs if t in outs]
        else:
            continue
        for tid in sides:
            t = tensors[tid]
            if t.dtype.startswith(("float", "bfloat")):
                out[(op.op_id, tid)] = input_bits(t)
    object.__setattr__(g, "_own_widths", out)
    return out


def held_width(g: OpGraph, i: int, tid: str, bits: str) -> str:
    """``Tables.held`` without the tables: the width op ``i`` at ``bits`` holds ``tid`` at."""
    return own_widths(g).get((i, tid)) or model_width(g.tensors[tid], bits)


KEPT_OPS = 50_000  # op contexts each kept mapping of partition keys holds at least (~250 bytes each)
KEPT_OPS_PER_OP = 20  # ... and per op of the model: twenty whole plans' worth
RUN_SHAPES = 4  # hosts and on-chip sizes whose placement-search keys a table keeps


class Kept(OrderedDict):
    """Partition keys and contexts, (kernel keys, [(op id, context)]) per key, the first kept out
    first once they hold more than ``budget`` ops' contexts (a session's bit-width and support
    edits keep making new ones)."""

    def __init__(self, budget: int):
        super().__init__()
        self.budget = budget
        self.ops = 0

    def __setitem__(self, key, value) -> None:
        old = super().get(key)
        if old is not None:
            self.ops -= len(old[1])
        super().__setitem__(key, value)
        self.ops += len(value[1])
        while self.ops > self.budget and len(self) > 1:
            _key, gone = self.popitem(last=False)
            self.ops -= len(gone[1])


class Tables:
    """Static per-graph tables for the cost model (see the module docstring)."""

    def __init__(self, g: OpGraph):
        self.g = g
        self.work = [work(op, g) for op in g.ops]
        self.size = {tid: t.size for tid, t in g.tensors.items()}
        outs = set(g.outputs)
        self.consumers = [tuple(c for t in op.outputs for c in g.consumers(t)) for op in g.ops]
        # an op whose output a model output only relabels (through views: reshape, squeeze ...) writes
        # that output itself: the views move no data
        reach = set(outs)
        for op in reversed(g.ops):
            if KINDS[op.kind].view and op.inputs and any(t in reach for t in op.outputs):
                reach.add(op.inputs[0])
        self.graph_out = [any(t in reach for t in op.outputs) for op in g.ops]
        self.out_elems = [sum(self.size[t] for t in op.outputs) for op in g.ops]
        self.act_inputs = [tuple(t for t in op.inputs if g.tensors[t].kind != "const") for op in g.ops]
        # the (op, tensor) pairs held in the tensor's own dtype at any op width (a (de)quantize's float side)
        self.own = own_widths(g)
        self.half = frozenset(tid for tid, x in g.tensors.items() if x.dtype == HALF)  # held at fp16 at most
        self.model_widths = op_model_widths(g)  # per op: "fp16" when the model holds all its values so
        self.weighted = frozenset(g.consumers(w)[0] for w in weight_tensors(g))  # ops whose weights are quantized
        self._inner: dict[str, list[tuple[int, str]]] = {}  # processor layout -> per op (``inner``)
        self._bytes: dict[tuple[str, str], float] = {}
        self._geo: dict[int, tuple] = {}
        self._cls: dict[int, str] = {}
        self.plan_memo: dict = {}  # per plan: its kernels, its schedule programs
        self._specs: list | None = None  # input_specs(), made when first asked for
        self.keys_memo: OrderedDict = OrderedDict()  # per (plan, bits, on-chip sizes): contexts, memo keys
        self.kernel_memo: OrderedDict = OrderedDict()  # costed kernels: the pipeline's cost models share it
        self.part_memo = Kept(self.kept_ops)  # per partition content: its kernels' keys, its contexts
        self.kernel_kept = Kept(self.kept_ops)  # per kernel content and neighbours: its keys, its contexts
        self._adjacent: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._runs: OrderedDict = OrderedDict()  # the placement search's partition keys, per host and on-chip sizes
        self._sigs: dict = {}
        self._next_sig = itertools.count()

    @cached_property
    def image_layouts(self) -> dict[str, str]:
        """``layouts.image_layouts`` of the graph (worked out once, whatever the processors' layouts)."""
        return image_layouts_of(self.g)

    @cached_property
    def model_layouts(self) -> dict[str, str]:
        """``layouts.model_layouts``: every rank-4 image activation's axis order in the model (a boundary
        between layouts reads its (N, C, H, W) from it, as the generated code's buffers do)."""
        return model_layouts(self.g)

    def inner(self, layout: str) -> list[tuple[int, str]]:
        """Per op: (size, letter) of its output's dim a processor of ``layout`` holds innermost, the
        dim its vector lanes fill (``layouts.innermost``; letter "" for the last dim of a tensor that
        is not an image)."""
        col = self._inner.get(layout)
        if col is None:
            lays = self.image_layouts
            tensors = self.g.tensors
            col = self._inner[layout] = [innermost(lays.get(op.outputs[0]), tensors[op.outputs[0]].shape, layout)
                                         if op.outputs else (1, "") for op in self.g.ops]  # fmt: skip
        return col

    def sig(self, key) -> int:
        """A number standing for ``key`` (a kernel's or boundary's ops, bit-widths and contexts) in
        the cost memos' keys, so a lookup hashes a number instead of the nested tuple.  Numbers are
        never reused: when the table is cleared, keys get new numbers and old memo entries age out."""
        s = self._sigs.get(key)
        if s is None:
            if len(self._sigs) >= 1 << 18:
                self._sigs.clear()
            s = self._sigs[key] = next(self._next_sig)
        return s

    def run_memo(self, soc) -> dict:
        """The placement search's kept partition keys and contexts (``placement.Evaluator``) for
        profiles with ``soc``'s host and on-chip sizes.  They hold this table's signatures
        (``sig``), so they are kept here and go with it (``Kept``: bounded by the ops they hold)."""
        key = (soc.host, tuple((p.name, p.onchip_bytes) for p in soc.processors))
        m = self._runs.get(key)
        if m is None:
            m = self._runs[key] = Kept(self.kept_ops)
            if len(self._runs) > RUN_SHAPES:  # (a sweep over on-chip sizes makes one per size)
                self._runs.popitem(last=False)
        return m

    def adjacent(self, ids: tuple[int, ...]) -> tuple[int, ...]:
        """The ops outside ``ids`` that they read from or feed (ascending)."""
        out = self._adjacent.get(ids)
        if out is None:
            tensors = self.g.tensors
            near = set()
            for i in ids:
                for tid in self.act_inputs[i]:
                    pr = tensors[tid].producer
                    if pr is not None:
                        near.add(pr)
                near.update(self.consumers[i])
            near.difference_update(ids)
            if len(self._adjacent) >= 1 << 18:
                self._adjacent.clear()
            out = self._adjacent[ids] = tuple(sorted(near))
        return out

    @property
    def kept_ops(self) -> int:
        return max(KEPT_OPS, KEPT_OPS_PER_OP * len(self.g.ops))

    def input_specs(self) -> list[tuple[tuple[str, int], ...]]:
        """Per op, per input: (tensor id, producing op), the producer -1 for a model input or a
        constant (they are never fused nor on chip)."""
        specs = self._specs
        if specs is None:
            tensors = self.g.tensors

            def producer(tid):
                tt = tensors[tid]
                return tt.producer if tt.kind == "act" else -1

            specs = self._specs = [tuple((tid, producer(tid)) for tid in op.inputs) for op in self.g.ops]
        return specs

    def geometry(self, i: int) -> tuple:
        geo = self._geo.get(i)
        if geo is None:
            geo = self._geo[i] = geometry(self.g.ops[i], self.g)
        return geo

    def kernel_class(self, i: int) -> str:
        c = self._cls.get(i)
        if c is None:
            op = self.g.ops[i]
            c = self._cls[i] = kernel_class_of(op.kind, op.attrs, self.geometry(i))
        return c

    def reduction_length(self, i: int) -> int:
        """Products accumulated into one output of a conv / matmul (IC/groups*KH*KW, or K); 0 otherwise."""
        geo = self.geometry(i)
        if not geo:
            return 0
        return geo[1] * geo[4] if geo[0] == "conv" else geo[1]

    def held(self, i: int, tid: str, bits: str) -> str:
        """The width op ``i``, running at ``bits``, holds its input or output ``tid`` at: ``bits``,
        or the tensor's own dtype for the float side of a (de)quantize (``own_widths``), never wider
        than the model holds it (a float16 tensor: fp16, ``model_width``)."""
        w = self.own.get((i, tid))
        if w:
            return w
        return "fp16" if bits == "fp32" and tid in self.half else bits

    def nbytes(self, tid: str, bits: str) -> float:
        k = (tid, bits)
        b = self._bytes.get(k)
        if b is None:
            b = self._bytes[k] = tensor_bytes(self.g.tensors[tid], bits, tid in mac_weights(self.g))
        return b
