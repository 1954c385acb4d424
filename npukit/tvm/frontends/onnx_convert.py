"""ONNX ops npukit converts itself, where TVM's ONNX converter writes an opaque ``call_tir`` kernel
(which no processor's rules can judge, no cost formula can count and no user recognises as their
op) or a separate op the model does not hold: each becomes the Relax op it is.  ``convert`` returns
the converted expression, or attributes for TVM's own converter, or None (TVM's conversion as it
is) for what these cannot take (computed operands, unknown shapes)."""

from __future__ import annotations

from ...errors import UnsupportedOpError
from .. import load as _load_tvm
from . import resize_scales


def convert(relax, op_name: str, inputs, attrs, opset, where: str = ""):
    """(expression or None, attributes for TVM's converter) of one ONNX node; ``where`` names it in
    an error (``<file>: node '<name>' (<op>)``)."""
    try:
        if op_name == "Conv":
            return None, _conv_same(inputs, attrs)
        if op_name == "Resize":
            by_scale = _resize_by_scales(relax, inputs, attrs, opset)
            return (by_scale, attrs) if by_scale is not None else (None, _resize_inputs(inputs, attrs, opset))
        f = _OWN.get(op_name)
        return (f(relax, inputs, attrs, opset) if f is not None else None), attrs
    except resize_scales.Unmappable as e:
        why = str(e)
    # raised outside the handler: a context would keep the frames (and TVM's BlockBuilder) alive past
    # the import, whose release TVM logs ("BlockBuilder destroyed with remaining blocks!")
    raise UnsupportedOpError(f"{where}: {why}")


def _text(v, default: str) -> str:
    v = default if v is None else v
    return v.decode() if isinstance(v, bytes) else str(v)


def _resize_by_scales(relax, inputs, attrs, opset):
    """A Resize of a 4-D NCHW tensor by constant scales whose mapping TVM's ``resize2d`` gets wrong
    (``resize_scales``): the ``take`` ops that compute it as ONNX Runtime does; None (the usual
    conversion) for every other Resize.  Resize-10 samples asymmetric coordinates, rounding down
    where an axis enlarges and up where it shrinks."""
    import numpy as np  # noqa: PLC0415

    tvm = _load_tvm()
    shape = _static_shape(inputs[0])
    if shape is None or len(shape) != 4 or attrs.get("axes") is not None:
        return None
    if opset < 11:
        scales = _const_array(tvm, inputs[1]) if len(inputs) > 1 else None
    else:
        sizes = inputs[3] if len(inputs) > 3 else None
        scales = _const_array(tvm, inputs[2]) if len(inputs) > 2 and sizes is None else None
    if scales is None:
        return None
    scales = np.asarray(scales, np.float32).ravel()
    if scales.size != 4 or scales[0] != 1 or scales[1] != 1 or (scales <= 0).any():
        return None
    method = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}.get(_text(attrs.get("mode"), "nearest"))
    if method is None:
        return None
    if opset < 11:
        mode, rounding = "asymmetric", ["floor" if k >= 1 else "ceil" for k in scales[2:]]
    else:
        mode = _text(attrs.get("coordinate_transformation_mode"), "half_pixel")
        rounding = _text(attrs.get("nearest_mode"), "round_prefer_floor")
    out = [int(np.float32(d) * k) for d, k in zip(shape[2:], scales[2:], strict=True)]  # ONNX Runtime's sizes
    takes = resize_scales.plan(shape, out, scales[2:], method, mode, rounding)
    return None if takes is None else resize_scales.emit(relax, inputs[0], takes)


def _const_array(tvm, b):
    """The numpy value of a constant operand, None when it is computed."""
    if b is None or not isinstance(b, tvm.ir.GenericConst):
        return None
    data = getattr(b, "data", None)
    value = data if data is not None and hasattr(data, "numpy") else getattr(b, "value", None)
    return value.numpy() if hasattr(value, "numpy") else None


