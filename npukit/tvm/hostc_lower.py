"""Host C, the TVM side: a group of tagged ops -> a Relax function -> TVM's C for its PrimFuncs.

``build_group_function`` cuts the group out of the tagged module (``host_kernels`` documents the
parameter order); ``lower_function`` runs ``DispatchSortScan`` / ``LegalizeOps`` /
``AnnotateTIROpPattern`` / ``FuseOps`` / ``FuseTIR`` / ``DeadCodeElimination``, reads the
resulting ``main`` back as a list of ``call_tir`` calls on named values, and builds the PrimFuncs
with the ``c`` target.  Anything that is not plain C (an op left unlegalized, a packed runtime
call, a symbolic shape) raises ``Unsupported`` with a reason a user can read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

from ..graph import OpGraph

TARGET = {"kind": "c"}
PASS_CONFIG = {"tirx.disable_assert": True}  # no argument checks: the wrappers pass exact tensors
# runtime entry points TVM's C may reference that a plain C program cannot provide
_PACKED_API = ("TVMFFIEnvModLookupFromImports", "TVMFFIFunctionCall", "TVMBackendParallelLaunch",
               "TVMBackendParallelBarrier", "TVMFFIEnvGetStream")  # fmt: skip
# runtime symbols the npukit runtime provides (see hostc_emit.runtime_text)
RUNTIME_SYMBOLS = ("TVMBackendAllocWorkspace", "TVMBackendFreeWorkspace", "TVMFFIErrorSetRaisedFromCStr")
# Relax ops that survive legalization only where a shape is computed at run time
_SHAPE_OPS = frozenset({"relax.tensor_to_shape", "relax.shape_of", "relax.shape_to_tensor", "relax.nonzero",
                        "relax.unique", "relax.dynamic_strided_slice"})  # fmt: skip
_WS = re.compile(r"TVMBackendAllocWorkspace\(\d+, [A-Za-z_0-9]+, \(uint64_t\)(\d+)ULL")
_FUNC_DEF = re.compile(r"^TVM_DLL int32_t (__tvm_ffi_\w+)\(void\* self_handle, void\* args, int32_t num_args, "
                       r"void\* result\) \{$", re.M)  # fmt: skip


class Unsupported(Exception):
    """TVM cannot lower this to plain C; the message says why (one line)."""


class ConstLeft(Exception):
    """A constant survived lowering as a call_tir argument: lift every constant and retry."""


@dataclass(frozen=True)
class Call:
    func: str  # the PrimFunc's global symbol (with the placeholder)
    args: tuple[str, ...]  # value names: "p<i>" parameter, "r<j>" result, "v<n>" intermediate


@dataclass(frozen=True)
class Lowered:
    """A group lowered to C, with symbols spelled with the placeholder (prefix-free, cacheable)."""

    chunk: str  # TVM's C for the group without its preamble
    includes: tuple[str, ...]  # the preamble's #include lines, in TVM's order
    calls: tuple[Call, ...]
    values: MappingProxyType  # intermediate name -> (shape, dtype)
    results: tuple[str, ...]  # value holding each result; "r<j>" when written in place
    workspace: MappingProxyType  # PrimFunc symbol -> bytes it takes from the pool (64-aligned)
    ws_blocks: MappingProxyType  # PrimFunc symbol -> number of blocks it allocates
    externs: tuple[str, ...]  # runtime symbols the chunk calls


# ---------------------------------------------------------------------------------------------
# the group's Relax function


def group_signature(graph: OpGraph, grp: tuple[int, ...], lift_all: bool):
    """(inputs, consts, inlined, results) as tensor-id tuples, in the documented order."""
    produced: set[str] = set()
    inputs: list[str] = []
    consts: list[str] = []
    inlined: list[str] = []
    for i in grp:
        op = graph.ops[i]
        for t in op.inputs:
            if t in produced:
                continue
            tt = graph.tensors[t]
            if tt.kind == "const":
                lst = inlined if (not lift_all and len(tt.shape) == 0) else consts
                if t not in lst:
                    lst.append(t)
            elif t not in inputs:
                inputs.append(t)
        produced.update(op.outputs)
    members = set(grp)
    outs = set(graph.outputs)
    results = [t for i in grp for t in graph.ops[i].outputs
               if t in outs or any(c not in members for c in graph.consumers(t))]  # fmt: skip
    if not results:  # nothing is read outside: the group still computes its last op
        results = list(graph.ops[grp[-1]].outputs)
    return tuple(inputs), tuple(consts), tuple(inlined), tuple(results)


def build_group_function(tvm, graph: OpGraph, calls: dict, grp: tuple[int, ...], lift_all: bool):
    """(relax.Function, params, inlined): params are (role, tid, shape, dtype, name) tuples."""
    from tvm import relax  # noqa: PLC0415

    inputs, consts, inlined, results = group_signature(graph, grp, lift_all)
    params = []
    env: dict[str, object] = {}  # tid -> relax expr in the new function
    for role, tids, stem in (("input", inputs, "in"), ("const", consts, "w")):
        for j, t in enumerate(tids):
            tt = graph.tensors[t]
            env[t] = relax.Var(f"{stem}{j}", relax.TensorType(tt.shape, tt.dtype))
            params.append((role, t, tt.shape, tt.dtype, f"{stem}{j}"))
    for j, t in enumerate(results):
        tt = graph.tensors[t]
        params.append(("output", t, tt.shape, tt.dtype, f"out{j}"))
    fparams = [env[t] for t in inputs + consts]

    bb = relax.BlockBuilder()
    with bb.function("main", fparams):
        with bb.dataflow():
            for i in grp:
                op = graph.ops[i]
                call = calls.get(i)
                if call is None:
                    raise Unsupported(f"op #{i} is not a call in the tagged module")
                it = iter(op.inputs)

                def leaf(arg, it=it):
                    t = next(it)
                    return arg if t in inlined else env[t]

                def rebuild(arg, leaf=leaf):
                    if isinstance(arg, relax.Var):
                        if isinstance(arg.ty, relax.TupleType):
                            return relax.Tuple([leaf(None) for _ in arg.ty.fields])
                        return leaf(arg)
                    if isinstance(arg, tvm.ir.GenericConst) and isinstance(arg.ty, relax.TensorType):
                        return leaf(arg)
                    if isinstance(arg, relax.Tuple):
                        return relax.Tuple([rebuild(f) for f in arg.fields])
                    return arg

                try:
                    args = [rebuild(a) for a in call.args]
                    left = next(it, None)
                except StopIteration:
                    left = "?"
                if left is not None:
                    raise Unsupported(f"op #{i}: its arguments do not match the graph's inputs {op.inputs}")
                out = bb.emit(relax.Call(call.op, args, call.attrs, call.ty_args))
                if len(op.outputs) == 1 and not isinstance(out.ty, relax.TupleType):
                    env[op.outputs[0]] = out
                else:
                    for k, t in enumerate(op.outputs):
                        env[t] = bb.emit(relax.TupleGetItem(out, k))
            res = env[results[0]] if len(results) == 1 else relax.Tuple([env[t] for t in results])
            gv = bb.emit_output(res)
        bb.emit_func_output(gv)
    return bb.get()["main"], tuple(params), inlined


# ---------------------------------------------------------------------------------------------
# Relax function -> C


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
            spatial = kinds.index(2) if 0 in kinds[:kinds.index(2)] else 0
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


def lower_function(tvm, func, placeholder: str, inline: bool = True) -> Lowered:
    from tvm import relax  # noqa: PLC0415

    from .importers import _first_line, _quiet  # noqa: PLC0415

    target = tvm.target.Target(TARGET)
    seq = tvm.transform.Sequential([
        relax.backend.DispatchSortScan(), relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
        relax.transform.FuseOps(), relax.transform.FuseTIR(), relax.transform.DeadCodeElimination(),
    ])  # fmt: skip
    try:
        with _quiet(), target:
            mod = seq(tvm.IRModule.from_expr(func))
    except Exception as e:  # noqa: BLE001 - a TVM failure is this group's reason
        raise Unsupported(f"TVM's Relax lowering failed: {_first_line(e)}") from None
    calls, values, results, order = _read_main(tvm, relax, mod)
    names = {gv: f"{placeholder}_f{j}" for j, gv in enumerate(order)}
    funcs = {}
    for gv, sym in names.items():
        f = mod[gv]
        _check_primfunc(tvm, f, gv)
        if inline:
            f = inline_blocks(tvm, f)
        funcs[tvm.ir.GlobalVar(sym)] = f.with_attr("global_symbol", sym)
    last = _last_module_instrument(tvm)
    try:
        with _quiet(), tvm.transform.PassContext(opt_level=3, config=PASS_CONFIG, instruments=[last]):
            src = tvm.tirx.build(tvm.IRModule(funcs), target=TARGET).inspect_source()
    except Exception as e:  # noqa: BLE001
        raise Unsupported(f"TVM's C code generator failed: {_first_line(e)}") from None
    src = exact_float_literals(src, last.mod.script() if last.mod is not None else "")
    for api in _PACKED_API:
        if api in src:
            raise Unsupported(f"TVM's C calls {api}, which needs the TVM runtime")
    chunk, includes = _split_preamble(src)
    calls = tuple(Call(names[gv], args) for gv, args in calls)
    ws = _workspace(chunk)
    return Lowered(chunk, includes, calls, MappingProxyType(values), results,
                   MappingProxyType({k: v[0] for k, v in ws.items()}), MappingProxyType({k: v[1] for k, v in ws.items()}),
                   tuple(s for s in RUNTIME_SYMBOLS if s in chunk))  # fmt: skip


def _last_module_instrument(tvm):
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


def _read_main(tvm, relax, mod):
    """main as [(callee gv, arg value names)], intermediates, result value names, callee order."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    f = mod["main"]
    env: dict[str, object] = {p.name: f"p{i}" for i, p in enumerate(f.params)}
    values: dict[str, tuple] = {}
    calls: list = []
    order: list = []

    def name_of(x):
        if isinstance(x, relax.Var):
            return env[x.name]
        if isinstance(x, relax.Tuple):
            return tuple(name_of(y) for y in x.fields)
        if isinstance(x, tvm.ir.GenericConst):
            raise ConstLeft()
        raise Unsupported(f"the lowered module passes a {type(x).__name__} between kernels")

    def new_value(ty):
        shape = getattr(ty, "shape", None)
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise Unsupported("its output shape is data-dependent (not known at compile time)") from None
        name = f"v{len(values)}"
        values[name] = (dims, str(ty.dtype))
        return name

    for blk in f.body.blocks:
        for b in blk.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.op.same_as(call_tir):
                gv = v.args[0]
                if len(v.args) > 2:
                    raise Unsupported("its lowered kernel takes symbolic shape arguments")
                if not isinstance(mod[gv], tvm.tirx.PrimFunc):
                    raise Unsupported(f"the lowered module calls {gv.name_hint}, which is not a TIR function")
                args = tuple(_flat(name_of(a) for a in v.args[1].fields))
                ty = b.var.ty
                outs = tuple(new_value(t) for t in ty.fields) if isinstance(ty, relax.TupleType) else new_value(ty)
                env[b.var.name] = outs
                if gv not in order:
                    order.append(gv)
                calls.append((gv, args + tuple(_flat([outs]))))
            elif isinstance(v, relax.TupleGetItem):
                env[b.var.name] = name_of(v.tuple_value)[v.index]
            elif isinstance(v, (relax.Tuple, relax.Var)):
                env[b.var.name] = name_of(v)
            elif isinstance(v, relax.Call):
                what = v.op.name if isinstance(v.op, tvm.ir.Op) else str(v.op)
                if what in _SHAPE_OPS:
                    raise Unsupported(f"its output shape is data-dependent: TVM computes it at run time ({what})")
                raise Unsupported(f"TVM 0.27 has no lowering of {what} to TIR for a C target")
            else:
                raise Unsupported(f"the lowered module holds a {type(v).__name__}")
    res = name_of(f.body.body)
    results = list(_flat([res]))
    # a result produced by a kernel is written straight into the caller's output buffer
    rename: dict[str, str] = {}
    for j, r in enumerate(results):
        if r.startswith("v") and r not in rename:
            rename[r] = f"r{j}"
    for old in rename:
        values.pop(old)
    calls = [(gv, tuple(rename.get(a, a) for a in args)) for gv, args in calls]
    results = tuple(rename.get(r, r) for r in results)
    return calls, values, results, order


