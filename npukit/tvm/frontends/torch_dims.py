"""PyTorch: the dynamic dims of an ExportedProgram's inputs in the user's words (``torch.export.Dim``
names and ranges, where the program keeps them), and the check that a size given for one lies in
the range the program was exported for."""

from __future__ import annotations

from ...errors import ShapeError


def _check_ranges(path: str, declared: dict, syms: dict, ranges: dict, input_shapes) -> None:
    """A size given for a dynamic dim must lie in the range the program was exported for
    (``torch.export.Dim(min=, max=)``): the program's guards hold only there."""
    for name, dims in declared.items():
        given = (input_shapes or {}).get(name)
        if dims is None or given is None:
            continue
        for ax, n in enumerate(given):
            sym = syms.get((name, ax))
            r = ranges.get(sym)
            if r is None:
                continue
            lo, hi = _bound(r.lower), _bound(r.upper)
            if (lo is not None and n < lo) or (hi is not None and n > hi):
                user = f"Dim {declared[name][ax]!r} in " if declared[name][ax] else ""
                raise ShapeError(f"{path}: input {name!r} dim {ax} = {n} is outside the range the program was exported "
                                 f"for ({user}{_span(r)})")  # fmt: skip


def _bound(x) -> int | None:
    """A range bound as an int, None when unbounded (sympy's and torch's infinities)."""
    try:
        v = int(x)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
    return v if abs(v) < 2**62 else None


def _dims(ep, user_inputs: list[str]) -> tuple[dict, dict, dict, dict]:
    """The user inputs' declared dims in the model's words, and what is known of the dynamic ones.

    Returns ``declared`` (input -> dims: an int, the ``torch.export.Dim``'s name, or "" where the
    program keeps no name: a .pt2 file drops them), ``syms`` ((input, axis) -> torch's symbol, s24),
    ``ranges`` (symbol -> its range) and ``words`` (symbol -> the dim as the user knows it:
    ``Dim 'batch' in 1..64``)."""
    ranges = {str(k): v for k, v in (getattr(ep, "range_constraints", None) or {}).items()}
    declared: dict = {}
    syms: dict = {}
    words: dict = {}
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        shape = getattr(node.meta.get("val"), "shape", None)
        if shape is None:
            declared[node.name] = None
            continue
        dims = []
        for ax, d in enumerate(shape):
            if isinstance(d, int) or str(d).isdigit():
                dims.append(int(d))
                continue
            sym = str(d)
            syms[(node.name, ax)] = sym
            user = _dim_name(d)
            r = ranges.get(sym)
            span = "" if r is None or _bound(r.upper) is None else f" in {_span(r)}"  # (a range the user gave)
            words[sym] = f"Dim {user!r}{span}" if user else f"a torch.export.Dim{span}, whose name the program does not keep"
            dims.append(user)
        declared[node.name] = dims
    return declared, syms, ranges, words


def _pinned_along(declared: dict, syms: dict, input_shapes: dict | None) -> dict:
    """``declared`` with each dynamic dim an input of ``input_shapes`` pins given its size in the inputs
    it does not name: one ``torch.export.Dim`` (one symbol) is one size in the program, which binding
    the shapes gives it everywhere (``x`` and ``y`` of one Dim 'batch': pinning ``x`` pins ``y``)."""
    known: dict[str, int] = {}
    for name, dims in (input_shapes or {}).items():
        for ax, v in enumerate(dims):
            if (name, ax) in syms:
                known.setdefault(syms[(name, ax)], int(v))
    return {name: dims if dims is None or name in (input_shapes or {}) else
            [known.get(syms.get((name, ax)), d) if (name, ax) in syms else d for ax, d in enumerate(dims)]
            for name, dims in declared.items()}  # fmt: skip


def _dim_name(d) -> str:
    """The name the user gave a dynamic dim's ``torch.export.Dim``, where the program still knows it
    (an ExportedProgram in memory; torch.export.save keeps no Dim names), else ""."""
    node = getattr(d, "node", None)
    env = getattr(node, "shape_env", None)
    if env is None:
        return ""
    debug = getattr(env, "source_name_to_debug_name", None) or {}
    for src in (getattr(env, "var_to_sources", None) or {}).get(getattr(node, "expr", None), ()):
        name = src.name() if callable(getattr(src, "name", None)) else getattr(src, "name", None)
        if debug.get(name):
            return str(debug[name])
    return ""


def _span(r) -> str:
    lo, hi = _bound(r.lower), _bound(r.upper)
    return f"{'-inf' if lo is None else lo}..{'inf' if hi is None else hi}"


def _shared_dims(declared: dict, syms: dict) -> dict:
    """torch's symbol of a dynamic dim -> the dim in the user's words, with every input dim it sizes
    (a Dim two inputs share takes one size): ``Dim 'batch' (input 'x' dim 0, input 'y' dim 0)``."""
    where: dict = {}
    for (inp, ax), sym in syms.items():
        where.setdefault(sym, []).append(f"input {inp!r} dim {ax}")
    return {sym: f"{f'Dim {declared[i][a]!r}' if declared[i][a] else 'one torch.export.Dim'} ({', '.join(where[sym])})"
            for (i, a), sym in syms.items()}  # fmt: skip
