"""Compatibility module: the importers live in ``npukit.tvm.frontends`` (one module per format).

Other code imports these names from here; keep them re-exported.
"""

from __future__ import annotations

from .frontends import MAC_KINDS, MODEL_EXTENSIONS, SPAN_PREFIX, Imported, import_model, op_id_of_span
from .frontends.common import _quiet

__all__ = ["Imported", "import_model", "op_id_of_span", "SPAN_PREFIX", "MODEL_EXTENSIONS", "MAC_KINDS", "_quiet"]