def _flat(xs):
    for x in xs:
        if isinstance(x, tuple):
            yield from _flat(x)
        else:
            yield x


def _check_primfunc(tvm, f, gv) -> None:
    text = f.script()
    m = re.search(r'call_packed\("([^"]+)"', text)
    if m:
        raise Unsupported(f"TVM lowers it to a call of the packed runtime function {m.group(1)!r}, "
                          "which a plain C program does not have")  # fmt: skip
    ptys = getattr(f.ty, "params", None)
    if ptys is None:
        ptys = f.ty.arg_types
    for p, ty in zip(f.params, ptys, strict=True):
        shape = getattr(ty, "shape", None)
        if shape is None:
            raise Unsupported(f"its kernel {gv.name_hint} takes a non-tensor parameter {p.name}")
        try:
            [int(d) for d in shape]
        except (TypeError, ValueError):
            raise Unsupported("its output shape is data-dependent (not known at compile time)") from None


def _split_preamble(src: str) -> tuple[str, tuple[str, ...]]:
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
        elif s.startswith("// tvm target:") or s == "#define TVM_EXPORTS" or s == "void* __tvm_ffi__library_ctx = NULL;":
            continue
        else:
            keep.append(line)
    return "\n".join(keep).strip("\n") + "\n", tuple(includes)


def _workspace(chunk: str) -> dict[str, tuple[int, int]]:
    """(bytes, blocks) each function takes from TVMBackendAllocWorkspace (64-byte aligned blocks,
    summed: an upper bound of its peak, exact when its blocks are all live together)."""
    out: dict[str, tuple[int, int]] = {}
    defs = list(_FUNC_DEF.finditer(chunk))
    for k, m in enumerate(defs):
        end = defs[k + 1].start() if k + 1 < len(defs) else len(chunk)
        body = chunk[m.end():end]
        sym = m.group(1)[len("__tvm_ffi_"):]
        sizes = _WS.findall(body)
        out[sym] = (sum((int(n) + 63) // 64 * 64 for n in sizes), len(sizes))
    if chunk.count("TVMBackendAllocWorkspace(") != len(_WS.findall(chunk)):
        raise Unsupported("TVM's C allocates a workspace whose size is not a constant")
    return out
