"""The generated program as data, then as C (no tvm here; the TVM parts come in as arguments).

``Program`` walks the plan's partitions in the order the partitioned ``main`` calls them:

* a host partition runs its kernels (the cost model's: a conv with its epilogue chain, or one op)
  through the plain C wrappers of TVM's host code (``host``), or, for the ops TVM cannot lower to C
  (sort, top-k, NMS), through npukit's reference kernels;
* an offloaded partition is one call of its wrapper ``<lib>_partition_<k>(arena)``, whose body
  (kernel-library calls, one per kernel: ``lower.KernelLowering``) is what the BYOC codegen
  registered as ``relax.ext.<processor>`` returns for that partition function;
* after a tensor is produced, every boundary it crosses becomes an explicit conversion call on the
  processor the profile names (``[conversion] layout_on / quantize_on``): the cost model's
  layout / quantize items, in the same places.

Every buffer but the model's inputs and outputs lives in one static arena; ``memplan`` places them
by lifetime (events: one per kernel, conversion or partition call).  A model without such a buffer
(every op on the host, reading inputs and writing outputs) has no arena.

An output that no op writes is filled by a copy (``fills``): a model input returned as an output, a
constant output (its values in the constant workspace), and an output that repeats an earlier one
(an Identity folded away, the same tensor listed twice).
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field

from ..cost import held_width
from ..cost import kernels as cost_kernels
from ..quant.boundary import copy_bits
from ..quant.scheme import INT_BITS
from . import memplan
from .lower import KernelLowering, Unsupported, model_node
from .lower_cmsis import CmsisLowering
from .names import Names, comment
from .storage import CTYPE, ITEMSIZE, Format, Storage
from .weights import Weights

# the host constants' dtypes the weights store as they are (any other float is stored as float32)
CONST_KINDS = {"float32": "F32", "int8": "S8", "int16": "S16", "int32": "S32", "int64": "S64", "uint8": "U8", "bool": "BOOL"}
_TENSOR_ID = re.compile(r"\btensor (\S+) ")  # how npukit.tvm.hostc's reasons name a tensor (its id)
HOST_FALLBACK = frozenset({"topk", "sort", "argsort", "all_class_non_max_suppression", "non_max_suppression"})


@dataclass
class Copy:
    key: tuple[str, str, str]  # (tensor id, processor, tag: "" main copy, "k" kernel scratch, "m" model view)
    fmt: Format
    bound: str = ""  # a C pointer expression when not in the arena (inputs->x, outputs->y)
    uses: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Fill:
    """A model output no op writes, filled by copying ``nbytes`` from ``src`` (a C expression: an
    input, an earlier output, a constant's symbol); ``late`` once every step has run."""

    index: int
    tid: str
    src: str
    nbytes: int
    what: str
    late: bool


class Fn:
    """One generated C function body: tensor descriptors over the arena, then statements."""

    def __init__(self, prog: Program, where: str, lib: str, arena: str):
        self.p, self.where, self.lib, self.arena = prog, where, lib, arena
        self.names = Names(reserved=("st", "arena", "inputs", "outputs"))
        self.decls: dict[str, tuple] = {}  # var -> ("copy", key, view) | ("const", symbol, dtype, shape)
        self.by_key: dict[tuple, str] = {}
        self.body: list[str] = []
        self.after: list[str] = []
        self.kernel: set[int] = set()  # op ids of the kernel being lowered
        self.writes: set[str] = set()  # tensors the op being lowered writes
        self.refs: list[tuple] = []  # copies whose data pointers the body names (see ``data``)
        self.op: int | None = None  # the op being lowered: its calls carry an "[op N]" marker

    def var(self, role: str) -> str:
        return self.names.ident(role)

    def line(self, s: str) -> None:
        self.body.append(s)

    def _copy(self, tid: str) -> Copy:
        g = self.p.g
        t = g.tensors[tid]
        internal = t.producer is not None and t.producer in self.kernel and (
            tid not in self.writes or all(c in self.kernel for c in g.consumers(tid)) and tid not in g.outputs)
        if internal and not self.p.escapes(tid, self.kernel):
            return self.p.scratch(tid, self.where)
        return self.p.copies[(tid, self.where, "")]

    def desc(self, tid: str, view: str = "model") -> str:
        c = self._copy(tid)
        self.p.use(c)
        if view == "model" and not c.fmt.model_view_ok:
            m = self.p.model_view(c)
            self.p.use(m)
            # the same buffer seen two ways: (N, C, H, W) in the model's layout for the conversion,
            # the model's own shape row-major for the op
            src, conv = self._decl(c, "spatial"), self._decl(m, "spatial")
            if tid in self.writes:
                self.after.append(self._call_line(f"{self.lib}_layout_convert", [conv, src], "back to the kernel layout"))
            else:
                self.body.append(self._call_line(f"{self.lib}_layout_convert", [src, conv], "to the model's axis order"))
            return self._decl(m, "model")
        return self._decl(c, view)

    def data(self, tid: str) -> str:
        """A C expression of a tensor's data pointer (resolved when rendering: offsets come from the
        memory plan, made after every use is known)."""
        c = self._copy(tid)
        self.p.use(c)
        self.refs.append(c.key)
        return f"@@data{len(self.refs) - 1}@@"

    def resolve(self, text: str) -> str:
        for k, key in enumerate(self.refs):
            text = text.replace(f"@@data{k}@@", self.p.data_expr(self.p.copies[key], self.arena))
        return text

    def render_body(self) -> list[str]:
        return [self.resolve(ln) for ln in self.body]

    def _decl(self, c: Copy, view: str) -> str:
        k = (c.key, view)
        v = self.by_key.get(k)
        if v is None:
            v = self.by_key[k] = self.names.ident("t", c.key[0] + "_" + c.key[2])
            self.decls[v] = ("copy", c.key, view)
        return "&" + v

    def const_desc(self, sym: str, dtype: str, shape) -> str:
        k = ("const", sym, dtype, tuple(shape))
        v = self.by_key.get(k)
        if v is None:
            v = self.by_key[k] = self.names.ident("k", sym)
            self.decls[v] = ("const", sym, dtype, tuple(shape))
        return "&" + v

    def workspace(self, size_expr: str, nbytes: int) -> str:
        c = self.p.workspace_copy(self.where, nbytes)
        self.p.use(c)
        self.refs.append(c.key)
        return f"(void *)(@@data{len(self.refs) - 1}@@)"

    def _call_line(self, fname: str, args, note: str) -> str:
        return f"/* {comment(note)} */\n    if ((st = {fname}({', '.join(args)})) != 0) return st;"

    def call(self, fname: str, *args, note: str = "") -> None:
        if self.op is not None:
            note = f"[op {self.op}] {note}"
        self.body.append(self._call_line(fname, args, note))
        self.body += self.after
        self.after = []

    # -- rendering -----------------------------------------------------------------------------
    def render_decls(self) -> list[str]:
        out = []
        L = self.lib
        for v, d in self.decls.items():
            if d[0] == "const":
                _, sym, dtype, shape = d
                shp = tuple(shape) or ()
                out.append(f"{L}_tensor {v} = {{(void *){sym}, {L.upper()}_{dtype}, {len(shp)}, {_dims(shp)}, "
                           f"{L.upper()}_ROW_MAJOR, 1, 1.0f, 0}};")  # fmt: skip
                continue
            _, key, view = d
            c = self.p.copies[key]
            f = c.fmt
            if view == "model" or not f.spatial:
                shape, layout, block = f.model_shape, "ROW_MAJOR", 1
            else:
                shape, layout, block = f.shape, f.layout, f.block
            out.append(f"{L}_tensor {v} = {{(void *)({self.p.data_expr(c, self.arena)}), {L.upper()}_{f.dtype}, "
                       f"{len(shape)}, {_dims(shape)}, {L.upper()}_{layout}, {block}, {_float(f.scale)}, {f.zero}}};"
                       f"  /* {comment(self.p.label(key[0]))} */")  # fmt: skip
        return out


def _dims(shape) -> str:
    return "{" + ", ".join(str(int(d)) for d in shape) + "}" if shape else "{0}"


def _float(x: float) -> str:
    import numpy as np  # noqa: PLC0415

    return f"{float(np.float32(x))!r}f"


class Program:
    """The whole generated program for one Result and one calibration (see the module docstring)."""

    def __init__(self, result, ranges: dict[str, tuple[float, float]], names: Names):
        self.r = result
        self.g = result.graph
        self.soc = result.soc
        self.plan = result.plan
        self.bits = result.bits
        self.storage = Storage(self.g, ranges)
        self.names = names
        self.weights = Weights(names)
        self.copies: dict[tuple[str, str, str], Copy] = {}
        self.event = 0
        self.steps: list[tuple] = []  # ("host", group, kernel|None) | ("part", pid) | ("convert", ...) | ("round", key)
        self.kernels = cost_kernels(self.plan, self.g, result.tables)
        self.procs = {p.name: p for p in self.soc.processors}
        self.host = self.soc.host
        self._ws = 0

    # -- copies ----------------------------------------------------------------------------
    def fmt(self, tid: str, where: str) -> Format:
        key = (tid, where, "")
        return self.copies[key].fmt if key in self.copies else self.storage.on(tid, self.procs[where], "fp32")

    def add_copy(self, key, fmt: Format, bound: str = "") -> Copy:
        c = self.copies.get(key)
        if c is None:
            c = self.copies[key] = Copy(key, fmt, bound)
        return c

    def scratch(self, tid: str, where: str) -> Copy:
        f = self.storage.host(tid, "fp32")  # float, the model's axis order: every view works
        return self.add_copy((tid, where, "k"), f)

    def model_view(self, c: Copy) -> Copy:
        f = c.fmt
        mf = Format(f.dtype, f.model_layout, 1, f.scale, f.zero, f.shape, f.model_shape, f.model_layout, f.grid_bits)
        return self.add_copy((c.key[0], c.key[1], "m"), mf)

    def workspace_copy(self, where: str, nbytes: int) -> Copy:
        self._ws += 1
        f = Format("S8", "ROW", 1, 1.0, 0, (nbytes,), (nbytes,), "")
        return self.add_copy((f"ws{self._ws}", where, "w"), f)

    def use(self, c: Copy) -> None:
        c.uses.append(self.event)

    def escapes(self, tid: str, kernel: set[int]) -> bool:
        g = self.g
        return tid in g.outputs or any(c not in kernel for c in g.consumers(tid))

    def data_expr(self, c: Copy, arena: str) -> str:
        if c.bound:
            return c.bound
        return f"{arena} + {self.offsets[c.key]}"

    def label(self, tid: str) -> str:
        return self.g.tensor_label(tid) if tid in self.g.tensors else tid

    # -- building ------------------------------------------------------------------------------
    def build(self, host_c, lib_of) -> None:
        """Walk the plan (see the module docstring).  ``host_c(groups) -> HostC``; ``lib_of(proc)``
        -> the kernel library prefix of an accelerator."""
        g, plan = self.g, self.plan
        self.lib_of = lib_of
        for k, tid in enumerate(g.inputs):
            self.add_copy((tid, self.host, ""), self.storage.host(tid), f"inputs->{self.io_field('in', k)}")
        for k, tid in enumerate(g.outputs):
            key = (tid, self.host, "")
            if key not in self.copies:
                b = self._output_bits(tid)
                self.add_copy(key, self.storage.host(tid, b), f"outputs->{self.io_field('out', k)}")
        by_tensor: dict[str, list] = {}
        for b in plan.boundaries:
            by_tensor.setdefault(b.tensor, []).append(b)
        self.by_tensor = by_tensor
        for tid in g.inputs:
            self._convert_all(tid)
        host_groups: list[tuple[int, ...]] = []
        in_part: dict[int, list[tuple[int, ...]]] = {}  # host partition -> its kernels in an order they can run
        for part in plan.partitions:
            if part.processor == self.host:
                ids = set(part.ops)
                in_part[part.pid] = self._runnable([k for k in self.kernels if k[0] in ids])
                host_groups += in_part[part.pid]
        self.host_c = host_c([grp for grp in host_groups if not (set(self.g.ops[i].kind for i in grp) & HOST_FALLBACK)])
        hk = {k.ops: k for k in self.host_c.kernels if k is not None}
        for part in plan.partitions:
            if part.processor == self.host:
                for grp in in_part[part.pid]:
                    self._host_group(grp, hk.get(grp))
            else:
                self._partition(part)
        self.fills = self._output_fills()

    def _runnable(self, kernels: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """A host partition's kernels (each a MAC op and the epilogue chain it fuses; by first op)
        in an order they can run: each after the kernels it reads from.  The order of first ops is
        not one: two convs feeding one add make the kernel (conv A, add), which reads conv B's
        output.  Of the kernels ready, the one with the first op comes first (the same order when
        it can run, a deterministic one otherwise); a chain's inner outputs have no other reader,
        so one always exists."""
        g = self.g
        where = {i: k for k, grp in enumerate(kernels) for i in grp}
        needs = [0] * len(kernels)
        feeds: list[list[int]] = [[] for _ in kernels]
        for k, grp in enumerate(kernels):
            deps = {where[t.producer] for i in grp for tid in g.ops[i].inputs
                    if (t := g.tensors[tid]).kind == "act" and t.producer in where} - {k}  # fmt: skip
            needs[k] = len(deps)
            for d in deps:
                feeds[d].append(k)
        ready = [k for k in range(len(kernels)) if not needs[k]]
        heapq.heapify(ready)
        out = []
        while ready:
            k = heapq.heappop(ready)
            out.append(kernels[k])
            for n in feeds[k]:
                needs[n] -= 1
                if not needs[n]:
                    heapq.heappush(ready, n)
        if len(out) != len(kernels):
            raise AssertionError("npukit: a host partition's kernels read each other in a cycle; please report this")
        return out

    def _output_fills(self) -> list[Fill]:
        """The outputs no step writes, each with the copy that fills it (see the module docstring)."""
        g = self.g
        fills = []
        for k, tid in enumerate(g.outputs):
            t = g.tensors[tid]
            c = self.copies[(tid, self.host, "")]
            field_expr = f"outputs->{self.io_field('out', k)}"
            f = c.fmt
            nbytes = math.prod(f.model_shape) * ITEMSIZE[f.dtype]
            if t.kind == "const":
                fills.append(Fill(k, tid, self._const_output(tid, f), nbytes, "a constant of the model", False))
            elif t.kind == "input":
                j = g.inputs.index(tid)
                fills.append(Fill(k, tid, c.bound, nbytes, f"model input {j}", False))
            elif c.bound != field_expr:  # the same tensor as an earlier output: copied once it is final
                j = g.outputs.index(tid)
                fills.append(Fill(k, tid, c.bound, nbytes, f"the same tensor as output {j}", True))
        return fills

    def _const_output(self, tid: str, f: Format) -> str:
        """The constant workspace's symbol holding a constant output's values in its host format."""
        import numpy as np  # noqa: PLC0415

        arr = np.asarray(self.g.consts[tid])
        npdt = {"F32": np.float32, "F16": np.float16, "S8": np.int8, "U8": np.uint8, "S16": np.int16,
                "S32": np.int32, "S64": np.int64, "BOOL": np.uint8}[f.dtype]  # fmt: skip
        vals = arr.astype(npdt)
        if f.dtype == "F16":
            vals = vals.view(np.uint16)
        return self.weights.add("c", self.label(tid), CTYPE[f.dtype], vals, f"{self.label(tid)} {list(arr.shape)}")

    @property
    def uses_arena(self) -> bool:
        """Does the program need the static arena (a buffer in it, or a partition wrapper's argument)?"""
        return self.arena_bytes > 0 or any(s[0] == "part" for s in self.steps)

    def _output_bits(self, tid: str) -> str:
        t = self.g.tensors[tid]
        if t.kind == "act" and self.plan.processor[t.producer] == self.host:  # (a dequantize's float output: its dtype)
            return held_width(self.g, t.producer, tid, self.bits[t.producer])
        return "fp32"

    def io_field(self, kind: str, k: int) -> str:
        return f"{kind}{k}"

    def _main_copy(self, tid: str) -> Copy:
        """The producer's copy of an op output (created on first need), at the width the producer
        holds it at (a dequantize's float output in its own dtype: ``cost.held_width``)."""
        t = self.g.tensors[tid]
        where = self.plan.processor[t.producer]
        key = (tid, where, "")
        if key not in self.copies:
            self.add_copy(key, self.storage.on(tid, self.procs[where], held_width(self.g, t.producer, tid, self.bits[t.producer])))
        return self.copies[key]

    def _host_group(self, grp: tuple[int, ...], hk) -> None:
        self.event += 1
        g = self.g
        fallback = hk is None
        for i in grp:
            for tid in g.ops[i].outputs:
                if not (tid not in g.outputs and all(c in grp for c in g.consumers(tid))):
                    self._main_copy(tid)
        if fallback:
            fn = Fn(self, self.host, "npk", "npukit_arena")
            fn.kernel = set(grp)
            for i in grp:
                fn.writes = set(g.ops[i].outputs)
                try:
                    KernelLowering(fn, self).op(g.ops[i])
                except Unsupported as e:
                    reason = self._host_reason(self.host_c.unsupported.get(i, ""))
                    raise Unsupported(f"{e}, and TVM cannot lower it to C either: {reason}") from None
            self.steps.append(("hostref", grp, fn))
        else:
            args = []
            for prm in hk.params:
                if prm.role == "const":
                    args.append(self._host_const(prm.tid, grp, prm))
                    continue
                c = self.copies[(prm.tid, self.host, "")] if prm.role == "input" else self._main_copy(prm.tid)
                self.use(c)
                args.append((c, prm))
            self.steps.append(("host", grp, hk, args))
        for i in grp:  # a float output stored at a narrower width on the host: rounded in place
            for tid in g.ops[i].outputs:
                key = (tid, self.host, "")
                if key in self.copies and self.copies[key].fmt.grid_bits and i in self._rounded():
                    self.use(self.copies[key])
                    self.steps.append(("round", key))
        for i in grp:
            for tid in g.ops[i].outputs:
                self._convert_all(tid)

    def _host_reason(self, reason: str) -> str:
        """A host C failure reason in the model's words: tensors by their model names."""
        return _TENSOR_ID.sub(lambda m: f"tensor {self.label(m.group(1))!r} " if m.group(1) in self.g.tensors
                              else m.group(0), reason) or "no reason given"  # fmt: skip

    def _rounded(self) -> frozenset[int]:
        if not hasattr(self, "_rounded_set"):
            from ..quant import rounded_ops  # noqa: PLC0415

            self._rounded_set = rounded_ops(self.g, self.kernels, self.bits)
        return self._rounded_set

    def _host_const(self, tid: str, grp, prm) -> str:
        """The weight array a host kernel's constant parameter ``prm`` points to (cast where TVM
        declares it ``bool`` and it is stored as bytes)."""
        import numpy as np  # noqa: PLC0415

        from ..quant.scheme import quantize_weight  # noqa: PLC0415
        from ..tvm.hostc_emit import c_type  # noqa: PLC0415

        arr = np.asarray(self.g.consts[tid])
        owner, axis = self._weight_owner(tid)
        if owner is not None and "float" in str(arr.dtype):  # the simulation's quantized MAC weights
            arr = quantize_weight(arr, self.bits[owner], axis)
        kind = CONST_KINDS.get(str(arr.dtype), "F32")
        ctype, want = CTYPE[kind], c_type(prm.dtype)
        if ctype != want and not (kind == "BOOL" and want == "bool"):
            op = next((self.g.ops[i] for i in grp if tid in self.g.ops[i].inputs), self.g.ops[grp[0]])
            raise Unsupported(f"{model_node(self.g, op)}: its constant {comment(self.g.tensors[tid].name or tid)} is "
                              f"{prm.dtype}, which the generated C does not store (it stores constants as "
                              f"{', '.join(CONST_KINDS)}); cast it in the model")  # fmt: skip
        sym = self.weights.add("c", self.label(tid), ctype, arr if ctype != "float" else arr.astype(np.float32),
                               f"{self.label(tid)} {list(arr.shape)}")  # fmt: skip
        return sym if ctype == want else f"(const {want} *){sym}"

    def _weight_owner(self, tid: str) -> tuple[int | None, int]:
        """(the MAC op whose weight ``tid`` is, its output-channel axis): the weights the simulation
        quantizes at that op's bit-width (``tvm.simulate.weight_tensors``)."""
        from ..opset import KINDS, weight_axis  # noqa: PLC0415

        t = self.g.tensors[tid]
        if len(t.shape) < 2 or "float" not in t.dtype:
            return None, 0
        for op in self.g.ops:
            if KINDS[op.kind].mac and tid in op.inputs[1:]:
                return op.op_id, weight_axis(self.g, tid)
        return None, 0

    def _partition(self, part) -> None:
        lib = self.lib_of(part.processor)
        fn = Fn(self, part.processor, lib, "arena")
        for pat, ids in part.patterns:
            self.event += 1
            ids = tuple(sorted(ids))
            for i in ids:
                for tid in self.g.ops[i].outputs:
                    if self.escapes(tid, set(ids)):
                        self._main_copy(tid)
            fn.kernel = set(ids)
            fn.line(f"/* [ops {','.join(map(str, ids))}] kernel {pat}: {comment(', '.join(self.g.ops[i].name for i in ids))} */")
            kl = CmsisLowering(fn, self) if self.procs[part.processor].kernel_api == "cmsis-nn" else KernelLowering(fn, self)
            for i in ids:
                fn.writes |= set(self.g.ops[i].outputs)
            kl.kernel(ids)
            fn.writes = set()
        self.steps.append(("part", part, fn))
        for i in part.ops:
            for tid in self.g.ops[i].outputs:
                self._convert_all(tid)

    def _convert_all(self, tid: str) -> None:
        for b in self.by_tensor.get(tid, ()):
            self._convert(b)

    def _convert(self, b) -> None:
        """The boundary copy of ``b.tensor`` on ``b.dst``, made by the processors the profile names."""
        self.event += 1
        g = self.g
        t = g.tensors[b.tensor]
        src = self.copies[(b.tensor, self.host, "")] if t.kind != "act" else self._main_copy(b.tensor)
        _src_bits, dst_bits = copy_bits(g, self.plan, self.bits, b)
        dkey = (b.tensor, b.dst, "")
        dst = self.copies.get(dkey)
        if dst is None:
            dst = self.add_copy(dkey, self.storage.on(b.tensor, self.procs[b.dst], dst_bits))
        self.use(src)
        self.use(dst)
        on = self._converter(b)
        self.steps.append(("convert", src.key, dkey, on, b))
        if dst.fmt.grid_bits and dst_bits in INT_BITS or dst.fmt.grid_bits == "fp16":
            self.steps.append(("round", dkey))

    def _converter(self, b) -> str:
        """The processor that converts: ``quantize_on``'s when the bit-widths differ, else
        ``layout_on``'s (one call does both; the cost model charges each on its own processor)."""
        at = {"dst": b.dst, "src": b.src, "host": self.host}
        src_bits, dst_bits = copy_bits(self.g, self.plan, self.bits, b)
        return at[self.soc.quantize_on] if src_bits != dst_bits else at[self.soc.layout_on]

    # -- memory --------------------------------------------------------------------------------
    def plan_memory(self) -> None:
        arena = [c for c in self.copies.values() if not c.bound]
        bufs = [memplan.Buffer(repr(c.key), c.fmt.nbytes, min(c.uses, default=0), max(c.uses, default=0)) for c in arena]
        offs, self.arena_bytes, self.lower_bound = memplan.plan(bufs)
        self.offsets = {c.key: offs[repr(c.key)] for c in arena}
