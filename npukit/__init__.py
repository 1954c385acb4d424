"""npukit: what-if offload studies of ML models on edge SoCs, built on Apache TVM's BYOC.

    import npukit
    soc = npukit.load_soc("arm-dsp-dla")
    study = npukit.Study("sample_models/digits_cnn.onnx", soc)
    study.placement; study.costs; study.totals; study.explain("/conv1/Conv")

``import npukit`` stays light: tvm (and torch) load only when a model is imported.
"""

from __future__ import annotations

from .errors import (
    ConfigError,
    DataError,
    ModelError,
    NpukitError,
    PartitionLimitWarning,
    ProfileError,
    ShapeError,
    UnsupportedOpError,
)

__version__ = "0.1.0"

_LAZY = {
    "Study": ("npukit.study", "Study"),
    "Config": ("npukit.config", "Config"),
    "load_soc": ("npukit.soc", "load_soc"),
    "SocProfile": ("npukit.soc", "SocProfile"),
    "bundled_socs": ("npukit.soc", "bundled"),
    "OpGraph": ("npukit.graph", "OpGraph"),
    "import_model": ("npukit.tvm.importers", "import_model"),
    "sweep": ("npukit.sweeps", "sweep"),
    "pareto": ("npukit.sweeps", "pareto"),
    "sweep_study": ("npukit.sweeps", "open_study"),
    "load_grid": ("npukit.sweeps", "load_grid"),
}

__all__ = [
    "ConfigError", "DataError", "ModelError", "NpukitError", "PartitionLimitWarning", "ProfileError", "ShapeError",
    "UnsupportedOpError", *_LAZY,
]  # fmt: skip


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'npukit' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
