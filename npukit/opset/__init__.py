"""The one op vocabulary: kinds and roles (``registry``), work formulas (``work``), shape helpers
(``shapes``).  No tvm."""

from .names import canonical, full, full_names, short_names
from .registry import ACTIVATIONS, ELEMENTWISE_COST, KINDS, OpKind, get, is_mac, is_view, kind, known, work
from .shapes import channels, geometry, kernel_hw, layout_dims, spatial_attr, weight_axis
from .work import TRANSCENDENTAL, Work

__all__ = [
    "ACTIVATIONS", "ELEMENTWISE_COST", "canonical", "full", "full_names", "short_names", "KINDS", "OpKind", "TRANSCENDENTAL", "Work", "channels", "geometry",
    "get", "is_mac", "is_view", "kernel_hw", "kind", "known", "layout_dims", "spatial_attr", "weight_axis", "work",
]  # fmt: skip
