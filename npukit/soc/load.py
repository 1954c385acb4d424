"""Loading and validating SoC profiles: TOML / JSON files, bundled names, dicts.  Errors name the file
and the field: ``soc.toml: processors.dla.macs_per_cycle.int4: must be a positive number, got -3``."""

from __future__ import annotations

import json
import math
import tomllib
from collections import OrderedDict
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from ..errors import ProfileError, closest
from ..opset.names import canonical
from .profile import Link, OpRule, Processor, SocProfile, _freeze
from .schema import (
    BITS,
    CONVERSION_FIELDS,
    DTYPES,
    HUGE,
    KERNEL_CLASS_DOC,
    KERNEL_CLASSES,
    LINK_FIELDS,
    MAC_ARRAY_KEYS,
    OP_FIELD_KINDS,
    OP_FIELDS,
    PLACEMENT_FIELDS,
    PROCESSOR_FIELDS,
    REDUCTION_KEYS,
    TINY,
    TOP_FIELDS,
    Field,
    class_variant_ok,
)  # fmt: skip

# ---------------------------------------------------------------------------------------------
# loading


def bundled() -> dict[str, Path]:
    """Bundled profile names -> paths."""
    root = resources.files("npukit").joinpath("profiles")
    return {Path(str(p)).stem: Path(str(p)) for p in root.iterdir() if str(p).endswith(".toml")}


class _Twice(ValueError):
    pass


