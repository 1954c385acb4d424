"""Validated SoC profiles as plain frozen values (no tvm): ``OpRule``, ``Processor``, ``Link`` and
``SocProfile``.  A profile is hashable by the digest of its document and pickles as that document,
so a worker process rebuilds it exactly."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import ProfileError
from .schema import BITS

# ---------------------------------------------------------------------------------------------
# the validated profile


@dataclass(frozen=True)
class OpRule:
    op: str
    kernel_max: tuple[int, int] | None = None
    strides: tuple[int, ...] | None = None
    dilations: tuple[int, ...] | None = None
    depthwise: bool = True
    grouped: bool = True
    max_channels: int | None = None
    max_elements: int | None = None
    ranks: tuple[int, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    axis: str = "any"
    max_k: int | None = None
    max_boxes: int | None = None
    const_weights: bool = False
    fused_only: bool = False
    note: str = ""


@dataclass(frozen=True)
class Processor:
    name: str
    kind: str
    host: bool
    clock_mhz: float
    macs_per_cycle: Mapping[str, float]
    vector_ops_per_cycle: Mapping[str, float]
    default_bits: str
    mac_array: Mapping[str, int]
    vector_lanes: int
    efficiency: Mapping[str, float]
    onchip_bytes: int
    dram_bytes_per_cycle: float
    onchip_bytes_per_cycle: float
    layout: str
    op_overhead_cycles: int
    call_overhead_cycles: int
    energy_pj_per_mac: Mapping[str, float]
    energy_pj_per_op: Mapping[str, float]
    energy_pj_per_byte: float
    energy_pj_per_onchip_byte: float
    static_mw: float
    max_tensor_bytes: int | None
    dtypes: tuple[str, ...] | None
    kernel_library: str
    ops: Mapping[str, OpRule]
    description: str = ""
    weight_bytes_per_cycle: float = 0.0  # 0 in a hand-built Processor: use dram_bytes_per_cycle
    weight_port: str = "shared"
    output_elems_per_cycle: float = 0.0
    reduction: Mapping[str, float] | None = None  # {unroll, serial, exponent}; None: util_red = 1
    kernel_api: str = "npukit"  # "npukit" (kernel_library's vendor-style API) or "cmsis-nn"
    max_partitions: int | None = None  # offloaded partitions its runtime can take; None: no limit
    # op kind -> its key in ops, where the profile sets it false (refused as disabled, not as missing)
    disabled_ops: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def bits(self) -> tuple[str, ...]:
        """Supported bit-widths, narrowest first."""
        return tuple(b for b in BITS if b in self.macs_per_cycle)

    def eff_key(self, cls: str) -> str:
        """The efficiency key used for kernel class (or op kind) ``cls``: the class, else its kind,
        else ``"*"``."""
        eff = self.efficiency
        if cls in eff:
            return cls
        kind = cls.split(".", 1)[0]
        return kind if kind in eff else "*"

    def eff(self, cls: str) -> float:
        """Efficiency of kernel class (or op kind) ``cls``: ``efficiency[class]``, else
        ``efficiency[kind]``, else ``efficiency["*"]`` (1 when absent)."""
        return self.efficiency.get(self.eff_key(cls), 1.0)

    def util_red(self, k: int) -> float:
        """Reduction utilisation of a conv / matmul whose outputs each accumulate ``k`` products
        (``reduction`` field): 1 up to ``unroll``, else serial * (unroll / k) ** exponent."""
        r = self.reduction
        if not r or k <= r["unroll"]:
            return 1.0
        return r["serial"] * (r["unroll"] / k) ** r["exponent"]


@dataclass(frozen=True)
class Link:
    between: tuple[str, str]
    bandwidth_gbps: float
    latency_us: float
    via_dram: bool
    energy_pj_per_byte: float


# processor fields no partition reads under given verdicts (costs, energy, library names), and
# top-level tables likewise: profiles that differ only in these partition alike.  Not ``layout``:
# the axis rule reads an image's axis in it (``rules_axis``), so a layout can change a verdict
COST_FIELDS = frozenset({
    "description", "clock_mhz", "macs_per_cycle", "vector_ops_per_cycle", "default_bits", "mac_array", "vector_lanes",
    "efficiency", "reduction", "onchip_bytes", "dram_bytes_per_cycle", "onchip_bytes_per_cycle",
    "weight_bytes_per_cycle", "weight_port", "output_elems_per_cycle", "op_overhead_cycles",
    "call_overhead_cycles", "energy_pj_per_mac", "energy_pj_per_op", "energy_pj_per_byte",
    "energy_pj_per_onchip_byte", "static_mw", "kernel_library", "max_partitions",
})  # fmt: skip
COST_TOP = frozenset({"name", "description", "sources", "conversion", "links"})


@dataclass(frozen=True)
class SocProfile:
    name: str
    description: str
    sources: tuple[str, ...]
    processors: tuple[Processor, ...]
    host: str
    order: tuple[str, ...]  # accelerators in preference order
    prefer: Mapping[str, tuple[str, ...]]
    links: tuple[Link, ...]
    layout_on: str
    quantize_on: str
    path: str
    raw: Mapping[str, Any]  # the validated document, for round trips and what-if edits
    target: str = "host"  # the build target of generated projects (npukit.codegen.targets)
    flash_bytes: int | None = None  # program-image budget (code + constants), None: none
    sram_bytes: int | None = None  # working-memory budget (data + bss + heap + stack), None: none

    def __reduce__(self):
        """Pickles as its validated document: a worker process re-validates it into an equal profile."""
        from .load import parse_profile  # noqa: PLC0415

        return (parse_profile, (_thaw(self.raw), self.path))

    def __hash__(self) -> int:
        return hash(self.digest)

    def __eq__(self, other) -> bool:
        return isinstance(other, SocProfile) and other.digest == self.digest

    @property
    def digest(self) -> str:
        d = self.__dict__.get("_digest")
        if d is None:
            d = hashlib.sha256(_dumps(self.raw).encode()).hexdigest()[:16]
            object.__setattr__(self, "_digest", d)
        return d

    @property
    def rules_digest(self) -> str:
        """Digest of what the BYOC partition reads of the profile beside the verdicts (processor
        names, kinds, host, supported ops and their limits, placement order): equal for profiles
        that differ only in costs (``COST_FIELDS``, ``COST_TOP``)."""
        d = self.__dict__.get("_rules_digest")
        if d is None:
            doc = {k: v for k, v in _thaw(self.raw).items() if k not in COST_TOP}
            doc["processors"] = {n: {k: v for k, v in p.items() if k not in COST_FIELDS}
                                 for n, p in doc.get("processors", {}).items()}  # fmt: skip
            d = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
            object.__setattr__(self, "_rules_digest", d)
        return d

    @property
    def names(self) -> tuple[str, ...]:
        d = self.__dict__.get("_names")
        if d is None:
            d = tuple(p.name for p in self.processors)
            object.__setattr__(self, "_names", d)
        return d

    def processor(self, name: str) -> Processor:
        for p in self.processors:
            if p.name == name:
                return p
        from ..errors import unknown  # noqa: PLC0415

        raise unknown("processor", name, self.names)

    @property
    def accelerators(self) -> tuple[str, ...]:
        d = self.__dict__.get("_accelerators")  # read per op by the placement and the rules: kept
        if d is None:
            d = tuple(p.name for p in self.processors if not p.host)
            object.__setattr__(self, "_accelerators", d)
        return d

    def preference(self, op: str) -> tuple[str, ...]:
        """Accelerators in the order they should get ``op`` (short name)."""
        first = self.prefer.get(op, ())
        return tuple(first) + tuple(n for n in self.order if n not in first)

    def link(self, a: str, b: str) -> Link:
        best, score = None, -1
        for ln in self.links:
            x, y = ln.between
            for p, q in ((x, y), (y, x)):
                if p in (a, "*") and q in (b, "*"):
                    s = (p != "*") + (q != "*")
                    if s > score:
                        best, score = ln, s
        if best is None:  # validated on load; kept for safety
            raise ProfileError(f"{self.path}: links: no link between {a} and {b}")
        return best

    def with_changes(self, changes: Mapping[str, Any]) -> SocProfile:
        """A new validated profile with dotted fields replaced: ``{"processors.dla.clock_mhz": 800}``;
        a number indexes a list of tables (``"links.0.bandwidth_gbps"``)."""
        doc = thawed(self.raw)
        for dotted, value in changes.items():
            cur = doc
            parts = dotted.split(".")
            for k, p in enumerate(parts):
                last = k == len(parts) - 1
                if isinstance(cur, list):
                    if not p.isdigit() or int(p) >= len(cur):
                        raise ProfileError(f"{self.path}: {dotted}: {'.'.join(parts[:k]) or p} is a list of "
                                           f"{len(cur)}; index it with 0..{len(cur) - 1}")  # fmt: skip
                    if last:
                        cur[int(p)] = value
                    else:
                        cur = cur[int(p)]
                elif last:
                    cur[p] = value
                else:
                    cur = cur.setdefault(p, {})
                if not last and not isinstance(cur, (dict, list)):
                    raise ProfileError(f"{self.path}: {dotted}: {p} is not a table")
        from .load import parse_profile  # noqa: PLC0415 - the loader builds profiles; this edits one

        edited = str(self.path) if str(self.path).endswith(" (edited)") else f"{self.path} (edited)"  # (once)
        return parse_profile(doc, edited, dotted=True)  # (its fields in the changes' spelling: links.0)

    def to_toml(self) -> str:
        import tomli_w  # noqa: PLC0415

        return tomli_w.dumps(_thaw(self.raw))


def _dumps(frozen) -> str:
    """The JSON text of a frozen document, keys sorted (the same text as of its thawed form)."""
    return json.dumps(frozen, sort_keys=True, default=dict)


def thawed(frozen):
    """A frozen document as plain, mutable dicts and lists: ``_thaw``'s result, by a JSON round trip
    (a profile is plain TOML data: strings, numbers, booleans, tables, arrays), several times faster."""
    return json.loads(json.dumps(frozen, default=dict))


def _thaw(x):
    if isinstance(x, Mapping):
        return {k: _thaw(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_thaw(v) for v in x]
    return x


def _freeze(x):
    """A read-only deep copy: tables become mapping proxies of new dicts, arrays tuples (nothing of
    ``x`` is shared, so a caller's later change to ``x`` cannot reach the profile)."""
    if isinstance(x, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return tuple(_freeze(v) for v in x)
    return x

