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


def _decided(path: Path, soc_name: str, share: bool, monkeypatch) -> list:
    """Every placement (processor, partition, reason), totals and schedule of the cost policy on a
    sample and after two support toggles and a pin, worked out from scratch."""
    from npukit import pipeline
    from npukit.tables import placement

    monkeypatch.setattr(shapes, "SHARE", share)
    out = []
    with pipeline.from_scratch():
        ff = Study(path, soc_name, {"placement": "first-fit"}).plan.processor  # (what an accelerator takes)
        s = Study(path, soc_name, {"placement": "cost"})
        accel = [p for p in s.soc.accelerators if p in ff]
        kinds = sorted({s.graph.ops[i].kind for i, p in enumerate(ff) if p in accel[:1]})
        edits = [lambda: None]
        if kinds:
            edits += [lambda: s.set_support(accel[0], kinds[0], False), lambda: s.pin(s.graph.ops[-1].source, s.soc.host)]
        for edit in edits:
            edit()
            out.append((placement(s.result).to_csv(), dict(s.totals)))
    return out


@pytest.mark.parametrize(("model", "soc_name"), [("transformer_encoder.onnx", "arm-dsp-dla"),
                                                 ("mobilenet_v1_025_int8.tflite", "ethos-u55-256"),
                                                 ("tiny_detector.onnx", "tda4vm-like"),
                                                 ("families/swin.onnx", "hexagon-like")])  # fmt: skip
def test_the_cost_policy_decides_alike_with_shared_structures(model, soc_name, monkeypatch):
    path = ROOT / "sample_models" / model
    own = _decided(path, soc_name, False, monkeypatch)
    shared = _decided(path, soc_name, True, monkeypatch)
    assert len(own) == 3
    assert shared == own


def _positional(got, op_ids):
    """``run_keys``' result with op ids by position in ``op_ids`` (signatures left out: numbers)."""
    loc = {i: n for n, i in enumerate(op_ids)}
    ks, cs = got
    return [(tuple(loc[i] for i in ids), proc) for ids, proc, _sig in ks], [(loc[i], c) for i, c in cs]


@pytest.mark.parametrize("model", ["transformer_encoder.onnx", "tiny_detector.onnx", "families/resnet.onnx",
                                   "families/shufflenet.onnx", "families/swin.onnx"])  # fmt: skip
def test_partitions_of_one_structure_get_the_same_contexts(model):
    """Soundness of the structure key itself, whatever the order partitions are met in: ranges of
    ops taken as partitions (whole, and one op of a larger partition with random neighbours in it),
    at random widths, on the host and on an accelerator; every two with one key work out the same
    kernels and contexts by position."""
    import random

    from npukit.cost.grouping import run_keys

    s = Study(ROOT / "sample_models" / model, "arm-dsp-dla", {"placement": "first-fit"})
    t, soc, g = Tables(s.graph), s.soc, s.graph
    memo = shapes.shapes_of(t)
    rnd = random.Random(15)
    n = len(g.ops)
    by_key: dict = {}
    collisions = 0
    for trial in range(3000):
        proc = rnd.choice([soc.host, soc.accelerators[0]])
        col = [rnd.choice(["int8", "int8", "fp16"]) for _ in range(n)]
        if trial % 2:
            a = rnd.randrange(n)
            ids = list(range(a, min(n, a + rnd.randint(1, 12))))
            first = ids[0] if proc != soc.host else -1
            key = memo.run(ids, [], first, soc.processor(proc).onchip_bytes, proc, col)
            got = run_keys(t, soc, proc, ids, [], col, first={first} if first >= 0 else set())
        else:
            ids = [rnd.randrange(n)]
            near = sorted(x for x in t.adjacent(tuple(ids)) if rnd.random() < 0.6)
            key = memo.run(ids, [tuple(ids)], -1, soc.processor(proc).onchip_bytes, proc, col, near)
            got = run_keys(t, soc, proc, ids, [tuple(ids)], col, near, set())
        pos = _positional(got, ids)
        seen = by_key.setdefault(key, pos)
        collisions += seen is not pos
        assert seen == pos, (model, ids)
    assert collisions > 100  # (the samples repeat their structures)


def test_structures_numbered_anew_past_the_table_bound_keep_every_figure(monkeypatch):
    """Past ``SIGS_KEPT`` structures the numbering starts over with new numbers: nothing kept under
    an old number is read for another structure."""
    s = Study(ROOT / "sample_models" / "transformer_encoder.onnx", "arm-dsp-dla", {"placement": "first-fit"})
    own, _ = _everything(s, False, monkeypatch)
    monkeypatch.setattr(shapes, "SIGS_KEPT", 5)
    shared, hits = _everything(s, True, monkeypatch)
    assert shared == own
    assert hits > 0


def test_a_crossing_is_costed_once_for_every_plan_that_holds_it():
    """A boundary's figures read only its tensor, its two processors and the widths the two sides
    hold it at, so plans whose partitions differ share them: after a support edit that moves ops
    around a crossing, the crossings both plans hold are the first plan's figures, and each equals
    ``boundary_cost`` worked out again."""
    from npukit.cost.boundary import boundary_cost

    s = Study(ROOT / "sample_models" / "transformer_encoder.onnx", "arm-dsp-dla", placement="first-fit")
    r1 = s.result
    t = Tables(r1.graph)
    cm = CostModel(t, r1.soc)
    first = dict(((b.tensor, b.src, b.dst), c) for b, c in zip(r1.plan.boundaries, cm.evaluate(r1.plan, list(r1.bits))[1]))
    s.set_support("dsp", "softmax", False)  # the softmaxes to the host: new partitions around them
    r2 = s.result
    assert r2.plan.partitions != r1.plan.partitions
    shared = 0
    for b, c in zip(r2.plan.boundaries, cm.evaluate(r2.plan, list(r2.bits))[1]):
        again = boundary_cost(b, t, r2.soc, c.src_bits, c.dst_bits, {p.name: p for p in r2.soc.processors},
                              r2.soc.link(b.src, b.dst))  # fmt: skip
        assert c == again, b
        old = first.get((b.tensor, b.src, b.dst))
        if old is not None and (old.src_bits, old.dst_bits) == (c.src_bits, c.dst_bits):
            assert c is old, b  # the first plan's figures
            shared += 1
    assert shared >= 100, shared
