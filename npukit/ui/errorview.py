"""The widget's numeric-error panel as plain JSON data: the figures when measured, the note over the
per-op table, and what made them stale (``viewmodel`` has the rest of the view)."""

from __future__ import annotations

import json
from typing import Any

from .viewmodel import _jsonable, _num, placement_key


def error_model(study, measure: bool) -> dict[str, Any]:
    """The numeric-error panel.  Measuring runs the model, so it happens only when asked."""
    cls = type(study)
    if not (hasattr(cls, "error_dict") and hasattr(cls, "error")):
        return {"state": "missing", "text": "error: not computed (this npukit has no Study.error yet)"}
    if not measure:
        return {"state": "idle", "text": "error: not computed (press 'measure error'; it runs the model)"}
    d = study.error_dict()
    per_op = study.error
    cols = [c for c in ("op_id", "name", "processor", "bits", "snr_db", "max_abs_err") if c in per_op.columns]
    ops = {c: _jsonable(per_op[c].tolist()) for c in cols}
    return {
        "state": "ok",
        "text": "",
        "outputs": _jsonable(d.get("outputs", [])),
        "accuracy": _num(d.get("accuracy")) if d.get("accuracy") is not None else None,
        "accuracy_fp32": _num(d.get("accuracy_fp32")) if d.get("accuracy_fp32") is not None else None,
        "samples": _jsonable(d.get("samples")),
        "per_op_samples": _jsonable(d.get("per_op_samples")),
        "per_op_note": per_op_note(d.get("samples"), d.get("per_op_samples")),
        "data_source": _jsonable(d.get("data_source")),
        "ops": ops,
        "config": error_key(study),
        "settings": _error_settings(study),
        "data": study.data.key,
    }


def per_op_note(samples, per_op) -> str:
    """The line over the per-op table: the samples its figures are measured on, said against the
    headline's count when they differ (the per-op figures keep every op's output, so they use the
    first samples only)."""
    if not samples or per_op is None:
        return ""
    if per_op >= samples:
        return f"per-op figures over all {samples} sample{'' if samples == 1 else 's'}, like the outputs above"
    return f"per-op figures over the first {per_op} of the {samples} samples (every op's output is kept for them)"


def error_key(study) -> str:
    """What the numeric error depends on: placement, bit-widths and the data it is measured on."""
    return _error_settings(study) + study.data.key


def _error_settings(study) -> str:
    cfg = study.config
    return placement_key(study) + json.dumps(list(cfg.bits) + list(cfg.layer_bits))


def stale_text(errors: dict, study) -> str:
    """What changed since the error panel's figures were measured, in the words of its note
    ("stale: the data changed since this was measured"); "" while they are the current ones."""
    why = [what for what, was, now in (("config", errors.get("settings"), _error_settings(study)),
                                       ("data", errors.get("data"), study.data.key)) if was != now]  # fmt: skip
    return f"stale: the {' and the '.join(why)} changed since this was measured" if why else ""
