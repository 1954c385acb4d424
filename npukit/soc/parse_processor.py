"""One ``[processors.NAME]`` section of a profile -> a ``Processor``: its fields checked and
completed (the default bit-width, the per-width tables, the MAC array, efficiency keys, the
reduction model, op rules, the kernel library's C prefix), memoized by the section's content."""

from __future__ import annotations

import math
from collections import OrderedDict
from types import MappingProxyType

from ..errors import ProfileError, closest
from ..opset.names import canonical
from .checks import _V
from .profile import OpRule, Processor
from .schema import (
    BITS,
    KERNEL_CLASS_DOC,
    KERNEL_CLASSES,
    MAC_ARRAY_KEYS,
    OP_FIELD_KINDS,
    OP_FIELDS,
    PROCESSOR_FIELDS,
    REDUCTION_KEYS,
    class_variant_ok,
)  # fmt: skip


def _eff_key(v: _V, path: str, k: str) -> str:
    """An ``efficiency`` key: an op name (short or full) or a kernel class ``KIND.VARIANT``."""
    head, dot, variant = k.rpartition(".")
    if dot and variant in KERNEL_CLASSES:  # a kernel class ("conv2d.depthwise", "relax.nn.conv2d.depthwise")
        try:
            kind = canonical(head, f"{v.where}: {path}.efficiency.{k}")
        except Exception as e:  # noqa: BLE001
            raise ProfileError(str(e)) from None
        if not class_variant_ok(kind, variant):
            v.fail(f"{path}.efficiency.{k}", f"{kind} has no {variant} class; classes are {KERNEL_CLASS_DOC}")
        return f"{kind}.{variant}"
    try:
        return canonical(k, f"{v.where}: {path}.efficiency.{k}")
    except Exception as e:  # noqa: BLE001
        if dot and "relax." not in k:
            v.fail(f"{path}.efficiency.{k}", f"unknown kernel class; classes are {KERNEL_CLASS_DOC}")
        raise ProfileError(str(e)) from None


_PARSED: OrderedDict = OrderedDict()  # (name, repr of the section) -> Processor


def _processor(v: _V, name: str, pdoc) -> Processor:
    """``_parse_processor``, memoized by the section's content: an edited profile (a sweep makes
    hundreds) re-validates only the processors its edits touched.  The key is the section's repr,
    which tells a list from a tuple and 1 from 1.0 or true, as the checks do (JSON text would not):
    a section is accepted from the memo only if it is the one validated."""
    key = (name, repr(pdoc))
    hit = _PARSED.get(key)
    if hit is None:
        hit = _PARSED[key] = _parse_processor(v, name, pdoc)
        if len(_PARSED) > 256:
            _PARSED.popitem(last=False)
    return hit


