"""Host C, TIR-level helpers: the inline schedule applied to each PrimFunc before it is built, the
repair of TVM's 7-digit float literals, and reading TVM's C text (preamble, workspace sizes)."""

from __future__ import annotations

import re

_WS = re.compile(r"TVMBackendAllocWorkspace\(\d+, [A-Za-z_0-9]+, \(uint64_t\)(\d+)ULL")
_FUNC_DEF = re.compile(
    r"^TVM_DLL int32_t (__tvm_ffi_\w+)\(void\* self_handle, void\* args, int32_t num_args, "
    r"void\* result\) \{$",
    re.M,
)


class NonConstantWorkspace(Exception):
    """TVM's C allocates a workspace whose size is not a constant."""


def inline_blocks(tvm, f):
    """``f`` with every block that can be inlined into its consumers (padding, bias add, quantize,
    the exp of a softmax) or its elementwise consumers into it, so its intermediate buffers (the
    workspace) disappear; the arithmetic of each element is unchanged."""
    from tvm import s_tir  # noqa: PLC0415

    try:
        sch = s_tir.Schedule(f)
        root = sch.get_sblock("root")
        for b in sch.get_child_blocks(root):
            try:
                sch.compute_inline(b)
            except s_tir.ScheduleError:
                pass
        for b in reversed(sch.get_child_blocks(root)):
            try:
                sch.reverse_compute_inline(b)
            except s_tir.ScheduleError:
                pass
        # a reduction's elementwise consumer moves under the reduction's spatial loops, so the
        # reduction's output shrinks to one element (a conv2d's accumulator with its epilogue)
        for b in sch.get_child_blocks(root):
            consumers = sch.get_consumers(b)
            kinds = [int(iv.iter_type) for iv in sch.get(b).iter_vars]
            if len(consumers) != 1 or 2 not in kinds:  # 2: a reduction (CommReduce) iterator
                continue
            spatial = kinds.index(2) if 0 in kinds[: kinds.index(2)] else 0
            loops = sch.get_loops(b)
            if spatial and spatial <= len(loops):
                try:
                    sch.reverse_compute_at(consumers[0], loops[spatial - 1], preserve_unit_loops=True)
                except s_tir.ScheduleError:
                    pass
        # the init of every reduction before its reduction loops (not an if inside them: faster,
        # and gcc cannot see that such an accumulator is always initialised)
        for b in sch.get_child_blocks(root):
            kinds = [int(iv.iter_type) for iv in sch.get(b).iter_vars]
            if 2 in kinds and sch.get(b).init is not None:
                first = kinds.index(2)
                loops = sch.get_loops(b)
                if first < len(loops) and all(k == 0 for k in kinds[:first]):
                    try:
                        sch.decompose_reduction(b, loops[first])
                    except s_tir.ScheduleError:
                        pass
        return sch.mod["main"]
    except Exception:  # noqa: BLE001 - a function the schedule cannot read is built as it is
        return f


def last_module_instrument(tvm):
    """A pass instrument keeping the module after the last pass (the one the C codegen prints)."""

    @tvm.ir.instrument.pass_instrument
    class _Last:
        def __init__(self):
            self.mod = None

        def run_after_pass(self, mod, info):
            self.mod = mod

    return _Last()


_C_FLOAT = re.compile(r"(?<![\w.])(\d\.\d{6}e[+-]\d{2,3})(f?)(?![\w.])")
_TIR_FLOAT = re.compile(r"T\.float(32|64)\(([-+0-9.eE]+)\)")


def exact_float_literals(src: str, tir_script: str) -> str:
    """TVM 0.27's C codegen prints float constants with 7 significant digits (``6.973948e-02f``),
    which does not round-trip a float32 (9 digits needed): a quantization scale printed so is not
    the scale TVM's LLVM build uses.  Every such literal is replaced by the shortest exact form of
    the one constant of the final TIR (``tir_script``) that prints the same at 7 digits."""
    import numpy as np  # noqa: PLC0415

    exact: dict[tuple[str, str], set[str]] = {}
    for bits, text in _TIR_FLOAT.findall(tir_script):
        v = abs(float(text))
        if not np.isfinite(v):
            continue
        if bits == "32":
            f32 = np.float32(v)
            key, lit = (f"{float(f32):.6e}", "f"), np.format_float_scientific(f32, unique=True, exp_digits=2)
        else:
            key, lit = (f"{v:.6e}", ""), np.format_float_scientific(np.float64(v), unique=True, exp_digits=2)
        exact.setdefault(key, set()).add(lit)

    def fix(m):
        cands = exact.get((m.group(1), m.group(2)))
        if cands is None or len(cands) != 1:
            return m.group(0)
        return next(iter(cands)) + m.group(2)

    return _C_FLOAT.sub(fix, src)


_C_SPECIAL = re.compile(r"(?<![\w.>])(inf|nan)f?(?![\w.(])")


def c_special_floats(src: str) -> str:
    """TVM 0.27's C codegen prints an infinite or NaN float constant as ``inff`` / ``inf`` /
    ``nanf`` (an isfinite's comparison, a clip without bounds), which no C compiler knows: each
    becomes math.h's ``INFINITY`` / ``NAN`` (a float; C converts it exactly where a double is
    compared, and ``-INFINITY`` keeps its sign)."""
    return _C_SPECIAL.sub(lambda m: "INFINITY" if m.group(1) == "inf" else "NAN", src)


def split_preamble(src: str) -> tuple[str, tuple[str, ...]]:
    """TVM's C without the lines every build repeats (target comment, TVM_EXPORTS, includes, the
    library context, the ``__tvm_ffi_main`` alias of a single-function build), and its includes."""
    keep, includes = [], []
    skip = False
    for line in src.splitlines():
        s = line.strip()
        if skip:  # CodegenC's entry alias __tvm_ffi_main (one per build: would clash between groups)
            skip = line != "}"
            continue
        if s.startswith("// CodegenC: NOTE: Auto-generated entry function"):
            skip = True
        elif s.startswith("#include"):
            includes.append(s)
        elif (
            s.startswith("// tvm target:") or s == "#define TVM_EXPORTS" or s == "void* __tvm_ffi__library_ctx = NULL;"
        ):
            continue
        else:
            keep.append(line)
    return "\n".join(keep).strip("\n") + "\n", tuple(includes)


def workspace(chunk: str) -> dict[str, tuple[int, int]]:
    """(bytes, blocks) each function takes from TVMBackendAllocWorkspace (64-byte aligned blocks,
    summed: an upper bound of its peak, exact when its blocks are all live together)."""
    out: dict[str, tuple[int, int]] = {}
    defs = list(_FUNC_DEF.finditer(chunk))
    for k, m in enumerate(defs):
        end = defs[k + 1].start() if k + 1 < len(defs) else len(chunk)
        body = chunk[m.end() : end]
        sym = m.group(1)[len("__tvm_ffi_") :]
        sizes = _WS.findall(body)
        out[sym] = (sum((int(n) + 63) // 64 * 64 for n in sizes), len(sizes))
    if chunk.count("TVMBackendAllocWorkspace(") != len(_WS.findall(chunk)):
        raise NonConstantWorkspace()
    return out
