"""Host C, the TVM side, first step: a group of tagged ops -> a Relax function of its own.

``build_group_function`` cuts the group out of the tagged module (``host_kernels`` documents the
parameter order): its activation inputs and constants become parameters (a 0-d constant stays
inlined unless every constant must be lifted), its ops are re-emitted on them, and the PrimFuncs
its ``call_tir`` calls come along.  ``hostc_lower.lower_function`` then lowers it to C.
"""

from __future__ import annotations

from ..graph import OpGraph
from .hostc_emit import C_DTYPES
from .hostc_lower import Unsupported
from .intdiv import INT_DIVISIONS, int_division
from .intpool import INT_AVG_POOLS, ROUNDING, narrow_int


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
    """(relax.Function, params, inlined, prims): params are (role, tid, shape, dtype, name) tuples;
    prims the PrimFuncs the group's ``call_tir`` calls (a frontend's own kernels), by GlobalVar."""
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
    for _, t, _, dtype, _ in params:
        if dtype not in C_DTYPES:
            raise Unsupported(f"tensor {t} is {dtype}, which host C does not pass ({', '.join(C_DTYPES)})")
    fparams = [env[t] for t in inputs + consts]

    prims: dict = {}
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
                if args and isinstance(args[0], tvm.ir.GlobalVar):  # call_tir: the kernel comes along
                    src = getattr(calls, "module", None)
                    if src is None or args[0] not in src.functions:
                        raise Unsupported(f"op #{i} calls {args[0].name_hint}, which its module does not define")
                    prims[args[0]] = src[args[0]]
                new = relax.Call(call.op, args, call.attrs, call.ty_args)
                name = getattr(call.op, "name", "")
                if name in INT_AVG_POOLS and narrow_int(op_dtype := str(graph.tensors[op.outputs[0]].dtype)):
                    # (its type is checked at the group's end only: a pool read by an astype passed)
                    raise Unsupported(f"TVM's average pool of {op_dtype} sums in {op_dtype} (wrapping) and truncates; "
                                      f"npukit rounds the average {ROUNDING}, as the kernel library's call does")  # fmt: skip
                # (an integer x / 0 gives 0 as npk_binary_int's, where TVM's C would trap)
                out = int_division(bb, relax, new) if name in INT_DIVISIONS else None
                if name == "relax.mean":
                    out = _int_mean(bb, relax, new)
                out = bb.emit(new) if out is None else out
                if len(op.outputs) == 1 and not isinstance(out.ty, relax.TupleType):
                    env[op.outputs[0]] = out
                else:
                    for k, t in enumerate(op.outputs):
                        env[t] = bb.emit(relax.TupleGetItem(out, k))
            res = env[results[0]] if len(results) == 1 else relax.Tuple([env[t] for t in results])
            gv = bb.emit_output(res)
        bb.emit_func_output(gv)
    return bb.get()["main"], tuple(params), inlined, prims


def _int_mean(bb, relax, call):
    """An integer mean as its sum divided by the count, in the mean's own dtype, else None (a float
    mean is emitted as it is).  TVM's legalized mean of an int32 tensor divides by an int64 count and
    writes int64 (``call_tir`` out_ty int64) where the op's output is int32: the host C wrote 8-byte
    values into the caller's 4-byte buffer (every other output element garbage, the rest overwritten).
    The sum wraps in the input's dtype and the division truncates, as TVM computes the mean (the
    simulation's values)."""
    call = bb.normalize(call)
    x = call.args[0]
    dtype = str(getattr(call.ty, "dtype", ""))
    if not dtype.startswith(("int", "uint")) or str(getattr(x.ty, "dtype", "")) != dtype:
        return None
    shape = [int(d) for d in x.ty.shape]
    axis = call.attrs.axis
    axes = range(len(shape)) if axis is None else [int(a) % len(shape) for a in axis]
    count = 1
    for a in axes:
        count *= shape[a]
    total = bb.emit(relax.op.sum(x, axis=call.attrs.axis, keepdims=bool(call.attrs.keepdims)))
    return bb.emit(relax.op.divide(total, relax.const(count, dtype)))