def _resize_inputs(inputs, attrs, opset):
    """TVM's ``Resize`` converter reads the operands of Resize-11 and later (x, roi, scales, sizes):

    - an empty ``scales`` tensor beside ``sizes`` (Resize-11 asks for an empty tensor there, later
      opsets for an empty name; torch's exporter writes the tensor at every opset) is no scales: TVM
      refused it ("Only one of scales and sizes can be provided");
    - Resize-10 is (x, scales), with no roi, and samples as ONNX Runtime does for it: asymmetric
      coordinates, the nearest pixel below when enlarging (above when shrinking).  TVM read its
      scales as the roi and found neither scales nor sizes.  A Resize-10 that enlarges one axis and
      shrinks another is left to TVM's converter.

    The attributes TVM's converter reads; ``inputs`` is changed in place."""
    import numpy as np  # noqa: PLC0415

    tvm = _load_tvm()
    if opset < 11:
        scales = _const_array(tvm, inputs[1]) if len(inputs) > 1 else None
        if scales is None or not ((scales >= 1).all() or (scales <= 1).all()):
            return attrs
        inputs.insert(1, None)
        return {**attrs, "coordinate_transformation_mode": b"asymmetric",
                "nearest_mode": b"floor" if (scales >= 1).all() else b"ceil"}  # fmt: skip
    scales = _const_array(tvm, inputs[2]) if len(inputs) > 3 and inputs[3] is not None else None
    if scales is not None and np.size(scales) == 0:
        inputs[2] = None
    return attrs


def _upsample(relax, inputs, attrs, opset):
    """ONNX ``Upsample`` of a 4-D NCHW tensor by constant scales (an input from Upsample-9, an
    attribute in Upsample-7) as one ``resize2d`` sampled as ONNX Runtime does: asymmetric
    coordinates and, for ``nearest``, the pixel below.  TVM's converter read the scales only from
    the attribute (Upsample-9 failed: "object of type 'NoneType' has no len()") and rounded to the
    nearest pixel (a different image).  None (TVM's conversion) for other ranks, modes or scales."""
    import numpy as np  # noqa: PLC0415

    scales = attrs.get("scales")
    if opset >= 9:
        scales = _const_array(_load_tvm(), inputs[1]) if len(inputs) > 1 else None
    shape = _static_shape(inputs[0])
    mode = _text(attrs.get("mode"), "nearest")
    if scales is None or shape is None or len(shape) != 4 or mode not in ("nearest", "linear"):
        return None
    scales = np.asarray(scales, dtype=np.float32).ravel()
    if scales.size != 4 or scales[0] != 1 or scales[1] != 1 or (scales < 1).any():
        return None
    size = [int(np.floor(d * k)) for d, k in zip(shape[2:], scales[2:], strict=True)]
    method = "nearest_neighbor" if mode == "nearest" else "linear"
    takes = resize_scales.plan(shape, size, scales[2:], method, "asymmetric", "floor")
    if takes is not None:
        return resize_scales.emit(relax, inputs[0], takes)
    return relax.op.image.resize2d(inputs[0], size, roi=None, layout="NCHW", method=method,
                                   coordinate_transformation_mode="asymmetric", rounding_method="floor")  # fmt: skip


def _clip(relax, inputs, attrs, opset):
    """ONNX ``Clip`` with constant bounds as one ``relax.clip`` (TVM's converter writes two opaque
    ``call_tir`` kernels, maximum then minimum); a NaN or missing bound is no bound, as in
    onnxruntime.  None (TVM's own conversion) for computed bounds or integer tensors."""
    import numpy as np  # noqa: PLC0415

    tvm = _load_tvm()
    x = inputs[0]
    if not str(getattr(getattr(x, "ty", None), "dtype", "")).startswith(("float", "bfloat")):
        return None
    if opset < 11:
        bounds = [attrs.get("min"), attrs.get("max")]
    else:
        bounds = []
        for b in (list(inputs) + [None, None])[1:3]:
            if b is None:
                bounds.append(None)
                continue
            arr = _const_array(tvm, b)
            if arr is None or arr.size != 1:
                return None
            bounds.append(float(arr.reshape(())))
    lo, hi = (-np.inf if bounds[0] is None or np.isnan(bounds[0]) else float(bounds[0]),
              np.inf if bounds[1] is None or np.isnan(bounds[1]) else float(bounds[1]))  # fmt: skip
    return relax.op.clip(x, lo, hi)


_PAD_MODES = {"constant": "constant", "edge": "replicate", "reflect": "reflect", "wrap": "circular"}




