"""The host partitions' steps of a generated program (no tvm): ``HostSteps``, a part of
``program.Program``.

A host partition's kernels run in an order they can run (``_runnable``); each is a call of the
plain C wrapper of TVM's host code, or, for the ops TVM cannot lower to C (sort, top-k, NMS), one
of npukit's reference kernels (``_host_group``).  The weights a wrapper's constant parameters point
to are the simulation's (a MAC op's float weights quantized at its bit-width: ``_host_const``).
"""

from __future__ import annotations

import heapq
import re

from .function import Fn
from .lower import KernelLowering, Unsupported, model_node
from .names import comment
from .storage import CTYPE

# the host constants' dtypes the weights store as they are (any other float is stored as float32)
CONST_KINDS = {"float32": "F32", "int8": "S8", "int16": "S16", "int32": "S32", "int64": "S64", "uint8": "U8", "bool": "BOOL"}
_TENSOR_ID = re.compile(r"\btensor (\S+) ")  # how npukit.tvm.hostc's reasons name a tensor (its id)
HOST_FALLBACK = frozenset({"topk", "sort", "argsort", "all_class_non_max_suppression", "non_max_suppression"})


class HostSteps:
    """The host partitions' steps of ``program.Program`` (see the module docstring)."""

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
