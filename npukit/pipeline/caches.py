"""The pipeline's caches, one bounded cache per step, and the cyclic collector during edits."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import Model

class LRU:
    """A small bounded cache (most recent last)."""

    def __init__(self, size: int):
        self.size = size
        self.d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()  # the widget builds in a thread beside the kernel

    def get(self, key):
        with self._lock:
            kv = self.d.get(key)
            if kv is None:
                return None
            self.d.move_to_end(kv[0])  # (by the key as kept: found by identity, not compared again)
            return kv[1]

    def put(self, key, value):
        with self._lock:
            self.d[key] = (key, value)  # (a plan in a key compares in ~0.1 ms at 1,000 ops)
            self.d.move_to_end(key)
            while len(self.d) > self.size:
                self.d.popitem(last=False)
            return value

    def clear(self) -> None:
        with self._lock:
            self.d.clear()


# one cache per step
IMPORTS = LRU(8)  # (path, digest of the file's bytes, shapes) -> (Model, ((file read beside it, its file_key), ...))
DIGESTS = LRU(64)  # a model file's stat signature -> digest of its bytes (pipeline.source.file_key)
TABLES = LRU(8)  # model key -> cost Tables
CAPS = LRU(16)  # (model, soc) -> capability verdicts
PREP = LRU(8)  # model key -> (chain shapes, op arities): partition work that no edit changes
PARTS = LRU(64)  # (model, soc, what the verdicts accept) -> Partitioned
CHOICES = LRU(64)  # (model, soc, config's partition key) -> the policy's Partitioned
COSTS = LRU(8)  # (model, soc) -> CostModel (it memoizes kernels and boundaries itself)
RESULTS = LRU(64)  # (model, soc, config) -> Result
SIMS = LRU(4)  # model key -> compiled Simulator
CODE = LRU(16)  # (model, soc, config, data) -> generated Project
HOSTC = LRU(32)  # (model, host kernel groups) -> TVM's C for the host's ops (npukit.tvm.hostc.HostC)
FITS = LRU(32)  # (model, soc, config, data) -> the measured memory fit of the target build (codegen.fit)
RANGES = LRU(8)  # (model, data) -> calibrated activation ranges (also kept on disk: calibration())
ERRORS = LRU(4)  # (model, data) -> ErrorModel (it memoizes per bit-width assignment itself)
SCORES = LRU(8)  # (model, soc) -> LRU of the cost placement's evaluated virtual plans
ADDITIVE = LRU(8)  # (model, soc) -> the cost placement's additive kernel and boundary figures
ADDITIVE_MAX = 200_000
HOSTONLY = LRU(16)  # (model, soc, ops pinned away from the host) -> the all-host baseline's partition
COSTED = LRU(16)  # (model, soc, plan, bit-widths) -> Costed (op costs, boundary costs, makespan, schedule)
VERDICTS = LRU(16)  # (model, soc, support edits, pins) -> every processor's verdict on every op
EVALUATORS = LRU(2)  # a sweep job's key -> its sweeps.evaluate.Evaluator (its own profiles, partitions, checks)


ALL_CACHES = (IMPORTS, DIGESTS, TABLES, CAPS, PREP, PARTS, CHOICES, COSTS, RESULTS, SIMS, ERRORS, CODE, HOSTC, FITS, RANGES,
              SCORES, ADDITIVE, HOSTONLY, COSTED, VERDICTS, EVALUATORS)
PARTITION_CACHES = (VERDICTS, PARTS, CHOICES, EVALUATORS)  # what a support toggle or a pin computes anew


def clear_caches() -> None:
    for c in ALL_CACHES:
        c.clear()


def clear_partition_caches() -> None:
    """Forget every verdict set and partition, so the next edit partitions for real (benchmarks)."""
    for c in PARTITION_CACHES:
        c.clear()


@contextlib.contextmanager
def from_scratch(keep=(IMPORTS, DIGESTS, SIMS)):
    """Inside the block every step is computed anew (each cache but ``keep`` is set aside, then
    restored): what a Study built from scratch sees, for checking an incremental result against.
    The imported model and the compiled simulation are kept by default -- the same file gives the
    same ones, and re-importing is checked on its own."""
    saved = [(c, c.d) for c in ALL_CACHES if c not in keep]
    for c, _ in saved:
        c.d = OrderedDict()
    try:
        yield
    finally:
        for c, d in saved:
            c.d = d



_SETTLED: set = set()


GC_FULL = 100  # generation-1 collections between full ones once a model is loaded (CPython's default: 10)


def settle(model: Model) -> None:
    """Once per model, after its first partition: collect garbage, then move every object alive
    (the libraries imported -- tvm, onnx, pandas --, the imported model, its module, tables and
    first verdicts: most of a session's long-lived objects) out of the collector's view
    (``gc.freeze``), so the full collections that edits trigger no longer walk them.  On the 1,161-op
    transformer this took a support toggle's p95 from ~130 ms to ~24 ms; at MobileNet size a full
    collection of the libraries alone took ~50 ms, one toggle in twenty.  Objects frozen are still
    freed when no longer referenced; only reference cycles among them would stay.

    It also raises the oldest generation's threshold to ``GC_FULL`` (never lowers it).  An edit under
    the cost policy allocates ~100,000 container objects at transformer size; at CPython's 10, 7 of
    12 pin / unpin edits paid a full collection of the caches that had grown since (15-35 ms each;
    27 ms of collection per edit on average), at 100 none of them (7 ms per edit).  The young
    generations keep CPython's thresholds (a larger first one made each collection of the middle
    generation ten times larger, visible in MobileNet-size edits).  Cyclic garbage that reaches the
    oldest generation waits longer for its collection.  ``NPUKIT_GC_FREEZE=0`` turns both off."""
    if model.key in _SETTLED or os.environ.get("NPUKIT_GC_FREEZE") == "0":
        return
    _SETTLED.add(model.key)
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young and old < GC_FULL:
        gc.set_threshold(young, middle, GC_FULL)


_GC_PAUSE = threading.Lock()
_GC_DEPTH = [0, False, 0]  # steps inside gc_paused(), whether it turned the collector off, edits frozen
GC_SWEEP = 1000  # edits between full collections of what the edits froze


@contextlib.contextmanager
def gc_paused():
    """The cyclic collector off while an edit's steps run (nested and threaded uses share one
    pause), back on after.  An edit allocates hundreds of thousands of short-lived containers: on
    the 10,006-op model ~380 young and ~35 middle collections per support toggle walked them (and
    the caches that grew), 20-175 ms an edit.  Reference counting still frees everything acyclic
    at once.

    What an edit leaves alive (its cache entries) is then frozen (``gc.freeze``) rather than walked
    by the next young collection (5-7 ms of a pin on the 1,161-op transformer, 6-28 ms of a toggle
    at 10,006 ops).  An edit's steps make no cyclic garbage (measured over every kind of edit), so
    nothing that could only be collected as a cycle is frozen with them, and the young generation is
    collected when the pause begins so that what was made outside it (a widget's JSON encoding
    leaves cycles) is not frozen either.  Every ``GC_SWEEP`` edits everything frozen is collected
    once in full (and frozen again), which bounds what a cycle made inside an edit could hold.
    ``NPUKIT_GC_FREEZE=0`` leaves the collector alone (as it does ``settle``)."""
    if os.environ.get("NPUKIT_GC_FREEZE") == "0":
        yield
        return
    with _GC_PAUSE:
        if _GC_DEPTH[0] == 0:
            _GC_DEPTH[1] = gc.isenabled()
            if _GC_DEPTH[1]:
                gc.collect(0)
            gc.disable()
        _GC_DEPTH[0] += 1
    try:
        yield
    finally:
        with _GC_PAUSE:
            _GC_DEPTH[0] -= 1
            if _GC_DEPTH[0] == 0 and _GC_DEPTH[1]:
                _GC_DEPTH[2] += 1
                if _GC_DEPTH[2] % GC_SWEEP == 0:
                    gc.unfreeze()
                    gc.collect()
                gc.freeze()
                gc.enable()
