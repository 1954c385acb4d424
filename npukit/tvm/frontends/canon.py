"""Canonical form at import: one network gives the same ops from every format.

TVM's frontends decompose the same layer differently (the ONNX exporter folds BatchNorm into the
convolution and writes GELU as erf arithmetic and ``torch.roll`` as slices + concat; torch.export
keeps ``batch_norm`` and ``gelu`` and writes roll as a gather of a computed index; a ``Linear`` on
a 3-D input is flattened to 2-D by one and not by the other ...).  This pass rewrites the folded
``main`` of every import into one form, so that op counts, placement and costs do not depend on
the exporter.  The rules themselves are in ``canon_rules``, ``canon_moves`` (data movement),
``canon_norms`` (normalisations), ``canon_clamps`` (clamps, PReLU) and ``canon_reduce``
(reductions); each documents what it matches.

How it runs: a rule is tried at every binding (its *root*), reading the function as it was at the
start of the pass (producers, constants, use counts); when it matches, it emits its replacement
(``Pass.emit``), names what it consumed, and the root's value becomes the replacement.  What the
rewrite left unused disappears at the next pass; passes repeat until no rule matches, so a rule's
output can be matched by another rule in the next pass.  Identical pure calls are computed once
(common subexpressions, as exporters often do themselves).

Names: every emitted op belongs to a model node (``owners``): a rule says which old binding each
new op is *like*, and the new op takes that binding's node (so a folded convolution keeps the
conv's name, a fused GELU the node that made its output).  A node whose ops all disappeared is
listed in the graph's ``elided`` map with the rule's reason.  Op ids and spans are given after
this pass, when the tagged module is built, so they stay dense and in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import load as _load_tvm
from .fold import Folded, _free

MAX_PASSES = 12
# a QDQ model gives every reader its own dequantize (and every writer its own quantize): the
# quantized-op patterns match per reader, so these are never merged as common subexpressions
NO_CSE = frozenset({"relax.dequantize", "relax.quantize"})


@dataclass
class Match:
    """What a rule did: the root's new value and the old bindings it made unnecessary."""

    value: Any  # a relax expression of the *new* function (usually a var ``Pass.emit`` returned)
    consumed: tuple = ()  # old vars whose nodes lose these ops
    reason: str = ""  # why, in the words the elided map shows


