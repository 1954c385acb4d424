"""Issue 14, item 11: mutated sample models and profiles (a short, seeded run of benchmarks/fuzz.py):
every mutant works or raises one NpukitError with a one-line message, within 10 s, without
exhausting memory; and the declared-size checks say exactly what is wrong."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import DIGITS_ONNX, ROOT, initializer, onnx_model, save_onnx, tensor_info

import npukit

sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz  # noqa: E402


def test_seeded_mutants_work_or_fail_clearly():
    out = fuzz.fuzz(seed=7, n=120, timeout=10.0)
    assert out["mutants"] == 120
    assert out["other_exceptions"] == 0 and out["hangs"] == 0, out["bad"]
    assert out["clear_errors"] > 30 and out["successes"] > 5
    assert out["slowest_s"] < 10


def test_a_huge_declared_input_is_refused_before_allocation(tmp_path):
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["y"], name="r")], [tensor_info("x", [1, 1000000, 1000000])],
                   [tensor_info("y", None)])  # fmt: skip
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(save_onnx(m, tmp_path / "huge.onnx", infer_shapes=False))
    assert str(ei.value) == (f"{tmp_path}/huge.onnx: input 'x' declares shape [1, 1000000, 1000000], 1e+12 elements; "
                             "npukit refuses tensors of more than 2.15e+09 elements (is the file corrupt?)")


def test_an_initializer_that_does_not_fill_its_shape_is_named(tmp_path):
    import onnx

    m = onnx.load(str(DIGITS_ONNX))
    w = next(t for t in m.graph.initializer if len(t.dims) == 4)
    w.dims[0] = w.dims[0] * 2
    onnx.save(m, str(tmp_path / "short.onnx"))
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(tmp_path / "short.onnx")
    n = int(np.prod(w.dims))
    assert str(ei.value) == (f"{tmp_path}/short.onnx: initializer {w.name!r} declares shape {list(w.dims)} ({n:,} "
                             f"elements) but holds {n // 2:,} (is the file truncated or corrupt?)")


def test_a_cycle_is_named(tmp_path):
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["b"], ["a"], name="first"), h.make_node("Relu", ["a"], ["b"], name="second")]
    m = onnx_model(nodes, [tensor_info("x", [1, 4])], [tensor_info("b", [1, 4])], [initializer("unused", [1])])
    with pytest.raises(npukit.ModelError) as ei:
        npukit.import_model(save_onnx(m, tmp_path / "cycle.onnx", infer_shapes=False))
    assert str(ei.value) == (f"{tmp_path}/cycle.onnx: node 'first' (Relu) reads tensor 'b', which node 'second' (Relu) "
                             "makes later: the graph has a cycle or its nodes are out of order")
