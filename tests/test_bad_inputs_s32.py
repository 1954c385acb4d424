"""Bad inputs a new user makes (session s32): each one an NpukitError in the model's words, the
same Study answering after it, no traceback on the command line."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, assert_cli_error, initializer, onnx_model, run_cli, save_onnx, tensor_info

import npukit


def _open_batch(tmp: Path) -> Path:
    from onnx import helper as h

    nodes = [h.make_node("MatMul", ["x", "w"], ["y"], name="fc")]
    m = onnx_model(nodes, [tensor_info("x", ["B", 4])], [tensor_info("y", ["B", 3])], [initializer("w", [4, 3])])
    return save_onnx(m, tmp / "open_batch.onnx")


@pytest.mark.parametrize("dims, shown, count", [
    ((99999999999, 4), "(99999999999, 4)", "4e+11"),
    ((2**63, 4), "(9223372036854775808, 4)", "3.69e+19"),  # beyond int64: TVM's own words were "ffi.BigInt"
])  # fmt: skip
def test_pinned_shape_too_large_is_refused_like_a_declared_one(tmp_path, dims, shown, count):
    path = _open_batch(tmp_path)
    want = (f"{path}: input_shapes['x'] = {shown}: {count} elements; npukit refuses tensors of more than "
            "2.15e+09 elements")  # fmt: skip
    with pytest.raises(npukit.ShapeError) as e:
        npukit.Study(path, "arm-dsp-dla", input_shapes={"x": dims})
    assert str(e.value) == want
    r = run_cli("inspect", path, "--input-shape", "x=" + ",".join(map(str, dims)))
    assert assert_cli_error(r) == want
    s = npukit.Study(path, "arm-dsp-dla", input_shapes={"x": (2, 4)})  # a sane size still works
    assert s.totals["macs"] == 24


def test_random_data_too_large_for_memory_is_a_data_error(tmp_path):
    """A shape the import accepts but whose 16 random samples do not fit in memory: one line, exit 2
    (was a numpy ``_ArrayMemoryError`` traceback from ``quant/data.py``)."""
    path = _open_batch(tmp_path)
    limit = 6 << 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "npukit", "study", str(path), "--soc", "arm-dsp-dla",
                        "--input-shape", "x=100000000,4"], capture_output=True, text=True, env=env,
                       preexec_fn=cap, timeout=300)  # fmt: skip
    assert p.returncode == 2, p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert p.stderr == ("npukit: error: seeded random inputs: 16 samples of input 'x' [100000000, 4] float32 "
                        "(23.8 GiB) do not fit in this machine's memory; give fewer, smaller samples of your own "
                        "with study.set_data() or --data\n")  # fmt: skip
