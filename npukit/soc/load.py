"""Loading and validating SoC profiles: TOML / JSON files, bundled names, dicts.  Errors name the file
and the field: ``soc.toml: processors.dla.macs_per_cycle.int4: must be a positive number, got -3``.

This module reads the file and assembles the profile (the host, the placement order and
preferences, the conversion processors, the links); ``checks`` holds the field checks,
``parse_processor`` the reading of one processor's section."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from ..errors import ProfileError, closest
from ..opset.names import canonical
from .checks import _V
from .parse_processor import _processor
from .profile import Link, Processor, SocProfile, _freeze
from .schema import CONVERSION_FIELDS, LINK_FIELDS, PLACEMENT_COLUMNS, PLACEMENT_FIELDS, TOP_FIELDS

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
    named = "/" not in s and path.is_dir() and s in bundled()  # (a directory of the profile's name here: the name)
    if path.suffix.lower() in (".toml", ".json") or (path.exists() and not named) or "/" in s:
        if not path.exists():
            raise ProfileError(f"{path}: no such profile file")
        if path.is_dir():
            raise ProfileError(f"{path}: is a directory, expected a SoC profile file (.toml or .json) or a bundled "
                               f"profile's name ({', '.join(sorted(bundled()))})")  # fmt: skip
        try:
            text = path.read_text(encoding="utf-8-sig")  # (a byte-order mark a Windows editor wrote: dropped)
        except UnicodeDecodeError:
            raise ProfileError(f"{path}: not a text file; a SoC profile is TOML or JSON") from None
        except OSError as e:
            raise ProfileError(f"{path}: cannot read: {e.strerror or e}") from None
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


def parse_profile(doc: Mapping, where: str, dotted: bool = False) -> SocProfile:
    v = _V(where, dotted)
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
        if name in PLACEMENT_COLUMNS:
            v.fail(f"processors.{name}", f"is a column of study.placement ({', '.join(PLACEMENT_COLUMNS)}), beside "
                                         "which each processor has a column of its verdicts: rename the processor")  # fmt: skip
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
            key = canonical(op, f"{where}: placement.prefer.{op}")
        except Exception as e:  # noqa: BLE001
            raise ProfileError(str(e)) from None
        if key in prefer:  # "softmax" and "relax.nn.softmax": one op, and only the last list would count
            given = next(k for k in (pl.get("prefer") or {}) if k != op and canonical(k, "") == key)
            v.fail(f"placement.prefer.{op}", f"names the op {key}, as placement.prefer.{given} does; keep one")
        if not isinstance(lst, list) or not all(isinstance(x, str) for x in lst):
            v.fail(f"placement.prefer.{op}", f"must be a list of processor names, got {lst!r}")
        if not lst:  # as placement.order: an entry that changes nothing is refused
            v.fail(f"placement.prefer.{op}", f"must not be empty (leave {op} out for the placement order)")
        if len(set(lst)) != len(lst):
            v.fail(f"placement.prefer.{op}", f"lists an entry twice: {lst!r}")
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
    for i, a in enumerate(names):  # the most specific link wins: two that name one processor each tie
        for b in names[i + 1 :]:
            hits = [k for k, ln in enumerate(links) if _matches(ln.between, a, b)]
            if any("*" not in links[k].between for k in hits):
                continue
            half = [k for k in hits if list(links[k].between) != ["*", "*"]]
            if len(half) > 1:
                j, k = half[:2]
                v.fail(f"links[{k}].between", f"{list(links[k].between)} and links[{j}]'s {list(links[j].between)} "
                                              f"both join {a!r} and {b!r}, each naming one of them, so neither is the "
                                              f"more specific and the first listed would be used: add a link with "
                                              f"between = [\"{a}\", \"{b}\"] and the figures of that route")  # fmt: skip
    missing = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]
               if not any(_matches(ln.between, a, b) for ln in links)]  # fmt: skip
    if missing:  # every pair at once: a profile of several processors linked in a chain misses several
        a, b = missing[0]
        pairs = ", nor between ".join(f"{x!r} and {y!r}" for x, y in missing)
        raise ProfileError(
            f"{where}: links: no link between {pairs}; a tensor crosses one link from the processor that makes it "
            f"to the one that reads it (npukit does not route it through a third processor): add [[links]] with "
            f"between = [\"{a}\", \"{b}\"] and the figures of that route, one for each pair (or [\"*\", \"*\"] "
            f"for a shared bus)"
        )  # fmt: skip
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
