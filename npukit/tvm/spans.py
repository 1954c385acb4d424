"""The span every tagged op call carries: ``npukit:<op_id>``.  Spans survive FuseOpsByPattern and
MergeCompositeFunctions, so a partitioned module can be read back op by op."""

from __future__ import annotations

SPAN_PREFIX = "npukit:"


def op_id_of_span(span) -> int | None:
    """The op id a tagged call carries, or None."""
    if span is None:
        return None
    name = getattr(getattr(span, "source_name", None), "name", "")
    if name.startswith(SPAN_PREFIX):
        try:
            return int(name[len(SPAN_PREFIX):])
        except ValueError:
            return None
    return None
