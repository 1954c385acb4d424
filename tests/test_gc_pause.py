"""The collector during edits (``pipeline.gc_paused``): what an edit leaves alive is frozen instead of
walked by the next young collection, garbage made outside an edit is never frozen with it, and what
the edits froze is collected in full every ``GC_SWEEP`` edits."""

from __future__ import annotations

import gc
import os
import weakref
from pathlib import Path

import pytest

import npukit
from npukit.pipeline import caches

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"

pytestmark = pytest.mark.skipif(os.environ.get("NPUKIT_GC_FREEZE") == "0", reason="the collector is left alone")


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def study():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    s.totals  # noqa: B018 - loaded, partitioned and settled
    yield s
    gc.unfreeze()  # (the other tests see the collector as they would without these edits)
    gc.collect()


def test_an_edit_freezes_what_it_leaves_alive(study):
    # counted from here: had the edits of the tests before this one brought the count to a multiple of
    # GC_SWEEP during this edit, its full collection would unfreeze and free more than the edit froze
    caches._GC_DEPTH[2] = 0  # noqa: SLF001
    gc.collect()
    before = gc.get_freeze_count()
    study.set_support("dla", "conv2d", False)
    study.totals  # noqa: B018
    assert gc.get_freeze_count() > before  # the edit's cache entries
    assert gc.isenabled()
    assert gc.get_count()[0] < 700  # nothing left for the next young collection to walk


def test_garbage_made_before_an_edit_is_not_frozen_with_it(study):
    gc.collect()
    n = Node()
    ref = weakref.ref(n)
    del n  # unreachable now, but only a collection frees it
    assert ref() is not None
    study.pin("/softmax/Softmax", "arm")
    assert ref() is None  # collected when the pause began, not frozen at its end


def test_every_gc_sweep_edits_what_was_frozen_is_collected(study, monkeypatch):
    monkeypatch.setattr(caches, "GC_SWEEP", 3)
    caches._GC_DEPTH[2] = 0  # noqa: SLF001 - count the edits from here
    with caches.gc_paused():  # a cycle made inside an edit, dropped after it was frozen
        n = Node()
    ref = weakref.ref(n)
    del n
    assert ref() is not None
    study.set_support("dla", "conv2d", False)  # the 2nd pause since the count was reset
    assert ref() is not None  # still frozen
    study.set_support("dla", "conv2d", True)  # the 3rd: the sweep
    assert ref() is None
