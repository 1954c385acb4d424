"""Pareto fronts of a sweep: the configurations no other configuration beats in every objective."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError, closest

DEFAULT = ("latency_us", "energy_uj", "error")
MAXIMIZE = frozenset({"accuracy", "accuracy_fp32", "snr_db", "top1_agreement"})


def objectives_of(df, objectives=None) -> list[tuple[str, bool]]:
    """(column, maximize) pairs.  Default: those of latency_us, energy_uj, error the table has.  A
    name may say its direction, ``"max:accuracy"`` / ``"min:latency_us"``; otherwise accuracy,
    snr_db and top1_agreement are maximized and everything else minimized."""
    if objectives is None:
        return [(c, False) for c in DEFAULT if c in df.columns]
    if isinstance(objectives, str):
        objectives = (objectives,)
    out = []
    for o in objectives:
        name, maximize = str(o), None
        if name.startswith(("max:", "min:")):
            maximize, name = name.startswith("max:"), name[4:]
        if name not in df.columns:
            raise ConfigError(f"pareto: no column {name!r} in the table; {closest(name, map(str, df.columns))}")
        out.append((name, name in MAXIMIZE if maximize is None else maximize))
    if not out:
        raise ConfigError("pareto: no objectives")
    return out


def pareto_mask(df, objectives: Sequence[str] | None = None, digits: int | None = 6):
    """A boolean Series: is each row in the Pareto set?  Rows that failed or lack an objective
    value are never in it.  Values are compared at ``digits`` significant digits (None: exactly),
    so that float noise -- an error figure that differs in its 8th digit between two placements
    of the same layers -- does not keep a configuration that is otherwise beaten."""
    import numpy as np  # noqa: PLC0415
    import pandas as pd  # noqa: PLC0415

    objs = objectives_of(df, objectives)

    def col(c: str, mx: bool):
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        if digits is not None:
            v = np.array([float(f"{x:.{digits}g}") for x in v.tolist()], dtype=float)
        return -v if mx else v

    x = np.column_stack([col(c, mx) for c, mx in objs]) if len(df) else np.zeros((0, len(objs)))
    ok = ~np.isnan(x).any(axis=1)
    if "failure" in df.columns:
        ok &= df["failure"].isna().to_numpy()
    idx = np.flatnonzero(ok)
    # lexicographic order: a point can only be dominated by one before it
    order = idx[np.lexsort(x[idx].T[::-1])] if len(idx) else idx
    keep: list[int] = []
    front = np.zeros((0, x.shape[1]))
    for i in order:
        p = x[i]
        if len(front) and np.any(np.all(front <= p, axis=1) & np.any(front < p, axis=1)):
            continue
        keep.append(i)
        front = np.vstack([front, p])
    mask = np.zeros(len(df), dtype=bool)
    mask[keep] = True
    return pd.Series(mask, index=df.index, name="pareto")


def pareto(df, objectives: Sequence[str] | None = None, digits: int | None = 6):
    """The non-dominated rows of ``df`` (in their order): no other row is at least as good in every
    objective and better in one (compared at ``digits`` significant digits; None: exactly).
    ``objectives`` default: latency_us, energy_uj and error (those present)."""
    return df[pareto_mask(df, objectives, digits)]
