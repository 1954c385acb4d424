"""Host C, the TVM side: a group of tagged ops -> a Relax function -> TVM's C for its PrimFuncs.

``hostc_relax.build_group_function`` cuts the group out of the tagged module (``host_kernels``
documents the parameter order); ``lower_function`` runs ``DispatchSortScan`` / ``LegalizeOps`` /
``AnnotateTIROpPattern`` / ``FuseOps`` / ``FuseTIR`` / ``DeadCodeElimination``, reads the
resulting ``main`` back as a list of ``call_tir`` calls on named values, and builds the PrimFuncs
with the ``c`` target.  Anything that is not plain C (an op left unlegalized, a packed runtime
call, a symbolic shape) raises ``Unsupported`` with a reason a user can read.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from types import MappingProxyType

from .hostc_tir import (
    NonConstantWorkspace,
    c_special_floats,
    exact_float_literals,
    inline_blocks,
    last_module_instrument,
    split_preamble,
    workspace,
)

TARGET = {"kind": "c"}
PASS_CONFIG = {"tirx.disable_assert": True}  # no argument checks: the wrappers pass exact tensors
# runtime entry points TVM's C may reference that a plain C program cannot provide
_PACKED_API = ("TVMFFIEnvModLookupFromImports", "TVMFFIFunctionCall", "TVMBackendParallelLaunch",
               "TVMBackendParallelBarrier", "TVMFFIEnvGetStream")  # fmt: skip
# runtime symbols the generated runtime provides (hostc_emit._runtime)
RUNTIME_SYMBOLS = ("TVMBackendAllocWorkspace", "TVMBackendFreeWorkspace", "TVMFFIErrorSetRaisedFromCStr")
# TIR intrinsics TVM 0.27 has no lowering of for the c target (LLVM has its own): a float32 / float64
# call becomes the C library's function.  tirx.fabs comes from abs, isfinite and isinf on floats.
_C_MATH = {"tirx.fabs": ("fabsf", "fabs")}
_c_math_lock = threading.Lock()
_c_math_done = False
# Relax ops that survive legalization only where a shape is computed at run time
_SHAPE_OPS = frozenset({"relax.tensor_to_shape", "relax.shape_of", "relax.shape_to_tensor", "relax.nonzero",
                        "relax.unique", "relax.dynamic_strided_slice"})  # fmt: skip


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


# TVM's words for an intrinsic the C code generator cannot print: `Unresolved call ir.Op(span=None,
# ..., name="tirx.fabs", ...)`; and any object printed with its fields, e.g. `ir.Op(span=None, ...)`
_UNRESOLVED = re.compile(r'Unresolved call\b.*?name="(?:tirx?\.)?(\w+)"')
_OBJECT_REPR = re.compile(r"\b(?:ir|tirx?|relax)\.\w+\(span=.*")


def _tvm_text(text: str) -> str:
    """A TVM error's first line without the objects it prints field by field (a reason a user reads)."""
    text = _OBJECT_REPR.sub("(an internal TVM object)", text)
    return text if len(text) <= 200 else text[:197] + "..."


def codegen_reason(text: str) -> str:
    """Why TVM's C code generator failed (its error's first line), in words a user reads."""
    m = _UNRESOLVED.search(text)
    if m:
        return f"its kernel uses the intrinsic '{m.group(1)}', which TVM's C code generator has no C for"
    return f"TVM's C code generator failed: {_tvm_text(text)}"


