"""Issue 5: boundary rows exactly where partitions meet, and the lane schedule's invariants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import npukit

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"


def _branchy(path: Path) -> Path:
    """x -> [conv+relu (DLA)] and x -> [softmax (DSP)] in parallel, joined by an add."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1, "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="branch_a/conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="branch_a/relu"),
        helper.make_node("Conv", ["r", "w"], ["c2"], name="branch_a/conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Softmax", ["x"], ["s"], name="branch_b/softmax", axis=-1),
        helper.make_node("Softmax", ["s"], ["s2"], name="branch_b/softmax2", axis=-1),
        helper.make_node("Sub", ["c2", "s2"], ["y"], name="join"),
    ]
    g = helper.make_graph(nodes, "branchy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 32, 32])], [w])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.fixture(scope="module")
def branchy(tmp_path_factory):
    return npukit.Study(_branchy(tmp_path_factory.mktemp("m") / "branchy.onnx"), "arm-dsp-dla")


def _check_schedule(study):
    tl = study.timeline
    g, plan = study.graph, study.plan
    # one thing at a time per lane
    for lane, rows in tl.groupby("lane"):
        rows = rows.sort_values("start_us")
        assert (rows["start_us"].to_numpy()[1:] >= rows["end_us"].to_numpy()[:-1] - 1e-9).all(), lane
    ops = tl[tl.kind == "op"].set_index("op_id")
    assert sorted(ops.index) == list(range(len(g.ops)))
    assert all(ops.loc[i, "lane"] == plan.processor[i] for i in ops.index)
    transfers = tl[tl.kind != "op"]
    for op in g.ops:
        start = ops.loc[op.op_id, "start_us"]
        for p in g.producers(op):
            arrive = ops.loc[p, "end_us"]
            if plan.processor[p] != plan.processor[op.op_id]:
                # the tensor crossed: its transfer (and conversions) end before the consumer starts
                moved = transfers[transfers.item.str.contains("->" + plan.processor[op.op_id], regex=False)]
                assert (moved.end_us >= arrive).any()
                arrive = max(arrive, moved[moved.start_us >= arrive - 1e-9].end_us.min())
            assert start >= arrive - 1e-9, (op.name, start, arrive)
    return tl


def test_parallel_branches_overlap(branchy):
    plan = branchy.plan
    names = {op.name: plan.processor[op.op_id] for op in branchy.graph.ops}
    assert names["branch_a/conv"] == "dla" and names["branch_b/softmax"] == "dsp"
    tl = _check_schedule(branchy)
    t = branchy.totals
    busy = tl.assign(d=tl.end_us - tl.start_us).groupby("lane").d.sum()
    assert t["latency_us"] == pytest.approx(tl.end_us.max())
    assert t["latency_us"] < busy.sum() - 1e-6  # the lanes overlap
    dla = tl[tl.lane == "dla"][["start_us", "end_us"]].to_numpy()
    dsp = tl[tl.lane == "dsp"][["start_us", "end_us"]].to_numpy()
    # the DLA and the DSP are really busy at the same time (ops or their boundary conversions)
    assert any(a0 < b1 and b0 < a1 for a0, a1 in dla for b0, b1 in dsp)


def test_schedule_invariants_on_samples():
    for model in ("tiny_detector.onnx", "digits_cnn.onnx", "mobilenet_v1_025_int8.tflite"):
        _check_schedule(npukit.Study(SAMPLES / model, "arm-dsp-dla"))


def test_boundaries_exactly_where_processors_meet():
    s = npukit.Study(SAMPLES / "tiny_detector.onnx", "arm-dsp-dla")
    g, plan = s.graph, s.plan
    expect = set()
    for tid, t in g.tensors.items():
        if t.kind == "const":
            continue
        src = plan.processor[t.producer] if t.kind == "act" else s.soc.host
        dsts = {plan.processor[c] for c in g.consumers(tid)} | ({s.soc.host} if tid in g.outputs else set())
        expect |= {(tid, src, d) for d in dsts if d != src}
    b = s.boundaries
    got = set(zip(b.tensor_id, b.src, b.dst))
    assert got == expect and len(b) == len(got)
    soc = s.soc
    for r in b.itertuples():
        ps, pd_ = soc.processor(r.src), soc.processor(r.dst)
        rank = len(g.tensors[r.tensor_id].shape)
        # a layout conversion only between different layouts (and only for feature maps)
        assert (r.layout_us > 0) == (ps.layout != pd_.layout and rank >= 3 and "float" in g.tensors[r.tensor_id].dtype)
        # a (de/re)quantization only where the bit-widths differ
        assert (r.quantize_us > 0) == ("quantize" in r.conversion)
        link = soc.link(r.src, r.dst)
        k = 2 if link.via_dram else 1
        assert r.transfer_us == pytest.approx(link.latency_us + k * r.bytes / (link.bandwidth_gbps * 1000))


def test_partition_rows_on_one_processor_have_no_boundaries():
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    for p in ("dla", "dsp"):
        for op in ("conv2d", "max_pool2d", "relu", "add", "matmul", "reshape", "softmax"):
            if op in s.soc.processor(p).ops:
                s.set_support(p, op, False)
    assert set(s.plan.processor) == {"arm"}
    assert len(s.boundaries) == 0 and len(s.plan.partitions) == 1
    t = s.totals
    assert t["transfer_us"] == 0 and t["latency_us"] == pytest.approx(t["busy_us"]["arm"])


MM_ONLY = {
    "name": "mm-only", "description": "host + a matmul engine", "sources": ["illustrative"],
    "processors": {
        "cpu": {"kind": "cpu", "host": True, "clock_mhz": 1000, "dram_bytes_per_cycle": 8,
                "macs_per_cycle": {"fp32": 4}, "energy_pj_per_mac": {"fp32": 1}, "energy_pj_per_byte": 10},
        "mm": {"kind": "npu", "clock_mhz": 1000, "dram_bytes_per_cycle": 16, "macs_per_cycle": {"fp32": 64},
               "energy_pj_per_mac": {"fp32": 0.5}, "energy_pj_per_byte": 10, "call_overhead_cycles": 2000,
               "ops": {"matmul": {}}},
    },
    "links": [{"between": ["*", "*"], "bandwidth_gbps": 4, "latency_us": 2}],
}  # fmt: skip


def test_an_offloaded_partition_is_one_call(tmp_path):
    """q and scores merge into one mm call although k's transpose (on the host) sits between them
    in program order: the call can start only once kt has arrived."""
    rng = np.random.default_rng(1)
    init = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), n) for n in ("wq", "wk")]
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
        helper.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
        helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[1, 0]),
        helper.make_node("MatMul", ["q", "kt"], ["y"], name="scores"),
    ]
    g = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 8])], init)  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "attn.onnx")
    s = npukit.Study(tmp_path / "attn.onnx", MM_ONLY, placement="first-fit")  # the merge itself is under test
    plan = s.plan
    by = {op.name: op.op_id for op in s.graph.ops}
    assert plan.partition[by["q"]] == plan.partition[by["scores"]] != plan.partition[by["k"]]
    tl = _check_schedule(s).set_index("item")
    kt_arrives = tl[tl.index.str.startswith("transfer kt")].end_us.max()
    assert tl.loc["q", "start_us"] >= kt_arrives  # q waits for its call's other input
    assert tl.loc["scores", "start_us"] == pytest.approx(tl.loc["q", "end_us"])
