"""Lowering the normalisations to kernel calls (no tvm): ``layer_norm``, ``batch_norm`` and the
group norms (``group_norm``, ``instance_norm``: one ``group_norm`` call, an instance norm having as
many groups as channels).  ``calls.missing_call`` has refused the forms the library has no call for."""

from __future__ import annotations

from ..graph import Op
from .calls import axis as _axis
from .lower_mac import _f

NORMS = frozenset({"layer_norm", "batch_norm", "group_norm", "instance_norm"})


def lower_norm(low, op: Op) -> None:
    """One norm op of ``low`` (a ``lower.KernelLowering``) as its call."""
    fn, L, a, name = low.fn, low.fn.lib, op.attrs, op.name
    g, k = low.g, op.kind
    rank = len(g.tensors[op.inputs[0]].shape)
    gam = low._float_const(op.inputs[1]) if len(op.inputs) > 1 and a.get("scale", True) else "NULL"  # noqa: SLF001
    bet = low._float_const(op.inputs[2]) if len(op.inputs) > 2 and a.get("center", True) else "NULL"  # noqa: SLF001
    eps = _f(float(a.get("epsilon", 1e-5)))
    if k == "layer_norm":
        axes = sorted(_axis(x, rank) for x in a.get("axes", (-1,)))  # the last ones (missing_call)
        v = fn.var("ln")
        fn.line(f"{L}_layer_norm_params {v} = {{{len(axes)}, {eps}, {gam}, {bet}}};")
        fn.call(f"{L}_layer_norm", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), f"&{v}", note=name)
    elif k == "batch_norm":  # in inference form, its batch statistics unread (missing_call)
        mean, var = low._float_const(op.inputs[3]), low._float_const(op.inputs[4])  # noqa: SLF001
        v = fn.var("bn")
        fn.line(f"{L}_batch_norm_params {v} = {{{_axis(int(a.get('axis', 1)), rank)}, {eps}, {mean}, {var}, {gam}, "
                f"{bet}}};")  # fmt: skip
        fn.call(f"{L}_batch_norm", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), f"&{v}", note=name)
    else:  # group_norm / instance_norm over axis 1 and every later axis (missing_call)
        channels = int(g.tensors[op.inputs[0]].shape[1])
        groups = int(a.get("num_groups", channels)) if k == "group_norm" else channels
        v = fn.var("gn")
        fn.line(f"{L}_group_norm_params {v} = {{{groups}, {eps}, {gam}, {bet}}};")
        fn.call(f"{L}_group_norm", fn.desc(op.inputs[0], "model"), fn.desc(op.outputs[0], "model"), f"&{v}",
                note=f"{name} ({k})")  # fmt: skip
