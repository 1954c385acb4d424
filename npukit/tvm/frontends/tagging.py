"""The common part of every import: fold constants, walk the bindings, name the ops after the
model's nodes and rebuild the *tagged* module (one dataflow block, op calls carrying a span
``npukit:<op_id>``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ModelError, ShapeError, UnsupportedOpError
from ...graph import Op, OpGraph, Tensor, freeze
from ...progress import Progress
from .. import load as _load_tvm
from .common import Imported, _main_of, _Marks, _run_quietly, check_input_dtype
from .naming import _name_ops, _with_name
from .sizes import check_inferred
from .tagged_module import _emit_tagged, _keep_kernels, canonical_args


def _const_array(c) -> np.ndarray:
    data = getattr(c, "data", None)
    if data is not None and hasattr(data, "numpy"):
        return data.numpy()
    v = c.value
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


def _static(x):
    """A non-tensor argument (shape, prim value, string, dtype) as plain Python, else None."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    if isinstance(x, relax.ShapeExpr):
        return tuple(int(v) for v in x.values)
    value = getattr(x, "value", None)  # IntImm, FloatImm, StringImm (modules moved between releases)
    if isinstance(value, (int, float, str)) and not isinstance(x, tvm.ir.GenericConst):
        return value
    return None


def _plain(v):
    """Relax attribute values as plain Python (tuples, ints, floats, strs)."""
    if isinstance(v, str):  # tvm_ffi dtypes subclass str
        return str(v)
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if hasattr(v, "__len__") and not isinstance(v, (str, bytes)) and not hasattr(v, "dtype"):
        try:
            return tuple(_plain(x) for x in v)
        except TypeError:
            pass
    for attr in ("value",):
        if hasattr(v, attr) and isinstance(getattr(v, attr), (int, float, str)):
            return getattr(v, attr)
    return str(v)


def _attrs(call) -> dict:
    a = call.attrs
    if a is None:
        return {}
    out = {}
    for k in dir(a):
        if k.startswith("_") or k == "id_":
            continue
        try:
            v = getattr(a, k)
        except Exception:  # noqa: BLE001, S112
            continue
        if callable(v):
            continue
        out[k] = _plain(v)
    return out


def _shape_of(ty, what: str, path: str) -> tuple[tuple[int, ...], str]:
    shape = getattr(ty, "shape", None)
    dtype = str(getattr(ty, "dtype", "float32"))
    if shape is None:
        raise ShapeError(f"{path}: {what} has an unknown shape; npukit needs static shapes")
    dims = []
    for i, d in enumerate(shape):
        try:
            dims.append(int(d))
        except (TypeError, ValueError):
            raise ShapeError(
                f"{path}: {what} has a symbolic dim {i} ({d}); npukit needs static shapes "
                "(pin the model's input shapes, or this op's output size is data-dependent)"
            ) from None
    return tuple(dims), dtype


_PACKED = frozenset({"call_dps_packed", "call_pure_packed", "call_inplace_packed", "call_builtin_with_ctx"})


def _known_kinds(path: str, ops: list[dict], names: dict, sources: dict) -> None:
    """Every op is one npukit has an entry for (a work formula, rules): else refused here, each named
    in the model's words (its node, the node's op type), not later by the cost model with no node."""
    from ...errors import closest  # noqa: PLC0415
    from ...graph import short_op  # noqa: PLC0415
    from ...opset import KINDS  # noqa: PLC0415

    bad = [o for o in ops if short_op(o["op"]) not in KINDS]
    if not bad:
        return
    src = {o["op_id"]: sources[o["op_id"]][1] for o in bad}  # (a Relax module's node is its op: said once)
    listed = "; ".join(f"{names[o['op_id']]!r} ({src[o['op_id']]}{'' if src[o['op_id']] == o['op'] else ', as ' + o['op']})"
                       for o in bad[:10])  # fmt: skip
    first = short_op(bad[0]["op"])
    hint = (f"an opaque {first} has no work npukit can count: write the kernel as a TIR function called with "
            "R.call_tir" if first in _PACKED else f"for {first!r}: {closest(first, KINDS)}")  # fmt: skip
    raise UnsupportedOpError(f"{path}: {len(bad)} op(s) npukit has no entry for (no work formula, no rules): {listed}"
                             f"{' ...' if len(bad) > 10 else ''}; {hint}")  # fmt: skip


