"""The C text of a generated project's model code (no tvm): the AOT entry point and its header, the
partition wrappers and their header.  Everything here renders a built and memory-planned
``program.Program``."""

from __future__ import annotations

import math

from .function import Copy, Fn, _dims, _float
from .names import comment
from .program import Program
from .runner import c_string
from .storage import CTYPE, GRID, Format


def _desc(prog: Program, c: Copy, lib: str, var: str, arena: str, view: str = "spatial") -> str:
    f = c.fmt
    if view == "model" or not f.spatial:
        shape, layout, block = f.model_shape, "ROW_MAJOR", 1
    else:
        shape, layout, block = f.shape, f.layout, f.block
    data = prog.data_expr(c, arena)
    return (f"{lib}_tensor {var} = {{(void *)({data}), {lib.upper()}_{f.dtype}, {len(shape)}, {_dims(shape)}, "
            f"{lib.upper()}_{layout}, {block}, {_float(f.scale)}, {f.zero}}};  /* {comment(prog.label(c.key[0]))} */")  # fmt: skip


def same_order(a: Format, b: Format) -> str:
    """Why two copies of a tensor hold it in the same memory order ("same layout", or
    ``cost.layouts.same_memory``'s words when their layouts differ), "" when they do not."""
    if not a.spatial or a.layout == b.layout and (a.layout != "TILED" or a.block == b.block):
        return "same layout"
    return a.same_memory_as(b.layout, b.block)


def _conversion_name(src: Copy, dst: Copy) -> str:
    """The call that makes ``dst`` from ``src``: a copy when the values and their memory order are
    the same (the transfer alone: the cost model charges no layout conversion either), else a
    layout conversion and / or a (de/re)quantize."""
    a, b = src.fmt, dst.fmt
    ia, ib = a.dtype in GRID or a.dtype in ("U8",), b.dtype in GRID or b.dtype in ("U8",)
    if a.dtype == b.dtype and (a.scale, a.zero) == (b.scale, b.zero):
        return "copy" if same_order(a, b) else "layout_convert"
    if not ia and ib:
        return "quantize"
    if ia and not ib:
        return "dequantize"
    if ia and ib:
        return "requantize"
    return "convert"


def _arena_note(prog: Program) -> list[str]:
    if not prog.uses_arena:
        return [" * No arena: every buffer is a model input, a model output or a constant. */"]
    return [
        f" * One static arena of {prog.arena_bytes} bytes holds every intermediate tensor (lower bound:",
        f" * {prog.lower_bound} bytes of live tensors at the peak). */",
    ]


def _index_source(g, tid: str) -> tuple[str, bool] | None:
    """The model input a take's indices are, directly or through the importer's wrap of negative
    indices (``where(x < 0, x + n, x)``): (input tensor, wrapped), else None."""
    t = g.tensors[tid]
    if t.kind == "input":
        return tid, False
    w = g.ops[t.producer] if t.producer is not None else None
    if w is None or w.kind != "where" or len(w.inputs) != 3:
        return None
    cond, plus, x = (g.tensors[i] for i in w.inputs)
    if x.kind != "input" or cond.producer is None or plus.producer is None:
        return None
    less, add = g.ops[cond.producer], g.ops[plus.producer]
    if less.kind == "less" and add.kind == "add" and w.inputs[2] in less.inputs and w.inputs[2] in add.inputs:
        return w.inputs[2], True
    return None


