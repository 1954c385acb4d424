"""Issue 14, items 2 and 9: torch-exported networks of the well-known families import from ONNX (legacy
exporter, opset 17, with its Shape/Gather/Concat chains) and from .pt2, with the same MACs, and fast.

The models are small seeded re-implementations (``sample_models/make_families.py``), exported here
into a temporary folder: nothing is downloaded.
"""

from __future__ import annotations

import sys
import time

import pytest
from conftest import SAMPLES

import npukit
from npukit.opset import work

torch = pytest.importorskip("torch")
sys.path.insert(0, str(SAMPLES))
import make_families  # noqa: E402

FAMILIES = list(make_families.FAMILIES)
# The two TVM frontends decompose some layers differently (ONNX folds BatchNorm into the conv and
# writes GELU as erf arithmetic and roll as slices + concat; torch.export keeps batch_norm, gelu, and
# roll as take/arange/mod): the MACs agree everywhere, the op counts only where no such layer exists.
SAME_OP_COUNT = {"resnet", "efficientnet", "regnet"}


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
    if name in SAME_OP_COUNT:
        assert len(g1.ops) == len(g2.ops)
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
