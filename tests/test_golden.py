"""Regression: every figure a user sees, for every sample on every bundled profile, equals the
golden files recorded before the pipeline redesign (``tests/golden/record.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "golden"))
import record  # noqa: E402

PAIRS = record.pairs()


@pytest.mark.slow
@pytest.mark.parametrize("model,soc", PAIRS, ids=[f"{m}-{s}" for m, s in PAIRS])
def test_figures_equal_golden(model, soc):
    d = record.diff(record.load(model, soc), record.record_pair(model, soc))
    assert not d, "\n".join(d)
