"""Lowering a processor's kernels to Arm CMSIS-NN's public API (no tvm): a processor whose profile
says ``kernel_api = "cmsis-nn"``.

A kernel CMSIS-NN can express becomes one call with CMSIS-NN's public signature, its parameter
structs (``cmsis_nn_conv_params``, ``cmsis_nn_dims``, ``cmsis_nn_per_channel_quant_params``, ...)
declared in the wrapper, so Arm's library links in place of npukit's reference ``npk_cmsis_nn.c``:

* a fused int8 conv2d (``[dequantize] conv2d [add bias] [relu / clip] [quantize] [clip]``, NHWC,
  groups 1) -> ``arm_convolve_wrapper_s8``; a depthwise one (groups = input channels, a channel
  multiplier) -> ``arm_depthwise_conv_wrapper_s8``; weights per output channel, symmetric, with
  per-channel multipliers and shifts and an int32 bias computed here, at export time;
* a fused int8 matmul with constant [K, N] weights -> ``arm_fully_connected_s8`` when the weights
  have one scale (a per-tensor quantized fully connected layer), else the same product as a 1x1
  ``arm_convolve_wrapper_s8`` (per-channel requantization, which the fully connected call lacks:
  npukit's int8 of a float model, and TFLite's converter, which quantizes FULLY_CONNECTED weights
  per channel, as in the bundled ``digits_cnn_int8.tflite``);
* max / average pooling with the same quantization in and out -> ``arm_max_pool_s8`` /
  ``arm_avgpool_s8``;
* softmax over the last axis into int8 with scale 1/256 and zero point -128 -> ``arm_softmax_s8``;
* add / multiply of two quantized int8 activations of one shape and layout (a float model's at int8,
  a QDQ / TFLite add) -> ``arm_elementwise_add_s8`` / ``arm_elementwise_mul_s8``, which saturate to
  the output's grid.  The model's own int8 arithmetic (an Add of int8 tensors with no quantization)
  wraps instead, as ONNX and TVM compute it: it falls back to npk's ``npk_binary_int``.

A kernel's scratch buffer (``cmsis_nn_context``) comes from the arena: npukit reserves what the
reference ``*_get_buffer_size`` returns (the size Arm's Cortex-M DSP build asks for) and the
generated code checks, before the call, that the linked library asks for no more (else the
wrapper returns ``ARM_CMSIS_NN_ARG_ERROR``).  Any other kernel (other bit-widths, layouts, a
broadcast, a rescaling pool) falls back to npukit's reference calls under the processor's
``kernel_library`` prefix (``lower.KernelLowering``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..graph import Op
from .calls import integer_arithmetic
from .kernels import cmsis_add_params, cmsis_mul_params, cmsis_softmax_params
from .lower import KernelLowering

S8_MIN, S8_MAX = -128, 127


def conv_buffer_size(in_channels: int, kh: int, kw: int) -> int:
    """``arm_convolve_wrapper_s8_get_buffer_size`` / ``arm_depthwise_conv_wrapper_s8_get_buffer_size``
    of npukit's reference (two int16 im2col columns, as Arm's DSP build asks): bytes."""
    return 2 * 2 * ((in_channels * kh * kw + 3) & ~3)


def avgpool_buffer_size(channels: int) -> int:
    """``arm_avgpool_s8_get_buffer_size``: one int32 sum per channel."""
    return 4 * channels


def _round_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def act_bounds(lo: float, hi: float, scale: float, zero: int) -> tuple[int, int]:
    """The int8 clamp of a real activation range [lo, hi] on an output grid, computed as npukit's
    reference kernels do (float32 quotient, rounded half away from zero, saturated)."""
    qlo, qhi = S8_MIN, S8_MAX
    if lo > -math.inf:
        qlo = max(qlo, _round_away(float(np.float32(lo) / np.float32(scale))) + zero)
    if hi < math.inf:
        qhi = min(qhi, _round_away(float(np.float32(hi) / np.float32(scale))) + zero)
    return qlo, qhi


def _dims(n, h, w, c) -> str:
    return f"{{.n = {int(n)}, .h = {int(h)}, .w = {int(w)}, .c = {int(c)}}}"


def _tile(w, h) -> str:
    return f"{{.w = {int(w)}, .h = {int(h)}}}"


class CmsisLowering(KernelLowering):
    """Kernels of a ``kernel_api = "cmsis-nn"`` processor inside one wrapper ``fn``."""

    def kernel(self, ids: tuple[int, ...]) -> None:
        fused = self._fused(ids)
        if fused is not None and self._mac_cmsis(*fused):
            return
        if fused is None and len(ids) == 1 and self._op_cmsis(self.g.ops[ids[0]]):
            return
        island = self._island(ids) if fused is None else None
        if island is not None and self._op_cmsis(island):
            return
        super().kernel(ids)

    def _island(self, ids: tuple[int, ...]) -> Op | None:
        """The middle op of a ``dequantize -> op -> quantize`` kernel (an int8 TFLite or QDQ softmax,
        pool ...), reading the kernel's int8 input and writing its int8 output in place of the
        dequantize and the quantize: the form a CMSIS-NN int8 call takes.  None for any other kernel."""
        if len(ids) != 3:
            return None
        dq, op, q = (self.g.ops[i] for i in ids)
        if (dq.kind != "dequantize" or q.kind != "quantize" or not op.inputs or len(op.outputs) != 1
                or op.inputs[0] != dq.outputs[0] or q.inputs[0] != op.outputs[0]):  # fmt: skip
            return None
        return dataclasses.replace(op, inputs=(dq.inputs[0], *op.inputs[1:]), outputs=q.outputs)

    # -- helpers -------------------------------------------------------------------------------
    def _s8(self, tid: str, spatial: bool) -> object | None:
        """The tensor's copy in this function when it is int8 in CMSIS-NN's layout (NHWC for a
        rank-4 tensor, row-major otherwise), else None."""
        c = self.fn._copy(tid)
        f = c.fmt
        if f.dtype != "S8" or c.key[2] != "":
            return None
        if f.spatial and f.layout != "NHWC":
            return None
        if spatial and not f.spatial:
            return None
        return c

    def _ptr(self, tid: str, const: bool) -> str:
        return f"({'const ' if const else ''}int8_t *)({self.fn.data(tid)})"

    def _nhwc(self, c) -> tuple[int, int, int, int]:
        n, ch, h, w = c.fmt.shape
        return n, h, w, ch

    def _context(self, size: int, check: str) -> str:
        """A cmsis_nn_context over ``size`` bytes of the arena, checked against ``check`` (a
        *_get_buffer_size call) before the kernel runs."""
        fn = self.fn
        v = fn.var("ctx")
        buf = fn.workspace(check, size) if size > 0 else "NULL"
        fn.line(f"cmsis_nn_context {v} = {{.buf = {buf}, .size = {size}}};")
        fn.line(f"if ({check} > {v}.size) return ARM_CMSIS_NN_ARG_ERROR;  /* the linked library wants more scratch */")
        return v

    # -- conv2d / depthwise / fully connected ----------------------------------------------------
    def _mac_cmsis(self, root: Op, x: str, w: str, bias, act, out: str) -> bool:
        p, g, fn = self.p, self.g, self.fn
        if p.bits[root.op_id] != "int8":
            return False
        conv = root.kind == "conv2d"
        cin, cout = self._s8(x, conv), self._s8(out, conv)
        if cin is None or cout is None:
            return False
        real, model_q = self._weights_real(root, w)
        if conv:
            a = root.attrs
            kl = str(a.get("kernel_layout", "OIHW"))
            groups = int(a.get("groups", 1))
            n, h, wd, c = self._nhwc(cin)
            kshape = g.tensors[root.inputs[1]].shape
            depthwise = groups > 1 and groups == c and kshape[kl.index("I")] == 1
            if groups != 1 and not depthwise:
                return False
            axis_o = kl.index("O")
        else:
            if len(g.tensors[root.inputs[1]].shape) != 2 or len(cin.fmt.model_shape) < 2 or cin.fmt.spatial \
                    or cout.fmt.spatial:  # fmt: skip
                return False
            axis_o = 1
        fin, fout = cin.fmt, cout.fmt
        ip = self.integer_params(root, real, model_q, "S8", axis_o, fin.scale, fout.scale, bias)
        if ip["wdt"] != "S8" or np.any(ip["shift"] > 0):  # an effective scale >= 1 could overflow CMSIS-NN's shift
            return False
        label = g.ops[root.op_id].name
        fn.op = root.op_id
        xs, ys = self._ptr(x, True), self._ptr(out, False)  # after the checks: a data() use is a real use
        lo, hi = act_bounds(*act, fout.scale, fout.zero)
        msym = p.weights.add("mult", label, "int32_t", ip["mult"], f"{label}: requantization multipliers")
        ssym = p.weights.add("shift", label, "int32_t", ip["shift"], f"{label}: requantization shifts")
        bsym = "NULL" if ip["bias"] is None else \
            p.weights.add("bias", label, "int32_t", ip["bias"], f"{label}: int32 bias at in_scale*w_scale")  # fmt: skip
        q = ip["q"]
        off_in, off_out = -int(fin.zero), int(fout.zero)
        act_s = f"{{.min = {lo}, .max = {hi}}}"
        if conv:
            kh, kw = kshape[kl.index("H")], kshape[kl.index("W")]
            on, oc, oh, ow = cout.fmt.shape
            st, dl, pad = a.get("strides", (1, 1)), a.get("dilation", (1, 1)), a.get("padding", (0, 0, 0, 0))
            order = (
                "IHWO" if depthwise else "OHWI"
            )  # CMSIS-NN: depthwise [1, KH, KW, C_out], conv [C_out, KH, KW, C_in]
            wsym = p.weights.add("w", label, "int8_t", np.transpose(q, [kl.index(ch) for ch in order]),
                                 f"{label}: int8 weights {order}")  # fmt: skip
            fdims = _dims(1, kh, kw, oc) if depthwise else _dims(oc, kh, kw, kshape[kl.index("I")])
            geo = (f".stride = {_tile(st[1], st[0])}, .padding = {_tile(pad[1], pad[0])}, "
                   f".dilation = {_tile(dl[1], dl[0])}, .activation = {act_s}")  # fmt: skip
            fname = "arm_depthwise_conv_wrapper_s8" if depthwise else "arm_convolve_wrapper_s8"
            ptype = "cmsis_nn_dw_conv_params" if depthwise else "cmsis_nn_conv_params"
            mult = f".ch_mult = {oc // c}, " if depthwise else ""
            odims = _dims(on, oh, ow, oc)
            idims = _dims(n, h, wd, c)
            size = conv_buffer_size(c, kh, kw)
            note = f"{label} ({'depthwise ' if depthwise else ''}conv2d, int8, per-channel requantization)"
        else:
            k, nout = q.shape
            rows = int(np.prod(fin.model_shape[:-1]))
            idims, odims = _dims(rows, 1, 1, k), _dims(rows, 1, 1, nout)
            per_tensor = (
                model_q is not None and np.all(ip["mult"] == ip["mult"][0]) and np.all(ip["shift"] == ip["shift"][0])
            )
            wsym = p.weights.add("w", label, "int8_t", q.T, f"{label}: int8 weights [C_out][K]")
            if per_tensor:
                fname, ptype, mult, geo = "arm_fully_connected_s8", "cmsis_nn_fc_params", "", f".activation = {act_s}"
                fdims = _dims(k, 1, 1, nout)  # n = accumulation depth, c = output channels
                size = 0
                note = f"{label} (fully connected, int8, per-tensor requantization)"
            else:  # per-channel weights: the product as a 1x1 convolution, which requantizes per channel
                fname, ptype, mult = "arm_convolve_wrapper_s8", "cmsis_nn_conv_params", ""
                geo = (f".stride = {_tile(1, 1)}, .padding = {_tile(0, 0)}, .dilation = {_tile(1, 1)}, "
                       f".activation = {act_s}")  # fmt: skip
                fdims = _dims(nout, 1, 1, k)
                size = conv_buffer_size(k, 1, 1)
                note = f"{label} (matmul with constant weights as a 1x1 convolution, int8, per-channel requantization)"
            oc = nout
        v = fn.var("params")
        offsets = f".input_offset = {off_in}, " + (".filter_offset = 0, " if ptype == "cmsis_nn_fc_params" else "") + \
            f".output_offset = {off_out}"  # fmt: skip
        fn.line(f"const {ptype} {v} = {{{offsets}, {mult}{geo}}};")
        qv = fn.var("quant")
        if ptype == "cmsis_nn_fc_params":
            fn.line(f"const cmsis_nn_per_tensor_quant_params {qv} = {{.multiplier = {int(ip['mult'][0])}, "
                    f".shift = {int(ip['shift'][0])}}};")  # fmt: skip
        else:
            fn.line(f"const cmsis_nn_per_channel_quant_params {qv} = {{.multiplier = (int32_t *){msym}, "
                    f".shift = (int32_t *){ssym}}};")  # fmt: skip
        dv = [fn.var(r) for r in ("in_dims", "filter_dims", "bias_dims", "out_dims")]
        for var, val in zip(dv, (idims, fdims, _dims(1, 1, 1, oc), odims)):
            fn.line(f"const cmsis_nn_dims {var} = {val};")
        if ptype == "cmsis_nn_fc_params":
            check = f"arm_fully_connected_s8_get_buffer_size(&{dv[1]})"
        else:
            check = f"{fname}_get_buffer_size(&{v}, &{dv[0]}, &{dv[1]}, &{dv[3]})"
        ctx = self._context(size, check)
        fn.call(fname, f"&{ctx}", f"&{v}", f"&{qv}", f"&{dv[0]}", xs, f"&{dv[1]}", wsym, f"&{dv[2]}", bsym,
                f"&{dv[3]}", ys, note=note)  # fmt: skip
        return True

    # -- single ops ----------------------------------------------------------------------------
    def _op_cmsis(self, op: Op) -> bool:
        if self.p.bits[op.op_id] != "int8" or len(op.outputs) != 1:
            return False
        if op.kind in ("max_pool2d", "avg_pool2d"):
            return self._pool(op)
        if op.kind == "softmax":
            return self._softmax(op)
        if op.kind in ("add", "multiply"):
            return self._elementwise(op)
        return False

    def _pool(self, op: Op) -> bool:
        fn, a = self.fn, op.attrs
        ci, co = self._s8(op.inputs[0], True), self._s8(op.outputs[0], True)
        if ci is None or co is None or (ci.fmt.scale, ci.fmt.zero) != (co.fmt.scale, co.fmt.zero):
            return False
        dl, pad = a.get("dilation", (1, 1)), a.get("padding", (0, 0, 0, 0))
        avg = op.kind == "avg_pool2d"
        if tuple(dl) != (1, 1) or (avg and any(pad) and a.get("count_include_pad")):
            return False
        fn.op = op.op_id
        xs, ys = self._ptr(op.inputs[0], True), self._ptr(op.outputs[0], False)
        n, h, w, c = self._nhwc(ci)
        on, oh, ow, oc = self._nhwc(co)
        st, ps = a.get("strides", (1, 1)), a["pool_size"]
        pad = tuple(pad) if len(pad) == 4 else (pad[0], pad[1], pad[0], pad[1])
        v = fn.var("pool_params")
        fn.line(f"const cmsis_nn_pool_params {v} = {{.stride = {_tile(st[1], st[0])}, .padding = {_tile(pad[1], pad[0])}, "
                f".activation = {{.min = {S8_MIN}, .max = {S8_MAX}}}}};")  # fmt: skip
        dv = [fn.var(r) for r in ("in_dims", "filter_dims", "out_dims")]
        for var, val in zip(dv, (_dims(n, h, w, c), _dims(1, ps[0], ps[1], 1), _dims(on, oh, ow, oc))):
            fn.line(f"const cmsis_nn_dims {var} = {val};")
        if avg:
            ctx = self._context(avgpool_buffer_size(c), f"arm_avgpool_s8_get_buffer_size({ow}, {c})")
        else:
            ctx = fn.var("ctx")
            fn.line(f"cmsis_nn_context {ctx} = {{.buf = NULL, .size = 0}};")
        fname = "arm_avgpool_s8" if avg else "arm_max_pool_s8"
        fn.call(
            fname,
            f"&{ctx}",
            f"&{v}",
            f"&{dv[0]}",
            xs,
            f"&{dv[1]}",
            f"&{dv[2]}",
            ys,
            note=f"{op.name} ({op.kind}, int8)",
        )
        return True

    def _softmax(self, op: Op) -> bool:
        fn = self.fn
        rank = len(self.g.tensors[op.inputs[0]].shape)
        axis = int(op.attrs.get("axis", -1))
        ci, co = self._s8(op.inputs[0], False), self._s8(op.outputs[0], False)
        if ci is None or co is None or axis not in (-1, rank - 1) or ci.fmt.spatial or co.fmt.spatial:
            return False
        if np.float32(co.fmt.scale) != np.float32(1.0 / 256) or co.fmt.zero != -128:
            return False
        try:
            mult, shift, diff_min = cmsis_softmax_params(ci.fmt.scale)
        except ValueError:
            return False
        fn.op = op.op_id
        shape = ci.fmt.model_shape
        row = int(shape[-1])
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        fn.body.append(f"/* [op {op.op_id}] {_c(op.name)} (softmax, int8 out at scale 1/256, zero point -128) */\n    "
                       f"arm_softmax_s8({self._ptr(op.inputs[0], True)}, {rows}, {row}, {mult}, {shift}, {diff_min}, "
                       f"{self._ptr(op.outputs[0], False)});")  # fmt: skip
        return True

    def _elementwise(self, op: Op) -> bool:
        fn, g = self.fn, self.g
        if len(op.inputs) != 2 or any(g.tensors[t].kind == "const" for t in op.inputs):
            return False
        if integer_arithmetic(g, g.ops[op.op_id]):  # (an island's op is the float op between its dequantize
            # and quantize): the model's own int8 add / multiply wraps; CMSIS-NN's requantizing calls
            # saturate, so it lowers to npk_binary_int (``KernelLowering``)
            return False
        cs = [self._s8(t, False) for t in (*op.inputs, op.outputs[0])]
        if any(c is None for c in cs):
            return False
        fa, fb, fo = (c.fmt for c in cs)
        if not (fa.model_shape == fb.model_shape == fo.model_shape and fa.layout == fb.layout == fo.layout):
            return False
        fn.op = op.op_id
        xa, xb, ys = self._ptr(op.inputs[0], True), self._ptr(op.inputs[1], True), self._ptr(op.outputs[0], False)
        n = int(np.prod(fo.model_shape))
        if op.kind == "add":
            prm = cmsis_add_params(fa.scale, fb.scale, fo.scale)
            fn.call("arm_elementwise_add_s8", xa, xb, str(-fa.zero), str(prm["input_1_mult"]), str(prm["input_1_shift"]),
                    str(-fb.zero), str(prm["input_2_mult"]), str(prm["input_2_shift"]), str(prm["left_shift"]), ys,
                    str(fo.zero), str(prm["out_mult"]), str(prm["out_shift"]), str(S8_MIN), str(S8_MAX), str(n),
                    note=f"{op.name} (add, int8)")  # fmt: skip
        else:
            m, s = cmsis_mul_params(fa.scale, fb.scale, fo.scale)
            fn.call("arm_elementwise_mul_s8", xa, xb, str(-fa.zero), str(-fb.zero), ys, str(fo.zero), str(m), str(s),
                    str(S8_MIN), str(S8_MAX), str(n), note=f"{op.name} (multiply, int8)")  # fmt: skip
        return True


def _c(text: str) -> str:
    from .names import comment  # noqa: PLC0415

    return comment(text)