def _parse_processor(v: _V, name: str, pdoc) -> Processor:
    path = f"processors.{name}"
    v.check_keys(pdoc, PROCESSOR_FIELDS, path)
    r = v.read(pdoc, PROCESSOR_FIELDS, path)
    macs = r["macs_per_cycle"]
    bits = [b for b in BITS if b in macs]
    default_bits = r["default_bits"] or ("int8" if "int8" in macs else bits[-1])
    if default_bits not in macs:
        v.fail(f"{path}.default_bits", f"{default_bits} is not in macs_per_cycle ({', '.join(bits)})")
    vec = r["vector_ops_per_cycle"] or dict(macs)
    epm = r["energy_pj_per_mac"]
    epo = r["energy_pj_per_op"] or dict(epm)
    for field, table in (("vector_ops_per_cycle", vec), ("energy_pj_per_mac", epm), ("energy_pj_per_op", epo)):
        for b in bits:  # every bit-width the processor runs needs a figure in each per-width table
            if b not in table:
                v.fail(f"{path}.{field}.{b}", f"missing: macs_per_cycle has {b}, so {field} needs it too")
    arr = {"channels_in": 1, "channels_out": 1, "pixels": 1, "kernel_taps": 1}
    for k, x in (r["mac_array"] or {}).items():
        if k not in MAC_ARRAY_KEYS:
            v.fail(f"{path}.mac_array.{k}", f"unknown field; {closest(k, MAC_ARRAY_KEYS)}")
        if not isinstance(x, int) or isinstance(x, bool) or x <= 0:
            v.fail(f"{path}.mac_array.{k}", f"must be a positive integer, got {x!r}")
        arr[k] = x
    if arr["channels_in"] % arr["kernel_taps"]:
        v.fail(f"{path}.mac_array.kernel_taps", f"must divide channels_in ({arr['channels_in']}), got {arr['kernel_taps']}")
    eff = {"*": 1.0}
    named: dict[str, str] = {}  # kernel class / op kind -> the key that named it
    for given, x in (r["efficiency"] or {}).items():
        k = _eff_key(v, path, given) if given != "*" else given
        if k in named:  # "conv2d" and "relax.nn.conv2d": one key, and only the last value would count
            v.fail(f"{path}.efficiency.{given}", f"names {k}, as {path}.efficiency.{named[k]} does; keep one")
        named[k] = given
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x <= 1:
            v.fail(f"{path}.efficiency.{k}", f"must be a number in (0, 1], got {x!r}")
        eff[k] = float(x)
    red = None
    if r["reduction"] is not None:
        red = {}
        for k, x in r["reduction"].items():
            if k not in REDUCTION_KEYS:
                v.fail(f"{path}.reduction.{k}", f"unknown field; {closest(k, REDUCTION_KEYS)}")
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                v.fail(f"{path}.reduction.{k}", f"must be a number, got {x!r}")
            red[k] = x
        for k in REDUCTION_KEYS:
            if k not in red:
                v.fail(f"{path}.reduction.{k}", "required field is missing (reduction = { unroll, serial, exponent })")
        if not isinstance(red["unroll"], int) or red["unroll"] < 1:
            v.fail(f"{path}.reduction.unroll", f"must be a positive integer, got {red['unroll']!r}")
        if not 0 < red["serial"] <= 1:
            v.fail(f"{path}.reduction.serial", f"must be a number in (0, 1], got {red['serial']!r}")
        if red["exponent"] < 0:
            v.fail(f"{path}.reduction.exponent", f"must be >= 0, got {red['exponent']!r}")
        red = MappingProxyType({"unroll": int(red["unroll"]), "serial": float(red["serial"]),
                                "exponent": float(red["exponent"])})  # fmt: skip
    ops = {}
    disabled = {}  # op kind -> the key that set it false
    ops_doc = r["ops"] or {}
    spelt: dict[str, str] = {}  # op kind -> the key that named it
    for op, odoc in ops_doc.items():
        try:
            key = canonical(op, f"{v.where}: {path}.ops.{op}")
        except Exception as e:  # noqa: BLE001
            raise ProfileError(str(e)) from None
        opath = f"{path}.ops.{op}"
        if key in spelt:  # "sigmoid" and "relax.sigmoid": one op, and only one of its tables would count
            v.fail(opath, f"names the op {key}, as {path}.ops.{spelt[key]} does; keep one")
        spelt[key] = op
        if odoc is False:  # (as leaving it out: the processor does not run it; its refusals say why)
            disabled[key] = op
            continue
        if odoc is True:
            odoc = {}
        v.check_keys(odoc, OP_FIELDS, opath)
        o = v.read(odoc, OP_FIELDS, opath)
        for fname in odoc:
            where = OP_FIELD_KINDS.get(fname)
            if where is not None and not where[0](key):
                v.fail(f"{opath}.{fname}", f"does not apply to {key}: it limits {where[1]} (an op of another kind "
                                           "never reads it)")  # fmt: skip
        ops[key] = OpRule(op=key, **o)
    if r["kernel_library"] is not None or not r["host"]:  # the C prefix of its generated calls (by default
        # an accelerator's name): checked now, not at export
        from ..codegen.kernels.library import KernelLibraryError, check_prefix  # noqa: PLC0415

        try:
            check_prefix(r["kernel_library"] or name)
        except KernelLibraryError as e:
            if r["kernel_library"] is not None:
                v.fail(f"{path}.kernel_library", str(e))
            v.fail(path, f"its name is the C prefix of its generated kernel calls (kernel_library defaults to it), "
                         f"and {e}: rename the processor or set {path}.kernel_library")  # fmt: skip
    dram = float(r["dram_bytes_per_cycle"])
    e_byte = float(r["energy_pj_per_byte"])
    return Processor(
        name=name, kind=r["kind"], host=bool(r["host"]), clock_mhz=float(r["clock_mhz"]),
        macs_per_cycle=MappingProxyType(macs), vector_ops_per_cycle=MappingProxyType(vec),
        default_bits=default_bits, mac_array=MappingProxyType(arr), vector_lanes=int(r["vector_lanes"]),
        efficiency=MappingProxyType(eff), onchip_bytes=int(r["onchip_bytes"]), dram_bytes_per_cycle=dram,
        onchip_bytes_per_cycle=float(r["onchip_bytes_per_cycle"] or 4 * dram), layout=r["layout"],
        op_overhead_cycles=int(r["op_overhead_cycles"]), call_overhead_cycles=int(r["call_overhead_cycles"]),
        energy_pj_per_mac=MappingProxyType(epm), energy_pj_per_op=MappingProxyType(epo),
        energy_pj_per_byte=e_byte,
        energy_pj_per_onchip_byte=float(r["energy_pj_per_onchip_byte"] if r["energy_pj_per_onchip_byte"] is not None else e_byte / 10),
        static_mw=float(r["static_mw"]), max_tensor_bytes=r["max_tensor_bytes"],
        dtypes=tuple(r["dtypes"]) if r["dtypes"] else None, kernel_library=r["kernel_library"] or name,
        ops=MappingProxyType(dict(sorted(ops.items()))), description=r["description"],
        disabled_ops=MappingProxyType(dict(sorted(disabled.items()))),
        weight_bytes_per_cycle=float(r["weight_bytes_per_cycle"] or dram), weight_port=r["weight_port"],
        output_elems_per_cycle=float(r["output_elems_per_cycle"]), reduction=red, kernel_api=r["kernel_api"],
        max_partitions=r["max_partitions"],
    )  # fmt: skip


