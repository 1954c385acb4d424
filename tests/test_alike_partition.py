"""The cost policy skips the second BYOC replay when the cost model chose first-fit's placement
(``byocsim.obeyed_alike``): the partition it keeps must be the replay's own, plan and verdicts, over
random edit sequences on every small sample and every bundled profile (fixed seed)."""

from __future__ import annotations

import random

import pytest
from test_incremental import PROFILES, _soc, samples, valid_edits

import npukit.byocsim as byocsim
from npukit import pipeline
from npukit.config import Config

SMALL = [p for p in samples() if p.stat().st_size < 400_000]
SAMPLES = samples()[0].parent
# skips taken with the fixed seed (the other samples' cost choices differ from first-fit)
KEPT_AT_LEAST = {"digits_cnn_int8.tflite": 1, "digits_cnn_qdq.onnx": 1, "mobilenet_v1_025_int8.tflite": 1}


def _replayed_in_full(model, soc, cfg, monkeypatch):
    """The cost policy's partition of ``cfg`` with every replay run (no partition cache, no skip)."""
    saved = [c.d.copy() for c in pipeline.PARTITION_CACHES]
    try:
        for c in pipeline.PARTITION_CACHES:
            c.clear()
        with monkeypatch.context() as m:
            m.setattr(byocsim, "obeyed_alike", lambda *a: None)
            return pipeline.partition(model, soc, cfg)
    finally:
        for c, d in zip(pipeline.PARTITION_CACHES, saved, strict=True):
            c.d.clear()
            c.d.update(d)


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.name)
def test_a_skipped_replay_gives_the_replays_partition(path, monkeypatch):
    model = pipeline.load(path)
    rnd = random.Random(f"npukit-alike-{path.name}")
    calls = {"alike": 0, "kept": 0}
    real = byocsim.obeyed_alike

    def counted(*a):
        out = real(*a)
        calls["alike"] += 1
        calls["kept"] += out is not None
        return out

    monkeypatch.setattr(byocsim, "obeyed_alike", counted)
    compared = 0
    for name in PROFILES:
        soc = _soc(name)
        for cfg in valid_edits(rnd, model, soc, Config(placement="cost"), 4):
            pipeline.clear_partition_caches()
            got = pipeline.partition(model, soc, cfg)
            ref = _replayed_in_full(model, soc, cfg, monkeypatch)
            where = f"{path.name} on {name}, {cfg}"
            assert got.plan == ref.plan, where
            assert dict(got.verdicts) == dict(ref.verdicts), where
            assert dict(got.notes) == dict(ref.notes), where
            compared += 1
    assert compared >= 10
    if path.name in KEPT_AT_LEAST:
        assert calls["kept"] >= KEPT_AT_LEAST[path.name], calls  # the skip was taken, not only refused


def test_the_skip_needs_verdicts_that_accept_no_more_than_the_plan_obeyed():
    """A pin of MobileNet's op 6 (a conv2d) to the Cortex-M55: the cost model keeps first-fit's placement, so
    the cost partition is first-fit's plan under its own verdicts, with no replay.  Verdicts that
    accept the op on the NPU again (where the plan's verdicts refused it) are refused the skip."""
    model = pipeline.load(SAMPLES / "mobilenet_v1_025_int8.tflite")
    soc = _soc("ethos-u55-256")
    cfg = Config(placement="cost").with_pin("#6", "m55")
    pipeline.clear_partition_caches()
    ff = pipeline.partition(model, soc, cfg.with_placement("first-fit"))
    cost = pipeline.partition(model, soc, cfg)
    assert cost.plan == ff.plan
    assert cost.plan.processor[6] == "m55" and cost.plan.processor.count("npu") == 145
    assert byocsim.obeyed_alike(model.graph, soc, cost.verdicts, ff) == cost.verdicts
    free = pipeline.partition(model, soc, Config(placement="first-fit"))
    assert free.verdicts[(6, "npu")].ok and not ff.verdicts[(6, "npu")].ok
    assert byocsim.obeyed_alike(model.graph, soc, {**cost.verdicts, (6, "npu"): free.verdicts[(6, "npu")]}, ff) is None
