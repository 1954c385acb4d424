"""Sweep grids (no tvm): a TOML ``[grid]`` table of dotted keys into the config and the SoC profile,
each with a list of values, combined as a product, a list (zipped) or random samples.

    [grid]
    mode = "product"                                   # or "list", or "random" with samples = N, seed = S
    "bits.dla" = ["int8", "fp16"]                      # bits.<processor>
    "layer_bits./conv1/Conv" = ["int8", "int16"]       # layer_bits.<node>
    "support.dla.softmax" = [true, false]              # support.<processor>.<op>
    "pin./softmax/Softmax" = ["dsp", "arm", "none"]    # pin.<node>; "none": not pinned
    "placement" = ["cost", "first-fit"]                # when the Config has a placement policy
    "soc.processors.dla.macs_per_cycle.int8" = [256, 512, 1024]   # soc.<profile field>
    "soc.links.0.bandwidth_gbps" = 4.0                 # one value: fixed for every configuration

A grid is validated like a profile: an unknown key or value raises a ``GridError`` naming the file's
line and the closest valid choices (tomllib gives no line numbers; ``key_lines`` finds them).

``points`` turns one point of a grid into its profile changes and Config.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import random
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import ConfigError, closest
from ..soc import BITS
from ..soc.profile import COST_FIELDS, COST_TOP
from ..soc.schema import SECTION_FIELDS, TOP_FIELDS
from .lines import key_lines

MODES = ("product", "list", "random")
# the most configurations one sweep runs: it lists and sorts them all before the first runs (about
# 400 MB and 1.5 s for a million); a larger grid is refused at once, not left to run out of memory
MAX_CONFIGURATIONS = 1_000_000
RESERVED = ("mode", "samples", "seed")
KINDS = ("bits", "layer_bits", "support", "pin", "placement", "soc")
FORMS = "bits.<processor>, layer_bits.<node>, support.<processor>.<op>, pin.<node>, placement, soc.<profile field>"
NO_PIN = "none"
PLACEMENTS = ("cost", "first-fit")
# the profile's top-level fields and tables (from the schema: a new field is sweepable as it is added)
SOC_TOP = tuple(dict.fromkeys([*(f.key for f in TOP_FIELDS), *(k.split(".")[0].split("[")[0] for k in SECTION_FIELDS if k)]))


class GridError(ConfigError):
    """A sweep grid names an unknown key or value (the message names the file's line)."""


def has_placement() -> bool:
    """Does this npukit's Config carry a placement policy (issue 13)?"""
    return "placement" in {f.name for f in dataclasses.fields(Config)}


def placements() -> tuple[str, ...]:
    from .. import config  # noqa: PLC0415

    return tuple(getattr(config, "PLACEMENTS", PLACEMENTS))


@dataclass(frozen=True)
class Axis:
    """One dotted key of the grid and its values."""

    key: str  # as written (the result column's name)
    kind: str  # one of KINDS
    target: tuple[str, ...]  # (processor,) | (node,) | (processor, op) | () | (profile path,)
    values: tuple
    line: int = 0  # 1-based line in the grid file (0: unknown)


@dataclass(frozen=True)
class Grid:
    axes: tuple[Axis, ...]
    mode: str = "product"
    samples: int | None = None
    seed: int = 0
    where: str = "<grid>"
    lines: Mapping[str, int] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def __len__(self) -> int:
        if self.mode == "list":
            return max((len(a.values) for a in self.axes), default=1)
        if self.mode == "random":
            return int(self.samples or 0)
        return self.size

    @property
    def size(self) -> int:
        """Configurations of the full product."""
        return math.prod(len(a.values) for a in self.axes)

    def points(self) -> list[tuple]:
        """Every configuration's values (one per axis), in grid order."""
        vals = [a.values for a in self.axes]
        return [tuple(v[k] for v, k in zip(vals, pos)) for pos in self.positions()]

    def positions(self) -> list[tuple[int, ...]]:
        """Every configuration as the position of its value in each axis's values, in grid order
        (what a sweep sorts and sends to its workers: small integers, not the values)."""
        sizes = [range(len(a.values)) for a in self.axes]
        if self.mode == "list":
            return [tuple(i if len(r) > 1 else 0 for r in sizes) for i in range(len(self))]
        if self.mode == "random":
            picks = sorted(random.Random(self.seed).sample(range(self.size), int(self.samples)))
            return [_decode(k, sizes) for k in picks]
        return list(itertools.product(*sizes))

    @property
    def digest(self) -> str:
        doc = [self.mode, self.samples, self.seed, [[a.key, list(a.values)] for a in self.axes]]
        return hashlib.sha256(canon(doc).encode()).hexdigest()[:16]

    def fail(self, key: str, msg: str) -> GridError:
        line = line_of(self.lines, key)
        return GridError(f"{self.where}:{line}: {key}: {msg}" if line else f"{self.where}: {key}: {msg}")


def line_of(lines: Mapping[str, int], key: str) -> int:
    """The line of a dotted key, else of the nearest key holding it (a key inside an inline table
    has no line of its own), 0 when none is known."""
    while key:
        line = lines.get(key)
        if line:
            return line
        key = key.rpartition(".")[0]
    return 0


def _decode(k: int, vals: list[tuple]) -> tuple:
    out = []
    for v in reversed(vals):
        k, r = divmod(k, len(v))
        out.append(v[r])
    return tuple(reversed(out))


def canon(x: Any) -> str:
    """Canonical JSON text of a value (sorted keys, no spaces): ids and sort keys."""
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def config_id(axes: tuple[Axis, ...], values: tuple) -> str:
    """A configuration's identity: its keys and values (what a resumed sweep skips by)."""
    return hashlib.sha256(canon([[a.key, v] for a, v in zip(axes, values)]).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# reading


def load_grid(spec) -> Grid:
    """A Grid from a path to a .toml file, TOML text, a dict (``{"grid": {...}}`` or the [grid]
    table itself) or a Grid."""
    if isinstance(spec, Grid):
        return spec
    if isinstance(spec, Mapping):
        spec = _as_toml(spec)
        doc = dict(spec) if "grid" in spec and isinstance(spec["grid"], Mapping) else {"grid": dict(spec)}
        return parse_grid(doc, "<grid>", {})
    s = str(spec)
    if "\n" in s or "=" in s and not Path(s).exists():
        where, text = "<grid>", s
    else:
        p = Path(s)
        if p.is_dir():
            raise GridError(f"{p}: is a directory, expected a grid file (.toml)")
        if not p.exists():  # (a pipe -- the shell's --grid <(...) -- is read as a file is)
            raise GridError(f"{p}: no such grid file")
        try:
            text = p.read_text(encoding="utf-8-sig")  # (a byte-order mark a Windows editor wrote: dropped)
        except UnicodeDecodeError:
            raise GridError(f"{p}: not a text file; a grid is TOML (a [grid] table of dotted keys)") from None
        except OSError as e:
            raise GridError(f"{p}: cannot read: {e.strerror or e}") from None
        where = s
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{where}: not valid TOML: {e}") from None
    return parse_grid(doc, where, key_lines(text))


def _as_toml(v):
    """A grid written in Python as TOML would hold it: a tuple, a range or a numpy array of values is
    their list (``range(256, 2049, 256)``, ``np.linspace(...)``), a numpy number a Python number."""
    if isinstance(v, Mapping):
        return {k: _as_toml(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, range)):
        return [_as_toml(x) for x in v]
    if type(v).__module__ == "numpy" and hasattr(v, "tolist"):  # an array or a scalar (no numpy import)
        return _as_toml(v.tolist())
    return v


def _flatten(t: Mapping, prefix: str = ""):
    for k, v in t.items():
        path = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            yield from _flatten(v, path)
        else:
            yield path, v


def parse_grid(doc: Mapping, where: str, lines: Mapping[str, int]) -> Grid:
    """The Grid of a parsed document; checks what needs no model or profile."""

    def fail(key: str, msg: str, line_key: str | None = None):
        line = line_of(lines, line_key or f"grid.{key}")
        raise GridError(f"{where}:{line}: {key}: {msg}" if line else f"{where}: {key}: {msg}")

    for k in doc:
        if k != "grid":
            fail(k, f"unknown table; a grid file has one table, [grid] ({closest(k, ['grid'])})", k)
    g = doc.get("grid")
    if not isinstance(g, Mapping):
        raise GridError(f"{where}: no [grid] table; put the keys under [grid]")
    g = dict(g)
    mode = g.pop("mode", "product")
    if mode not in MODES:
        fail("mode", f"unknown mode {mode!r}; {closest(str(mode), MODES)}")
    samples, seed = g.pop("samples", None), g.pop("seed", 0)
    if mode == "random":
        if samples is None:
            raise GridError(f"{where}: mode = \"random\" needs samples = N (and optionally seed = S)")
        if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
            fail("samples", f"must be a positive integer, got {samples!r}")
    elif samples is not None:
        fail("samples", f"only mode = \"random\" takes samples (mode is {mode!r})")
    if not isinstance(seed, int) or isinstance(seed, bool):
        fail("seed", f"must be an integer, got {seed!r}")
    axes = []
    keys: set[str] = set()
    for key, raw in _flatten(g):
        if key in keys:  # a dotted key and a table that both reach it
            fail(key, "is set twice (once as one quoted key, once inside a table); keep one")
        keys.add(key)
        axes.append(_axis(key, raw, lines.get(f"grid.{key}", 0), fail, mode))
    if not axes:
        raise GridError(f"{where}: the [grid] table has no keys; use {FORMS}")
    full = {f"grid.{a.key}": a.line for a in axes} | {k: v for k, v in lines.items() if k.startswith("grid.")}
    grid = Grid(tuple(axes), mode, samples, seed, where, {k.removeprefix("grid."): v for k, v in full.items()})
    if mode == "list":
        long = [a for a in axes if len(a.values) > 1]
        n = len(long[0].values) if long else 1
        for a in long:
            if len(a.values) != n:
                fail(a.key, f"mode = \"list\" zips the lists: {len(a.values)} values, but "
                            f"{long[0].key} has {len(long[0].values)}")  # fmt: skip
        seen: dict[str, int] = {}
        for i, p in enumerate(grid.points()):
            c = canon(list(p))
            if c in seen:
                raise GridError(f"{where}: mode = \"list\": configurations {seen[c]} and {i} are the same")
            seen[c] = i
    if mode == "random" and samples > grid.size:
        fail("samples", f"{samples} samples but the grid has only {grid.size} configurations; "
                        "lower samples or use mode = \"product\"")  # fmt: skip
    if mode == "random" and samples > MAX_CONFIGURATIONS:
        fail("samples", f"{samples:,} samples, more than a sweep runs ({MAX_CONFIGURATIONS:,}); lower samples")
    if len(grid) > MAX_CONFIGURATIONS:
        dims = " x ".join(str(len(a.values)) for a in axes if len(a.values) > 1)
        raise GridError(f"{where}: the grid makes {len(grid):,} configurations ({dims}), more than a sweep runs "
                        f"({MAX_CONFIGURATIONS:,}); sweep fewer values, or draw some: mode = \"random\" with "
                        "samples = N")  # fmt: skip
    return grid


def _same(v):
    """A hashable form of a grid value under which two values are one exactly when they are equal and of
    one kind (1000 and 1000.0 are one number; true is not 1; tables and lists by their contents)."""
    if _number(v):
        return ("n", v)  # (1000 == 1000.0, and they hash alike)
    if isinstance(v, Mapping):
        return ("m", frozenset((k, _same(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_same(x) for x in v))
    try:
        hash(v)
    except TypeError:
        return ("r", type(v).__name__, repr(v))
    return (type(v).__name__, v)


def _number(v) -> bool:
    """An int or a float (1000 and 1000.0 are one value), not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


INT64 = (-(2**63), 2**63 - 1)


def _beyond_int64(v):
    """The first integer in ``v`` (a value, a list, a table) that a TOML integer cannot hold (64-bit:
    Python's reader takes any, a Parquet column does not), or None."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v if not INT64[0] <= v <= INT64[1] else None
    items = v.values() if isinstance(v, Mapping) else v if isinstance(v, (list, tuple)) else ()
    return next((b for b in map(_beyond_int64, items) if b is not None), None)


def _axis(key: str, raw, line: int, fail, mode: str) -> Axis:
    head, _, rest = key.partition(".")
    values = tuple(raw) if isinstance(raw, list) else (raw,)
    if not values:
        fail(key, "must list at least one value")
    big = _beyond_int64(values)
    if big is not None:
        fail(key, f"{big} is beyond a TOML integer (64-bit: {INT64[0]} .. {INT64[1]})")
    if mode != "list":  # (one pass: a value's kind and contents, hashed)
        seen: set = set()
        for v in values:
            k = _same(v)
            if k in seen:
                fail(key, f"value {v!r} is listed twice")
            seen.add(k)
    if head == "placement" and not rest:
        if not has_placement():
            fail(key, "this npukit has no placement policy yet (Config has no 'placement' field); remove the key")
        for v in values:
            if v not in placements():
                fail(key, f"unknown placement {v!r}; {closest(str(v), placements())}")
        return Axis(key, "placement", (), values, line)
    if head == "bits" and rest and "." not in rest:
        for v in values:
            if v not in BITS:
                fail(key, f"unknown bit-width {v!r}; {closest(str(v), BITS)}")
        return Axis(key, "bits", (rest,), values, line)
    if head == "layer_bits" and rest:
        for v in values:
            if v not in BITS:
                fail(key, f"unknown bit-width {v!r}; {closest(str(v), BITS)}")
        return Axis(key, "layer_bits", (rest,), values, line)
    if head == "support" and rest.count(".") >= 1:
        proc, op = rest.split(".", 1)
        for v in values:
            if not isinstance(v, bool):
                fail(key, f"must be true or false, got {v!r}")
        return Axis(key, "support", (proc, op), values, line)
    if head == "pin" and rest:
        for v in values:
            if not isinstance(v, str):
                fail(key, f"must be a processor name or {NO_PIN!r}, got {v!r}")
        return Axis(key, "pin", (rest,), values, line)
    if head == "soc" and rest:
        return Axis(key, "soc", (rest,), values, line)
    if head in ("bits", "support", "layer_bits", "pin", "soc", "placement"):
        form = {"bits": "bits.<processor>", "support": "support.<processor>.<op>", "layer_bits": "layer_bits.<node>",
                "pin": "pin.<node>", "soc": "soc.<profile field>", "placement": "placement"}[head]  # fmt: skip
        fail(key, f"malformed key; write {form}")
    fail(key, f"unknown key; {closest(head, KINDS + RESERVED)} (keys are {FORMS})")
    raise AssertionError  # fail raised


# ---------------------------------------------------------------------------------------------
# a point's effect on the partition; the ids and sort keys of many points

# configurations that differ only in these share one first-fit partition (see SocProfile.rules_digest)


def moves_ops(path: str, value=None, soc=None) -> bool:
    """Can setting profile field ``path`` (to ``value`` on ``soc``) change the first-fit partition?
    A whole macs_per_cycle table can when its keys (the bit-widths the processor runs, which the
    checks read) differ from the profile's; without a profile, assume it can."""
    parts = path.split(".")
    if parts[0] == "processors" and len(parts) >= 3:
        if parts[2] == "macs_per_cycle" and len(parts) == 3:
            if soc is None or not isinstance(value, Mapping) or parts[1] not in soc.names:
                return True
            return set(value) != set(soc.processor(parts[1]).macs_per_cycle)
        return parts[2] not in COST_FIELDS
    return parts[0] not in COST_TOP


def _group(a: Axis) -> int:
    """0: the partition depends on it; 1: another profile change; 2: the rest."""
    if a.kind in ("support", "pin", "placement") or (a.kind == "soc" and moves_ops(a.target[0])):
        return 0
    return 1 if a.kind == "soc" else 2


class PointKeys:
    """``config_id`` and a sort key of the many points of one grid given as value positions
    (``Grid.positions``), each value's canonical text worked out once.  The sort key is (what the
    partition depends on, the other profile changes, the rest): sorting points by it groups the
    configurations that share a partition, then a profile."""

    def __init__(self, axes: tuple[Axis, ...]):
        self.axes = axes
        self._keys = [canon(a.key) for a in axes]
        self._groups = [_group(a) for a in axes]
        self._texts: list[list] = [[None] * len(a.values) for a in axes]

    def values(self, pos: tuple[int, ...]) -> tuple:
        return tuple(a.values[k] for a, k in zip(self.axes, pos))

    def config_id(self, pos: tuple[int, ...]) -> str:
        """``config_id`` of the point (the same text, hashed)."""
        parts = []
        for j, k in enumerate(pos):
            t = self._texts[j][k]
            if t is None:
                t = self._texts[j][k] = canon(self.axes[j].values[k])
            parts.append(f"[{self._keys[j]},{t}]")
        return hashlib.sha256(f"[{','.join(parts)}]".encode()).hexdigest()[:16]

    def sort_key(self, pos: tuple[int, ...]) -> tuple:
        groups: tuple[list, list, list] = ([], [], [])
        for g, k in zip(self._groups, pos):
            groups[g].append(k)
        return tuple(groups[0]), tuple(groups[1]), tuple(groups[2])
