"""SoC profiles: a TOML (or JSON) description of the processors, their limits, costs and links.

The schema is data (``TOP_FIELDS``, ``PROCESSOR_FIELDS``, ``OP_FIELDS``, ``LINK_FIELDS``): the
validator reads it, and ``reference_markdown()`` turns it into docs/soc-profile.md, so the
reference page never drifts from what the loader accepts.  Errors name the file and the field:
``soc.toml: processors.dla.macs_per_cycle.int4: must be a positive number, got -3``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import ProfileError, closest
from .ops import canonical

BITS = ("int2", "int4", "int8", "int16", "fp16", "fp32")
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint64",
          "uint32", "uint16", "uint8", "bool")  # fmt: skip
TINY, HUGE = 1e-9, 1e15  # sane bounds for rates and sizes: outside them the figures overflow
BIT_WIDTH = {"int2": 2, "int4": 4, "int8": 8, "int16": 16, "fp16": 16, "fp32": 32}
KINDS = ("cpu", "dsp", "dla", "npu", "gpu")
LAYOUTS = ("NCHW", "NHWC", "tiled")
CONVERT_ON = ("dst", "src", "host")


# ---------------------------------------------------------------------------------------------
# kernel classes: finer efficiency keys than the op kind (``npukit.cost.kernel_class`` derives them)

KERNEL_CLASSES = {
    "depthwise": "any convolution kind but transposed ones, e.g. `conv2d.depthwise`: groups > 1, one input channel per group",
    "pointwise": "likewise, e.g. `conv2d.pointwise`: a 1-tap (1x1) kernel, groups 1",
    "gemv": "`matmul.gemv`: a matmul with one output row (M x batch = 1, matrix-vector)",
}
KERNEL_CLASS_DOC = ("`KIND.depthwise` (" + KERNEL_CLASSES["depthwise"] + "), `KIND.pointwise` ("
                    + KERNEL_CLASSES["pointwise"] + "), " + KERNEL_CLASSES["gemv"]
                    + "; any other op's class is its kind.")  # fmt: skip


def class_variant_ok(kind: str, variant: str) -> bool:
    """Is ``KIND.VARIANT`` a kernel class the cost model can derive?"""
    if variant in ("depthwise", "pointwise"):
        return kind.startswith("conv") and "transpose" not in kind
    return variant == "gemv" and kind == "matmul"


# ---------------------------------------------------------------------------------------------
# the schema


@dataclass(frozen=True)
class Field:
    key: str
    type: str  # str | bool | int | number | bits | bits_table | list[int] | list[str] | kernel | choice
    doc: str
    required: bool = False
    default: Any = None
    choices: tuple = ()
    minimum: float | None = None  # inclusive lower bound for numbers
    positive: bool = False  # strictly > 0
    maximum: float | None = None


TOP_FIELDS = (
    Field("name", "str", "Profile name, as used by `npukit.load_soc(name)` and `--soc`.", required=True),
    Field("description", "str", "One line shown by `npukit socs`.", required=True),
    Field("sources", "list[str]", "Public sources of the figures (datasheets, TRMs, vendor pages), or a note that they are illustrative.", default=()),
    Field("host", "str", "Name of the host processor. Default: the processor with `host = true`, else the only one of kind `cpu`."),
)  # fmt: skip

PLACEMENT_FIELDS = (
    Field("order", "list[str]", "Accelerators in order of preference when several accept an op (the host is always last). Default: the order of the `[processors.*]` tables."),
    Field("prefer", "table", "Per-op preference overriding `order`: `softmax = [\"dsp\", \"dla\"]`. Keys are op names (short or full Relax names); listed processors come first, in that order."),
)  # fmt: skip

CONVERSION_FIELDS = (
    Field("layout_on", "choice", "Which processor performs a layout conversion at a boundary: the consumer (`dst`), the producer (`src`) or the host.", default="dst", choices=CONVERT_ON),
    Field("quantize_on", "choice", "Which processor performs quantize / dequantize / requantize at a boundary where bit-widths differ.", default="dst", choices=CONVERT_ON),
)  # fmt: skip

PROCESSOR_FIELDS = (
    Field("kind", "choice", "What the processor is.", required=True, choices=KINDS),
    Field("description", "str", "Free text shown in the UI.", default=""),
    Field("host", "bool", "This processor runs the program and every op no accelerator accepts. Exactly one processor is the host.", default=False),
    Field("clock_mhz", "number", "Clock frequency in MHz; latency = cycles / clock_mhz microseconds.", required=True, positive=True),
    Field("macs_per_cycle", "bits_table", "Peak multiply-accumulates per cycle for each bit-width it runs; its keys are the bit-widths the processor supports.", required=True),
    Field("vector_ops_per_cycle", "bits_table", "Elementwise / vector operations per cycle per bit-width (activations, pooling, softmax, sorting). Default: `macs_per_cycle`."),
    Field("default_bits", "bits", "Bit-width ops run at on this processor unless the user sets another. Default: int8 if supported, else the widest supported."),
    Field("mac_array", "table", "Granularity at which the MAC array consumes each dimension (its lanes, or the size of one step): `{ channels_in = 16, channels_out = 16, pixels = 1, kernel_taps = 1 }`. Utilisation of a conv/matmul = fill(input channels per group, channels_in) * fill(out channels, channels_out) * fill(output pixels, pixels) with fill(n, p) = n / (ceil(n / p) * p). With `kernel_taps` = t > 1 the channels_in lanes may instead take channels_in / t channels x t kernel taps (part-kernel order, e.g. a depthwise or a 3-channel first layer): the input factor is the larger of fill(IC/groups, channels_in) and fill(IC/groups, channels_in / t) * fill(KH*KW, t). Matmul uses K, N, M. Default: all 1 (always full)."),
    Field("vector_lanes", "int", "Lanes of the vector unit; elementwise utilisation = n / (ceil(n / lanes) * lanes) over the innermost dim.", default=1, positive=True),
    Field("efficiency", "table", "Achieved fraction of peak (0..1] by kernel class or op kind, `\"*\"` for the rest: `{ \"*\" = 0.7, conv2d = 0.5, \"conv2d.depthwise\" = 0.3 }`. A key is `\"*\"`, an op kind, or a kernel class `KIND.VARIANT` derived from the op's shapes: " + KERNEL_CLASS_DOC + " An op (or a kernel, by its anchor) uses the first key present of: its class, its kind, `\"*\"` (default 1). Fitted by `npukit calibrate` for the host.", default=None),
    Field("reduction", "table", "How the MAC rate of scalar code depends on the reduction length K of a conv / matmul (the products accumulated into one output: IC/groups x KH x KW for a conv, K for a matmul): `{ unroll = 27, serial = 0.3, exponent = 0.25 }`. A reduction of at most `unroll` MACs is unrolled by the compiler and vectorised across outputs: util_red = 1. A longer one runs as one dependent accumulation chain per output, overlapped less with its neighbours the longer it is: util_red = serial x (unroll / K)^exponent (`serial` in (0, 1], `exponent` >= 0). MAC cycles are divided by util_red like the MAC-array utilisation. Default: none (util_red = 1). Fitted by `npukit calibrate` for the host (untuned TVM code).", default=None),
    Field("onchip_bytes", "int", "On-chip memory (SRAM / cache) in bytes. A tensor that fits is reused on chip between ops on this processor instead of going through DRAM.", default=0, minimum=0),
    Field("dram_bytes_per_cycle", "number", "Bandwidth to shared DRAM in bytes per cycle of this processor.", required=True, positive=True),
    Field("onchip_bytes_per_cycle", "number", "Bandwidth of on-chip memory in bytes per cycle. Default: 4 x `dram_bytes_per_cycle`.", positive=True),
    Field("weight_bytes_per_cycle", "number", "Bandwidth at which constant weights and biases are read, in bytes per cycle of this processor (e.g. weights kept in flash or MRAM while activations live in SRAM). Default: `dram_bytes_per_cycle`.", positive=True),
    Field("weight_port", "choice", "How weight reads share the memory system: `shared` (the same port as DRAM activation traffic: their cycles add) or `separate` (their own bus, e.g. Ethos-U's AXI1 to flash: weight and activation transfers overlap, memory cycles = the larger of the two).", default="shared", choices=("shared", "separate")),
    Field("output_elems_per_cycle", "number", "Output elements per cycle of a fixed-function output stage pipelined with the MAC array (accumulator -> bias, requantise, activation clamp -> store). When > 0 a conv / matmul's compute is max(MAC cycles, output elements / output_elems_per_cycle) and the elementwise epilogue fused after it (bias add, quantize, clip, relu ...) costs nothing more. 0: no such stage; a fused epilogue is vector work after the MACs.", default=0, minimum=0),
    Field("layout", "choice", "Activation layout the processor's kernels use; a boundary between processors with different layouts costs a conversion.", default="NHWC", choices=LAYOUTS),
    Field("op_overhead_cycles", "int", "Fixed cycles per op (kernel launch, descriptor setup).", default=0, minimum=0),
    Field("call_overhead_cycles", "int", "Fixed cycles per partition call (driver / mailbox round trip), added once per partition.", default=0, minimum=0),
    Field("energy_pj_per_mac", "bits_table", "Energy per MAC in picojoules for each bit-width.", required=True),
    Field("energy_pj_per_op", "bits_table", "Energy per vector operation in pJ. Default: `energy_pj_per_mac`."),
    Field("energy_pj_per_byte", "number", "Energy per byte moved to or from DRAM, in pJ.", required=True, minimum=0),
    Field("energy_pj_per_onchip_byte", "number", "Energy per byte moved within on-chip memory, in pJ. Default: `energy_pj_per_byte` / 10.", minimum=0),
    Field("static_mw", "number", "Static (leakage + idle) power in milliwatts while the processor is busy; energy += static_mw x latency.", default=0.0, minimum=0),
    Field("max_tensor_bytes", "int", "Largest tensor (input, weight or output, at the model's dtype) any op on this processor may touch.", positive=True),
    Field("dtypes", "list[str]", "Model tensor dtypes the processor accepts (e.g. `[\"float32\", \"int8\"]`). Default: any."),
    Field("kernel_library", "str", "C prefix of the vendor-style kernel library its generated calls use (e.g. `vsi_nn`). Default: the processor name."),
    Field("ops", "table", "Supported ops: one table per op (short Relax name, `[processors.dla.ops.conv2d]`), holding its limits. A non-host processor runs nothing else; the host runs everything no accelerator takes."),
)  # fmt: skip

OP_FIELDS = (
    Field("kernel_max", "kernel", "Largest kernel / pool window, as one int (square) or `[h, w]`."),
    Field("strides", "list[int]", "Allowed strides (every spatial stride must be in the list)."),
    Field("dilations", "list[int]", "Allowed dilations."),
    Field("depthwise", "bool", "Depthwise convolution (groups = channels) is supported.", default=True),
    Field("grouped", "bool", "Grouped convolution (1 < groups < channels) is supported.", default=True),
    Field("max_channels", "int", "Largest input or output channel count.", positive=True),
    Field("max_elements", "int", "Largest number of elements in any input or output tensor of the op.", positive=True),
    Field("ranks", "list[int]", "Allowed ranks of the op's first input."),
    Field("dtypes", "list[str]", "Model dtypes accepted for this op (overrides the processor's `dtypes`)."),
    Field("axis", "choice", "For softmax, reductions, sort and topk: `last` accepts only the innermost axis.", default="any", choices=("any", "last")),
    Field("max_k", "int", "topk: largest k.", positive=True),
    Field("max_boxes", "int", "Non-max suppression: largest number of boxes.", positive=True),
    Field("fused_only", "bool", "Accepted only fused into a preceding conv / matmul (as a bias or activation epilogue), never alone.", default=False),
    Field("note", "str", "Free text appended to this op's verdicts (e.g. where a limit comes from).", default=""),
)  # fmt: skip

LINK_FIELDS = (
    Field("between", "list[str]", "The two processors the link joins; `\"*\"` matches any. The most specific link wins.", required=True),
    Field("bandwidth_gbps", "number", "Bandwidth in GB/s (1 GB/s = 1000 bytes/us).", required=True, positive=True),
    Field("latency_us", "number", "Fixed latency per transfer (synchronisation, cache maintenance) in us.", default=0.0, minimum=0),
    Field("via_dram", "bool", "A transfer goes through shared DRAM: the producer writes, the consumer reads (2x bytes at `bandwidth_gbps`).", default=True),
    Field("energy_pj_per_byte", "number", "Energy per byte transferred, in pJ.", default=0.0, minimum=0),
)  # fmt: skip

SECTION_FIELDS = {
    "": TOP_FIELDS,
    "placement": PLACEMENT_FIELDS,
    "conversion": CONVERSION_FIELDS,
    "processors.NAME": PROCESSOR_FIELDS,
    "processors.NAME.ops.OP": OP_FIELDS,
    "links[]": LINK_FIELDS,
}
MAC_ARRAY_KEYS = ("channels_in", "channels_out", "pixels", "kernel_taps")
REDUCTION_KEYS = ("unroll", "serial", "exponent")


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

    def __hash__(self) -> int:
        return hash(self.digest)

    def __eq__(self, other) -> bool:
        return isinstance(other, SocProfile) and other.digest == self.digest

    @property
    def digest(self) -> str:
        d = self.__dict__.get("_digest")
        if d is None:
            d = hashlib.sha256(json.dumps(_thaw(self.raw), sort_keys=True).encode()).hexdigest()[:16]
            object.__setattr__(self, "_digest", d)
        return d

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.processors)

    def processor(self, name: str) -> Processor:
        for p in self.processors:
            if p.name == name:
                return p
        from .errors import unknown  # noqa: PLC0415

        raise unknown("processor", name, self.names)

    @property
    def accelerators(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.processors if not p.host)

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
        """A new validated profile with dotted fields replaced: ``{"processors.dla.clock_mhz": 800}``."""
        doc = _thaw(self.raw)
        for dotted, value in changes.items():
            cur = doc
            parts = dotted.split(".")
            for p in parts[:-1]:
                cur = cur.setdefault(p, {})
                if not isinstance(cur, dict):
                    raise ProfileError(f"{self.path}: {dotted}: {p} is not a table")
            cur[parts[-1]] = value
        return parse_profile(doc, f"{self.path} (edited)")

    def to_toml(self) -> str:
        import tomli_w  # noqa: PLC0415

        return tomli_w.dumps(_thaw(self.raw))


def _thaw(x):
    if isinstance(x, Mapping):
        return {k: _thaw(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_thaw(v) for v in x]
    return x


def _freeze(x):
    if isinstance(x, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in x.items()})
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x


# ---------------------------------------------------------------------------------------------
# loading


def bundled() -> dict[str, Path]:
    """Bundled profile names -> paths."""
    root = resources.files("npukit").joinpath("profiles")
    return {Path(str(p)).stem: Path(str(p)) for p in root.iterdir() if str(p).endswith(".toml")}


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
            doc = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
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
                self.fail(path, f"must be {'an integer' if t == 'int' else 'a number'}, got {v!r}")
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
        if not name.isidentifier():
            v.fail(f"processors.{name}", "processor names must be identifiers (letters, digits, _)")
        processors.append(_parse_processor(v, name, pdoc))

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
            v.fail("host", "name the host processor (host = \"arm\") or mark one with host = true")
        host = cpus[0]
    processors = [_with_host(p, p.name == host) for p in processors]
    for p in processors:
        if not p.host and not p.ops:
            v.fail(f"processors.{p.name}.ops", "an accelerator needs at least one supported op")

    names = [p.name for p in processors]
    accel = [n for n in names if n != host]
    pl = doc.get("placement", {})
    v.check_keys(pl, PLACEMENT_FIELDS, "placement")
    order = list(v.read(pl, PLACEMENT_FIELDS, "placement")["order"] or accel)
    for i, n in enumerate(order):
        if n not in accel:
            v.fail(f"placement.order[{i}]", f"{n!r} is not an accelerator of this profile; {closest(n, accel)}")
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
                v.fail(f"placement.prefer.{op}[{i}]", f"{n!r} is not an accelerator; {closest(n, accel)}")
        prefer[key] = tuple(lst)

    conv = doc.get("conversion", {})
    v.check_keys(conv, CONVERSION_FIELDS, "conversion")
    conv = v.read(conv, CONVERSION_FIELDS, "conversion")

    links = []
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
        links.append(Link(tuple(r["between"]), float(r["bandwidth_gbps"]), float(r["latency_us"]),
                          r["via_dram"], float(r["energy_pj_per_byte"])))  # fmt: skip
    prof = SocProfile(
        name=top["name"], description=top["description"], sources=tuple(top["sources"] or ()),
        processors=tuple(processors), host=host, order=tuple(order), prefer=MappingProxyType(prefer),
        links=tuple(links), layout_on=conv["layout_on"], quantize_on=conv["quantize_on"], path=where,
        raw=_freeze(copy.deepcopy(_thaw(doc))),
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
    for b in bits:
        if b not in vec:
            v.fail(f"{path}.vector_ops_per_cycle.{b}", f"missing: macs_per_cycle has {b}, so vector_ops_per_cycle needs it too")
    epm = r["energy_pj_per_mac"]
    for b in bits:
        if b not in epm:
            v.fail(f"{path}.energy_pj_per_mac.{b}", f"missing: macs_per_cycle has {b}, so energy_pj_per_mac needs it too")
    epo = r["energy_pj_per_op"] or dict(epm)
    for b in bits:
        if b not in epo:
            v.fail(f"{path}.energy_pj_per_op.{b}", f"missing for supported bit-width {b}")
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
        if odoc is True:
            odoc = {}
        v.check_keys(odoc, OP_FIELDS, opath)
        o = v.read(odoc, OP_FIELDS, opath)
        ops[key] = OpRule(op=key, **o)
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
        output_elems_per_cycle=float(r["output_elems_per_cycle"]), reduction=red,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the reference page


def reference_markdown() -> str:
    """docs/soc-profile.md, generated from the schema above."""
    out = [
        "# SoC profile reference",
        "",
        "<!-- generated by `python -m npukit.soc > docs/soc-profile.md`; do not edit by hand -->",
        "",
        "A profile is a TOML (or JSON) file: top-level fields, one `[processors.NAME]` table per "
        "processor (exactly one is the host), per-op limits in `[processors.NAME.ops.OP]`, and "
        "`[[links]]` joining every pair of processors. Load one with `npukit.load_soc(name_or_path)`. "
        "Every field is validated on load; an error names the file and the field, e.g. "
        "`soc.toml: processors.dla.macs_per_cycle.int4: must be a positive number, got -3`.",
        "",
        f"Bit-widths: {', '.join(f'`{b}`' for b in BITS)}. Processor kinds: {', '.join(f'`{k}`' for k in KINDS)}. "
        f"Layouts: {', '.join(f'`{k}`' for k in LAYOUTS)}.",
        "",
    ]
    titles = {
        "": "Top level",
        "placement": "`[placement]`",
        "conversion": "`[conversion]`",
        "processors.NAME": "`[processors.NAME]`",
        "processors.NAME.ops.OP": "`[processors.NAME.ops.OP]` (an empty table `{}` or `true` accepts the op without limits)",
        "links[]": "`[[links]]`",
    }
    for sec, fields in SECTION_FIELDS.items():
        out += [f"## {titles[sec]}", "", "| field | type | required / default | meaning |", "|---|---|---|---|"]
        for f in fields:
            typ = f.type if f.type != "choice" else " \\| ".join(f"`{c}`" for c in f.choices)
            if f.required:
                req = "required"
            elif f.default in (None, (), ""):
                req = "optional"
            else:
                req = f"`{json.dumps(f.default)}`"
            doc = f.doc.replace("|", "\\|")
            out.append(f"| `{f.key}` | {typ} | {req} | {doc} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(reference_markdown())