def c_math_intrinsics(tvm) -> None:
    """Register (once per process) the ``c`` target's lowering of the intrinsics in ``_C_MATH``.
    Without it TVM's C code generator stops at an unresolved ``tirx.fabs`` (every ONNX Cast from
    a float to an integer type checks ``isfinite`` first).  Only the ``c`` target is touched: LLVM
    keeps its own rule, and a rule someone else registered for ``c`` is kept.  fabs is exact, so
    the C computes the bits LLVM's ``llvm.fabs`` does."""
    global _c_math_done
    if _c_math_done:
        return
    with _c_math_lock:
        if _c_math_done:
            return
        from tvm.tirx import call_pure_extern, register_intrin_lowering  # noqa: PLC0415

        for name, (f32, f64) in _C_MATH.items():
            try:
                have = tvm.ir.Op.get(name).get_attr("c.FLowerIntrinsic")
            except Exception:  # noqa: BLE001 - the attribute is not registered for any op yet
                have = None
            if have is not None:
                continue

            def rule(call, f32=f32, f64=f64):
                fn = {"float32": f32, "float64": f64}.get(str(call.ty.dtype))
                return call_pure_extern(call.ty, fn, *call.args) if fn else call

            register_intrin_lowering(name, target="c", f=rule, level=10)
        _c_math_done = True


def lower_function(tvm, func, placeholder: str, inline: bool = True, fuse_group: bool = True, prims=None) -> Lowered:
    from tvm import relax  # noqa: PLC0415

    from .frontends.common import _first_line, _quiet  # noqa: PLC0415

    c_math_intrinsics(tvm)
    target = tvm.target.Target(TARGET)
    legalize = tvm.transform.Sequential([
        relax.backend.DispatchSortScan(), relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
    ])  # fmt: skip
    fuse = tvm.transform.Sequential([
        relax.transform.FuseOps(), relax.transform.FuseTIR(), relax.transform.DeadCodeElimination(),
    ])  # fmt: skip
    try:
        with _quiet(), target:
            src = tvm.IRModule.from_expr(func)
            for gv, f in (prims or {}).items():
                src[gv] = f
            legal = legalize(src)
            mod = (_fuse_whole_group(tvm, relax, legal) if fuse_group else None) or fuse(legal)
    except Exception as e:  # noqa: BLE001 - a TVM failure is this group's reason
        raise Unsupported(f"TVM's Relax lowering failed: {_tvm_text(_first_line(e))}") from None
    try:
        calls, values, results, order = _read_main(tvm, relax, mod)
    except Unsupported as e:
        packed = _packed_calls(tvm, mod)
        if packed:
            raise Unsupported(
                f"{e}; its kernels also call the packed runtime function(s) {', '.join(packed)}"
            ) from None
        raise
    _check_result_types(tvm, func, legal)  # (after the reasons _read_main gives: a data-dependent shape)
    names = {gv: f"{placeholder}_f{j}" for j, gv in enumerate(order)}
    funcs = {}
    for gv, sym in names.items():
        f = mod[gv]
        _check_primfunc(tvm, f, gv)
        if inline:
            f = inline_blocks(tvm, f)
        funcs[tvm.ir.GlobalVar(sym)] = f.with_attr("global_symbol", sym)
    last = last_module_instrument(tvm)
    try:
        with _quiet(), tvm.transform.PassContext(opt_level=3, config=PASS_CONFIG, instruments=[last]):
            src = tvm.tirx.build(tvm.IRModule(funcs), target=TARGET).inspect_source()
    except Exception as e:  # noqa: BLE001
        raise Unsupported(codegen_reason(_first_line(e))) from None
    src = c_special_floats(exact_float_literals(src, last.mod.script() if last.mod is not None else ""))
    for api in _PACKED_API:
        if api in src:
            raise Unsupported(f"TVM's C calls {api}, which needs the TVM runtime")
    chunk, includes = split_preamble(src)
    calls = tuple(Call(names[gv], args) for gv, args in calls)
    try:
        ws = workspace(chunk)
    except NonConstantWorkspace:
        raise Unsupported("TVM's C allocates a workspace whose size is not a constant") from None
    return Lowered(chunk, includes, calls, MappingProxyType(values), results,
                   MappingProxyType({k: v[0] for k, v in ws.items()}), MappingProxyType({k: v[1] for k, v in ws.items()}),
                   tuple(s for s in RUNTIME_SYMBOLS if s in chunk))  # fmt: skip


