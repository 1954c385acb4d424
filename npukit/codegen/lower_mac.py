"""The fused conv2d / matmul kernel of ``lower.KernelLowering`` (no tvm): ``MacLowering``.

A conv2d / matmul composite of the form ``[dequantize] root [add bias] [activation] [quantize]
[clip]`` becomes ONE fused call: integer storage on both sides takes the integer path (weights
quantized per output channel at the kernel's bit-width, int32 / int64 bias, per-channel fixed-point
multipliers computed here, at export time); float storage takes the float path.  The float scratch
of an integer tensor (``_dequantized``, ``_float_scratch``) serves the per-op path too.
"""

from __future__ import annotations

import math

import numpy as np

from ..graph import Op
from ..opset import KINDS
from ..quant.scheme import integer_weight, quantize_weight
from .kernels import bias_shift, pack_weights, quantize_bias, quantize_multipliers
from .storage import GRID, INTEGER, NPK


def _f(x: float) -> str:
    if math.isinf(x):
        return "INFINITY" if x > 0 else "-INFINITY"
    return f"{float(np.float32(x))!r}f"


class MacLowering:
    """The fused conv2d / matmul kernel of ``lower.KernelLowering`` (see the module docstring)."""

    def _fused(self, ids):
        """(root op, input tensor, weight tensor, bias tensor, act (lo, hi), output tensor) of a
        fused conv / matmul kernel, or None."""
        ops = [self.g.ops[i] for i in ids]
        roots = [op for op in ops if KINDS[op.kind].mac]
        if len(roots) != 1 or roots[0].kind not in ("conv2d", "matmul") or len(roots[0].inputs) < 2:
            return None
        root = roots[0]
        k = ops.index(root)
        x = root.inputs[0]
        if k == 1:
            if ops[0].kind != "dequantize" or ops[0].outputs[0] != x:
                return None
            x = ops[0].inputs[0]
        elif k != 0:
            return None
        w = root.inputs[1]
        wt = self.g.tensors[w]
        if wt.kind != "const":
            wp = wt.producer
            if wp is None or self.g.ops[wp].kind != "dequantize" or self.g.tensors[self.g.ops[wp].inputs[0]].kind != "const":
                return None
        cur = root.outputs[0]
        bias, lo, hi = None, -math.inf, math.inf
        out_q = None
        for op in ops[k + 1 :]:
            if op.inputs[0] != cur and not (op.kind == "add" and len(op.inputs) == 2 and op.inputs[1] == cur):
                return None
            other = [t for t in op.inputs if t != cur]
            if op.kind == "add" and bias is None and out_q is None and lo == -math.inf and len(other) == 1 \
                    and self.g.tensors[other[0]].kind == "const" and self._is_bias(root, other[0]):  # fmt: skip
                bias = other[0]
            elif op.kind == "relu":
                lo = max(lo, 0.0)
            elif op.kind == "clip" and out_q is None:
                lo, hi = max(lo, float(op.attrs.get("min", -math.inf))), min(hi, float(op.attrs.get("max", math.inf)))
            elif op.kind == "quantize" and out_q is None:
                out_q = op
            elif op.kind == "clip" and out_q is not None:  # a clamp on the quantized values
                s, z = self.p.storage.host(out_q.outputs[0]).scale, self.p.storage.host(out_q.outputs[0]).zero
                lo = max(lo, (float(op.attrs.get("min", -math.inf)) - z) * s)
                hi = min(hi, (float(op.attrs.get("max", math.inf)) - z) * s)
            else:
                return None
            cur = op.outputs[0]
        return root, x, w, bias, (lo, hi), cur

    def _is_bias(self, root: Op, tid: str) -> bool:
        c = self.g.tensors[tid]
        n = self.g.tensors[root.outputs[0]]
        oc = self._out_channels(root)
        return c.size == oc and (len(c.shape) <= 1 or sum(d > 1 for d in c.shape) <= 1) and len(c.shape) <= len(n.shape)

    def _out_channels(self, root: Op) -> int:
        if root.kind == "conv2d":
            return self.p.fmt(root.outputs[0], self.fn.where).shape[1]
        return self.g.tensors[root.outputs[0]].shape[-1]

    def _weights_real(self, root: Op, w: str):
        """(float weights, model integer weights and their per-channel scales or None)."""
        g = self.g
        t = g.tensors[w]
        if t.kind == "const":
            return np.asarray(g.consts[w], np.float32), None
        dq = g.ops[t.producer]
        q = np.asarray(g.consts[dq.inputs[0]])
        s = np.asarray(g.consts[dq.inputs[1]], np.float64)
        z = np.asarray(g.consts[dq.inputs[2]], np.int64) if len(dq.inputs) > 2 else np.zeros(1, np.int64)
        axis = int(dq.attrs.get("axis", 0) or 0)
        shape = [1] * q.ndim
        if s.size > 1:
            shape[axis] = s.size
        real = ((q.astype(np.int64) - z.reshape(shape if z.size > 1 else [1] * q.ndim)) * s.reshape(shape)).astype(np.float32)
        return real, (q, s, z, axis)

    def _mac(self, root: Op, x: str, w: str, bias, act, out: str) -> None:
        fn, p, g = self.fn, self.p, self.g
        fn.op = root.op_id
        bits = p.bits[root.op_id]
        view = "spatial" if root.kind == "conv2d" else "model"
        xin = fn.desc(x, view)
        yout = fn.desc(out, view)
        fin, fout = fn._copy(x).fmt, fn._copy(out).fmt
        integer = fin.dtype in INTEGER and fout.dtype in INTEGER and fin.dtype not in ("S32", "S64")
        real, model_q = self._weights_real(root, w)
        label = g.ops[root.op_id].name
        if not integer and fin.dtype in INTEGER:  # an integer input of a float kernel: dequantized first
            xin = self._dequantized(x, view, label)
            fin = fn._copy(x).fmt
            fin = type(fin)("F32", fin.model_layout or "ROW", 1, 1.0, 0, fin.shape, fin.model_shape, fin.model_layout)
        qout = None
        if not integer and fout.dtype in INTEGER:  # an integer output of a float kernel: its float result
            qout, yout = yout, self._float_scratch(out, view)  # quantized into it after the call
        if root.kind == "conv2d":
            kl = str(root.attrs.get("kernel_layout", "OIHW"))
            perm = [kl.index(c) for c in "OHWI"]
            axis_o = kl.index("O")
        else:
            perm = None  # matmul weights stay [K, N]
            axis_o = real.ndim - 1
        wdt = NPK.get(bits, "S8") if integer else ("F16" if fin.dtype == "F16" else "F32")
        if integer and wdt not in GRID:
            wdt = "S8"
        if integer:
            ip = self.integer_params(root, real, model_q, wdt, axis_o, fin.scale, fout.scale, bias, wide=fin.dtype == "S16")
            wdt, qo = ip["wdt"], (np.transpose(ip["q"], perm) if perm else ip["q"])
            if wdt in ("S4", "S2"):
                wsym = p.weights.add("w", label, "uint8_t", np.frombuffer(pack_weights(qo, GRID[wdt]), np.uint8),
                                     f"{label}: {wdt} weights, packed")  # fmt: skip
            else:
                wsym = p.weights.add("w", label, {"S8": "int8_t", "S16": "int16_t"}[wdt], qo, f"{label}: {wdt} weights")
            msym = p.weights.add("mult", label, "int32_t", ip["mult"], f"{label}: requantization multipliers")
            ssym = p.weights.add("shift", label, "int32_t", ip["shift"], f"{label}: requantization shifts")
            bsym, bsh = "NULL", ip["bias_shift"]
            if ip["bias"] is not None:
                note = f"{label}: bias at in_scale*w_scale" + (f"/2^{bsh}" if bsh else "")
                bsym = p.weights.add("bias", label, str(ip["bias"].dtype) + "_t", ip["bias"], note)
        else:  # the simulation's weights: a model's float weights rounded at the kernel's bit-width
            wr = quantize_weight(real, bits if model_q is None else "fp32", axis_o)
            if fin.dtype == "F16":
                wr = quantize_weight(wr, "fp16", axis_o)
            qo = np.transpose(wr, perm) if perm else wr
            if wdt == "F16":
                wsym = p.weights.add("w", label, "uint16_t", np.asarray(qo, np.float16).view(np.uint16), f"{label}: F16 weights")
            else:
                wsym = p.weights.add("w", label, "float", np.asarray(qo, np.float32), f"{label}: {wdt} weights")
            msym = ssym = "NULL"
            bsh = 0
            bsym = "NULL" if bias is None else p.weights.add("bias", label, "float", np.asarray(g.consts[bias], np.float32).ravel())
        lo, hi = act
        L = fn.lib
        if root.kind == "conv2d":
            a = root.attrs
            k = self.g.tensors[root.inputs[1]].shape
            kl = str(a.get("kernel_layout", "OIHW"))
            kh, kw = k[kl.index("H")], k[kl.index("W")]
            st, dl, pad = a.get("strides", (1, 1)), a.get("dilation", (1, 1)), a.get("padding", (0, 0, 0, 0))
            pad = tuple(pad) if len(pad) == 4 else (pad[0], pad[1], pad[0], pad[1])
            v = fn.var("conv")
            fn.line(f"{L}_conv2d_params {v} = {{{st[0]}, {st[1]}, {dl[0]}, {dl[1]}, {pad[0]}, {pad[1]}, {pad[2]}, {pad[3]}, "
                    f"{int(a.get('groups', 1))}, {kh}, {kw}, {L.upper()}_{wdt}, {wsym}, {bsym}, {msym}, {ssym}, "
                    f"{_f(lo)}, {_f(hi)}, {bsh}}};")  # fmt: skip
            fn.call(f"{L}_conv2d", xin, yout, f"&{v}", note=f"{label} (conv2d{', fused ' + ', '.join(self._fusion_desc(root, bias, act)) if bias or act != (-math.inf, math.inf) else ''})")
        else:
            bt = fn.const_desc(wsym, wdt if integer else ("F16" if wdt == "F16" else "F32"), g.tensors[root.inputs[1]].shape)
            v = fn.var("mm")
            fn.line(f"{L}_matmul_params {v} = {{1, 0, {bsym}, {msym}, {ssym}, {_f(lo)}, {_f(hi)}, {bsh}}};")
            fn.call(f"{L}_matmul", xin, bt, yout, f"&{v}", note=f"{label} (matmul, constant weights)")
        if qout is not None:
            fn.call(f"{L}_quantize", yout, qout, note=f"{label}: its float result to the integer output")

    def integer_params(self, root: Op, real, model_q, wdt: str, axis_o: int, in_scale: float, out_scale: float,
                       bias, wide: bool = False) -> dict:
        """The export-time parameters of an integer conv / matmul: ``q`` (integer weights in the
        model's weight layout), ``wdt`` (their storage type), per-output-channel ``scales``,
        requantization ``mult`` / ``shift`` (of in_scale * w_scale / out_scale) and the integer
        ``bias`` (int32; int64 with ``wide`` or S16 weights) or None."""
        nb = GRID[wdt]
        if model_q is not None and nb >= 8 and model_q[0].dtype == np.int8 and not np.any(model_q[2]):
            q, s = model_q[0].astype(np.int64), model_q[1]
            n = q.shape[model_q[3]]
            scales = np.broadcast_to(s.ravel(), (n,)).astype(np.float64) if s.size > 1 else np.full(n, float(s.ravel()[0]))
            wdt = "S8"
        else:
            qf, sc = integer_weight(real, {16: "int16", 8: "int8", 4: "int4", 2: "int2"}[nb], axis_o)
            q, scales = qf.astype(np.int64), sc.astype(np.float64).ravel()
        eff = in_scale * scales
        mult, shift = quantize_multipliers(eff / out_scale)
        bq, bsh = None, 0
        if bias is not None:
            b = np.asarray(self.g.consts[bias], np.float64).ravel()
            wide = wide or wdt == "S16"
            # at 4 / 2 bits a step of in_scale * w_scale is a large part of an output step (up to
            # about one at int2): the bias gets a finer grid (the kernel's bias_shift), so that it
            # stays the fp32 bias the simulation adds; 8-bit kernels keep TFLite's grid (CMSIS-NN's)
            if wdt in ("S4", "S2") and not wide:
                bsh = bias_shift(b, in_scale, scales)
            bq = quantize_bias(b, in_scale, scales, wide=wide, shift=bsh)
        return {"q": q, "wdt": wdt, "scales": scales, "mult": mult, "shift": shift, "bias": bq, "bias_shift": bsh}

    def _dequantized(self, tid: str, view: str, label: str) -> str:
        """A float copy of an integer tensor (kernel scratch, the model's axis order), made by an
        explicit dequantize call; its descriptor."""
        fn = self.fn
        src = fn.desc(tid, view)
        dst = self._float_scratch(tid, view)
        op, fn.op = fn.op, None
        fn.call(f"{fn.lib}_dequantize", src, dst, note=f"[op {op}] {label}: integer input of a float kernel")
        fn.op = op
        return dst

    def _float_scratch(self, tid: str, view: str) -> str:
        """A float buffer in the shape of integer tensor ``tid`` (kernel scratch): its dequantized copy,
        or a float kernel's result that a quantize call then stores into ``tid``; its descriptor."""
        fn = self.fn
        f = fn._copy(tid).fmt
        ff = type(f)("F32", f.model_layout or "ROW", 1, 1.0, 0, f.shape, f.model_shape, f.model_layout)
        c = self.p.add_copy((tid, fn.where, "f"), ff)
        self.p.use(c)
        return fn._decl(c, view)

    def _fusion_desc(self, root, bias, act) -> list[str]:
        out = ["bias"] if bias else []
        lo, hi = act
        if (lo, hi) != (-math.inf, math.inf):
            out.append(f"clamp [{lo:g}, {hi:g}]")
        return out
