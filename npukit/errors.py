"""Errors a user can meet.  Every one names the file, node or profile field at fault and says
what would be accepted.  The CLI prints ``npukit: error: <message>`` and exits 2."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable


class NpukitError(Exception):
    """Base class of every error npukit raises on bad input or a bad edit."""


class ModelError(NpukitError):
    """The model file cannot be read or imported (empty, truncated, wrong format)."""


class UnsupportedOpError(ModelError):
    """The model uses operators no importer knows; the message lists all of them."""


class ShapeError(ModelError):
    """A model input has a symbolic or unknown dimension."""


class ProfileError(NpukitError):
    """A SoC profile is malformed; the message names the file and the field."""


class ConfigError(NpukitError):
    """An edit names an unknown processor, op, node or bit-width, or asks for the impossible.

    ``field``: the config field at fault (``bits.dla``, ``pins."/conv1/Conv"``) when the error is an
    entry's of a config given whole; ``in_config`` puts it after the file's name."""

    field: str | None = None


def at_field(e: ConfigError, table: str, key=None) -> ConfigError:
    """``e`` marked as the error of config field ``table.key`` (the first mark stands)."""
    if e.field is None:
        e.field = table if key is None else f"{table}.{field_key(key)}"
    return e


def field_key(key) -> str:
    """A config key as TOML spells it: bare when it can be, else quoted (``"/conv1/Conv"``)."""
    key = str(key)
    return key if key and all(c.isalnum() or c in "_-" for c in key) and key.isascii() else json.dumps(key, ensure_ascii=False)


def in_config(where: str, e: ConfigError) -> ConfigError:
    """``e`` as the error of a config read from ``where`` (its file; "" for a dict or text): the file,
    then the field at fault, then what is wrong, as a bad bit-width in the file already reads."""
    return ConfigError(": ".join([*filter(None, (where, e.field)), str(e)]))


class DataError(NpukitError):
    """User data (inputs / labels) does not fit the model."""


def closest(name: str, choices: Iterable[str], n: int = 5) -> str:
    """A phrase listing the valid names closest to ``name`` (all of them if few, the close ones
    named first); a name longer than ``LONG`` characters is shortened."""
    choices = sorted(set(map(str, choices)))
    # the name in other letter case ('CONV2D', 'Softmax') or with spaces around first: difflib's ratio
    # is case-sensitive
    same = [c for c in choices if c.strip().lower() == str(name).strip().lower() and c != str(name)]
    if len(choices) <= 12:
        near = " or ".join(map(repr, map(_short, same[:2]))) or _near(str(name), choices)
        ask = f"did you mean {near}? " if near else ""
        return f"{ask}valid names: {', '.join(repr(_short(c)) for c in choices)}"
    shown = same + [c for c in difflib.get_close_matches(str(name), choices, n=n, cutoff=0.3) if c not in same]
    shown = shown[:n]
    lead = "closest valid names"
    if not shown:
        shown = choices[:n]
        lead = f"some of the {len(choices)} valid names"
    return f"{lead}: {', '.join(repr(_short(c)) for c in shown)}"


LONG = 60


def _near(name: str, choices: list[str]) -> str:
    """The choices as close to ``name`` as the closest one (difflib's ratio >= 0.6), at most three:
    "'a'", "'a' or 'b'", "'a', 'b' or 'c'"."""
    scored = sorted((-difflib.SequenceMatcher(None, name, c).ratio(), c) for c in choices)
    if not scored or -scored[0][0] < 0.6:
        return ""
    top = [repr(_short(c)) for r, c in scored if r == scored[0][0]][:3]
    return top[0] if len(top) == 1 else f"{', '.join(top[:-1])} or {top[-1]}"


def _short(name: str) -> str:
    return name if len(name) <= LONG else name[: LONG - 3] + "..."


def unknown(what: str, name: str, choices: Iterable[str]) -> ConfigError:
    """A ConfigError for an unknown name, listing the closest valid ones."""
    return ConfigError(f"unknown {what} {name!r}; {closest(name, choices)}")


class PartitionLimitWarning(UserWarning):
    """A plan gives an accelerator more offloaded partitions than its runtime can take
    (``processors.<name>.max_partitions``): estimated all the same, but the chip would refuse it."""
