"""Config: the user's edits as one immutable, hashable value (no tvm).

``Study(model, soc, config)`` rebuilds any state from it; ``to_toml()`` / ``to_json()`` and
``Config.from_toml()`` / ``from_json()`` round-trip it, so a what-if is a file you can share.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .errors import ConfigError, field_key
from .soc import BITS

PLACEMENTS = ("cost", "first-fit")


@dataclass(frozen=True)
class Config:
    disabled: frozenset[tuple[str, str]] = field(default_factory=frozenset)  # (processor, op kind)
    enabled: frozenset[tuple[str, str]] = field(default_factory=frozenset)  # (processor, op kind)
    pins: tuple[tuple[str, str], ...] = ()  # (node, processor), sorted
    bits: tuple[tuple[str, str], ...] = ()  # (processor, bits), sorted
    layer_bits: tuple[tuple[str, str], ...] = ()  # (node, bits), sorted
    # "cost": npukit's cost model chooses among the processors that accept each op (and whether an
    # offload pays for its call and transfers); "first-fit": the profile's preference order decides
    placement: str = "cost"

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"placement: must be one of {', '.join(map(repr, PLACEMENTS))}, got {self.placement!r}")
        # an op kind as the profile's op tables key it: "relax.nn.conv2d" and " conv2d" are "conv2d" (they were
        # accepted and then matched nothing, the edit silently without effect); an unknown one is kept for
        # ``pipeline.check`` to name
        given = {which: {(p, _kind(op)): f"{p}:{op}" for p, op in sorted(getattr(self, which))}
                 for which in ("disabled", "enabled")}  # fmt: skip
        for p, kind in sorted(set(given["disabled"]) & set(given["enabled"])):  # (said in the user's spellings)
            raise ConfigError(f"support of {kind} on {p} is both disabled and enabled (disabled: "
                              f"{given['disabled'][(p, kind)]}; enabled: {given['enabled'][(p, kind)]}); keep one")  # fmt: skip
        for which in ("disabled", "enabled"):
            kinds = frozenset(given[which])
            if kinds != getattr(self, which):
                object.__setattr__(self, which, kinds)

    # -- edits (each returns a new Config) -----------------------------------------------------
    def with_support(self, proc: str, op: str, on: bool) -> Config:
        key = (proc, op)
        dis, en = set(self.disabled), set(self.enabled)
        dis.discard(key)
        en.discard(key)
        (en if on else dis).add(key)
        return replace(self, disabled=frozenset(dis), enabled=frozenset(en))

    def without_support_edit(self, proc: str, op: str) -> Config:
        key = (proc, op)
        return replace(self, disabled=self.disabled - {key}, enabled=self.enabled - {key})

    def with_pin(self, node: str, proc: str | None) -> Config:
        pins = {n: p for n, p in self.pins if n != node}
        if proc is not None:
            pins[node] = proc
        return replace(self, pins=tuple(sorted(pins.items())))

    def with_bits(self, bits: str, processor: str | None = None, layer: str | None = None) -> Config:
        if layer is not None:
            lb = dict(self.layer_bits)
            if bits is None:
                lb.pop(layer, None)
            else:
                lb[layer] = bits
            return replace(self, layer_bits=tuple(sorted(lb.items())))
        pb = dict(self.bits)
        if bits is None:
            pb.pop(processor, None)
        else:
            pb[processor] = bits
        return replace(self, bits=tuple(sorted(pb.items())))

    def with_placement(self, placement: str) -> Config:
        return replace(self, placement=placement)

    @property
    def partition_key(self) -> tuple:
        """The part of the config the partition depends on.  With "first-fit" a processor's bit-width
        never moves ops, a layer's can (a processor that cannot run it refuses the layer's ops); with
        "cost" both can (a narrower width makes an accelerator cheaper), so they are part of it."""
        if self.placement == "first-fit":
            return (self.disabled, self.enabled, self.pins, self.placement, self.layer_bits)
        return (self.disabled, self.enabled, self.pins, self.placement, self.bits, self.layer_bits)

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        d: dict = {}
        if self.disabled:
            d["disabled"] = [f"{p}:{o}" for p, o in sorted(self.disabled)]
        if self.enabled:
            d["enabled"] = [f"{p}:{o}" for p, o in sorted(self.enabled)]
        if self.pins:
            d["pins"] = dict(self.pins)
        if self.bits:
            d["bits"] = dict(self.bits)
        if self.layer_bits:
            d["layer_bits"] = dict(self.layer_bits)
        if self.placement != "cost":
            d["placement"] = self.placement
        return d

    @classmethod
    def coerce(cls, config) -> Config:
        """A Config from what a user passes for one: a Config, None (the defaults), a dict, TOML or
        JSON text, or a saved .toml / .json file's path."""
        import os  # noqa: PLC0415

        if config is None:
            return cls()
        if isinstance(config, Config):
            return config
        if isinstance(config, Mapping):
            return cls.from_dict(config)
        if isinstance(config, os.PathLike):
            return cls.read(config)
        if isinstance(config, str):
            s = config.strip()
            if _is_path(s):  # a file's path, not its text
                return cls.read(s)
            return cls.from_json(s) if s.startswith("{") else cls.from_toml(s)
        raise ConfigError(f"config must be a npukit.Config, a dict, TOML/JSON text or a .toml/.json file, got "
                          f"{type(config).__name__}")  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping, where: str = "config") -> Config:
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where}: must be a table, got {type(d).__name__}")
        valid = ("disabled", "enabled", "pins", "bits", "layer_bits", "placement")
        for k in d:
            if k not in valid:
                raise ConfigError(f"{where}: unknown field {k!r}; valid: {', '.join(valid)}")

        def pairs(key: str) -> frozenset[tuple[str, str]]:
            out = set()
            items = d.get(key, [])
            if isinstance(items, (set, frozenset)):
                items = sorted(items, key=str)
            if not isinstance(items, (list, tuple)):  # (a string's letters, a table's keys, an int: not a list)
                raise ConfigError(f"{where}: {key}: must be a list of 'processor:op' strings, got {items!r}")
            for i, s in enumerate(items):
                if not isinstance(s, str) or s.count(":") != 1:
                    raise ConfigError(f"{where}: {key}[{i}]: expected 'processor:op', got {s!r}")
                a, b = s.split(":")
                out.add((a, b))
            return frozenset(out)

        def table(key: str, check_bits: bool) -> tuple[tuple[str, str], ...]:
            t = d.get(key, {})
            if not isinstance(t, Mapping):
                raise ConfigError(f"{where}: {key}: must be a table of name = value")
            for k, v in t.items():
                if not isinstance(v, str) or (check_bits and v not in BITS):
                    want = f"one of {', '.join(BITS)}" if check_bits else "a processor name"
                    raise ConfigError(f"{where}: {key}.{field_key(k)}: must be {want}, got {v!r}")
            return tuple(sorted((str(k), str(v)) for k, v in t.items()))

        placement = d.get("placement", "cost")
        if placement not in PLACEMENTS:
            raise ConfigError(f"{where}: placement: must be one of {', '.join(map(repr, PLACEMENTS))}, got {placement!r}")
        args = (pairs("disabled"), pairs("enabled"), table("pins", False), table("bits", True), table("layer_bits", True),
                placement)  # fmt: skip
        try:
            return cls(*args)
        except ConfigError as e:  # (a contradiction): a file's name before it, as pipeline.check's errors have
            if where == "config":
                raise
            raise ConfigError(f"{where}: {e}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def to_toml(self) -> str:
        import tomli_w  # noqa: PLC0415

        return tomli_w.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str, where: str = "config") -> Config:
        from .soc.load import _no_twice, _Twice  # noqa: PLC0415 - a key written twice: refused, as in a profile

        try:
            doc = json.loads(text, object_pairs_hook=_no_twice)
        except _Twice as e:
            raise ConfigError(f"{where}: {e}") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{where}: not valid JSON: {e}") from None
        return cls.from_dict(doc, where)

    @classmethod
    def from_toml(cls, text: str, where: str = "config") -> Config:
        try:
            return cls.from_dict(tomllib.loads(text), where)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{where}: not valid TOML: {e}") from None

    @staticmethod
    def origin(config) -> str | None:
        """Where a config given whole came from, as its errors name it: the file's path, "" for a
        dict or TOML / JSON text (its errors name the field alone), None for a Config (or none)."""
        import os  # noqa: PLC0415

        if config is None or isinstance(config, Config):
            return None
        if isinstance(config, os.PathLike):
            return str(config)
        if isinstance(config, str) and _is_path(config):
            return config.strip()
        return ""

    @classmethod
    def read(cls, path) -> Config:
        """A config saved as a file (``.json`` is JSON, anything else TOML), errors naming the file."""
        from pathlib import Path  # noqa: PLC0415

        path = Path(path)
        if path.is_dir():
            raise ConfigError(f"{path}: is a directory, expected a config file (.toml or .json, see --save-config)")
        if not path.exists():  # (a pipe -- the shell's --config <(...) -- is read as a file is)
            raise ConfigError(f"{path}: no such config file")
        try:
            text = path.read_text(encoding="utf-8-sig")  # (a byte-order mark a Windows editor wrote: dropped)
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a text file; a config is TOML or JSON (see --save-config)") from None
        return cls.from_json(text, str(path)) if path.suffix.lower() == ".json" else cls.from_toml(text, str(path))


def _kind(op: str) -> str:
    """The short name of a known op kind (``opset.canonical``), else ``op`` as given."""
    from .opset import canonical  # noqa: PLC0415

    try:
        return canonical(op, "op")
    except ConfigError:
        return op


def _is_path(s: str) -> bool:
    """Config text naming a saved file (one line ending .toml / .json, or naming a file that exists,
    ``my.cfg``), not the text of one; a file of another name was parsed as TOML text ("not valid TOML")."""
    import os  # noqa: PLC0415

    s = s.strip()
    if not s or "\n" in s or "=" in s or s.startswith(("{", "[")):
        return False
    return s.lower().endswith((".toml", ".json")) or os.path.isfile(s)
