"""``npukit.sweep_study``: the Study of one sweep row.  Whatever is passed that is not one row of a
sweep (an index, a dict of other things, a whole DataFrame), or a row opened on a profile its
configuration does not fit, is said as such, not as an error of the parts it was taken apart into."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from ..config import Config
from ..errors import ConfigError, closest
from ..soc import load_soc
from .store import SweepError

HOW = "pass one row of the sweep's results, e.g. df.iloc[3] (or a dict of one row's columns)"


def open_study(row, model, soc, input_shapes=None):
    """The Study of one sweep row (a DataFrame row or dict holding ``config`` and the ``soc.*`` grid
    columns), to look at that configuration in full, on the model and profile the sweep ran on (and
    the ``input_shapes`` it was given)."""
    from ..study import Study  # noqa: PLC0415

    r = _row(row)
    cfg = r["config"]
    if cfg is None or (isinstance(cfg, float) and cfg != cfg):  # (a failed row's config: None, or NaN from a DataFrame)
        raise SweepError(f"configuration {r.get('index')} failed ({r.get('failure')}); there is no study to open")
    try:
        config = Config.from_dict(json.loads(cfg)) if isinstance(cfg, str) else None
    except (ValueError, ConfigError) as e:
        raise SweepError(f"{_it(r)}: its config {cfg!r} is not a saved config ({e}); {HOW}") from None
    if config is None:
        raise SweepError(f"{_it(r)}: its config {cfg!r} is not a saved config (JSON text); {HOW}")
    soc = load_soc(soc)
    changes = {}
    for k, v in r.items():
        if isinstance(k, str) and k.startswith("soc.") and v is not None and not (isinstance(v, float) and v != v):
            if isinstance(v, str) and v[:1] in "[{":
                v = json.loads(v)
            elif hasattr(v, "item"):
                v = v.item()
            changes[k[4:]] = v
    _fits(r, config, soc, changes)
    try:
        study = Study(model, soc.with_changes(changes) if changes else soc, config, input_shapes=input_shapes)
    except ConfigError as e:
        raise ConfigError(f"{_it(r)}: its config {cfg} does not fit this model: {e}; open the row on the model its "
                          "sweep ran on") from None  # fmt: skip
    _same_figures(r, study, soc)
    return study


def _same_figures(r: dict, study, soc) -> None:
    """The study estimates what the row recorded (the same model, profile and config give the same
    figures, to the bit): else the model or the profile is not the one the sweep ran on -- a profile
    edited under the same name -- and the study would be taken for the row's."""
    for col in ("latency_us", "energy_uj"):
        want = r.get(col)
        if want is None or isinstance(want, str) or want != want:  # (not recorded, or NaN)
            continue
        got = study.totals[col]
        if not math.isclose(got, float(want), rel_tol=1e-9, abs_tol=1e-12):
            unit = "us" if col == "latency_us" else "uJ"
            raise SweepError(f"{_it(r)}: opened on {Path(str(study.graph.path)).name} and profile {soc.name!r}, its "
                             f"configuration estimates {col} = {got:,.6g} {unit} where the sweep recorded "
                             f"{float(want):,.6g} {unit}: the model or the profile is not the one the sweep ran on "
                             f"(edited since?); open the row on the files the sweep ran on, or study its config on "
                             f"these: npukit.Study(model, soc, json.loads(row['config']))")  # fmt: skip


def _row(row) -> dict:
    """``row`` as a dict of one sweep row's columns, or a SweepError saying what it is instead."""
    if hasattr(row, "columns") and hasattr(row, "iloc"):  # a DataFrame: several rows
        raise SweepError(f"sweep_study takes one row, not a DataFrame of {len(row)} rows; {HOW}")
    if not isinstance(row, Mapping) and not (hasattr(row, "items") and hasattr(row, "index")):  # (a pandas Series)
        if isinstance(row, int) and not isinstance(row, bool):
            raise SweepError(f"sweep_study: {row} is an index, not a row of this sweep; pass the row itself: "
                             f"df.iloc[{row}] (or a dict of one row's columns)")  # fmt: skip
        shown = repr(row) if len(repr(row)) <= 60 else repr(row)[:57] + "..."
        raise SweepError(f"sweep_study: the {type(row).__name__} {shown} is not a row of this sweep; {HOW}")
    r = dict(row.items())
    if "config" not in r:
        keys = ", ".join(map(repr, list(r)[:6])) + (", ..." if len(r) > 6 else "") or "none"
        raise SweepError(f"sweep_study: not a row of this sweep: it has no 'config' column (its keys: {keys}); {HOW}")
    return r


def _it(r: dict) -> str:
    return f"sweep row {r['index']}" if r.get("index") is not None else "the sweep row"


def _fits(r: dict, config: Config, soc, changes: dict) -> None:
    """Every processor the row names (its ``soc.processors.<name>`` columns, its config's edits) is
    one of ``soc``'s: a row opened on another profile says so, not that a field of a processor it
    made up is missing."""
    named = [(k.split(".")[1], f"column soc.{k}") for k in changes if k.startswith("processors.") and k.count(".") >= 2]
    named += [(p, f"config bits.{p}") for p, _b in config.bits]
    named += [(p, f"config {'disabled' if (p, o) in config.disabled else 'enabled'} {p}:{o}")
              for p, o in sorted(config.disabled | config.enabled)]  # fmt: skip
    named += [(p, f"config pins.{n!r}") for n, p in config.pins]
    for proc, where in named:
        if proc not in soc.names:
            raise SweepError(f"{_it(r)}: {soc.name} has no processor {proc!r} (the row's {where}); open the row on "
                             f"the profile its sweep ran on ({closest(proc, soc.names)})")  # fmt: skip
