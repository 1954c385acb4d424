"""Lowering one kernel (a fused composite, or one op) to calls into a kernel library (no tvm).

A conv2d / matmul composite of the form ``[dequantize] root [add bias] [activation] [quantize]
[clip]`` becomes ONE fused call: integer storage on both sides takes the integer path (weights
quantized per output channel at the kernel's bit-width, int32 / int64 bias, per-channel fixed-point
multipliers computed here, at export time); float storage takes the float path.  Any other kernel
becomes one call per op, its intermediates in float scratch (nothing is rounded inside a kernel,
as in the simulation), its outputs stored in their kernel format.

This module holds ``KernelLowering`` (a kernel, one op) and the errors naming a model node;
``lower_mac`` the fused conv2d / matmul kernel (``MacLowering``, which ``KernelLowering`` extends).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import NpukitError
from ..graph import Op
from .calls import BINARY, INT_UNARY, KNOWN, UNARY, integer_arithmetic, missing_call, resize_modes
from .calls import COORD_MODES as _COORD_MODES
from .calls import PAD_MODES as _PAD_MODES
from .calls import ROUNDING as _ROUNDING
from .calls import axis as _axis
from .kernels import quantize_multipliers
from .lower_mac import MacLowering, _f
from .lower_norm import NORMS, lower_norm
from .storage import INTEGER

ACTS = ("relu", "clip")


class Unsupported(NpukitError):
    pass


def model_node(g, op: Op) -> str:
    """The model node ``op`` came from, in the model's words: ``node 'ci' (Cast float32->int32)``.
    One node can import as several ops (a Cast to an integer type is nine); a cast names the
    dtype it reads (its first op's input) and the one it makes (its last op's output)."""
    if not op.source:
        return f"op {op.name!r} (added by the importer)"
    what = op.source_op
    if "cast" in what.lower():
        mine = [o for o in g.ops if o.source == op.source and o.source_op == op.source_op]
        if mine and mine[0].inputs and mine[-1].outputs:
            what += f" {g.tensors[mine[0].inputs[0]].dtype}->{g.tensors[mine[-1].outputs[0]].dtype}"
    return f"node {op.source!r} ({what})"


def no_kernel_call(g, op: Op, where: str) -> str:
    """Why an op has no kernel call, naming its model node (and the op when the node is several)."""
    part = f"its {op.kind} op {op.name!r}" if op.name != op.source else op.kind
    return f"{model_node(g, op)}: code generation has no kernel call for {part} on {where}"


def _c_list(xs) -> str:
    """A C brace initializer of integers: ``{1, 2, 3}``."""
    return "{" + ", ".join(map(str, xs)) + "}"


def _int_bounds(a, dtype: str) -> tuple[int, int]:
    """A clip's [min, max] on integers of ``dtype``: its bounds rounded inward (the integers between
    them), within the dtype's range (an unbounded side is the dtype's end)."""
    info = np.iinfo(dtype)
    lo, hi = float(a.get("min", -math.inf)), float(a.get("max", math.inf))
    lo = info.min if not lo > info.min else min(math.ceil(lo), info.max)
    hi = info.max if not hi < info.max else max(math.floor(hi), info.min)
    return int(lo), int(hi)


def _c_int64(v: int) -> str:
    """An int64_t argument in C (the minimum has no literal of its own)."""
    return "INT64_MIN" if v == -(2**63) else f"INT64_C({v})"


class KernelLowering(MacLowering):
    """Lowers kernels inside one generated function ``fn`` (see ``function.Fn``)."""

    def __init__(self, fn, prog):
        self.fn = fn
        self.p = prog
        self.g = prog.g

    # -- helpers -----------------------------------------------------------------------------
    def const(self, tid: str, role: str = "c"):
        """A const tensor as an F32 descriptor over a weights array."""
        t = self.g.tensors[tid]
        arr = np.asarray(self.g.consts[tid])
        if "float" in str(arr.dtype):
            sym = self.p.weights.add(role, t.name or tid, "float", arr.astype(np.float32), f"{t.name or tid} {list(t.shape)}")
            return self.fn.const_desc(sym, "F32", t.shape)
        ctype, dt = {"int8": ("int8_t", "S8"), "uint8": ("uint8_t", "U8"), "int16": ("int16_t", "S16"),
                     "int32": ("int32_t", "S32"), "int64": ("int64_t", "S64"), "bool": ("uint8_t", "BOOL")}[str(arr.dtype)]  # fmt: skip
        sym = self.p.weights.add(role, t.name or tid, ctype, arr, f"{t.name or tid} {list(t.shape)}")
        return self.fn.const_desc(sym, dt, t.shape)

    def scalar(self, tid: str) -> float:
        return float(np.ravel(self.g.consts[tid])[0])

    def operand(self, tid: str, view: str):
        t = self.g.tensors[tid]
        return self.const(tid) if t.kind == "const" else self.fn.desc(tid, view)

    def _held_axes(self, op: Op, axes: list[int]) -> tuple[str, list[int]]:
        """(view, axes) of a softmax or reduction: on rank-4 buffers in and out (the same model axis
        order, the rank kept) the buffers as held -- the "spatial" view, (N, C, H, W) in the copy's
        own layout -- and the model's axes as that view's (N, C, H, W) indices, so an NHWC copy is
        reduced where it lies, no conversion to the model's order and back; else the model's view
        and axes."""
        fi, fo = self.fn._copy(op.inputs[0]).fmt, self.fn._copy(op.outputs[0]).fmt
        if not (fi.spatial and fo.spatial and fi.model_layout == fo.model_layout):
            return "model", axes
        to_nchw = (0, 2, 3, 1) if fi.model_layout == "NHWC" else (0, 1, 2, 3)  # as ``storage.semantic``
        return "spatial", [to_nchw[_axis(x, 4)] for x in axes]

    # -- a kernel ----------------------------------------------------------------------------
    def kernel(self, ids: tuple[int, ...]) -> None:
        fused = self._fused(ids)
        if fused is not None:
            self._mac(*fused)
            return
        for i in ids:
            self.op(self.g.ops[i])

    # -- one op ------------------------------------------------------------------------------
    def op(self, op: Op) -> None:
        fn, L = self.fn, self.fn.lib
        fn.op = op.op_id
        k = op.kind
        a = op.attrs
        name = op.name
        why = missing_call(self.g, op)  # (the support rules refuse such an op on an accelerator)
        if why is not None:
            host = self.p.soc.host
            pin = f"; pin it to the host ({host})" if fn.where != host else ""
            raise Unsupported((no_kernel_call(self.g, op, fn.where) if k not in KNOWN else f"{name}: {why}") + pin)
        if integer_arithmetic(self.g, op):  # the model's own integers: wrap as the model does, never saturate
            self._integer(op)
        elif k in BINARY:
            x, y = (self.operand(t, "model") for t in op.inputs[:2])
            fn.call(f"{L}_{k}", x, y, fn.desc(op.outputs[0], "model"), note=f"{name} ({k})")
        elif k in UNARY:
            fn.call(f"{L}_{k}", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), note=f"{name} ({k})")
        elif k == "clip":
            fn.call(f"{L}_clip", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"),
                    _f(float(a.get("min", -math.inf))), _f(float(a.get("max", math.inf))), note=f"{name} (clip)")  # fmt: skip
        elif k == "leakyrelu":
            fn.call(f"{L}_leaky_relu", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"),
                    _f(float(a.get("alpha", 0.01))), note=f"{name} (leaky_relu)")  # fmt: skip
        elif k in ("conv2d", "matmul") and self._fused((op.op_id,)) is not None:
            self._mac(*self._fused((op.op_id,)))
        elif k == "matmul":
            v = fn.var("mm")
            ins, out = op.inputs[:2], op.outputs[0]
            fo, fa, fb = (self.p.fmt(t, fn.where) for t in (out, *ins))
            integer = [f.dtype in INTEGER and self.g.tensors[t].kind != "const" for t, f in zip((out, *ins), (fo, fa, fb))]
            y_out = fn.desc(out, "model")
            if all(integer):
                x, y = (self.operand(t, "model") for t in ins)
                m, s = quantize_multipliers([fa.scale * fb.scale / fo.scale])
                msym = self.p.weights.add("mult", name, "int32_t", m)
                ssym = self.p.weights.add("shift", name, "int32_t", s)
                dst = y_out
            else:  # dtypes mixed (an integer input of a float intermediate): the product in float, each
                # integer input dequantized first and an integer output quantized after
                x, y = (self._dequantized(t, "model", name) if q else self.operand(t, "model") for t, q in zip(ins, integer[1:]))
                dst = self._float_scratch(out, "model") if integer[0] else y_out
                msym = ssym = "NULL"
            fn.line(f"{L}_matmul_params {v} = {{0, 0, NULL, {msym}, {ssym}, -INFINITY, INFINITY, 0}};")
            fn.call(f"{L}_matmul", x, y, dst, f"&{v}", note=f"{name} (matmul)")
            if dst is not y_out:
                fn.call(f"{L}_quantize", dst, y_out, note=f"{name}: its float product to the integer output")
        elif k in ("max_pool2d", "avg_pool2d"):
            st, dl, pad, ps = a.get("strides", (1, 1)), a.get("dilation", (1, 1)), a.get("padding", (0, 0, 0, 0)), a["pool_size"]
            pad = tuple(pad) if len(pad) == 4 else (pad[0], pad[1], pad[0], pad[1])
            v = fn.var("pool")
            fn.line(f"{L}_pool2d_params {v} = {{{ps[0]}, {ps[1]}, {st[0]}, {st[1]}, {dl[0]}, {dl[1]}, {pad[0]}, {pad[1]}, "
                    f"{pad[2]}, {pad[3]}, {int(bool(a.get('ceil_mode')))}, {int(bool(a.get('count_include_pad')))}}};")  # fmt: skip
            fn.call(f"{L}_{k}", fn.desc(op.inputs[0], "spatial"), fn.desc(op.outputs[0], "spatial"), f"&{v}", note=f"{name} ({k})")
        elif k == "adaptive_avg_pool2d":
            fn.call(f"{L}_adaptive_avg_pool2d", fn.desc(op.inputs[0], "spatial"), fn.desc(op.outputs[0], "spatial"), note=name)
        elif k in ("mean", "sum", "max", "min"):
            rank = len(self.g.tensors[op.inputs[0]].shape)
            ax = a.get("axis")
            axes = range(rank) if ax is None else (ax if isinstance(ax, tuple) else (ax,))
            view, axes = self._held_axes(op, [_axis(x, rank) for x in axes])
            mask = sum(1 << x for x in axes)
            fn.call(f"{L}_reduce_{k}", fn.desc(op.inputs[0], view), fn.desc(op.outputs[0], view), f"{mask}u", note=f"{name} ({k})")
        elif k in ("softmax", "log_softmax"):
            view, (ax,) = self._held_axes(op, [int(a.get("axis", -1))])
            fn.call(f"{L}_{k}", fn.desc(op.inputs[0], view), fn.desc(op.outputs[0], view), str(ax), note=f"{name} ({k})")
        elif k in NORMS:
            lower_norm(self, op)
        elif k == "pad":
            mode = _PAD_MODES.get(str(a.get("pad_mode", "constant")))
            width = [int(w) for w in a.get("pad_width", ())]
            v = fn.var("pad")
            fn.line(f"{L}_pad_params {v} = {{{L.upper()}_PAD_{mode}, {_c_list(width[0::2])}, {_c_list(width[1::2])}, "
                    f"{_f(float(a.get('pad_value', 0.0)))}}};")  # fmt: skip
            fn.call(f"{L}_pad", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), f"&{v}", note=name)
        elif k == "resize2d":
            method, cmode, rnd = resize_modes(a)  # (missing_call refused the modes it has no call for)
            v = fn.var("rs")
            U = L.upper()
            fn.line(f"{L}_resize2d_params {v} = {{{U}_{method}, {U}_{_COORD_MODES[cmode]}, "
                    f"{U}_{_ROUNDING.get(rnd, 'ROUND_PREFER_FLOOR')}}};")  # fmt: skip
            fn.call(f"{L}_resize2d", fn.desc(op.inputs[0], "spatial"), fn.desc(op.outputs[0], "spatial"), f"&{v}", note=name)
        elif k in ("reshape", "squeeze", "expand_dims", "flatten"):
            fn.call(f"{L}_reshape", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), note=f"{name} ({k})")
        elif k == "permute_dims":
            rank = len(self.g.tensors[op.inputs[0]].shape)
            axes = a.get("axes") or tuple(reversed(range(rank)))
            sym = self.p.weights.add("axes", name, "int32_t", np.array(axes, np.int32))
            fn.call(f"{L}_permute_dims", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), sym, note=name)
        elif k == "concat":
            v = fn.var("cat")
            ins = [self.operand(t, "model") for t in op.inputs]
            fn.line(f"const {L}_tensor *{v}[{len(ins)}] = {{{', '.join(ins)}}};")
            fn.call(f"{L}_concat", v, str(len(ins)), fn.desc(op.outputs[0], "model"), str(int(a.get("axis", 0))), note=name)
        elif k == "split":
            v = fn.var("parts")
            outs = [fn.desc(t, "model") for t in op.outputs]
            fn.line(f"const {L}_tensor *{v}[{len(outs)}] = {{{', '.join(outs)}}};")
            fn.call(f"{L}_split", fn.desc(op.inputs[0], "model"), v, str(len(outs)), str(int(a.get("axis", 0))), note=name)
        elif k == "strided_slice":
            self._slice(op)
        elif k in ("quantize", "dequantize", "astype"):
            fn.call(f"{L}_convert", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), note=f"{name} ({k})")
        elif k == "topk":
            v = fn.var("topk")
            fn.line(f"{L}_topk_params {v} = {{{int(a.get('axis', -1))}, {int(bool(a.get('largest', True)))}}};")
            vals = fn.desc(op.outputs[0], "model") if len(op.outputs) > 1 else "NULL"
            idx = fn.desc(op.outputs[-1], "model")
            fn.call(f"{L}_topk", fn.desc(op.inputs[0], "model"), vals, idx, f"&{v}", note=name)
        elif k in ("sort", "argsort"):
            fn.call(f"{L}_{k}", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), str(int(a.get("axis", -1))),
                    str(int(bool(a.get("descending", False)))), note=name)  # fmt: skip
        elif k == "all_class_non_max_suppression":
            self._nms(op)
        else:
            host = self.p.soc.host
            raise Unsupported(no_kernel_call(self.g, op, fn.where) + (f"; pin it to the host ({host})" if fn.where != host else ""))

    def _integer(self, op: Op) -> None:
        """An op of the model's own integer arithmetic (``calls.integer_arithmetic``): one
        ``npk_binary_int`` / ``npk_unary_int`` call, exact on the stored integers and wrapping to the
        output's dtype as ONNX, TVM and C do (``npk_binary`` / ``npk_unary`` compute on quantized real
        values and saturate)."""
        fn, L, k = self.fn, self.fn.lib, op.kind
        U = L.upper()
        note = f"{op.name} ({k} of the model's integers: wraps)"
        out = fn.desc(op.outputs[0], "model")
        if k in BINARY:
            x, y = (self.operand(t, "model") for t in op.inputs[:2])
            fn.call(f"{L}_binary_int", x, y, out, f"{U}_{BINARY[k]}", note=note)
            return
        lo, hi = _int_bounds(op.attrs, self.g.tensors[op.inputs[0]].dtype) if k == "clip" else (0, 0)
        fn.call(f"{L}_unary_int", fn.desc(op.inputs[0], "model"), out, f"{U}_{INT_UNARY[k]}", _c_int64(lo), _c_int64(hi),
                note=note)  # fmt: skip

    def _float_const(self, tid: str) -> str:
        t = self.g.tensors[tid]
        return self.p.weights.add("c", t.name or tid, "float", np.asarray(self.g.consts[tid], np.float32).ravel())

    def _slice(self, op: Op) -> None:
        fn, L, a = self.fn, self.fn.lib, op.attrs
        vals = [a.get(f"arg{j}") for j in range(1, 5)]
        axes, begin, end, strides = (v if isinstance(v, tuple) else (v,) for v in vals)
        if len(strides) == 1 and len(axes) > 1:
            strides = strides * len(axes)
        v = fn.var("slc")
        fn.line(f"{L}_slice_params {v} = {{{len(axes)}, {_c_list(axes)}, {_c_list(begin)}, {_c_list(end)}, "
                f"{_c_list(strides)}}};")  # fmt: skip
        fn.call(f"{L}_strided_slice", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), f"&{v}", note=op.name)

    def _nms(self, op: Op) -> None:
        fn, L = self.fn, self.fn.lib
        boxes, scores = op.inputs[0], op.inputs[1]
        mx, iou, sc = (self.scalar(t) for t in op.inputs[2:5])
        v = fn.var("nms")
        n = self.g.tensors[boxes].shape[-2]
        ws = fn.workspace(f"{L}_nms_workspace_size({n})", 8 * n + 64)
        fn.line(f"{L}_nms_params {v} = {{0, {int(mx)}, {_f(iou)}, {_f(sc)}, {ws}}};")
        cnt = fn.var("count")
        fn.line(f"int64_t {cnt} = 0;")
        fn.call(f"{L}_nms", fn.desc(boxes, "model"), fn.desc(scores, "model"), fn.desc(op.outputs[0], "model"), f"&{cnt}",
                f"&{v}", note=op.name)  # fmt: skip
        if len(op.outputs) > 1:
            fn.line(f"*(int64_t *)({fn.data(op.outputs[1])}) = {cnt};")
        if self.p.fmt(op.outputs[0], fn.where).dtype == "S64":
            fn.line(f"for (int64_t r = {cnt}; r < {self.g.tensors[op.outputs[0]].shape[0]}; ++r) "
                    f"{{ int64_t *row = (int64_t *)({fn.data(op.outputs[0])}) + 3 * r; row[0] = row[1] = row[2] = -1; }}")  # fmt: skip