@dataclass
class Pass:
    """One rewrite pass over a function: the old function's facts and the new function's builder."""

    relax: Any
    tvm: Any
    bb: Any
    defs: dict  # old var -> its bound value (old expression)
    uses: dict  # old var -> number of reads in the old (live) function
    owners: dict  # old var -> source index (or None)
    origin: dict  # old var -> raw var (for the names of ops no node owns)
    mapping: dict = field(default_factory=dict)  # old var -> new expression
    new_owners: dict = field(default_factory=dict)
    new_origin: dict = field(default_factory=dict)
    copies: dict = field(default_factory=dict)  # (old dequantize var, old reader var) -> its own copy
    derived: dict = field(default_factory=dict)  # new constant -> the model's constant it was computed from
    took: dict = field(default_factory=dict)  # source index -> the folded node whose outputs it makes

    # --- reading the old function -------------------------------------------------------------
    def call(self, x, *names: str):
        """The call bound to var ``x`` if its op is one of ``names`` (short or full), else None."""
        v = self.defs.get(x) if isinstance(x, self.relax.Var) else None
        if isinstance(v, self.relax.Call) and isinstance(v.op, self.tvm.ir.Op):
            op = v.op.name
            if not names or op in names or op.rsplit(".", 1)[-1] in names:
                return v
        return None

    def single(self, x) -> bool:
        """``x`` is a binding read exactly once (a rule may consume it)."""
        return isinstance(x, self.relax.Var) and x in self.defs and self.uses.get(x, 0) == 1

    def const(self, x) -> np.ndarray | None:
        if isinstance(x, self.tvm.ir.GenericConst):
            data = getattr(x, "data", None)
            return data.numpy() if data is not None and hasattr(data, "numpy") else np.asarray(x.value.numpy())
        return None

    def scalar(self, x) -> float | None:
        """A constant holding one number (shape (), (1,), (1, 1) ...) as a float."""
        a = self.const(x)
        if a is None or a.size != 1 or a.dtype.kind not in "fiu":
            return None
        return float(a.reshape(()))

    def shape(self, x) -> tuple[int, ...] | None:
        ty = getattr(x, "ty", None)
        dims = getattr(ty, "shape", None)
        if dims is None:
            return None
        try:
            return tuple(int(d) for d in dims)
        except (TypeError, ValueError):
            return None

    def dtype(self, x) -> str:
        return str(getattr(getattr(x, "ty", None), "dtype", "float32"))

    def attr(self, call, name: str, default=None):
        a = call.attrs
        if a is None or not hasattr(a, name):
            return default
        v = getattr(a, name)
        return v if v is not None else default

    def src_name(self, x) -> str:
        return getattr(self, "_names", {}).get(self.owners.get(x), "")

    def src_op(self, x) -> str:
        """The op type of the model node binding ``x`` came from (``Conv``, ``aten.chunk.default`` ...)."""
        s = self.owners.get(x)
        sources = getattr(self, "_sources", ())
        return sources[s].op_type if s is not None and s < len(sources) else ""

    # --- writing the new function -------------------------------------------------------------
    def m(self, x, reader=None):
        """An old expression rewritten for the new function (as the old binding ``reader`` reads it:
        its own copy of a shared dequantize)."""
        relax = self.relax
        if isinstance(x, relax.Var):
            if reader is not None:
                c = self.copies.get((x, reader))
                if c is not None:
                    return c
            return self.mapping.get(x, x)
        if isinstance(x, relax.Tuple):
            return relax.Tuple([self.m(y, reader) for y in x.fields])
        return x

    def derive(self, const, source):
        """``const``, computed from the model's constant ``source`` (a folded weight): it goes by that
        constant's name."""
        if isinstance(source, self.tvm.ir.GenericConst):
            self.derived[const] = source
        return const

    def outputs_of(self, like, gone) -> None:
        """The node of old binding ``like`` now makes what the model's readers read as the output of
        the node of ``gone`` (which a rule folded into it): its last op's tensors take that node's
        output names."""
        a, b = self.owners.get(like), self.owners.get(gone)
        if a is not None and b is not None and a != b:
            self.took[a] = b

    def emit(self, call, like):
        """Bind a new call; it belongs to the node of the old binding ``like``."""
        var = self.bb.emit(call)
        self.new_owners[var] = self.owners.get(like)
        if like in self.origin:
            self.new_origin[var] = self.origin[like]
        return var

    def new_call(self, old, args, like):
        """``old``'s op and attributes on new arguments, bound as a new op like ``like``."""
        return self.emit(self.relax.Call(old.op, list(args), old.attrs, old.ty_args, old.span), like)


def canonicalize(folded: Folded, owners: dict, marks) -> tuple[Folded, dict]:
    """Rewrite ``folded.func`` into the canonical form; returns it with its binding owners."""
    from .canon_rules import LATE_RULES, RULES  # noqa: PLC0415

    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    func, origin = folded.func, dict(folded.origin)
    derived: dict = {}  # a constant a rule computed -> the model's constant it came from
    names = {i: s.name for i, s in enumerate(marks.sources)}
    fired = wasted = 0
    for phase, rules in enumerate((RULES, {**RULES, **LATE_RULES})):
        if phase and not _has_late_work(relax, tvm, func, LATE_RULES):
            break
        for _ in range(MAX_PASSES):
            func, owners, origin, fired, wasted, made = _one_pass(relax, tvm, func, owners, origin, marks, names, rules)
            derived.update(made)
            if not fired:
                break
    if fired or wasted:  # the last pass's rewrites (or rewrites given up) left calls unused
        func, owners, origin, _, _, _ = _one_pass(relax, tvm, func, owners, origin, marks, names, {})
    return Folded(func, origin, folded.counts, derived), owners


def _has_late_work(relax, tvm, func, late: dict) -> bool:
    """Whether a late rule's op reads the same op (a reshape of a reshape): else the late phase is skipped."""
    defs = {b.var: b.value for blk in func.body.blocks for b in blk.bindings}
    for v in defs.values():
        if _kind(relax, tvm, v) in late and v.args and _kind(relax, tvm, defs.get(v.args[0])) == _kind(relax, tvm, v):
            return True
    return False