def _finish(raw, marks: _Marks, fmt: str, path: str, input_names, output_names, const_names, aliases=None,
            model_shapes=None) -> Imported:
    """``const_names``: a constant of ``raw`` -> the model's name of its weight; ``model_shapes``: such a
    name -> the weight's shape as the model holds it; ``aliases``: ``OpGraph.aliases``."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    from .canon import canonicalize  # noqa: PLC0415
    from .fold import fold  # noqa: PLC0415

    main = _main_of(raw, path)
    marks.resolve(main.params)
    _attribute_pending(main, marks)
    computes = {marks.owner[b.var] for blk in main.body.blocks for b in blk.bindings
                if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op) and b.var in marks.owner}  # fmt: skip
    nbind = sum(len(blk.bindings) for blk in main.body.blocks)
    with Progress(nbind, "npukit: folding constants") as bar:
        folded = _run_quietly(lambda: fold(main, bar), lambda err: ModelError(f"{path}: constant folding failed: {err}"))
    owners = dict(zip([b.var for blk in folded.func.body.blocks for b in blk.bindings],
                      _owners_after_fold([b for blk in folded.func.body.blocks for b in blk.bindings], folded.origin,
                                         marks), strict=True))  # fmt: skip
    # one form whatever the exporter wrote (folded BatchNorm, one gelu, roll as slices ...)
    derived = folded.derived
    folded, owners = canonicalize(folded, owners, marks)
    const_names = dict(const_names)  # a constant computed from one named constant (a transposed weight) keeps its name
    for made in (derived, folded.derived):  # folding's, then the canonical rules' (a weight BatchNorm scaled)
        for new, old in (made or {}).items():
            if old in const_names and new not in const_names:
                const_names[new] = const_names[old]
    f = folded.func

    tensors: dict[str, Tensor] = {}
    consts: dict[str, np.ndarray] = {}
    ops: list[dict] = []
    env: dict[Any, Any] = {}  # var -> tid | tuple of tids

    labels = []
    for i, p in enumerate(f.params):
        label = input_names[i] if i < len(input_names) else p.name
        shape, dtype = _shape_of(p.ty, f"input {label!r}", path)
        check_input_dtype(path, label, dtype)
        tid = f"in{i}"
        tensors[tid] = Tensor(tid, shape, dtype, "input", None, label)
        env[p] = tid
        labels.append(label)

    def const_tid(c) -> str:
        tid = f"c{len(consts)}"
        arr = _const_array(c)
        consts[tid] = arr
        name, shape = const_names.get(c, ""), tuple(int(s) for s in arr.shape)
        held = (model_shapes or {}).get(name)  # (a weight the op reads transposed, or a part of one)
        held = tuple(held) if held is not None and tuple(held) != shape else None
        tensors[tid] = Tensor(tid, shape, str(arr.dtype), "const", None, name, held)
        return tid

    def tids_of(x, argname: str, static: dict) -> list[str]:
        """Tensor ids of an argument (tuples flattened); static values go to ``static``."""
        if isinstance(x, relax.Var):
            return _as_list(env[x])
        if isinstance(x, tvm.ir.GenericConst) and isinstance(x.ty, relax.TensorType):
            return [const_tid(x)]
        if isinstance(x, relax.Tuple):
            vals = [_static(y) for y in x.fields]
            if x.fields and all(v is not None for v in vals):  # a tuple of values (a slice's axes, begins...): all of them
                static[argname] = tuple(vals)
                return []
            return [t for y in x.fields for t in tids_of(y, argname, static)]
        val = _static(x)
        static[argname] = val if val is not None else str(x)
        return []

    def tensors_only(fields) -> None:
        """A tuple's (the model outputs') fields are tensors: a shape among them is refused with its
        node, not dropped from the outputs."""
        for x in fields:
            if not isinstance(x, (relax.Var, relax.Tuple, tvm.ir.GenericConst)):
                src = next((i for i, y in marks.values if y.same_as(x)), None)
                raise ModelError(f"{path}: {_where(marks, src)} makes {_kind_of(x)}, which npukit cannot read")

    bindings = [b for blk in f.body.blocks for b in blk.bindings]
    owner_at = [owners.get(b.var) for b in bindings]
    for k, b in enumerate(bindings):
        v = b.value
        var = b.var
        raw_name = folded.origin[var].name if var in folded.origin else var.name
        if isinstance(b, relax.MatchCast) or isinstance(v, relax.Var):
            env[var] = env.get(v) if isinstance(v, relax.Var) else None
        elif isinstance(v, relax.Call):
            where = _where(marks, owner_at[k])
            if not isinstance(v.op, tvm.ir.Op):
                raise ModelError(f"{path}: {where} calls {_callee(v.op)}, which is not a Relax operator npukit can read")
            op_id = len(ops)
            static: dict = {}
            argnames = [a.name for a in v.op.arguments]
            in_tids = [t for j, arg in enumerate(canonical_args(tvm, v))
                       for t in tids_of(arg, argnames[j] if j < len(argnames) else f"arg{j}", static)]  # fmt: skip
            ty = var.ty
            if isinstance(ty, relax.TupleType):
                fields = [(f"t{op_id}.{j}", fty) for j, fty in enumerate(ty.fields)]
            elif isinstance(ty, relax.TensorType):
                fields = [(f"t{op_id}", ty)]
            else:
                raise ModelError(f"{path}: {where}: its {v.op.name} returns {_kind_of(ty)}, not a tensor")
            for tid, fty in fields:
                what = f"output of {where}" if owner_at[k] is not None else f"output of {v.op.name} ({raw_name})"
                shp, dt = _shape_of(fty, what, path)
                tensors[tid] = Tensor(tid, shp, dt, "act", op_id)
            outs = tuple(t for t, _ in fields)
            env[var] = outs if isinstance(ty, relax.TupleType) else outs[0]
            attrs = _attrs(v)
            attrs.update(static)
            ops.append(dict(op_id=op_id, op=v.op.name, attrs=attrs, inputs=tuple(in_tids), outputs=outs,
                            src=owner_at[k], var=raw_name, bvar=var))  # fmt: skip
        elif isinstance(v, relax.TupleGetItem):
            tup = env.get(v.tuple_value) if isinstance(v.tuple_value, relax.Var) else None
            env[var] = tup[v.index] if isinstance(tup, tuple) else tup
        elif isinstance(v, relax.Tuple):
            tensors_only(v.fields)
            env[var] = tuple(t for y in v.fields for t in _as_list(_env_of(y, env, const_tid)))
        elif isinstance(v, tvm.ir.GenericConst):
            env[var] = const_tid(v)
        elif isinstance(v, relax.If):
            raise UnsupportedOpError(f"{path}: control flow ({_where(marks, owner_at[k])}) is not supported")
        else:
            src = owner_at[k]
            if src is None:  # a converter's non-tensor result, bound where it is used (a model output)
                src = next((i for i, x in marks.values if x.same_as(v)), None)
            raise ModelError(f"{path}: {_where(marks, src)} makes {_kind_of(v)}, which npukit cannot read")
    body = f.body.body
    tensors_only(body.fields if isinstance(body, relax.Tuple) else [body])
    out_tids = _as_list(_env_of(body, env, const_tid))
    if not ops:
        raise ModelError(_computes_nothing(path, out_tids, output_names, tensors))

    names, sources = _name_ops(ops, marks)
    _known_kinds(path, ops, names, sources)
    # a node's declared outputs name the tensors of its last op
    by_src: dict[int, list[int]] = {}
    for o in ops:
        if o["src"] is not None:
            by_src.setdefault(o["src"], []).append(o["op_id"])
    for s, ids in by_src.items():
        src, last = marks.sources[marks.outputs_of.get(s, s)], ops[ids[-1]]
        names_out = src.outputs[:len(last["outputs"])] if s in marks.outputs_of else src.outputs  # (a BN's statistics)
        if len(names_out) == len(last["outputs"]):
            for tid, nm in zip(last["outputs"], names_out, strict=True):
                tensors[tid] = _with_name(tensors[tid], nm)
    # each output keeps the model's own name, also where two outputs are one tensor (an Identity of
    # another output), or an output is an input or a constant: the names are the graph's, per output.
    # An op's output tensor takes the name of the first model output it is (inputs and constants keep
    # their own names).
    out_names = []
    named: set[str] = set()
    for i, tid in enumerate(out_tids):
        nm = output_names[i] if i < len(output_names) and output_names[i] else ""
        if nm and tensors[tid].kind == "act" and tid not in named:
            tensors[tid] = _with_name(tensors[tid], nm)
            named.add(tid)
        out_names.append(nm or tensors[tid].name or tid)

    check_inferred(path, ops, names, tensors, sources)
    tagged, var_names = _emit_tagged(relax, tvm, f, ops, names, labels)
    _keep_kernels(tvm, relax, raw, tagged)

    op_objs = tuple(
        Op(op_id=o["op_id"], name=names[o["op_id"]], source=sources[o["op_id"]][0],
           source_op=sources[o["op_id"]][1], op=o["op"], attrs=freeze(o["attrs"]),
           inputs=o["inputs"], outputs=o["outputs"], var=var_names[o["op_id"]])
        for o in ops
    )  # fmt: skip
    used = {o["src"] for o in ops}
    elided = {src.name: marks.elided.get(i, "folded away at import (FoldConstant): its value became a constant"
                                         if i in computes else "no computation of its own: passes on another node's value")
              for i, src in enumerate(marks.sources) if i not in used}  # fmt: skip
    elided.update({k: v for k, v in marks.pre_elided.items() if k not in elided})
    graph = OpGraph(
        ops=op_objs, tensors=freeze(tensors), inputs=tuple(t for t, v in tensors.items() if v.kind == "input"),
        outputs=tuple(out_tids), consts=freeze(consts), elided=freeze(elided), source_format=fmt, path=path,
        output_names=tuple(out_names), aliases=freeze(aliases or {}),
    )  # fmt: skip
    return Imported(graph, tagged)


def _computes_nothing(path: str, out_tids, output_names, tensors) -> str:
    """Why a model without a single op is refused, naming what each of its outputs is (or that it
    lists none: then every op it has is unused, removed at import)."""
    if not out_tids:
        return (f"{path}: the model has no outputs (its graph lists none), so nothing it computes is used; "
                "npukit has nothing to place, estimate or generate: list the tensors it computes as outputs")  # fmt: skip
    what = []
    for i, tid in enumerate(out_tids[:8]):
        t = tensors[tid]
        name = output_names[i] if i < len(output_names) and output_names[i] else t.name or f"output {i}"
        if t.kind != "input":
            what.append(f"{name!r} is a constant")
        else:
            what.append(f"{name!r} is an input" if name == t.name else f"{name!r} is the input {t.name!r}")
    more = f" and {len(out_tids) - 8} more" if len(out_tids) > 8 else ""
    detail = f" ({', '.join(what)}{more})" if what else ""
    return (
        f"{path}: the model computes nothing: it has no ops left after constant folding, every output is "
        f"one of its inputs or a constant{detail}; npukit has nothing to place, estimate or generate"
    )


def _where(marks: _Marks, src: int | None) -> str:
    """The model node a binding came from, in the model's words."""
    if src is None:
        return "an op the importer added"
    s = marks.sources[src]
    return f"node {s.name!r} ({s.op_type})"


