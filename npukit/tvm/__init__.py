"""The boundary to Apache TVM: the only package in npukit that imports ``tvm``.

TVM's Python API moves between releases (``tir`` -> ``tirx``, ``struct_info`` -> ``ty``, codegen
hooks through ``tvm_ffi``); everything version-specific lives here.

``tvm_ffi`` imports torch at start-up when it is installed, which makes ``import tvm`` 3-4x slower
(field note, DESIGN.md section 7).  ``load()`` hides torch during that import unless torch is
already loaded; the PyTorch importer imports torch later, when a PyTorch model is actually
loaded.
"""

from __future__ import annotations

import sys
import threading
import warnings

_lock = threading.Lock()


def load():
    """Import tvm (once) without dragging torch in; return the ``tvm`` module."""
    mod = sys.modules.get("tvm")
    if mod is not None:
        return mod
    with _lock:
        hide = "torch" not in sys.modules
        if hide:
            sys.modules["torch"] = None  # type: ignore[assignment]  # makes `import torch` fail
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import tvm  # noqa: PLC0415
                from tvm import relax  # noqa: F401, PLC0415
        finally:
            if hide and sys.modules.get("torch", 0) is None:
                del sys.modules["torch"]
    return tvm


def remapper(mapping: dict):
    """``m(expr)``: an argument of the old main rewritten for a rebuilt main (vars looked up by
    name in ``mapping``, tuples rebuilt, constants and static values kept)."""
    from tvm import relax  # noqa: PLC0415

    def m(x):
        if isinstance(x, relax.Var):
            return mapping[x.name]
        if isinstance(x, relax.Tuple):
            return relax.Tuple([m(y) for y in x.fields])
        return x

    return m