def _one_pass(relax, tvm, func, owners, origin, marks, names, rules):
    bindings = [b for blk in func.body.blocks for b in blk.bindings]
    live, uses = _liveness(relax, bindings, func.body.body)
    defs = {b.var: b.value for b in bindings}
    bb = relax.BlockBuilder()
    p = Pass(relax, tvm, bb, defs, uses, owners, origin)
    p._names = names  # noqa: SLF001 - read by src_name
    p._sources = marks.sources  # noqa: SLF001 - read by src_op
    fired = wasted = 0
    outputs = set(_free(relax, func.body.body))
    shared = _shared_dequantize(p, bindings, live)
    seen: dict = {}  # structural hash -> [new vars] (common subexpressions)
    taken: set = set()  # old vars a rewrite of this pass replaced or consumed
    import tvm_ffi  # noqa: PLC0415 - ships with tvm

    with bb.function("main", list(func.params)):
        with bb.dataflow():
            for b, alive in zip(bindings, live, strict=True):
                if not alive:
                    continue
                var, v = b.var, b.value
                out = var in outputs  # read by the function's result: bound outside the block
                if isinstance(b, relax.MatchCast):
                    inner = p.m(v)
                    if isinstance(inner, (relax.Call, relax.Tuple, relax.TupleGetItem)):
                        inner = bb.emit(inner)
                    nv = bb.match_cast(inner, b.ty)
                    _keep(p, var, nv)
                    continue
                if isinstance(v, relax.Var):
                    p.mapping[var] = p.m(v)
                    if out:
                        _keep(p, var, bb.emit_output(p.m(v)))
                    continue
                if isinstance(v, relax.TupleGetItem):
                    tup = p.m(v.tuple_value)
                    if isinstance(tup, relax.Tuple):  # a rule made the tuple: read its field
                        p.mapping[var] = tup.fields[v.index]
                        if out:
                            _keep(p, var, bb.emit_output(tup.fields[v.index]))
                        continue
                match = None
                for rule in rules.get(_kind(relax, tvm, v), ()):
                    try:
                        match = rule(p, var, v)
                    except Exception:  # noqa: BLE001, S112 - a rule that cannot read the binding does not apply
                        match = None
                    if match is not None:
                        break
                if match is not None and any(c in taken for c in match.consumed):
                    match = None  # another rewrite of this pass read or replaced it: next pass
                    wasted += 1
                if match is not None:
                    fired += 1
                    taken.update(match.consumed)
                    taken.add(var)
                    for c in (var, *match.consumed):
                        s = owners.get(c)
                        if s is not None and match.reason:
                            marks.elided[s] = match.reason
                    p.mapping[var] = match.value
                    if out:
                        _keep(p, var, bb.emit_output(match.value))
                    continue
                new = _rebuild(relax, p, v, var)
                key = None
                if (
                    isinstance(new, relax.Call)
                    and isinstance(new.op, tvm.ir.Op)
                    and not out
                    and new.op.name not in NO_CSE
                ):
                    new = bb.normalize(new)  # typed, as the calls it is compared with
                    key = tvm_ffi.structural_hash(new)
                    twin = next((w for w in seen.get(key, ()) if tvm_ffi.structural_equal(w[1], new)), None)
                    if twin is not None:  # computed already: read that value
                        fired += 1
                        s = owners.get(var)
                        if s is not None:
                            first = names.get(p.new_owners.get(twin[0]), "")
                            marks.elided[s] = (f"computes the same value as {first!r}: computed once at import "
                                               "(common subexpression)")  # fmt: skip
                        p.mapping[var] = twin[0]
                        continue
                nv = bb.emit_output(new) if out else bb.emit(new)
                _keep(p, var, nv)
                if key is not None:
                    seen.setdefault(key, []).append((nv, new))
                fired += _copy_shared_dequantize(p, var, v, new, shared)
            result = p.m(func.body.body)
            if any(isinstance(x, relax.DataflowVar) for x in _free(relax, result)):
                result = bb.emit_output(result)
        gv = bb.emit_func_output(result)
    new_func = bb.get()[gv]
    if func.attrs is not None:
        for key, value in func.attrs.items():
            new_func = new_func.with_attr(key, value)
    marks.outputs_of.update(p.took)
    return new_func, p.new_owners, p.new_origin, fired, wasted, p.derived


