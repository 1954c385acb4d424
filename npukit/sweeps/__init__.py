"""Design-space sweeps (``npukit.sweep`` / ``npukit.pareto``; the package is ``sweeps`` so that
importing it never shadows the function ``npukit.sweep``): a grid of configurations (support sets, pins, bit-widths, placement, SoC
parameters) evaluated at once, one row per configuration, on local worker processes or a Dask
cluster; Parquet output that resumes; Pareto fronts; a self-contained HTML report.

    df = npukit.sweep("model.onnx", "arm-dsp-dla", "grid.toml", out="results.parquet")
    front = npukit.pareto(df)                     # latency_us, energy_uj (and error) minimized
    study = npukit.sweep_study(df.iloc[3], "model.onnx", "arm-dsp-dla")   # open one configuration
"""

from __future__ import annotations

from .check import check_grid
from .grid import Axis, Grid, GridError, load_grid
from .pareto import pareto, pareto_mask
from .run import open_study, sweep
from .store import SweepError

__all__ = ["Axis", "Grid", "GridError", "SweepError", "check_grid", "load_grid", "open_study", "pareto",
           "pareto_mask", "sweep"]  # fmt: skip