def _pad(relax, inputs, attrs, opset):
    """ONNX ``Pad`` with constant pads as one ``relax.nn.pad`` (TVM's converter writes an opaque
    ``call_tir`` kernel, which no processor's rules can judge and no cost formula can count): the
    pads per axis as (before, after) pairs, ONNX's modes named as Relax names them (edge ->
    replicate, wrap -> circular).  None (TVM's own conversion) for computed pads, axes or value."""
    import numpy as np  # noqa: PLC0415

    tvm = _load_tvm()
    x = inputs[0]
    shape = getattr(getattr(x, "ty", None), "shape", None)
    try:
        rank = len(shape)
    except TypeError:
        return None
    mode = attrs.get("mode", b"constant")
    mode = _PAD_MODES.get(mode.decode() if isinstance(mode, bytes) else str(mode))
    if mode is None:
        return None
    if opset < 11:
        pads, value = attrs.get("pads"), attrs.get("value", 0.0)
        axes = None
    else:
        ops = list(inputs) + [None, None, None]
        pads = _const_array(tvm, ops[1])
        value = 0.0
        if ops[2] is not None:
            v = _const_array(tvm, ops[2])
            if v is None or v.size != 1:
                return None
            value = float(v.reshape(()))
        axes = None
        if ops[3] is not None:
            axes = _const_array(tvm, ops[3])
            if axes is None:
                return None
            axes = [int(a) % rank for a in axes.ravel()]
    if pads is None:
        return None
    pads = [int(p) for p in np.asarray(pads).ravel()]
    axes = list(range(rank)) if axes is None else axes
    if len(pads) != 2 * len(axes) or any(p < 0 for p in pads):  # crops: TVM's own conversion
        return None
    width = [0] * (2 * rank)
    for k, ax in enumerate(axes):
        width[2 * ax], width[2 * ax + 1] = pads[k], pads[len(axes) + k]
    return relax.op.nn.pad(x, width, mode, value)


def _static_shape(x) -> list[int] | None:
    """The dimensions of a Relax operand when every one is a number, else None."""
    shape = getattr(getattr(x, "ty", None), "shape", None)
    try:
        return [int(d) for d in shape]
    except (TypeError, ValueError):
        return None


