"""An edit's Plan is TVM's: random edit sequences on every sample, under both placement policies,
each partition (the replay of TVM's passes, with every cache an edit keeps) held against a run
from scratch (TVM's own FuseOpsByPattern + MergeCompositeFunctions on the whole module, caches set
aside): placement, partition ids, patterns, function names, boundaries, verdicts, reasons.

Fixed seed; the number of sequences per sample shrinks with the model's size so the whole file runs
in well under a minute on two cores.  A reference is computed once per distinct configuration.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from npukit import pipeline
from npukit.config import Config
from npukit.errors import ConfigError
from npukit.rules import winner_reason
from npukit.soc import load_soc

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"
PROFILES = ("arm-dsp-dla", "ethos-u55-256", "tda4vm-like", "hexagon-like", "vsi-npu", "riscv-accel", "cortex-m7-cmsis-nn")


def samples() -> list[Path]:
    return sorted(p for ext in ("onnx", "tflite", "pt2") for p in SAMPLES.rglob(f"*.{ext}"))


# (sequences, edits per sequence, share of sequences under the cost policy) by model size
# (NPUKIT_PROPERTY_SCALE=10 multiplies the sequences for a long run)
def budget(n_ops: int) -> tuple[int, int, float]:
    scale = float(os.environ.get("NPUKIT_PROPERTY_SCALE", "1"))
    if n_ops <= 30:
        n, edits, cost = 60, 4, 0.1
    elif n_ops <= 80:
        n, edits, cost = 8, 3, 0.15
    elif n_ops <= 200:
        n, edits, cost = 3, 3, 0.34
    else:
        n, edits, cost = 1, 2, 0.0
    return max(1, round(n * scale)), edits, cost


_REFS: dict = {}
_SOCS: dict = {}


def _soc(name: str):
    if name not in _SOCS:
        _SOCS[name] = load_soc(name)
    return _SOCS[name]


def from_scratch(model, soc, cfg):
    """TVM's passes on the whole module, every partition cache set aside (and put back after)."""
    key = (model.key, soc.digest, cfg.partition_key)
    if key in _REFS:
        return _REFS[key]
    caches = (*pipeline.PARTITION_CACHES, pipeline.RESULTS)
    saved = [c.d.copy() for c in caches]
    old = os.environ.get("NPUKIT_BYOC")
    os.environ["NPUKIT_BYOC"] = "tvm"
    try:
        for c in caches:
            c.clear()
        ref = pipeline.partition(model, soc, cfg)
    finally:
        if old is None:
            del os.environ["NPUKIT_BYOC"]
        else:
            os.environ["NPUKIT_BYOC"] = old
        for c, d in zip(caches, saved, strict=True):
            c.d.clear()
            c.d.update(d)
    _REFS[key] = ref
    return ref


def reasons(model, soc, cfg, part) -> tuple[str, ...]:
    pins = pipeline.pins_of(model.graph, cfg)
    plan = part.plan
    return tuple(winner_reason(op, plan.processor[op.op_id], plan.pattern[op.op_id], part.verdicts, soc,
                               op.op_id in pins, part.notes.get(op.op_id, "")) for op in model.graph.ops)  # fmt: skip


def random_edit(rnd: random.Random, model, soc, cfg: Config) -> Config:
    g = model.graph
    kinds = sorted({op.kind for op in g.ops})
    what = rnd.random()
    if what < 0.5:
        proc = rnd.choice(soc.accelerators)
        kind = rnd.choice(kinds)
        on = rnd.random() < 0.4
        has = kind in soc.processor(proc).ops
        return cfg.without_support_edit(proc, kind) if on == has else cfg.with_support(proc, kind, on)
    if what < 0.8:
        op = rnd.choice(g.ops)
        node = rnd.choice((op.source, f"#{op.op_id}"))
        return cfg.with_pin(node, rnd.choice(soc.names))
    if what < 0.95 and cfg.pins:
        return cfg.with_pin(rnd.choice(cfg.pins)[0], None)
    return Config(placement=cfg.placement)


