"""The SoC profile schema as data (no tvm): every field with its type, bounds and the words of the
generated reference page (``docs/soc-profile.md``).  The loader (``npukit.soc.load``) reads these
tables, so the reference never drifts from what is accepted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..codegen.targets import get_target, target_names

BITS = ("int2", "int4", "int8", "int16", "fp16", "fp32")
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint64",
          "uint32", "uint16", "uint8", "bool")  # fmt: skip
TINY, HUGE = 1e-9, 1e15  # sane bounds for rates and sizes: outside them the figures overflow
BIT_WIDTH = {"int2": 2, "int4": 4, "int8": 8, "int16": 16, "fp16": 16, "fp32": 32}
KINDS = ("cpu", "dsp", "dla", "npu", "gpu")
LAYOUTS = ("NCHW", "NHWC", "tiled")
CONVERT_ON = ("dst", "src", "host")
KERNEL_APIS = ("npukit", "cmsis-nn")
# the columns of ``study.placement`` (and of each op's row in ``npukit study --json``) beside the one
# column per processor, holding its verdict: a processor may not be named as one of them
PLACEMENT_COLUMNS = ("op_id", "name", "op", "processor", "partition", "reason", "pattern", "source")
TARGET_NAMES = target_names()
TARGET_DOC = "One of: " + "; ".join(f"`{n}`: {get_target(n).description}" for n in TARGET_NAMES) + "."


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
    Field("target", "choice", "Build target of the generated C project (`make target` / `make run-target`, `study.build(target=True)`): the host processor's instruction set and how its program runs. " + TARGET_DOC, default="host", choices=TARGET_NAMES),
    Field("flash_bytes", "int", "Memory budget for the program image, in bytes: code, constants (the weights) and the load image of initialised data, i.e. `text + rodata + data` of the built program (an MCU's flash or MRAM; on an application processor, the memory the program is loaded into). `study.fit()` checks the target build against it. Default: no budget.", positive=True),
    Field("sram_bytes", "int", "Memory budget for working memory, in bytes: initialised and zeroed data (the arena of intermediate tensors), heap and stack, i.e. `data + bss` of the built program (an MCU's SRAM; on an application processor, the on-chip SRAM the working set should stay in). `study.fit()` checks the target build against it. Default: no budget.", positive=True),
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
    Field("vector_lanes", "int", "Lanes of the vector unit; elementwise utilisation = n / (ceil(n / lanes) * lanes) over the innermost dim in the processor's `layout`.", default=1, positive=True),
    Field("efficiency", "table", "Achieved fraction of peak (0..1] by kernel class or op kind, `\"*\"` for the rest: `{ \"*\" = 0.7, conv2d = 0.5, \"conv2d.depthwise\" = 0.3 }`. A key is `\"*\"`, an op kind, or a kernel class `KIND.VARIANT` derived from the op's shapes: " + KERNEL_CLASS_DOC + " An op (or a kernel, by its anchor) uses the first key present of: its class, its kind, `\"*\"` (default 1). Fitted by `npukit calibrate` for the host.", default=None),
    Field("reduction", "table", "How the MAC rate of scalar code depends on the reduction length K of a conv / matmul (the products accumulated into one output: IC/groups x KH x KW for a conv, K for a matmul): `{ unroll = 27, serial = 0.3, exponent = 0.25 }`. A reduction of at most `unroll` MACs is unrolled by the compiler and vectorised across outputs: util_red = 1. A longer one runs as one dependent accumulation chain per output, overlapped less with its neighbours the longer it is: util_red = serial x (unroll / K)^exponent (`serial` in (0, 1], `exponent` >= 0). MAC cycles are divided by util_red like the MAC-array utilisation. Default: none (util_red = 1). Fitted by `npukit calibrate` for the host (untuned TVM code).", default=None),
    Field("onchip_bytes", "int", "On-chip memory (SRAM / cache) in bytes. A tensor that fits is reused on chip between ops on this processor instead of going through DRAM.", default=0, minimum=0),
    Field("dram_bytes_per_cycle", "number", "Bandwidth to shared DRAM in bytes per cycle of this processor.", required=True, positive=True),
    Field("onchip_bytes_per_cycle", "number", "Bandwidth of on-chip memory in bytes per cycle. Default: 4 x `dram_bytes_per_cycle`.", positive=True),
    Field("weight_bytes_per_cycle", "number", "Bandwidth at which constant weights and biases are read, in bytes per cycle of this processor (e.g. weights kept in flash or MRAM while activations live in SRAM). Default: `dram_bytes_per_cycle`.", positive=True),
    Field("weight_port", "choice", "How weight reads share the memory system: `shared` (the same port as DRAM activation traffic: their cycles add) or `separate` (their own bus, e.g. Ethos-U's AXI1 to flash: weight and activation transfers overlap, memory cycles = the larger of the two).", default="shared", choices=("shared", "separate")),
    Field("output_elems_per_cycle", "number", "Output elements per cycle of a fixed-function output stage pipelined with the MAC array (accumulator -> bias, requantise, activation clamp -> store). When > 0 a conv / matmul's compute is max(MAC cycles, output elements / output_elems_per_cycle) and the elementwise epilogue fused after it (bias add, quantize, clip, relu ...) costs nothing more. 0: no such stage; a fused epilogue is vector work after the MACs.", default=0, minimum=0),
    Field("layout", "choice", "Activation layout the processor's kernels use; a boundary between processors with different layouts costs a conversion, unless both hold the tensor in the same memory order (C = 1, or H = W = 1 after a global pool: no byte moves).", default="NHWC", choices=LAYOUTS),
    Field("op_overhead_cycles", "int", "Fixed cycles per op (kernel launch, descriptor setup).", default=0, minimum=0),
    Field("call_overhead_cycles", "int", "Fixed cycles per partition call (driver / mailbox round trip), added once per partition.", default=0, minimum=0),
    Field("energy_pj_per_mac", "bits_table", "Energy per MAC in picojoules for each bit-width.", required=True),
    Field("energy_pj_per_op", "bits_table", "Energy per vector operation in pJ. Default: `energy_pj_per_mac`."),
    Field("energy_pj_per_byte", "number", "Energy per byte moved to or from DRAM, in pJ.", required=True, minimum=0),
    Field("energy_pj_per_onchip_byte", "number", "Energy per byte moved within on-chip memory, in pJ. Default: `energy_pj_per_byte` / 10.", minimum=0),
    Field("static_mw", "number", "Static (leakage + idle) power in milliwatts while the processor is busy; energy += static_mw x latency.", default=0.0, minimum=0),
    Field("max_tensor_bytes", "int", "Largest tensor (input, weight or output, at the model's dtype) any op on this processor may touch.", positive=True),
    Field("max_partitions", "int", "Most offloaded partitions (calls) this accelerator's runtime can take in one program, e.g. 1 for a runtime that loads one compiled graph (TIM-VX's NBG in the VeriSilicon RFC: \"if BYOC partition multi graphs to VSI NPU, it will failed\"). The cost placement holds its plans to it: of the accelerator's partitions it keeps the ones that give the fastest plan (each op moved off says so, with the figures of every plan compared). A plan still over it (first-fit, which is what TVM's passes give, or pins that split the accelerator) is estimated all the same, and flagged: `study.partition_limits`, a `npukit.PartitionLimitWarning` from `study.export()` / `study.build()`, a note from `npukit study`. Default: no limit.", positive=True),
    Field("dtypes", "list[str]", "Model tensor dtypes the processor accepts (e.g. `[\"float32\", \"int8\"]`). Default: any."),
    Field("kernel_library", "str", "C prefix of the vendor-style kernel library its generated calls use (e.g. `vsi_nn`). Default: the processor name."),
    Field("kernel_api", "choice", "The API the generated calls of this processor use. `npukit`: the vendor-style library named by `kernel_library` (npukit's reference kernels under that prefix). `cmsis-nn`: int8 NHWC convolutions, depthwise convolutions, fully connected layers, pooling, softmax and the elementwise add / mul of quantized int8 values (which saturate to the output's grid) become calls with Arm CMSIS-NN's public signatures and parameter structs (`arm_convolve_wrapper_s8`, `cmsis_nn_context`, `cmsis_nn_dims`, ...), their scratch buffers in the arena, so Arm's library can be linked instead of npukit's reference `npk_cmsis_nn.c`; a kernel CMSIS-NN cannot express (other bit-widths, layouts or ops, and the model's own integer arithmetic, an int8 Add with no quantization, which wraps) falls back to the `kernel_library` calls.", default="npukit", choices=KERNEL_APIS),
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
    Field("axis", "choice", "For softmax, reductions, sort, topk, layer_norm and rms_norm: `last` accepts only the axis the processor holds innermost in its memory (a norm: only over it). An image (a rank-4 activation whose layout a conv, pool or resize names, and what keeps its axes from it) is read in the processor's `layout`: channels (model axis 1 of an NCHW model) innermost on NHWC or tiled, the last spatial dim on NCHW; any other tensor in the model's axis order (its last axis). Dims of one element take no place. The verdict names the axis and the order it read.", default="any", choices=("any", "last")),
    Field("max_k", "int", "topk: largest k.", positive=True),
    Field("max_boxes", "int", "Non-max suppression: largest number of boxes.", positive=True),
    Field("const_weights", "bool", "matmul: the second operand must be the model's constant weights (a fully connected layer); an activation x activation matmul (attention's scores and context) is refused.", default=False),
    Field("fused_only", "bool", "Accepted only fused into a kernel, never alone: as the bias or activation epilogue of a conv / matmul, or as the dequantize before and the quantize / activation after a quantized op the processor takes (a pool, softmax, add ...).", default=False),
    Field("note", "str", "Free text appended to this op's verdicts (e.g. where a limit comes from).", default=""),
)  # fmt: skip

def _role(kind: str) -> str:
    from ..opset import KINDS  # noqa: PLC0415

    k = KINDS.get(kind)
    return k.role if k is not None else ""


def _conv(kind: str) -> bool:
    return kind.startswith("conv")


# op-table fields that limit some op kinds only: which kinds (a test of the short op name), in words;
# the loader refuses such a field on any other kind (it would never be read)
OP_FIELD_KINDS = {
    "kernel_max": (lambda k: _conv(k) or _role(k) == "pool", "convolutions and pools"),
    "strides": (lambda k: _conv(k) or _role(k) == "pool", "convolutions and pools"),
    "dilations": (lambda k: _conv(k) or _role(k) == "pool", "convolutions and pools"),
    "depthwise": (_conv, "convolutions"),
    "grouped": (_conv, "convolutions"),
    "max_channels": (_conv, "convolutions"),
    "axis": (lambda k: _role(k) in ("softmax", "reduce", "sort") or k in ("layer_norm", "rms_norm"),
             "softmax, reductions, sort, topk, layer_norm and rms_norm"),
    "max_k": (lambda k: k == "topk", "topk"),
    "max_boxes": (lambda k: _role(k) == "nms", "non-max suppression"),
    "const_weights": (lambda k: k == "matmul", "matmul"),
}


# processor fields that are not figures: no estimate reads them (why, in words)
NOT_FIGURES = {
    "kind": f"is what the processor is ({', '.join(KINDS)}), not a figure: no estimate reads it",
    "host": "says which processor is the host, the shape of the profile, not a figure",
    "description": "is free text: no estimate reads it",
}
# top-level fields and op-table fields that are not figures either: free text about the profile
# (why, in words); a sweep over them gives rows that differ in nothing but the words
TOP_NOT_FIGURES = {
    "name": "names the profile: no estimate reads it",
    "description": "is free text: no estimate reads it",
    "sources": "lists where the figures come from: no estimate reads it",
}
OP_NOT_FIGURES = {
    "note": "is free text appended to the op's verdicts: no estimate reads it",
}
# processor fields only an accelerator reads: the host runs every op no accelerator takes, in the
# program itself (why the host never reads each, in words)
ACCELERATOR_ONLY = {
    "call_overhead_cycles": "is paid once per call of an offloaded partition, and the host's ops are never called as one",
    "ops": "lists the ops an accelerator takes; the host runs every op, so its ops table is never read",
    "max_tensor_bytes": "limits the ops an accelerator takes; the host takes every op, so it is never checked",
    "dtypes": "limits the ops an accelerator takes; the host takes every op, so it is never checked",
    "max_partitions": "limits an accelerator's offloaded calls; the host's ops are never called as one, so it is never checked",
    "kernel_library": "names the C library an accelerator's generated calls use; the host's ops are TVM's generated C",
    "kernel_api": "names the API an accelerator's generated calls use; the host's ops are TVM's generated C",
}  # fmt: skip


def unread_field(field: str, host: bool) -> str | None:
    """Why a processor (the host or an accelerator) reads nothing of profile field ``field``, in
    words, or None when some figure reads it."""
    if field in NOT_FIGURES:
        return NOT_FIGURES[field]
    return ACCELERATOR_ONLY.get(field) if host else None


def figure_fields(host: bool) -> tuple[str, ...]:
    """The processor fields some figure of the host (or of an accelerator) reads, in schema order."""
    return tuple(f.key for f in PROCESSOR_FIELDS if unread_field(f.key, host) is None)


LINK_FIELDS = (
    Field("between", "list[str]", "The two processors the link joins; `\"*\"` matches any. The most specific link wins; two that each name one of the pair (`[\"a\", \"*\"]`, `[\"*\", \"b\"]`) tie and are refused: join the pair by name.", required=True),
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
# the reference page


def reference_markdown() -> str:
    """docs/soc-profile.md, generated from the schema above."""
    out = [
        "# SoC profile reference",
        "",
        "<!-- generated by `python -m npukit.soc > docs/soc-profile.md`; do not edit by hand -->",
        "",
        "A profile is a TOML (or JSON) file: top-level fields, one `[processors.NAME]` table per "
        "processor (exactly one is the host; NAME is a C identifier -- ASCII letters, digits and `_`, not "
        "starting with a digit, distinct from the others without case -- since the generated code names "
        "its files and functions after it; an accelerator's NAME is also the default C prefix of its "
        "kernel calls, `kernel_library`, which starts with a letter: a name starting with `_` needs its "
        "own `kernel_library`; and not one of " + ", ".join(f"`{c}`" for c in PLACEMENT_COLUMNS) + ", the "
        "columns of `study.placement` beside its one column per processor), per-op limits in `[processors.NAME.ops.OP]`, and "
        "`[[links]]` joining every pair of processors (a tensor crosses one link, from the processor that "
        "makes it to the one that reads it: npukit does not route it through a third). Load one with `npukit.load_soc(name_or_path)`. "
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
        "processors.NAME.ops.OP": "`[processors.NAME.ops.OP]` (an empty table `{}` or `true` accepts the op without limits; `false` does not, as leaving the op out, and its refusals say it is disabled in the profile)",
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