def _no_twice(pairs) -> dict:
    """A JSON object, refusing a key written twice (TOML refuses it; JSON would keep the last)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _Twice(f"{k!r} is written twice in one JSON object (the second would replace the first); write it once")
        out[k] = v
    return out


def load_soc(spec: str | Path | Mapping | SocProfile) -> SocProfile:
    """A bundled profile name, a path to a .toml / .json profile, or a dict with the same fields."""
    if isinstance(spec, SocProfile):
        return spec
    if isinstance(spec, Mapping):
        return parse_profile(spec, "<dict>")
    s = str(spec)
    path = Path(s)
    if path.suffix.lower() in (".toml", ".json") or path.exists() or "/" in s:
        if not path.exists():
            raise ProfileError(f"{path}: no such profile file")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ProfileError(f"{path}: cannot read: {e}") from None
        try:
            doc = json.loads(text, object_pairs_hook=_no_twice) if path.suffix.lower() == ".json" else tomllib.loads(text)
        except _Twice as e:
            raise ProfileError(f"{path}: {e}") from None
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
            raise ProfileError(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'TOML'}: {e}") from None
        return parse_profile(doc, str(path))
    table = bundled()
    if s not in table:
        raise ProfileError(f"unknown SoC profile {s!r}; bundled: {', '.join(sorted(table))}; or pass a path to a .toml file")
    return load_soc(table[s])


class _V:
    """Validation helpers bound to a file name."""

    def __init__(self, where: str):
        self.where = where

    def fail(self, path: str, msg: str):
        raise ProfileError(f"{self.where}: {path}: {msg}")

    def check_keys(self, table, fields, path: str, extra: tuple[str, ...] = ()):
        if not isinstance(table, Mapping):
            self.fail(path or "(top level)", f"must be a table, got {type(table).__name__}")
        valid = [f.key for f in fields] + list(extra)
        for k in table:
            if k not in valid:
                self.fail(f"{path}.{k}" if path else k, f"unknown field; {closest(k, valid)}")
        for f in fields:
            if f.required and f.key not in table:
                self.fail(f"{path}.{f.key}" if path else f.key, f"required field is missing ({f.doc})")

    def value(self, f: Field, v, path: str):
        t = f.type
        if t == "str":
            if not isinstance(v, str):
                self.fail(path, f"must be a string, got {v!r}")
            return v
        if t == "bool":
            if not isinstance(v, bool):
                self.fail(path, f"must be true or false, got {v!r}")
            return v
        if t in ("int", "number"):
            ok = isinstance(v, int) if t == "int" else isinstance(v, (int, float))
            if isinstance(v, bool) or not ok or (isinstance(v, float) and not math.isfinite(v)):
                finite = " finite" if isinstance(v, float) and not math.isfinite(v) else ""
                self.fail(path, f"must be {'an integer' if t == 'int' else 'a' + finite + ' number'}, got {v!r}")
            self.bounds(f, v, path)
            return v
        if t == "choice":
            if v not in f.choices:
                self.fail(path, f"must be one of {', '.join(map(repr, f.choices))}, got {v!r}")
            return v
        if t == "bits":
            if v not in BITS:
                self.fail(path, f"must be one of {', '.join(BITS)}, got {v!r}")
            return v
        if t == "bits_table":
            if not isinstance(v, Mapping) or not v:
                self.fail(path, f"must be a table of bit-width = number ({', '.join(BITS)}), got {v!r}")
            out = {}
            for k, x in v.items():
                if k not in BITS:
                    self.fail(f"{path}.{k}", f"unknown bit-width; must be one of {', '.join(BITS)}")
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0 or (
                        x == 0 and not path.split(".")[-1].startswith("energy")):  # fmt: skip
                    self.fail(f"{path}.{k}", f"must be a positive number, got {x!r}")
                if x != 0 and not TINY <= x <= HUGE:
                    self.fail(f"{path}.{k}", f"must be between {TINY:g} and {HUGE:g}, got {x!r}")
                out[k] = float(x)
            return out
        if t.startswith("list["):
            inner = t[5:-1]
            if not isinstance(v, list):
                self.fail(path, f"must be a list of {inner}s, got {v!r}")
            if not v and f.key not in ("sources",):
                self.fail(path, "must not be empty (leave the field out for no limit)")
            for i, x in enumerate(v):
                bad = (not isinstance(x, int) or isinstance(x, bool) or x <= 0) if inner == "int" else not isinstance(x, str)
                if bad:
                    self.fail(f"{path}[{i}]", f"must be a {'positive integer' if inner == 'int' else 'string'}, got {x!r}")
                if f.key == "dtypes" and x not in DTYPES:
                    self.fail(f"{path}[{i}]", f"unknown dtype {x!r}; one of {', '.join(DTYPES)}")
            if len(set(v)) != len(v) and f.key != "between":
                self.fail(path, f"lists an entry twice: {v!r}")
            return tuple(v)
        if t == "kernel":
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return (v, v)
            if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v):
                return (v[0], v[1])
            self.fail(path, f"must be a positive integer or [h, w], got {v!r}")
        if t == "table":
            if not isinstance(v, Mapping):
                self.fail(path, f"must be a table, got {v!r}")
            return v
        raise AssertionError(t)

    def bounds(self, f: Field, v, path: str):
        if f.positive and not v > 0:
            self.fail(path, f"must be a positive number, got {v!r}")
        if f.positive and not TINY <= v <= HUGE:
            self.fail(path, f"must be between {TINY:g} and {HUGE:g} (a physical rate or size), got {v!r}")
        if f.minimum is not None and v < f.minimum:
            self.fail(path, f"must be >= {f.minimum}, got {v!r}")
        if f.maximum is not None and v > f.maximum:
            self.fail(path, f"must be <= {f.maximum}, got {v!r}")

    def read(self, table, fields, path: str) -> dict:
        out = {}
        for f in fields:
            p = f"{path}.{f.key}" if path else f.key
            out[f.key] = self.value(f, table[f.key], p) if f.key in table else f.default
        return out


def parse_profile(doc: Mapping, where: str) -> SocProfile:
    v = _V(where)
    v.check_keys(doc, TOP_FIELDS, "", extra=("placement", "conversion", "processors", "links"))
    top = v.read(doc, TOP_FIELDS, "")
    if not top["name"].strip():
        v.fail("name", "must not be empty")

    procs_doc = doc.get("processors")
    if not isinstance(procs_doc, Mapping) or not procs_doc:
        v.fail("processors", "at least one [processors.NAME] table is required")
    processors = []
    for name, pdoc in procs_doc.items():
        if not (name.isascii() and name.isidentifier()):
            v.fail(f"processors.{name}", "processor names are C identifiers, as the generated code uses them: ASCII "
                                         "letters, digits and _, not starting with a digit")  # fmt: skip
        twin = next((p.name for p in processors if p.name.lower() == name.lower()), None)
        if twin is not None:
            v.fail(f"processors.{name}", f"differs from processor {twin!r} only in case; the generated code's files "
                                         "and symbols need names apart without case")  # fmt: skip
        processors.append(_processor(v, name, pdoc))

    hosts = [p.name for p in processors if p.host]
    host = top["host"]
    if host is not None:
        if host not in {p.name for p in processors}:
            v.fail("host", f"no processor named {host!r}; {closest(host, [p.name for p in processors])}")
        if hosts and hosts != [host]:
            v.fail("host", f"says {host!r} but processors {hosts} set host = true")
    elif len(hosts) == 1:
        host = hosts[0]
    elif len(hosts) > 1:
        v.fail("processors", f"only one processor may set host = true, got {', '.join(hosts)}")
    else:
        cpus = [p.name for p in processors if p.kind == "cpu"]
        if len(cpus) != 1:
            which = f"the processors of kind cpu are {', '.join(cpus)}" if cpus else "no processor is of kind cpu"
            v.fail("host", f"name the host processor (host = {(cpus or [processors[0].name])[0]!r}) or mark one with "
                           f"host = true; {which}")  # fmt: skip
        host = cpus[0]
    processors = [_with_host(p, p.name == host) for p in processors]
    for p in processors:
        if not p.host and not p.ops:
            v.fail(f"processors.{p.name}.ops", "an accelerator needs at least one supported op")
        if p.host and p.ops:
            v.fail(f"processors.{p.name}.ops", "the host runs every op, so its ops table is never read: remove it "
                                               "(limits belong to the accelerators)")  # fmt: skip

    names = [p.name for p in processors]
    accel = [n for n in names if n != host]

    def not_accel(n: str) -> str:
        return closest(n, accel) if accel else f"this profile has no accelerator, only the host {host}"
    pl = doc.get("placement", {})
    v.check_keys(pl, PLACEMENT_FIELDS, "placement")
    order = list(v.read(pl, PLACEMENT_FIELDS, "placement")["order"] or accel)
    for i, n in enumerate(order):
        if n not in accel:
            v.fail(f"placement.order[{i}]", f"{n!r} is not an accelerator of this profile; {not_accel(n)}")
    order += [n for n in accel if n not in order]
    prefer = {}
    for op, lst in (pl.get("prefer") or {}).items():
        try:
            key = canonical(op, f"{where}: placement.prefer")
        except Exception as e:  # noqa: BLE001
            raise ProfileError(str(e)) from None
        if not isinstance(lst, list) or not all(isinstance(x, str) for x in lst):
            v.fail(f"placement.prefer.{op}", f"must be a list of processor names, got {lst!r}")
        for i, n in enumerate(lst):
            if n not in accel:
                v.fail(f"placement.prefer.{op}[{i}]", f"{n!r} is not an accelerator; {not_accel(n)}")
            elif key not in next(p for p in processors if p.name == n).ops:
                v.fail(f"placement.prefer.{op}[{i}]", f"{n!r} does not run {key} (processors.{n}.ops has no {key}), "
                                                      "so preferring it changes nothing")  # fmt: skip
        prefer[key] = tuple(lst)

    conv = doc.get("conversion", {})
    v.check_keys(conv, CONVERSION_FIELDS, "conversion")
    conv = v.read(conv, CONVERSION_FIELDS, "conversion")

    links = []
    joined: dict[tuple[str, str], int] = {}  # the processors a link joins -> its index
    ldoc = doc.get("links", [])
    if not isinstance(ldoc, list):
        v.fail("links", "must be an array of tables ([[links]])")
    for i, ln in enumerate(ldoc):
        path = f"links[{i}]"
        v.check_keys(ln, LINK_FIELDS, path)
        r = v.read(ln, LINK_FIELDS, path)
        if len(r["between"]) != 2:
            v.fail(f"{path}.between", f"must name exactly two processors, got {list(r['between'])}")
        for j, n in enumerate(r["between"]):
            if n != "*" and n not in names:
                v.fail(f"{path}.between[{j}]", f"no processor named {n!r}; {closest(n, names + ['*'])}")
        if len(r["between"]) == 2 and r["between"][0] == r["between"][1] != "*":
            v.fail(f"{path}.between", f"names {r['between'][0]!r} twice: a link joins two processors (no tensor "
                                      "crosses from a processor to itself)")  # fmt: skip
        pair = tuple(sorted(r["between"]))  # (a link joins its two processors both ways)
        if pair in joined:
            j = joined[pair]
            v.fail(f"{path}.between", f"joins {pair[0]!r} and {pair[1]!r}, as links[{j}] does: the first would always "
                                      f"be used and this one ignored; keep one")  # fmt: skip
        joined[pair] = i
        links.append(Link(tuple(r["between"]), float(r["bandwidth_gbps"]), float(r["latency_us"]),
                          r["via_dram"], float(r["energy_pj_per_byte"])))  # fmt: skip
    prof = SocProfile(
        name=top["name"], description=top["description"], sources=tuple(top["sources"] or ()),
        processors=tuple(processors), host=host, order=tuple(order), prefer=MappingProxyType(prefer),
        links=tuple(links), layout_on=conv["layout_on"], quantize_on=conv["quantize_on"], path=where,
        raw=_freeze(doc), target=top["target"], flash_bytes=top["flash_bytes"],
        sram_bytes=top["sram_bytes"],
    )  # fmt: skip
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if not any(_matches(ln.between, a, b) for ln in links):
                raise ProfileError(
                    f"{where}: links: no link between {a!r} and {b!r}; add [[links]] with "
                    f"between = [\"{a}\", \"{b}\"] (or [\"*\", \"*\"] for a shared bus)"
                )
    return prof


def _matches(between, a, b) -> bool:
    x, y = between
    return (x in (a, "*") and y in (b, "*")) or (x in (b, "*") and y in (a, "*"))


def _with_host(p: Processor, host: bool) -> Processor:
    if p.host == host:
        return p
    d = dict(p.__dict__)
    d["host"] = host
    return Processor(**d)


def _eff_key(v: _V, path: str, k: str) -> str:
    """An ``efficiency`` key: an op name (short or full) or a kernel class ``KIND.VARIANT``."""
    head, dot, variant = k.rpartition(".")
    if dot and variant in KERNEL_CLASSES:  # a kernel class ("conv2d.depthwise", "relax.nn.conv2d.depthwise")
        try:
            kind = canonical(head, f"{v.where}: {path}.efficiency")
        except Exception as e:  # noqa: BLE001
            raise ProfileError(str(e)) from None
        if not class_variant_ok(kind, variant):
            v.fail(f"{path}.efficiency.{k}", f"{kind} has no {variant} class; classes are {KERNEL_CLASS_DOC}")
        return f"{kind}.{variant}"
    try:
        return canonical(k, f"{v.where}: {path}.efficiency")
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
    for k, x in (r["efficiency"] or {}).items():
        if k != "*":
            k = _eff_key(v, path, k)
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
    ops_doc = r["ops"] or {}
    for op, odoc in ops_doc.items():
        try:
            key = canonical(op, f"{v.where}: {path}.ops")
        except Exception as e:  # noqa: BLE001
            raise ProfileError(str(e)) from None
        opath = f"{path}.ops.{op}"
        if odoc is False:  # (as leaving it out: the processor does not run it)
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
        weight_bytes_per_cycle=float(r["weight_bytes_per_cycle"] or dram), weight_port=r["weight_port"],
        output_elems_per_cycle=float(r["output_elems_per_cycle"]), reduction=red, kernel_api=r["kernel_api"],
    )  # fmt: skip