def _check_result_types(tvm, func, legal) -> None:
    """The group's results keep the types its ops declare: the program holds each in a buffer of
    that dtype and shape.  TVM 0.27 legalizes an int8 ``avg_pool2d`` (declared int8) into a kernel
    that writes int64, eight times the bytes of the buffer it is given."""
    want, got = func.ret_ty, legal["main"].ret_ty
    import tvm_ffi  # noqa: PLC0415

    if not tvm_ffi.structural_equal(want, got):
        from .frontends.common import _model_words  # noqa: PLC0415

        raise Unsupported(f"TVM's lowering of its ops returns {_model_words(str(got))} where the ops declare "
                          f"{_model_words(str(want))}")  # fmt: skip


def _fuse_whole_group(tvm, relax, mod):
    """One PrimFunc for the whole group: main's call_tir bindings become one primitive function
    that FuseTIR merges (its intermediates become the PrimFunc's own buffers, which the inline
    schedule can then remove: a dequantize inlined into the padding of the conv2d it feeds).
    None where main is not a plain chain of call_tir (FuseOps then fuses what its rules allow)."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    f = mod["main"]
    blocks = f.body.blocks
    if len(blocks) != 1 or not isinstance(blocks[0], relax.DataflowBlock):
        return None
    ncalls = 0
    for b in blocks[0].bindings:
        v = b.value
        if isinstance(v, relax.Call) and v.op.same_as(call_tir) and len(v.args) == 2:
            ncalls += 1
        elif not isinstance(v, (relax.TupleGetItem, relax.Tuple, relax.Var)):
            return None
    if ncalls < 2:
        return None
    try:
        inner = relax.Function(f.params, f.body, f.ret_ty).with_attr("Primitive", True)
        bb = relax.BlockBuilder(tvm.IRModule({gv: fn for gv, fn in mod.functions.items() if gv.name_hint != "main"}))
        gv = bb.add_func(inner, "fused_group")
        params = [relax.Var(p.name, p.ty) for p in f.params]
        with bb.function("main", params):
            with bb.dataflow():
                out = bb.emit_output(relax.Call(gv, params))
            bb.emit_func_output(out)
        fused = relax.transform.DeadCodeElimination()(relax.transform.FuseTIR()(bb.get()))
    except Exception:  # noqa: BLE001 - FuseTIR refused: fall back to FuseOps' grouping
        return None
    prims = [fn for fn in fused.functions.values() if isinstance(fn, tvm.tirx.PrimFunc)]
    return fused if len(prims) == 1 else None


def _read_main(tvm, relax, mod):
    """main as [(callee gv, arg value names)], intermediates, result value names, callee order."""
    call_tir = tvm.ir.Op.get("relax.call_tir")
    f = mod["main"]
    env: dict = {p: f"p{i}" for i, p in enumerate(f.params)}  # keyed by the Var itself: names repeat
    values: dict[str, tuple] = {}
    calls: list = []
    order: list = []

    def name_of(x):
        if isinstance(x, relax.Var):
            return env[x]
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
                env[b.var] = outs
                if gv not in order:
                    order.append(gv)
                calls.append((gv, args + tuple(_flat([outs]))))
            elif isinstance(v, relax.TupleGetItem):
                env[b.var] = name_of(v.tuple_value)[v.index]
            elif isinstance(v, (relax.Tuple, relax.Var)):
                env[b.var] = name_of(v)
            elif isinstance(v, tvm.ir.GenericConst):
                raise Unsupported("TVM folds its value to a constant when it lowers it: nothing is left to run")
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


_PACKED = re.compile(r'call_packed\("([^"]+)"')


def _packed_calls(tvm, mod) -> list[str]:
    """The packed runtime functions the module's PrimFuncs call (sorted, quoted)."""
    names = {n for f in mod.functions.values() if isinstance(f, tvm.tirx.PrimFunc) for n in _PACKED.findall(f.script())}
    return [repr(n) for n in sorted(names)]


def _check_primfunc(tvm, f, gv) -> None:
    m = _PACKED.search(f.script())
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
