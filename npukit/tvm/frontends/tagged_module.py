"""The tagged module rebuilt from a folded ``main``: one dataflow block whose op calls carry readable
names and a span ``npukit:<op_id>``, arguments in npukit's canonical order, and the frontend's own
kernels (``call_tir`` PrimFuncs) brought along."""

from __future__ import annotations

from typing import Any

from .common import SPAN_PREFIX
from .naming import _Namer

COMMUTATIVE = frozenset({"add", "multiply", "maximum", "minimum", "equal", "not_equal", "logical_and", "logical_or",
                         "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"})  # fmt: skip


def canonical_args(tvm, call) -> list:
    """A call's arguments in npukit's canonical order, so equivalent graphs from every format match the
    same patterns and rules: a commutative binary op takes its activation first and its constant
    second (PyTorch's ``bias + linear`` becomes ``linear + bias``, as ONNX and TFLite write it)."""
    args = list(call.args)
    if len(args) == 2 and call.op.name.rsplit(".", 1)[-1] in COMMUTATIVE:
        const = [isinstance(a, tvm.ir.GenericConst) for a in args]
        if const[0] and not const[1]:
            args.reverse()
    return args


def _keep_kernels(tvm, relax, raw, tagged) -> None:
    """The PrimFuncs main's ``call_tir`` calls (kernels a frontend wrote itself, e.g. a Pad that
    crops) come along from the frontend's module, so the module compiles on its own."""
    funcs = getattr(raw, "functions", None)
    if not funcs:
        return
    call_tir = tvm.ir.Op.get("relax.call_tir")
    for blk in tagged["main"].body.blocks:
        for b in blk.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.op.same_as(call_tir) and isinstance(v.args[0], tvm.ir.GlobalVar):
                gv = v.args[0]
                if gv in funcs and gv not in tagged.functions:
                    tagged[gv] = raw[gv]


def _emit_tagged(relax, tvm, f, ops, names, labels):
    """Rebuild main as one dataflow block: op calls get readable names and an op-id span."""
    by_var = {o["bvar"]: o for o in ops}
    var_names: dict[int, str] = {}
    namer = _Namer()
    params = [relax.Var(namer(lb), p.ty) for p, lb in zip(f.params, labels, strict=True)]
    mapping: dict[Any, Any] = dict(zip(f.params, params, strict=True))
    m = _remapper(relax, mapping)
    tuples: dict[Any, Any] = {}  # var -> the Tuple expression it binds
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            for blk in f.body.blocks:
                for b in blk.bindings:
                    v, var = b.value, b.var
                    o = by_var.get(var)
                    if isinstance(b, relax.MatchCast) or isinstance(v, relax.Var):
                        mapping[var] = m(v)
                    elif o is not None:
                        i = o["op_id"]
                        span = tvm.ir.Span(tvm.ir.SourceName(f"{SPAN_PREFIX}{i}"), i, i, 0, 0)
                        call = relax.Call(v.op, [m(a) for a in canonical_args(tvm, v)], v.attrs, v.ty_args, span)
                        want = namer(names[i])
                        mapping[var] = bb.emit(call, name_hint=want)
                        var_names[i] = mapping[var].name
                        assert var_names[i] == want, (want, var_names[i])
                    elif isinstance(v, relax.TupleGetItem):
                        tup = tuples.get(v.tuple_value) if isinstance(v.tuple_value, relax.Var) else None
                        if tup is not None:  # (a, b)[0] is a: no tuple between two ops (canonical form)
                            mapping[var] = m(tup.fields[v.index])
                        else:
                            mapping[var] = bb.emit(relax.TupleGetItem(m(v.tuple_value), v.index))
                    else:
                        if isinstance(v, relax.Tuple):
                            tuples[var] = v
                        mapping[var] = bb.emit(m(v))
            out = bb.emit_output(m(f.body.body))
        gv = bb.emit_func_output(out)
    # the entry function is "main" whatever the bindings are called; tuples left unread are dropped
    main = relax.analysis.remove_all_unused(bb.get()[gv])
    return tvm.IRModule({"main": main}), var_names


def _remapper(relax, mapping: dict):
    """``m(expr)``: an argument of the folded main rewritten for the tagged main (vars looked up by
    identity in ``mapping``, tuples rebuilt, constants and static values kept)."""

    def m(x):
        if isinstance(x, relax.Var):
            return mapping[x]
        if isinstance(x, relax.Tuple):
            return relax.Tuple([m(y) for y in x.fields])
        return x

    return m