def _index_checks(prog: Program) -> list[str]:
    """A model input a ``take`` reads its indices from is checked before the run: TVM's take reads
    wherever an index points (a Gather index out of range read out of bounds: a segfault, a
    HardFault on a Cortex-M).  An index out of range fails the run (NPK_ERR_PARAM), naming the input."""
    g = prog.g
    out, seen = [], set()
    for op in g.ops:
        if op.kind != "take" or len(op.inputs) < 2:
            continue
        src = _index_source(g, op.inputs[1])
        if src is None:
            continue
        tid, wrapped = src
        data = g.tensors[op.inputs[0]]
        axis = op.attrs.get("axis")
        n = math.prod(data.shape) if axis is None else data.shape[int(axis) % max(len(data.shape), 1)]
        f = prog.copies[(tid, prog.soc.host, "")].fmt
        if not f.dtype.startswith(("S", "U")) or (tid, n, wrapped) in seen:
            continue
        seen.add((tid, n, wrapped))
        k, lo = g.inputs.index(tid), -n if wrapped else 0
        name, what = g.tensor_label(tid), g.tensor_label(op.inputs[0])
        count = math.prod(g.tensors[tid].shape)
        why = f"input '{name}': an index out of {lo}..{n - 1} for '{op.name}'"
        out += [f"    {{ /* input {comment(name)}: indices into {comment(what)} ({op.name}, {n} entries); TVM's take "
                "does not check them */",
                f"        const {CTYPE[f.dtype]} *ix = inputs->in{k};",
                f"        for (int32_t k = 0; k < {count}; ++k)",
                f"            if (ix[k] < {lo} || ix[k] >= {n})",
                f"                return npukit__failed(NPK_ERR_PARAM, {c_string(why)});",
                "    }"]  # fmt: skip
    return out


