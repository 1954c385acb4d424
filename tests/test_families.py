"""Issue 14, items 2 and 9: torch-exported networks of the well-known families import from ONNX (legacy
exporter, opset 17, with its Shape/Gather/Concat chains) and from .pt2, with the same MACs, the same ops
(kinds and counts, after the canonical form), the same placement and the torch model's output, and fast.

The models are small seeded re-implementations (``sample_models/make_families.py``), exported here
into a temporary folder: nothing is downloaded.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES

import npukit
from npukit.opset import work

torch = pytest.importorskip("torch")
sys.path.insert(0, str(SAMPLES))
import make_families  # noqa: E402

FAMILIES = list(make_families.FAMILIES)
# The op counts per kind after the canonical form (npukit/tvm/frontends/canon.py), the same from both
# formats: ``python tests/test_families.py`` prints them.
OPS = {
    "resnet": 24, "mobilenet_v2": 41, "mobilenet_v3": 108, "efficientnet": 86, "regnet": 29, "shufflenet": 51,
    "swin": 175, "vit": 90,
}  # fmt: skip
# ViT's attention: the ONNX exporter transposes K before scaling Q, torch.export after; both orders
# are valid topological orders of the same graph, and npukit keeps the exporter's order (op ids)
ORDER_DIFFERS = {"vit": [26, 27, 66, 67]}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("families")
    torch.set_num_threads(1)
    return {name: make_families.export(name, out) for name in FAMILIES}


def _load(path):
    t0 = time.perf_counter()
    g = npukit.import_model(path).graph
    return g, time.perf_counter() - t0


@pytest.mark.parametrize("name", FAMILIES)
def test_family_imports_from_onnx_and_pt2_with_the_same_macs(exported, name):
    onnx_path, pt2_path = exported[name]
    g1, t1 = _load(onnx_path)
    g2, t2 = _load(pt2_path)
    macs1, macs2 = (sum(work(op, g).macs for op in g.ops) for g in (g1, g2))
    assert macs1 == macs2 > 0
    assert len(g1.ops) == len(g2.ops) == OPS[name]
    assert Counter(op.kind for op in g1.ops) == Counter(op.kind for op in g2.ops)
    for g in (g1, g2):  # every tensor static: no shape was left for run time
        assert all(all(isinstance(d, int) for d in t.shape) for t in g.tensors.values())
    assert t1 < 10 and t2 < 10, (t1, t2)


def test_shufflenet_onnx_shape_chains_fold_at_import(exported):
    g = npukit.import_model(exported["shufflenet"][0]).graph
    folded = [k for k, v in g.elided.items() if v.startswith("computes a shape")]
    assert any("/Shape" in k for k in folded), folded
    # the chunk's Slice nodes became static strided slices with the model's own names
    slices = [op for op in g.ops if op.source_op == "Slice"]
    assert slices and all(op.kind == "strided_slice" for op in slices)
    study = npukit.Study(exported["shufflenet"][0], "arm-dsp-dla")
    assert set(study.placement["name"]) == {op.name for op in g.ops}


def test_swin_imports_under_ten_seconds_from_both_formats(exported):
    for path in exported["swin"]:
        g, seconds = _load(path)
        assert seconds < 10, f"{path.name}: {seconds:.1f} s"
        assert sum(work(op, g).macs for op in g.ops) == 2670912


@pytest.mark.parametrize("name", FAMILIES)
def test_family_places_the_same_from_both_formats(exported, name):
    """arm-dsp-dla places the same processor at every position, whichever format was imported."""
    tables = [npukit.Study(path, "arm-dsp-dla").placement for path in exported[name]]
    (k1, k2), (p1, p2) = ([list(t[c]) for t in tables] for c in ("op", "processor"))
    assert p1 == p2
    assert [i for i, (a, b) in enumerate(zip(k1, k2, strict=True)) if a != b] == ORDER_DIFFERS.get(name, [])


def _vm_run(mod, x):
    import tvm
    from tvm import relax

    target = tvm.target.Target({"kind": "llvm"})
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    out = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x))
    while not hasattr(out, "numpy"):  # the model's one output, inside its tuple
        out = out[0]
    return out.numpy()


@pytest.mark.parametrize("name", FAMILIES)
def test_family_canonical_form_keeps_the_model_output(exported, name):
    """Both imported modules (folded BatchNorm, one gelu, roll as slices ...) compute what the torch
    model computes, to 1e-4 relative, on a random input."""
    x = np.random.default_rng(1).standard_normal(make_families.INPUT).astype(np.float32)
    with torch.no_grad():
        ref = make_families.build(name)(torch.from_numpy(x)).numpy()
    for path in exported[name]:
        got = _vm_run(npukit.import_model(path).mod, x)
        assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max(), path.name


def _print_counts(folder) -> None:
    """The op counts per family and format (what OPS records), and the kinds that differ."""
    for name in FAMILIES:
        onnx_path, pt2_path = make_families.export(name, folder)
        graphs = [npukit.import_model(p).graph for p in (onnx_path, pt2_path)]
        kinds = [Counter(op.kind for op in g.ops) for g in graphs]
        diff = {
            k: (kinds[0][k], kinds[1][k]) for k in sorted(set(kinds[0]) | set(kinds[1])) if kinds[0][k] != kinds[1][k]
        }
        print(f"{name:14s} onnx {len(graphs[0].ops):4d}  pt2 {len(graphs[1].ops):4d}  {diff or 'same kinds'}")


if __name__ == "__main__":  # python tests/test_families.py
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        _print_counts(Path(d))
