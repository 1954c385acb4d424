"""``main`` of the tagged module as plain data: its bindings in order, what each reads (read once per
model by ``npukit.tvm.partition.skeleton``; every replay reads it)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

# an argument: the index of the binding whose variable it is, None for anything that is not a
# variable bound in main (a parameter, a constant, a shape, a prim value), or a tuple of
# arguments for a tuple written inline
Arg = int | None | tuple


@dataclass(frozen=True)
class Binding:
    kind: str  # "call" (an operator call), "tgi" (tuple field), "tuple", "var" (x = y), "other"
    op: str = ""  # full Relax op name of a call
    op_id: int | None = None  # npukit span of a call
    args: tuple = ()  # Args, in argument order
    flat: bool = False  # its variable is a tuple of tensors


@dataclass(frozen=True)
class Skeleton:
    """``main``'s bindings in order (one dataflow block), as plain data."""

    bindings: tuple[Binding, ...]
    outputs: tuple[int, ...] = ()  # bindings whose variables main returns

    @cached_property
    def reads(self) -> tuple[tuple[int, ...], ...]:
        """Per binding: ``_vars`` of its arguments (worked out once; every replay reads them)."""
        return tuple(tuple(_vars(b.args)) for b in self.bindings)

    @cached_property
    def only_tuple_fields_read(self) -> frozenset[int]:
        """Bindings whose (tuple) variable is read only by tuple-field bindings, directly or through
        aliases, and never returned (TVM's ``HasOnlyTupleGetItemUsers``)."""
        users: dict[int, list[int]] = {}
        for k, b in enumerate(self.bindings):
            for a in _vars(b.args):
                users.setdefault(a, []).append(k)
        outs = set(self.outputs)
        out = set()
        for k, b in enumerate(self.bindings):
            if not b.flat:
                continue
            pending, seen, has_tgi, ok = [k], set(), False, True
            while pending and ok:
                cur = pending.pop()
                if cur in seen:
                    continue
                seen.add(cur)
                if cur in outs:
                    ok = False
                    break
                cb = self.bindings[cur]
                if cb.kind == "var" and isinstance(cb.args[0], int):
                    pending.append(cb.args[0])
                for u in users.get(cur, ()):
                    ub = self.bindings[u]
                    if ub.kind == "tgi" and ub.args[0] == cur:
                        has_tgi = True
                    elif ub.kind == "var" and ub.args[0] == cur:
                        pending.append(u)
                    else:
                        ok = False
                        break
            if ok and has_tgi:
                out.add(k)
        return frozenset(out)

    @cached_property
    def call_ops(self) -> dict[int, int]:
        """Binding -> op id, of every call of an op (what main's order names as ("op", id))."""
        return {k: b.op_id for k, b in enumerate(self.bindings) if b.kind == "call" and b.op_id is not None}

    @cached_property
    def op_ids(self) -> tuple[int | None, ...]:
        """Per binding: its op id (None but for calls of ops)."""
        return tuple(b.op_id for b in self.bindings)

    @cached_property
    def escapes(self) -> dict[tuple[int, ...], bool]:
        """Memo of ``patterns.internal_outputs_escape`` per match (binding indices): it depends on
        the graph alone, and every replay asks it of the same matches."""
        return {}

    @cached_property
    def by_op(self) -> dict[tuple[str, int], list[int]]:
        out: dict[tuple[str, int], list[int]] = {}
        for k, b in enumerate(self.bindings):
            if b.kind == "call":
                out.setdefault((b.op, len(b.args)), []).append(k)
        return out


def _vars(args) -> list[int]:
    """Binding indices an argument list reads, in visiting order (inline tuples opened)."""
    out: list[int] = []
    for a in args:
        if isinstance(a, tuple):
            out += _vars(a)
        elif a is not None:
            out.append(a)
    return out