def entry_source(prog: Program, libs: list[str], model_name: str, config_text: str) -> str:
    g = prog.g
    out = [
        "/* Generated by npukit: the model's AOT entry point.",
        f" * model: {comment(model_name)}",
        f" * profile: {comment(prog.soc.name)}; config: {comment(config_text)}",
        " *",
        " * npukit_model_run runs the partitions in the order the partitioned module calls them: host",
        " * kernels (TVM's C), accelerator partitions (one wrapper each, calling the processor's kernel",
        " * library) and, where a tensor crosses processors, explicit layout / (re)quantize calls.",
        *_arena_note(prog),
        "#include <math.h>",
        "#include <stddef.h>",
        "#include <stdint.h>",
        *(["#include <string.h>"] if prog.fills else []),
        "",
        '#include "npukit_model.h"',
        '#include "npukit_weights.h"',
        '#include "npk_ref.h"',
    ]
    out += [f'#include "{lib}.h"' for lib in libs]
    if prog.host_c.kernels and any(k is not None for k in prog.host_c.kernels):
        out.append(f'#include "{prog.host_c.prefix}.h"')
    out += ['#include "npukit_partitions.h"', ""]
    if prog.uses_arena:  # without a buffer in it, an arena would be an unused variable (-Werror)
        out += [f"static uint8_t npukit_arena[{max(prog.arena_bytes, 16)}] __attribute__((aligned(16), "
                'section(".bss.npk_arena")));', ""]  # fmt: skip
    out += ["const char *npukit_model_failed_step = 0;", "",
            "/* a step failed: say which (npukit_model_failed_step) and pass its status on */",
            "static inline int32_t npukit__failed(int32_t st, const char *step) {",
            "    npukit_model_failed_step = step;", "    return st;", "}", ""]  # fmt: skip
    out += ["int32_t npukit_model_run(const npukit_model_inputs *inputs, npukit_model_outputs *outputs) {",
            "    int32_t st = 0;", "    (void)inputs;", "    (void)outputs;", "    npukit_model_failed_step = 0;"]  # fmt: skip

    def checked(call: str, step: str) -> str:
        return f"if ((st = {call}) != 0) return npukit__failed(st, {c_string(step)});"

    out += _index_checks(prog)
    out += _fills(prog, late=False)
    for step in prog.steps:
        kind = step[0]
        if kind == "host":
            _, grp, hk, args = step
            names = ", ".join(g.ops[i].name for i in grp)
            cargs = []
            for a in args:
                if isinstance(a, str):
                    cargs.append(a)
                    continue
                c, prm = a
                base = prm.ctype.rsplit("*", 1)[0].strip()
                cargs.append(f"({base} *)({prog.data_expr(c, 'npukit_arena')})")
            out.append(f"    /* [ops {','.join(map(str, grp))}] host: {comment(names)} */")
            out.append("    " + checked(f"{hk.symbol}({', '.join(cargs)})", f"host kernel {hk.symbol} ({_few(names)})"))
        elif kind == "hostref":
            _, grp, fn = step
            out.append(f"    {{ /* [ops {','.join(map(str, grp))}] host (npukit reference kernels): "
                       f"{comment(', '.join(g.ops[i].name for i in grp))} */")
            out += ["        " + d for d in fn.render_decls()]
            step_name = f"host reference kernels ({_few(', '.join(g.ops[i].name for i in grp))})"
            out.append(f"        npukit_model_failed_step = {c_string(step_name)};  /* (cleared when the run succeeds) */")
            out += ["        " + ln.replace("\n    ", "\n        ") for ln in fn.render_body()]
            out.append("    }")
        elif kind == "part":
            _, part, fn = step
            sym = prog.partition_symbol[part.pid]
            ops = ", ".join(g.ops[i].name for i in part.ops[:4]) + (", ..." if len(part.ops) > 4 else "")
            out.append(f"    /* partition {part.pid} on {part.processor}: {len(part.ops)} op{'s' * (len(part.ops) != 1)} ({comment(ops)}) */")
            out.append("    " + checked(f"{sym}(npukit_arena)", f"partition {part.pid} on {part.processor} ({sym}: {_few(ops)})"))
        elif kind == "convert":
            _, skey, dkey, on, b = step
            src, dst = prog.copies[skey], prog.copies[dkey]
            lib = "npk" if on == prog.soc.host else prog.lib_of(on)
            what = _conversion_name(src, dst)
            same = same_order(src.fmt, dst.fmt)
            why = f" ({same}: no layout conversion)" if same and same != "same layout" else ""
            out.append(f"    {{ /* boundary {comment(prog.label(b.tensor))}: {b.src} -> {b.dst}, {what} on {on}{comment(why)} */")
            out.append("        " + _desc(prog, src, lib, "src", "npukit_arena"))
            out.append("        " + _desc(prog, dst, lib, "dst", "npukit_arena"))
            out.append("        " + checked(f"{lib}_{what}(&src, &dst)", f"boundary {prog.label(b.tensor)}: {b.src} -> {b.dst}, "
                                                                         f"{what} on {on}"))  # fmt: skip
            out.append("    }")
        elif kind == "round":
            _, key = step
            c = prog.copies[key]
            f = c.fmt
            n = 1
            for d in f.model_shape:
                n *= d
            # the buffer holds the tensor's own dtype: float, or IEEE halves for a float16 tensor
            # (the simulation rounds those in float and stores them back as float16)
            half = f.dtype == "F16"
            if f.dtype not in ("F32", "F16") or (half and f.grid_bits == "fp16"):
                raise AssertionError(f"npukit: no in-place rounding of a {f.dtype} buffer to {f.grid_bits}; please report this")
            ptr = f"({'uint16_t' if half else 'float'} *)({prog.data_expr(c, 'npukit_arena')})"
            held = " (float16)" if half else ""
            out.append(f"    /* {comment(prog.label(key[0]))}{held} stored at {f.grid_bits} on the host: rounded in place */")
            rounding = f"rounding {prog.label(key[0])} to {f.grid_bits}"
            if f.grid_bits == "fp16":
                out.append("    " + checked(f"npk_round_to_fp16({ptr}, {n})", rounding))
            else:
                bits = {"int16": 16, "int8": 8, "int4": 4, "int2": 2}[f.grid_bits]
                fn = "npk_round_to_bits_f16" if half else "npk_round_to_bits"
                out.append("    " + checked(f"{fn}({ptr}, {n}, {bits}, {_float(f.scale)}, {f.zero})", rounding))
    out += _fills(prog, late=True)
    out += ["    npukit_model_failed_step = 0;", "    return st;", "}", ""]
    return "\n".join(out)