def _conv_same(inputs, attrs):
    """ONNX ``Conv`` with ``auto_pad`` SAME_UPPER / SAME_LOWER: the pads worked out as ONNX defines
    them (the output is ceil(input / stride); the total padding split in two, the odd one at the end
    for SAME_UPPER, at the start for SAME_LOWER), so the conv holds its own padding.  TVM's converter
    pads the input in a ``call_tir`` kernel of its own first: an op the model does not have, which
    no accelerator takes, so every such conv crossed to the host and back."""
    mode = attrs.get("auto_pad", b"NOTSET")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        return attrs
    shape, wshape = _static_shape(inputs[0]), _static_shape(inputs[1])
    if shape is None or len(shape) < 3:
        return attrs
    n = len(shape) - 2
    kernel = list(attrs.get("kernel_shape") or (wshape[2:] if wshape is not None else []))
    if len(kernel) != n:
        return attrs
    strides = list(attrs.get("strides") or [1] * n)
    dilations = list(attrs.get("dilations") or [1] * n)
    begin, end = [], []
    for x, k, s, d in zip(shape[2:], kernel, strides, dilations):
        total = max((-(-x // s) - 1) * s + (k - 1) * d + 1 - x, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if mode == "SAME_UPPER" else big)
        end.append(big if mode == "SAME_UPPER" else small)
    out = {k: v for k, v in attrs.items() if k != "auto_pad"}
    out["pads"] = begin + end
    return out


def _einsum(relax, inputs, attrs, opset):
    """ONNX ``Einsum`` as ``relax.einsum`` (TVM's converter writes ``topi.einsum`` as a ``call_tir``
    kernel, so its MACs counted as nothing)."""
    eq = attrs.get("equation", b"")
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    return relax.op.einsum(list(inputs), eq.replace(" ", "")) if eq else None


def _tile(relax, inputs, attrs, opset):
    """ONNX ``Tile`` with constant repeats as ``relax.tile``."""
    tvm = _load_tvm()
    reps = _const_array(tvm, inputs[1]) if len(inputs) > 1 else None
    if reps is None:
        return None
    reps = [int(r) for r in reps.ravel()]
    shape = _static_shape(inputs[0])
    if shape is None or len(reps) != len(shape) or any(r < 0 for r in reps):
        return None
    return relax.op.tile(inputs[0], reps)


def _cumsum(relax, inputs, attrs, opset):
    """ONNX ``CumSum`` with a constant axis as ``relax.cumsum``, ``reverse`` as ``relax.flip``
    before and after it (TVM's converter flips in ``call_tir`` kernels)."""
    tvm = _load_tvm()
    axis = _const_array(tvm, inputs[1]) if len(inputs) > 1 else None
    shape = _static_shape(inputs[0])
    if axis is None or axis.size != 1 or shape is None:
        return None
    axis = int(axis.reshape(())) % max(len(shape), 1)
    x = inputs[0]
    reverse = int(attrs.get("reverse", 0)) != 0
    if reverse:
        x = relax.op.flip(x, axis)
    y = relax.op.cumsum(x, axis, exclusive=int(attrs.get("exclusive", 0)) != 0)
    return relax.op.flip(y, axis) if reverse else y


def _pairwise(name: str):
    """ONNX ``Min`` / ``Max`` of two inputs or more as ``relax.minimum`` / ``relax.maximum`` of each
    next input (what ``torch.minimum`` / ``torch.maximum`` give in a .pt2): TVM's converter
    broadcasts every input to the output's shape, stacks them and reduces the stack (two ops or
    more for one, and a constant operand such as ``Max(x, 0)``'s zero stored at the output's full
    size).  Equal values: each is a min / max with numpy broadcasting.  None (TVM's conversion) for
    one input or constants only (folded)."""

    def convert(relax, inputs, attrs, opset):
        tvm = _load_tvm()
        ins = [x for x in inputs if x is not None]
        if len(ins) < 2 or all(isinstance(x, tvm.ir.GenericConst) for x in ins):
            return None
        out = ins[0]
        for x in ins[1:]:
            out = getattr(relax.op, name)(out, x)
        return out

    return convert


def _one_hot(relax, inputs, attrs, opset):
    """ONNX ``OneHot`` with constant depth and values as ``relax.one_hot`` whose output has the
    values' dtype, as ONNX defines it.  TVM's converter reads the values as Python numbers, so float32
    values made a float64 output (which export then refused: "model output 'y' is float64 ...; cast
    it in the model") and int32 ones an int64 output.  A negative index counts from the end (index +
    depth, from opset 11: the less / add / where TVM's converter writes too); an index outside
    [-depth, depth) gives a row of off values.  None (TVM's conversion) for a computed depth or values, or non-integer
    indices."""
    tvm = _load_tvm()
    if len(inputs) < 3 or any(x is None for x in inputs[:3]):
        return None
    depth, values = _const_array(tvm, inputs[1]), _const_array(tvm, inputs[2])
    idt = str(getattr(getattr(inputs[0], "ty", None), "dtype", ""))
    if depth is None or values is None or depth.size != 1 or values.size != 2 or not idt.startswith(("int", "uint")):
        return None
    vdt = str(values.dtype)
    if not vdt.startswith(("float", "int", "uint", "bool")):
        return None
    off, on = (relax.prim_value(v.item(), vdt) for v in values.ravel())
    n = int(depth.reshape(()))  # (a float depth is cast to an integer, as ONNX says)
    indices = inputs[0]
    if opset >= 11 and not idt.startswith("uint"):  # (OneHot-9 has no negative indices)
        indices = relax.op.where(relax.op.less(indices, relax.const(0, idt)), relax.op.add(indices, relax.const(n, idt)),
                                 indices)  # fmt: skip
    return relax.op.one_hot(indices, on, off, n, int(attrs.get("axis", -1)))


_OWN = {"Clip": _clip, "Pad": _pad, "Einsum": _einsum, "Tile": _tile, "CumSum": _cumsum, "Min": _pairwise("minimum"),
        "Max": _pairwise("maximum"), "OneHot": _one_hot, "Upsample": _upsample}  # fmt: skip
