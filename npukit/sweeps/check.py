"""Checks of a grid against the model and the profile: every processor, node, op and profile field
it names exists and every value applies (GridError naming the line and the closest valid
choices)."""

from __future__ import annotations

from ..errors import ConfigError, NpukitError, closest
from ..soc import BITS
from .grid import NO_PIN, SOC_TOP, Axis, Grid, canon


def check_grid(grid: Grid, model, soc) -> None:
    """Every processor, node, op and profile field the grid names exists, and every value applies
    (GridError naming the line and the closest valid choices)."""
    from .. import pipeline as pl  # noqa: PLC0415
    from ..opset import canonical  # noqa: PLC0415

    names = soc.names
    paths = sorted((a.target[0], a.key) for a in grid.axes if a.kind == "soc")
    for (p1, k1), (p2, k2) in zip(paths, paths[1:]):  # (sorted: a field right before what it holds)
        if p2.startswith(p1 + "."):
            raise grid.fail(k2, f"sets a field inside {k1!r}, which the grid also sets whole: one of the two "
                                f"would be ignored; keep one")  # fmt: skip
    added = _added_widths(grid)
    for a in grid.axes:
        k = a.kind
        if k in ("bits", "support") and a.target[0] not in names:
            raise grid.fail(a.key, f"unknown processor {a.target[0]!r}; {closest(a.target[0], names)}")
        if k == "bits":
            p = soc.processor(a.target[0])
            ok = set(p.bits) | added.get(p.name, set())
            for v in a.values:
                if v not in ok:
                    raise grid.fail(a.key, f"{p.name} cannot run {v}: processors.{p.name}.macs_per_cycle lists "
                                           f"{', '.join(b for b in BITS if b in ok)}")  # fmt: skip
        elif k == "support":
            if soc.processor(a.target[0]).host:
                raise grid.fail(a.key, f"{a.target[0]} is the host: it runs every op no accelerator takes; "
                                       f"toggle an accelerator ({', '.join(soc.accelerators)})")  # fmt: skip
            try:
                op = canonical(a.target[1])
            except ConfigError as e:
                raise grid.fail(a.key, str(e)) from None
            kinds = sorted({o.kind for o in model.graph.ops})
            if op not in kinds:  # every row alike: the toggle reaches no op
                raise grid.fail(a.key, f"the model has no {op} op, so toggling it changes no configuration; its ops: "
                                       f"{', '.join(kinds)}")  # fmt: skip
        elif k in ("pin", "layer_bits"):
            try:
                pl.resolve(model.graph, a.target[0])
            except ConfigError as e:
                raise grid.fail(a.key, str(e)) from None
            if k == "pin":
                for v in a.values:
                    if v != NO_PIN and v not in names:
                        raise grid.fail(a.key, f"unknown processor {v!r}; {closest(str(v), (*names, NO_PIN))}")
            else:
                _check_layer_widths(grid, a, soc, added)
        elif k == "soc":
            _check_soc_axis(grid, a, soc)


def _added_widths(grid: Grid) -> dict[str, set[str]]:
    """Bit-widths the grid itself adds to a processor's macs_per_cycle (``soc.processors.dla.macs_per_cycle.int4``)."""
    added: dict[str, set[str]] = {}
    for a in grid.axes:
        parts = a.target[0].split(".") if a.kind == "soc" else []
        if len(parts) == 4 and parts[0] == "processors" and parts[2] == "macs_per_cycle":
            added.setdefault(parts[1], set()).add(parts[3])
    return added


def _check_layer_widths(grid: Grid, a: Axis, soc, added: dict[str, set[str]]) -> None:
    """A layer width no processor runs in any configuration fails every row that sets it (at run
    time, one row at a time): it is refused here."""
    runs = {p.name: [b for b in BITS if b in set(p.bits) | added.get(p.name, set())] for p in soc.processors}
    for v in a.values:
        if not any(v in r for r in runs.values()):
            widths = "; ".join(f"{n} runs {', '.join(r)}" for n, r in runs.items())
            raise grid.fail(a.key, f"no processor runs {v}, so layer {a.target[0]!r} cannot run at it: {widths} "
                                   "(processors.<name>.macs_per_cycle)")  # fmt: skip


def _check_soc_axis(grid: Grid, a: Axis, soc) -> None:
    from ..soc.schema import (  # noqa: PLC0415
        ACCELERATOR_ONLY,
        OP_FIELDS,
        OP_NOT_FIGURES,
        PROCESSOR_FIELDS,
        TOP_NOT_FIGURES,
        figure_fields,
        unread_field,
    )

    # (an unknown field's suggestions are the fields a sweep takes, not those it refuses below)
    path = a.target[0]
    parts = path.split(".")
    top = [k for k in SOC_TOP if k not in TOP_NOT_FIGURES]
    if parts[0] not in SOC_TOP:
        raise grid.fail(a.key, f"unknown profile field {parts[0]!r}; {closest(parts[0], top)}")
    if parts[0] in TOP_NOT_FIGURES:
        raise grid.fail(a.key, f"not a figure to sweep: {parts[0]} {TOP_NOT_FIGURES[parts[0]]}; top-level fields "
                               f"to sweep: {', '.join(top)}")  # fmt: skip
    if len(parts) >= 5 and parts[0] == "processors" and parts[2] == "ops" and parts[4] in OP_NOT_FIGURES:
        raise grid.fail(a.key, f"not a figure to sweep on {parts[1]}: {parts[4]} {OP_NOT_FIGURES[parts[4]]}; sweep "
                               f"the op's limits, or support.{parts[1]}.{parts[3]}")  # fmt: skip
    if parts[0] == "processors":
        if len(parts) < 3:
            raise grid.fail(a.key, "write soc.processors.<processor>.<field>")
        if parts[1] not in soc.names:
            raise grid.fail(a.key, f"unknown processor {parts[1]!r}; {closest(parts[1], soc.names)}")
        p = soc.processor(parts[1])
        if parts[2] not in [f.key for f in PROCESSOR_FIELDS]:
            raise grid.fail(a.key, f"unknown processor field {parts[2]!r}; {closest(parts[2], figure_fields(p.host))}")
        why = unread_field(parts[2], p.host)
        if why is not None:
            who = f"on the host {p.name}" if p.host and parts[2] in ACCELERATOR_ONLY else f"on {p.name}"
            raise grid.fail(a.key, f"not a figure to sweep {who}: {parts[2]} {why}; fields to sweep on {p.name}: "
                                   f"{', '.join(figure_fields(p.host))}")  # fmt: skip
        limits = [f.key for f in OP_FIELDS if f.key not in OP_NOT_FIGURES]
        if len(parts) >= 5 and parts[2] == "ops" and parts[4] not in limits:
            raise grid.fail(a.key, f"unknown op field {parts[4]!r}; {closest(parts[4], limits)}")
    for v in a.values:
        try:
            soc.with_changes({path: v})
        except NpukitError as e:
            msg = str(e)
            for pre in (f"{soc.path} (edited): ", f"{soc.path}: "):
                msg = msg.removeprefix(pre)
            if msg.startswith(path + ": "):  # about the field itself: the message already says the value
                msg = msg[len(path) + 2:]
            else:
                msg = f"{canon(v)}: {msg}"
            raise grid.fail(a.key, msg) from None


