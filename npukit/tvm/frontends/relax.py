"""A Relax IRModule: its ``main``'s bindings are the nodes."""

from __future__ import annotations

from ...errors import ModelError, ShapeError, UnsupportedOpError
from .. import load as _load_tvm
from .common import Imported, _bind_input_shapes, _check_input_shapes, _dim, _Marks, _pinned_along, _Source
from .tagging import _finish


def _import_relax(mod, input_shapes) -> Imported:
    _load_tvm()
    from tvm import relax  # noqa: PLC0415

    names = [gv.name_hint for gv in mod.functions]
    if "main" not in names:
        raise ModelError(f"<IRModule>: no 'main' function; it has {', '.join(sorted(names)) or 'none'}")
    f = mod["main"]
    if not isinstance(f, relax.Function):
        raise ModelError("<IRModule>: 'main' is not a Relax function")
    _check_params(f)
    _check_bindings(mod, f, relax, _load_tvm())
    mod, f, const_names = _bind_weights(mod, f, relax)
    marks = _Marks()
    for blk in f.body.blocks:
        for b in blk.bindings:
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, _load_tvm().ir.Op):
                marks.owner[b.var] = len(marks.sources)
                marks.sources.append(_Source(b.var.name, b.value.op.name))
    ins = [p.name for p in f.params]
    declared = {}
    for p in f.params:
        declared[p.name] = _declared_dims(p, relax)
    _check_input_shapes("<IRModule>", _pinned_along(declared, input_shapes), input_shapes)
    mod = _bind_input_shapes(mod, ins, input_shapes, "<IRModule>", marks)
    outs = _output_names(f, relax)
    return _finish(mod, marks, "relax", "<IRModule>", ins, outs, const_names)


def _declared_dims(p, relax) -> list | None:
    """The dims a parameter of main declares (None: no rank); a parameter that is no tensor, or a
    tensor of a known rank but no shape (which ``input_shapes`` has no dims of to pin), is refused."""
    ty = getattr(p, "ty", None)
    if isinstance(ty, relax.TupleType):
        raise ModelError(f"<IRModule>: input {p.name!r} is a tuple; npukit takes tensor inputs: give main one "
                         "parameter per tensor")  # fmt: skip
    if not isinstance(ty, relax.TensorType):
        what = {"ShapeType": "a shape (R.Shape)", "PrimType": "a scalar (R.Prim)"}.get(type(ty).__name__, "no tensor")
        raise ModelError(f"<IRModule>: input {p.name!r} is {what}; npukit takes tensor inputs: give main one tensor "
                         "parameter per input (a scalar as R.Tensor((), dtype))")  # fmt: skip
    if ty.shape is None and ty.ndim >= 0:
        dims = ", ".join(f'"d{k}"' for k in range(ty.ndim)) + ("," if ty.ndim == 1 else "")
        raise ShapeError(f"<IRModule>: input {p.name!r} declares rank {ty.ndim} but no shape; npukit needs static "
                         f'shapes: declare its dims in main, e.g. R.Tensor(({dims}), "{ty.dtype}"), and pin symbolic '
                         "ones with input_shapes")  # fmt: skip
    return None if ty.shape is None else [_dim(d) for d in ty.shape]


def _check_params(f) -> None:
    """Every parameter of ``main`` has a name of its own: the model's inputs are given and reported by
    name (``set_data``, ``input_shapes``, the generated code's inputs), so two named alike would be
    fed one array."""
    seen: dict[str, int] = {}
    for k, p in enumerate(f.params):
        if p.name in seen:
            raise ModelError(f"<IRModule>: main's parameters {seen[p.name]} and {k} are both named {p.name!r}; "
                             "npukit gives and reports a model's inputs by name: give each parameter a name of "
                             "its own")  # fmt: skip
        seen[p.name] = k


def _check_bindings(mod, f, relax, tvm) -> None:
    """Every binding of ``main`` calls a Relax operator: a call of another function or an if / else
    is refused here, named by its variable (the frontends' walk gives a binding with no operator of
    its own to the operator after it)."""
    for blk in f.body.blocks:
        for b in blk.bindings:
            v, name = b.value, b.var.name
            if isinstance(v, relax.If):
                raise UnsupportedOpError(f"<IRModule>: {name!r} is an if / else; npukit does not support control "
                                         "flow: give main one path of operators")  # fmt: skip
            if not isinstance(v, relax.Call) or isinstance(v.op, tvm.ir.Op):
                continue
            callee = getattr(v.op, "name_hint", None)
            if isinstance(v.op, tvm.ir.GlobalVar) and isinstance(mod.functions.get(v.op), relax.Function):
                raise ModelError(f"<IRModule>: {name!r} calls the Relax function {callee!r}; npukit reads the operators "
                                 f"of main itself: declare {callee!r} with @R.function(private=True) and inline it with "
                                 "relax.transform.InlinePrivateFunctions()")  # fmt: skip
            if isinstance(v.op, tvm.ir.GlobalVar):
                what = f"the TIR function {callee!r} directly; call it with R.call_tir"
            elif isinstance(v.op, relax.ExternFunc):
                what = f"the external function {v.op.global_symbol!r}, which npukit cannot place or estimate"
            else:
                what = f"{callee!r}, a function value, which npukit cannot place or estimate"
            raise ModelError(f"<IRModule>: {name!r} calls {what}")


def _output_names(f, relax) -> list[str]:
    """The name of each tensor ``main`` returns, flattened as its outputs are: a var's own name; a
    var bound to a tuple of vars (``gv = (lv3, lv4)``, as TVM's frontends return) names by its
    fields; a field of a tuple an op made (``parts = R.split(...)``) is ``parts:0``, ``parts:1`` ...
    (``parts:1:0`` nested), as the tables label a tuple's fields; a constant, no variable, is
    ``output <k>``."""
    tuples = {b.var: b.value for blk in f.body.blocks for b in blk.bindings if isinstance(b.value, relax.Tuple)}

    def names(e) -> list[str]:
        e = tuples.get(e, e)
        if isinstance(e, relax.Tuple):
            return [n for x in e.fields for n in names(x)]
        return fields(e.name, e.ty) if isinstance(e, relax.Var) else [""]

    def fields(name: str, ty) -> list[str]:
        if not isinstance(ty, relax.TupleType):
            return [name]
        return [n for k, fty in enumerate(ty.fields) for n in fields(f"{name}:{k}", fty)]

    return [n or f"output {k}" for k, n in enumerate(names(f.body.body))]


def _bind_weights(mod, f, relax):
    """``main`` with the weights a frontend kept as parameters bound as constants.

    ``from_onnx(keep_params_in_input=True)`` and ``from_exported_program(keep_params_as_input=True)``
    make every weight a parameter of ``main`` after its ``num_input`` inputs and keep the values in
    its ``params`` attribute (as ``relax.frontend.detach_params`` reads them): they are the model's
    weights, not inputs to feed.  Returns the module, ``main`` and each such constant's name (the
    parameter's)."""
    attrs = f.attrs or {}
    values, count = attrs.get("params"), attrs.get("num_input")
    if values is None or count is None or len(f.params) - int(count) != len(values):
        return mod, f, {}
    consts = {p: relax.const(v) for p, v in zip(f.params[int(count):], values, strict=True)}
    f = f.bind_params(consts).without_attr("params")
    mod = mod.clone()  # (the user's module stays as it was)
    mod["main"] = f
    return mod, f, {c: p.name for p, c in consts.items()}


