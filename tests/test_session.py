"""Issue 14, long sessions: random edits on a Study (a short, seeded run of benchmarks/session.py;
the benchmark does 10,000).  After every edit the figures equal the same config evaluated from
scratch, nothing raises but the documented NpukitError, and memory stays flat."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT, SAMPLES

sys.path.insert(0, str(ROOT / "benchmarks"))
import session  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("model", "soc", "widget"), [
    ("digits_cnn.onnx", "arm-dsp-dla", True),
    ("tiny_detector.onnx", "vsi-npu", False),
])  # fmt: skip
def test_random_edits_equal_a_study_from_scratch(model, soc, widget):
    r = session.run(SAMPLES / model, soc, edits=150, check_every=1, error_every=50, widget=widget, seed=14)
    assert r["n_other_exceptions"] == 0, r["other_exceptions"]
    assert r["n_mismatches"] == 0, r["mismatches"]
    assert r["checked"] == 150
    assert set(r["by_kind"]) == set(session.KINDS)  # every kind of edit was tried ...
    assert r["documented_errors"].get("pin", 0) > 0  # ... including bad ones, refused with NpukitError
    assert sum(r["by_kind"].values()) - sum(r["documented_errors"].values()) > 75  # most edits applied


def test_memory_stays_flat_over_a_long_session():
    """Edits with the widget attached, without the from-scratch checks (those allocate on their
    own), measuring the error now and then: once the bounded caches are full, the process does not
    grow (benchmarks/session.py measures 10,000 edits)."""
    r = session.run(SAMPLES / "tiny_detector.onnx", "vsi-npu", edits=600, check_every=0, error_every=50,
                    widget=True, seed=15, warmup=300)  # fmt: skip
    assert r["n_other_exceptions"] == 0, r["other_exceptions"]
    assert r["rss_growth_mb"] < 50, r
