"""The pure steps of a study, composed (the Study and sweeps call these; nothing here keeps state but
bounded caches keyed by exactly what each step depends on):

    load(model, input_shapes)            -> Model     (import: OpGraph + tagged Relax module)
    verdicts(model, soc, config)         -> every processor's verdict on every op under the edits
    partition(model, soc, config)        -> Partitioned (the real TVM BYOC partition, read back as a Plan)
    estimate(model, soc, config, part)   -> Result    (per-op figures, boundaries, timeline, totals)
    error(result, data)                  -> ErrorResult (the numeric error of the bit-widths)

``evaluate(model, soc, config)`` composes them.  A ``Model``, a ``SocProfile`` and a ``Config`` all
pickle, so ``evaluate`` runs the same in a worker process (the worker's caches fill on first use).
A bit-width edit never re-partitions: the partition is keyed by the support edits and pins only.

Modules: ``caches`` (one bounded cache per step; the collector during edits), ``model`` (import,
tables, the edits resolved: names, pins, bit-widths, verdicts, checks), ``partitioning`` (the BYOC
partition and the cost policy), ``results`` (the estimate step, ``evaluate``), ``products``
(numeric error, generated code, calibration, memory).  Every name is reached as ``pipeline.<name>``.
"""

from __future__ import annotations

from .caches import (
    ADDITIVE,
    ADDITIVE_MAX,
    ALL_CACHES,
    CAPS,
    CHOICES,
    CODE,
    COSTED,
    COSTS,
    DIGESTS,
    ERRORS,
    EVALUATORS,
    FITS,
    GC_FULL,
    HOSTC,
    HOSTONLY,
    IMPORTS,
    LRU,
    PARTITION_CACHES,
    PARTS,
    PREP,
    RANGES,
    RESULTS,
    SCORES,
    SIMS,
    TABLES,
    VERDICTS,
    clear_caches,
    clear_partition_caches,
    from_scratch,
    gc_paused,
)
from .model import (
    Model,
    by_specificity,
    capabilities_of,
    check,
    check_bits,
    cost_model,
    host_toggle,
    layer_bits_of,
    load,
    per_op,
    pinned_as,
    pins_of,
    resolve,
    shown,
    tables,
    verdicts,
)
from .partitioning import (
    bits_policy,
    byoc_steps,
    check_placed,
    layer_width_error,
    partition,
    partition_cached,
    width_error,
)
from .products import (
    RANGES_FORMAT,
    budgets,
    calibrated_tensors,
    calibration,
    code,
    code_if_generated,
    default_data,
    error,
    error_model,
    host_code,
    measured_fit,
    memory,
    record_fit,
    simulate,
    simulate_float,
    simulator,
)
from .products import (
    _ranges_file as _ranges_file,  # (benchmarks/export.py reads the calibration file)
)
from .results import Result, estimate, evaluate, totals
from .widths import op_bits, settings, width_notes

__all__ = [
    "ADDITIVE",
    "ADDITIVE_MAX",
    "ALL_CACHES",
    "CAPS",
    "CHOICES",
    "CODE",
    "COSTED",
    "COSTS",
    "DIGESTS",
    "ERRORS",
    "EVALUATORS",
    "FITS",
    "GC_FULL",
    "HOSTC",
    "HOSTONLY",
    "IMPORTS",
    "LRU",
    "Model",
    "PARTITION_CACHES",
    "PARTS",
    "PREP",
    "RANGES",
    "RANGES_FORMAT",
    "RESULTS",
    "Result",
    "SCORES",
    "SIMS",
    "TABLES",
    "VERDICTS",
    "bits_policy",
    "budgets",
    "by_specificity",
    "byoc_steps",
    "calibrated_tensors",
    "calibration",
    "capabilities_of",
    "check",
    "check_bits",
    "host_toggle",
    "shown",
    "check_placed",
    "clear_caches",
    "clear_partition_caches",
    "code",
    "code_if_generated",
    "cost_model",
    "default_data",
    "error",
    "error_model",
    "estimate",
    "evaluate",
    "from_scratch",
    "gc_paused",
    "layer_width_error",
    "host_code",
    "layer_bits_of",
    "load",
    "measured_fit",
    "memory",
    "op_bits",
    "settings",
    "width_notes",
    "partition",
    "partition_cached",
    "per_op",
    "pinned_as",
    "pins_of",
    "record_fit",
    "resolve",
    "simulate",
    "simulate_float",
    "simulator",
    "tables",
    "totals",
    "verdicts",
    "width_error",
]