def _shared_dequantize(p: Pass, bindings, live) -> dict:
    """Dequantizes of an activation (not a constant) that two ops or more read: var -> its readers
    in binding order."""
    relax = p.relax
    readers: dict = {}
    for b, alive in zip(bindings, live, strict=True):
        if alive and isinstance(b.value, relax.Call):
            for a in _reads(relax, b.value):
                if p.call(a, "relax.dequantize") is not None:
                    lst = readers.setdefault(a, [])
                    # (one reader reading it twice, add(dq, dq), is one reader: compared by
                    # identity of the var, not of its Python wrapper, which each access makes anew)
                    if not lst or not lst[-1].same_as(b.var):
                        lst.append(b.var)
    return {a: r for a, r in readers.items() if len(r) > 1 and p.const(p.defs[a].args[0]) is None}


def _copy_shared_dequantize(p: Pass, var, v, new, shared: dict) -> int:
    """After a dequantize that several ops read (``shared``), one copy of it per reader but the
    first, each read only by its reader: a QDQ model gives each reader its own (onnxruntime's QDQ
    passes make it so), so each reader's quantized pattern can fuse its input, where one shared was
    fused into none and ran alone.  The copies belong to the dequantize's node.  Returns how many."""
    readers = shared.get(var)
    if not readers:
        return 0
    for r in readers[1:]:
        p.copies[(var, r)] = p.emit(p.relax.Call(new.op, list(new.args), new.attrs, new.ty_args, new.span), var)
    return len(readers) - 1


def _keep(p: Pass, old, new) -> None:
    """``new`` is the old binding ``old`` carried over: same node, same raw name."""
    p.mapping[old] = new
    p.new_owners[new] = p.owners.get(old)
    if old in p.origin:
        p.new_origin[new] = p.origin[old]


def _rebuild(relax, p: Pass, v, var=None):
    if isinstance(v, relax.Call):
        if p.copies:  # a reader of a shared dequantize reads its own copy
            return relax.Call(v.op, [p.m(a, var) for a in v.args], v.attrs, v.ty_args, v.span)
        return relax.Call(v.op, [p.m(a) for a in v.args], v.attrs, v.ty_args, v.span)
    if isinstance(v, relax.TupleGetItem):
        return relax.TupleGetItem(p.m(v.tuple_value), v.index)
    return p.m(v)


def _kind(relax, tvm, v) -> str:
    """The key rules are registered under: a call's full op name, or ``TupleGetItem``."""
    if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
        return v.op.name
    return type(v).__name__


def _liveness(relax, bindings, out) -> tuple[list[bool], dict]:
    """Which bindings the output needs, and how often each live var is read."""
    index = {b.var: k for k, b in enumerate(bindings)}
    live = [False] * len(bindings)
    work = _free(relax, out)
    while work:
        var = work.pop()
        k = index.get(var)
        if k is None or live[k]:
            continue
        live[k] = True
        work.extend(_reads(relax, bindings[k].value))
    uses: dict = {}
    for x in _free(relax, out):
        uses[x] = uses.get(x, 0) + 1
    for b, alive in zip(bindings, live, strict=True):
        if alive:
            for x in _reads(relax, b.value):
                uses[x] = uses.get(x, 0) + 1
    return live, uses


def _reads(relax, v) -> list:
    return _free(relax, v)


# helpers the rules share


def _operands(p: Pass, call):
    """(var, const) of a commutative binary call written either way round, else (None, None)."""
    a, b = call.args
    if p.const(b) is not None and p.const(a) is None:
        return a, b
    if p.const(a) is not None and p.const(b) is None:
        return b, a
    return None, None


def _prim(x) -> float:
    v = getattr(x, "value", x)
    return float(v)


def _axes(call, rank: int) -> list[int]:
    axes = call.attrs.axes if call.attrs is not None else None
    return list(range(rank))[::-1] if axes is None else [int(a) % rank for a in axes]