def _callee(op) -> str:
    name = getattr(op, "name_hint", None) or getattr(op, "global_symbol", None)
    return f"the function {name!r}" if name else "a function"


def _kind_of(x) -> str:
    """What a Relax value or type is, in words (never an internal binding name)."""
    n = type(x).__name__
    return {"ShapeType": "a shape", "ShapeExpr": "a shape", "TupleType": "a tuple", "PrimType": "a scalar",
            "ObjectType": "an opaque object", "FuncType": "a function", "ExternFunc": "an external function",
            "Function": "a function", "If": "control flow", "PrimValue": "a scalar"}.get(n, f"a {n}")  # fmt: skip


def _attribute_pending(f, marks: _Marks) -> None:
    """Give every unmarked binding to the node whose conversion emitted it.

    The hooks bind each node's result right after converting it, so a binding belongs to the
    first marked binding at or after it in emission order (helpers a converter emitted, such as
    the reshape + add of an ONNX Conv bias, come just before the node's own result).
    """
    pending: list = []
    last = None
    for blk in f.body.blocks:
        for b in blk.bindings:
            owner = marks.owner.get(b.var)
            if owner is None:
                pending.append(b.var)
                continue
            for p in pending:
                marks.owner[p] = owner
            pending.clear()
            last = owner
    if last is not None:  # trailing bindings (output tuples) belong to the last node
        for p in pending:
            marks.owner.setdefault(p, last)


def _owners_after_fold(bindings, origin: dict, marks: _Marks) -> list[int | None]:
    """The source node of each binding of the folded function.

    A binding folding rebuilt keeps its raw binding's node (``origin``); one the normaliser added
    (the ``R.nonzero`` inside a frontend's ``match_cast``) belongs, like the helpers before the
    fold, to the node of the next binding whose node is known.
    """
    out: list[int | None] = [None] * len(bindings)
    pending: list[int] = []
    last = None
    for k, b in enumerate(bindings):
        raw = origin.get(b.var)
        own = None if raw is None else marks.owner.get(raw)
        if own is None:
            pending.append(k)
            continue
        out[k] = last = own
        for j in pending:
            out[j] = own
        pending.clear()
    for j in pending:
        out[j] = last
    return out


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, tuple):
        return list(x)
    return [x]


def _env_of(e, env, const_tid):
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    if isinstance(e, relax.Var):
        return env.get(e)
    if isinstance(e, relax.Tuple):
        return tuple(t for y in e.fields for t in _as_list(_env_of(y, env, const_tid)))
    if isinstance(e, tvm.ir.GenericConst):
        return const_tid(e)
    return None
