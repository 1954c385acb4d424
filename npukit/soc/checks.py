"""The field checks of the profile loader: ``_V``, bound to a file name, checks a table's keys
(unknown, missing), a value against its schema ``Field`` (type, choices, bit-widths, lists, bounds)
and reads a table's fields with their defaults.  Its errors name the file and the field:
``soc.toml: processors.dla.macs_per_cycle.int4: must be a positive number, got -3``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ..errors import ProfileError, closest
from .schema import BITS, DTYPES, HUGE, TINY, Field

_INDEX = re.compile(r"\[(\d+)\]")  # a list index in a field path: links[0].between[1]


class _V:
    """Validation helpers bound to a file name.  ``dotted``: list indices in the fields named as the
    dotted keys of ``SocProfile.with_changes`` and a sweep grid spell them (``links.0.between.1``),
    not as a file's readers know them (``links[0].between[1]``)."""

    def __init__(self, where: str, dotted: bool = False):
        self.where = where
        self.dotted = dotted

    def fail(self, path: str, msg: str):
        if self.dotted:
            path = _INDEX.sub(r".\1", path)
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
                self.fail(path, f"must be a list of {'integers' if inner == 'int' else 'strings'}, got {v!r}")
            if not v and f.key not in ("sources",):
                self.fail(path, "must not be empty (leave the field out for " + (
                    "the order of the [processors.*] tables)" if f.key == "order" else "no limit)"))
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
