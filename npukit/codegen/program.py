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
  layout / quantize items, in the same places; where neither the values nor their memory order
  change (the same layout, or layouts that put every element at the same offset: C = 1,
  H = W = 1), a copy (``emit.same_order``), as the cost model charges the transfer alone.

Every buffer but the model's inputs and outputs lives in one static arena; ``memplan`` places them
by lifetime (events: one per kernel, conversion or partition call).  A model without such a buffer
(every op on the host, reading inputs and writing outputs) has no arena.

An output that no op writes is filled by a copy (``fills``): a model input returned as an output, a
constant output (its values in the constant workspace), and an output that repeats an earlier one
(an Identity folded away, the same tensor listed twice).

This module holds ``Program``: its copies, the walk, the outputs, the offloaded partitions, the
boundary conversions and the memory plan; ``function`` holds the C function bodies (``Fn``) and the
copies (``Copy``), ``host_steps`` the host partitions' steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..cost import held_width
from ..cost import kernels as cost_kernels
from ..quant.boundary import copy_bits
from ..quant.scheme import INT_BITS
from . import memplan
from .function import Copy, Fn
from .host_steps import HOST_FALLBACK, HostSteps
from .lower import KernelLowering
from .lower_cmsis import CmsisLowering
from .names import Names, comment
from .storage import CTYPE, ITEMSIZE, Format, Storage
from .weights import Weights


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


class Program(HostSteps):
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
