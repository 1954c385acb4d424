"""Kernels and partitions of one structure share one costing and one set of memory contexts
(``npukit.cost.shapes``): every kernel, context, figure and trace of every op and boundary is the
same as when each is worked out as itself, on every sample and bundled profile, under both
placement policies and with bit-width edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from npukit import Study
from npukit.cost import shapes
from npukit.cost.grouping import plan_keys
from npukit.cost.model import CostModel
from npukit.cost.tables import Tables
from npukit.errors import NpukitError
from npukit.soc import BIT_WIDTH, load_soc

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("digits_cnn.onnx", "digits_cnn_int8.tflite", "tiny_detector.onnx", "mobilenet_v1_025_int8.tflite",
          "transformer_encoder.onnx", "families/resnet.onnx", "families/shufflenet.onnx", "families/swin.onnx")  # fmt: skip
PROFILES = sorted(p.stem for p in (ROOT / "npukit" / "profiles").glob("*.toml"))
FIELDS = ("processor", "bits", "kernel", "role", "macs", "latency_us", "energy_uj", "vector_ops", "bytes",
          "dram_bytes", "onchip_bytes", "weight_bytes", "compute_cycles", "memory_cycles", "overhead_cycles",
          "cycles")  # fmt: skip


def _everything(study: Study, share: bool, monkeypatch) -> list:
    """Every op's figures and trace, every boundary's, from a cost model with fresh memos."""
    monkeypatch.setattr(shapes, "SHARE", share)
    r = study.result
    t = Tables(r.graph)
    cm = CostModel(t, r.soc)
    bits = list(r.bits)
    keys = plan_keys(r.plan, r.soc, t, bits)
    ops, bounds = cm.evaluate(r.plan, bits, keys=keys)
    out = [[(ids, proc) for ids, proc, _sig in keys.kernels], keys.contexts]
    out += [(c.op_id, *(getattr(c, f) for f in FIELDS), c.trace) for c in ops]
    out += [(b, cm.boundary_trace(b)) for b in bounds]
    memo = shapes.shapes_of(t)
    return out, memo.hits + memo.run_hits


def _studies(model: str, soc):
    """The sample under both policies, and with each offloading processor at its narrowest other
    width (a bit-width edit changes the kernels' widths and contexts)."""
    path = ROOT / "sample_models" / model
    for placement in ("first-fit", "cost"):
        s = Study(path, soc, {"placement": placement})
        yield s
        for p in soc.processors:
            if p.name == soc.host:
                continue
            widths = sorted(p.vector_ops_per_cycle, key=BIT_WIDTH.__getitem__)
            other = [w for w in widths if w != p.default_bits]
            if other:
                try:
                    yield s.copy().set_bits(other[0], processor=p.name)
                except NpukitError:  # (no op of the model runs at that width there)
                    pass


@pytest.mark.parametrize("soc_name", PROFILES)
@pytest.mark.parametrize("model", MODELS)
def test_a_shared_costing_reads_as_the_kernels_own(model, soc_name, monkeypatch):
    soc = load_soc(soc_name)
    for s in _studies(model, soc):
        own, none = _everything(s, False, monkeypatch)
        shared, hits = _everything(s, True, monkeypatch)
        assert none == 0
        assert shared == own
        if model == "transformer_encoder.onnx":  # its 40 layers: most kernels repeat one costed before
            assert hits > len(own) // 4