def valid_edits(rnd: random.Random, model, soc, cfg: Config, n: int):
    """The configs of ``n`` random edits from ``cfg``, each one the Study accepts (an edit it refuses
    is not made: the next one starts from the same config)."""
    for _ in range(n):
        nxt = random_edit(rnd, model, soc, cfg)
        try:
            pipeline.check(model, soc, nxt)
        except ConfigError:
            continue
        cfg = nxt
        yield cfg


def tvm_under(model, soc, vs):
    """TVM's own passes on the whole module under exactly ``vs`` (what a partition obeyed)."""
    from npukit.patterns import chain_shapes
    from npukit.tvm.partition import arities, run_once

    return run_once(model.module, model.graph, soc, vs, chain_shapes(model.graph), arities(model.module))


def check_sequence(model, soc, rnd: random.Random, edits: int, placement: str, whole: bool = True) -> int:
    """``whole``: every edit against a whole run from scratch (for the cost policy: its placement
    search again, then TVM's passes); else (cost policy) the chosen partition and the first-fit
    baseline against TVM's passes under the verdicts each obeyed."""
    checked = 0
    for cfg in valid_edits(rnd, model, soc, Config(placement=placement), edits):
        got = pipeline.partition(model, soc, cfg)
        where = f"{Path(model.graph.path).name} on {soc.name}, {cfg}"
        if not whole:
            assert got.plan == tvm_under(model, soc, got.verdicts).plan, where
            ff = pipeline.partition(model, soc, cfg.with_placement("first-fit"))
            assert ff.plan == tvm_under(model, soc, ff.verdicts).plan, where
            checked += 1
            continue
        ref = from_scratch(model, soc, cfg)
        assert got.plan == ref.plan, where
        assert dict(got.verdicts) == dict(ref.verdicts), where
        assert dict(got.notes) == dict(ref.notes), where
        assert reasons(model, soc, cfg, got) == reasons(model, soc, cfg, ref), where
        checked += 1
    return checked


@pytest.mark.parametrize("path", samples(), ids=lambda p: str(p.relative_to(SAMPLES)))
def test_edits_partition_as_tvm_does_from_scratch(path):
    model = pipeline.load(path)
    n, edits, cost_share = budget(len(model.graph.ops))
    rnd = random.Random(f"npukit-incremental-{path.name}")
    checked = 0
    whole_cost = 0
    for k in range(n):
        soc = _soc(PROFILES[(k + len(path.name)) % len(PROFILES)])
        placement = "cost" if rnd.random() < cost_share else "first-fit"
        # the cost policy's placement search is slow and not what is checked here: one sequence
        # per sample runs it again from scratch, the others check its partitions against TVM
        whole = placement == "first-fit" or whole_cost < 1
        whole_cost += placement == "cost"
        checked += check_sequence(model, soc, rnd, 2 if placement == "cost" and whole else edits, placement, whole)
    assert checked >= n // 2  # most edits are valid ones


def test_the_lazy_module_is_tvms_and_agrees_with_the_replay():
    """``Partitioned.mod`` is TVM's own partition of the whole module under the verdicts the Plan
    obeyed; building it checks the read-back against the replayed Plan."""
    from npukit.tvm.partition import LazyModule, read_plan

    rnd = random.Random(7)
    for path in (SAMPLES / "tiny_detector.onnx", SAMPLES / "families" / "shufflenet.onnx"):
        model = pipeline.load(path)
        for name in ("arm-dsp-dla", "tda4vm-like"):
            soc = load_soc(name)
            cfg = Config(placement="first-fit")
            for _ in range(3):
                cfg = random_edit(rnd, model, soc, cfg)
                try:
                    pipeline.check(model, soc, cfg)
                except ConfigError:
                    cfg = Config(placement="first-fit")
                part = pipeline.partition(model, soc, cfg)
                assert isinstance(part.module, LazyModule)
                assert read_plan(part.mod, model.graph, soc.host) == part.plan