def _few(names: str, n: int = 80) -> str:
    """A list of names for a one-line message, cut at ``n`` characters."""
    return names if len(names) <= n else names[: n - 3] + "..."


def _fills(prog: Program, late: bool) -> list[str]:
    """The copies that fill the outputs no op writes (``Program.fills``): inputs and constants
    first, repeats of another output once it is final."""
    out = []
    for f in prog.fills:
        if f.late != late:
            continue
        name = prog.g.tensors[f.tid].name or prog.label(f.tid)
        out.append(f"    /* output {f.index} ({comment(name)}): {f.what}, copied */")
        out.append(f"    memcpy(outputs->{prog.io_field('out', f.index)}, {f.src}, {f.nbytes});")
    return out


def partition_source(prog: Program, part, fn: Fn, symbol: str, tvm_name: str) -> str:
    """One partition's wrapper: kernel-library calls over tensors in the arena."""
    g = prog.g
    lines = [f"/* partition {part.pid} on {part.processor} (TVM function {comment(tvm_name)}): "
             f"{len(part.ops)} ops, library {fn.lib} */",  # fmt: skip
             f"int32_t {symbol}(uint8_t *arena) {{", "    int32_t st = 0;", "    (void)arena;"]
    lines += ["    " + d for d in fn.render_decls()]
    lines += ["    " + ln for ln in fn.render_body()]
    lines += ["    return st;", "}", ""]
    _ = g
    return "\n".join(lines)


def partitions_header(prog: Program) -> str:
    out = ["/* Generated by npukit: the accelerator partitions' wrappers (one per offloaded partition). */",
           "#ifndef NPUKIT_PARTITIONS_H", "#define NPUKIT_PARTITIONS_H", "", "#include <stdint.h>", ""]  # fmt: skip
    for _pid, sym in sorted(prog.partition_symbol.items()):
        out.append(f"int32_t {sym}(uint8_t *arena);")
    out += ["", "#endif", ""]
    return "\n".join(out)


def model_header(prog: Program, model_name: str) -> str:
    g = prog.g
    out = [
        "/* Generated by npukit: the model's entry point.",
        f" * model: {comment(model_name)}",
        " *",
        " *   int32_t npukit_model_run(const npukit_model_inputs *inputs, npukit_model_outputs *outputs);",
        " *",
        " * returns 0, or the nonzero status of the first kernel that failed.  Buffers are the model's own",
        " * dtype and shape, C order. */",
        "#ifndef NPUKIT_MODEL_H",
        "#define NPUKIT_MODEL_H",
        "",
        "#include <stdint.h>",
        "",
        "typedef struct {",
    ]
    for k, tid in enumerate(g.inputs):
        t = g.tensors[tid]
        f = prog.copies[(tid, prog.soc.host, "")].fmt
        q = f", scale {f.scale:g}, zero point {f.zero}" if f.dtype in GRID or f.dtype == "U8" else ""
        out.append(f"    const {CTYPE[f.dtype]} *in{k};  /* {comment(t.name or tid)}: {list(t.shape)} {t.dtype}{q} */")
    out += ["} npukit_model_inputs;", "", "typedef struct {"]
    for k, tid in enumerate(g.outputs):
        t = g.tensors[tid]
        f = prog.copies[(tid, prog.soc.host, "")].fmt
        q = f", scale {f.scale:g}, zero point {f.zero}" if f.dtype in GRID or f.dtype == "U8" else ""
        out.append(f"    {CTYPE[f.dtype]} *out{k};  /* {comment(g.output_name(k))}: {list(t.shape)} {t.dtype}{q} */")
    out += ["} npukit_model_outputs;", "",
            "int32_t npukit_model_run(const npukit_model_inputs *inputs, npukit_model_outputs *outputs);", "",
            "/* After a run that failed: the step that failed (a partition, a host kernel, a boundary's",
            " * conversion), in words; 0 after a run that succeeded. */",
            "extern const char *npukit_model_failed_step;", "",
            "#endif", ""]  # fmt: skip
    return "\n".join(out)
