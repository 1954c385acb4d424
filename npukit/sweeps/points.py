"""One point of a sweep grid -> what a worker evaluates (no tvm): its profile changes
(``soc_changes``) and its Config (``config_of``), and the result table's column types and values of
the grid's axes (``axis_type``, ``column_value``)."""

from __future__ import annotations

import dataclasses

from ..config import Config
from .grid import NO_PIN, Axis, canon


def soc_changes(axes: tuple[Axis, ...], values: tuple) -> dict:
    """The profile changes of one point: ``{"processors.dla.clock_mhz": 800, ...}``."""
    return {a.target[0]: v for a, v in zip(axes, values) if a.kind == "soc"}


def config_of(axes: tuple[Axis, ...], values: tuple, soc) -> Config:
    """The Config of one point on its (already changed) profile ``soc``; support toggles are edits
    only where they differ from the profile (as ``Study.set_support``)."""
    from ..opset import canonical  # noqa: PLC0415

    cfg = Config()
    for a, v in zip(axes, values):
        k = a.kind
        if k == "bits":
            cfg = cfg.with_bits(v, processor=a.target[0])
        elif k == "layer_bits":
            cfg = cfg.with_bits(v, layer=a.target[0])
        elif k == "support":
            proc, op = a.target[0], canonical(a.target[1])
            if v == (op in soc.processor(proc).ops):
                cfg = cfg.without_support_edit(proc, op)
            else:
                cfg = cfg.with_support(proc, op, v)
        elif k == "pin":
            cfg = cfg.with_pin(a.target[0], None if v == NO_PIN else v)
        elif k == "placement":
            cfg = dataclasses.replace(cfg, placement=v)
    return cfg


def axis_type(a: Axis) -> str:
    """The column type of an axis: bool | int | float | str | json (tables, lists, mixed values)."""
    types = {type(v) for v in a.values}
    if types == {bool}:
        return "bool"
    if types == {int}:
        return "int"
    if types <= {int, float}:
        return "float"
    if types == {str}:
        return "str"
    return "json"


def column_value(a: Axis, kind: str, v):
    if kind == "json":
        return canon(v)
    if kind == "float":
        return float(v)
    return v
