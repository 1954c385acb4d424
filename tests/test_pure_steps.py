"""The pure steps without TVM: an OpGraph built by hand, a profile as a dict, and the rules, the
pattern table, the cost model and the timeline checked against hand-computed figures.

Graph: x[1,4,8,8] -> conv 3x3 (4->8, pad 1) -> add bias -> relu -> reshape [1,512] -> matmul
[512,10] -> softmax -> y[1,10].  Every test here also proves the step runs without importing tvm.
"""

from __future__ import annotations

import subprocess
import sys
from types import MappingProxyType

import numpy as np
import pytest

from npukit.config import Config
from npukit.cost import CostModel, Tables, kernels
from npukit.graph import Op, OpGraph, Tensor
from npukit.opset import KINDS, canonical, kind, work
from npukit.patterns import chain_shapes, table
from npukit.plan import build_plan
from npukit.rules import capabilities, verdicts
from npukit.soc import load_soc
from npukit.timeline import schedule


def _op(i, name, op, ins, outs, **attrs) -> Op:
    return Op(i, name, name.split("/")[0], "Hand", op, MappingProxyType(dict(sorted(attrs.items()))), tuple(ins),
              tuple(outs), f"v{i}")  # fmt: skip


def hand_graph() -> OpGraph:
    t = {
        "in0": Tensor("in0", (1, 4, 8, 8), "float32", "input", None, "x"),
        "c0": Tensor("c0", (8, 4, 3, 3), "float32", "const", None, "w1"),
        "c1": Tensor("c1", (1, 8, 1, 1), "float32", "const", None, "b1"),
        "c2": Tensor("c2", (512, 10), "float32", "const", None, "w2"),
        "t0": Tensor("t0", (1, 8, 8, 8), "float32", "act", 0),
        "t1": Tensor("t1", (1, 8, 8, 8), "float32", "act", 1),
        "t2": Tensor("t2", (1, 8, 8, 8), "float32", "act", 2),
        "t3": Tensor("t3", (1, 512), "float32", "act", 3),
        "t4": Tensor("t4", (1, 10), "float32", "act", 4),
        "t5": Tensor("t5", (1, 10), "float32", "act", 5, "y"),
    }
    conv = dict(strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1, data_layout="NCHW",
                kernel_layout="OIHW", out_layout="NCHW")  # fmt: skip
    ops = (
        _op(0, "conv", "relax.nn.conv2d", ["in0", "c0"], ["t0"], **conv),
        _op(1, "conv/add", "relax.add", ["t0", "c1"], ["t1"]),
        _op(2, "relu", "relax.nn.relu", ["t1"], ["t2"]),
        _op(3, "flat", "relax.reshape", ["t2"], ["t3"]),
        _op(4, "fc", "relax.matmul", ["t3", "c2"], ["t4"]),
        _op(5, "sm", "relax.nn.softmax", ["t4"], ["t5"], axis=-1),
    )
    consts = {"c0": np.zeros((8, 4, 3, 3), np.float32), "c1": np.zeros((1, 8, 1, 1), np.float32),
              "c2": np.zeros((512, 10), np.float32)}  # fmt: skip
    return OpGraph(ops, MappingProxyType(t), ("in0",), ("t5",), MappingProxyType(consts), MappingProxyType({}), "hand",
                   "<hand>")  # fmt: skip


def hand_soc(dla_changes=None):
    cpu = {"kind": "cpu", "host": True, "clock_mhz": 100, "macs_per_cycle": {"fp32": 1, "int8": 2},
           "dram_bytes_per_cycle": 4, "energy_pj_per_mac": {"fp32": 1, "int8": 1}, "energy_pj_per_byte": 1,
           "default_bits": "fp32", "layout": "NCHW", "op_overhead_cycles": 10}  # fmt: skip
    dla = {"kind": "dla", "clock_mhz": 200, "macs_per_cycle": {"int8": 64}, "vector_ops_per_cycle": {"int8": 8},
           "dram_bytes_per_cycle": 8, "energy_pj_per_mac": {"int8": 0.5}, "energy_pj_per_byte": 2,
           "layout": "NHWC", "op_overhead_cycles": 20, "call_overhead_cycles": 1000,
           "ops": {"conv2d": {"kernel_max": 3, "grouped": False}, "add": {}, "relu": {},
                   "matmul": {"ranks": [4]}}, **(dla_changes or {})}  # fmt: skip
    return load_soc({"name": "hand", "description": "hand", "processors": {"cpu": cpu, "dla": dla},
                     "links": [{"between": ["cpu", "dla"], "bandwidth_gbps": 1.0, "latency_us": 2.0}]})  # fmt: skip


def test_work_formulas_by_hand():
    g = hand_graph()
    assert work(g.ops[0], g).macs == 1 * 8 * 8 * 8 * 4 * 3 * 3 == 18432
    assert work(g.ops[4], g).macs == 10 * 512
    assert work(g.ops[3], g).vector_ops == 0  # a view
    assert work(g.ops[5], g).vector_ops == 10 * 12
    assert work(g.ops[1], g).vector_ops == 512  # one op per output element
    assert KINDS["relu"].epilogue and KINDS["conv2d"].mac and KINDS["reshape"].relabel


def test_registry_knows_every_relax_op_and_names_the_closest_on_a_miss():
    from npukit.errors import UnsupportedOpError
    from npukit.opset import full_names

    assert {n.rsplit(".", 1)[1] for n in full_names()} == set(KINDS)
    assert kind("relax.nn.conv2d").full == "relax.nn.conv2d"
    with pytest.raises(UnsupportedOpError, match=r"no entry for op 'relax.nn.conv9d'.*'conv2d'"):
        kind("relax.nn.conv9d")
    assert canonical("relax.nn.softmax") == "softmax"


def test_verdicts_are_data_with_the_values_compared():
    g, soc = hand_graph(), hand_soc()
    caps = capabilities(g, soc)
    fc = caps[(4, "dla")]
    assert not fc.ok and fc.rule == "ranks" and dict(fc.failures[0].values) == {"rank": 2, "allowed": (4,)}
    assert fc.text == "rank-2 tensor, supports ranks 4"
    assert caps[(5, "dla")].rule == "unsupported" and caps[(0, "cpu")].host
    vs = verdicts(g, soc, frozenset({("dla", "relu")}), frozenset(), {0: "cpu"}, caps)
    assert vs[(2, "dla")].failed("user_disabled") and vs[(2, "dla")].text == "user disabled relu on dla"
    assert vs[(0, "dla")].failed("pinned") and dict(vs[(0, "dla")].failures[0].values) == {"node": "conv", "to": "cpu"}
    enabled = verdicts(g, soc, frozenset(), frozenset({("dla", "softmax")}), {}, caps)
    assert enabled[(5, "dla")].ok  # the user asserts support the profile lacks


def test_pattern_table_is_plain_data_in_priority_order():
    g, soc = hand_graph(), hand_soc()
    assert chain_shapes(g) == frozenset({(("conv2d", "add", "relu"), 0), (("matmul",), 0)})
    specs = table(g, soc, capabilities(g, soc))
    # longest chains first, then single ops (by kind); matmul is refused everywhere (rank 2), so no pattern
    assert [s.chain for s in specs] == [("conv2d", "add", "relu"), ("conv2d", "add"), ("add",), ("conv2d",), ("relu",)]
    assert specs[0].name == "dla.conv2d_add_relu" and all(s.processor == "dla" for s in specs)
    no_relu = table(g, soc, verdicts(g, soc, frozenset({("dla", "relu")}), frozenset(), {}, capabilities(g, soc)))
    assert [s.chain for s in no_relu] == [("conv2d", "add"), ("add",), ("conv2d",)]


def _plan_conv_on_dla(g):
    # the conv chain offloaded as one composite partition, the rest on the host
    return build_plan(g, "cpu", [("fn_dla_0", "dla", [("dla.conv2d_add_relu", [0, 1, 2])])],
                      [("call", "fn_dla_0"), ("op", 3), ("op", 4), ("op", 5)])  # fmt: skip


def test_cost_of_a_fused_kernel_by_hand_and_columns_add_up():
    g, soc = hand_graph(), hand_soc()
    t = Tables(g)
    plan = _plan_conv_on_dla(g)
    bits = ["int8", "int8", "int8", "fp32", "fp32", "fp32"]
    ops, bounds = CostModel(t, soc).evaluate(plan, bits)
    assert kernels(plan, g, t) == [(0, 1, 2), (3,), (4,), (5,)]
    c = ops[0]
    # MACs 18,432 at 64/cycle = 288; add + relu 512 ops each at 8/cycle = 128 (no output stage)
    assert c.compute_cycles == pytest.approx(288 + 64 + 64)
    # bytes at int8: input 256 B + weights 288 B + bias 8*int32 = 32 B + output 512 B (the host reads it)
    assert c.bytes == 256 + 288 + 32 + 512 and c.weight_bytes == 320
    assert c.memory_cycles == pytest.approx((256 + 512) / 8 + 320 / 8)
    assert c.overhead_cycles == 20 + 1000 and c.cycles == pytest.approx(max(416, 136) + 1020)
    assert c.latency_us == pytest.approx(1436 / 200)
    for m in ops[1:3]:  # the epilogue carries nothing, and names its kernel
        assert (m.cycles, m.kernel, m.role) == (0, 0, "epilogue")
    for x in ops:
        assert x.cycles == pytest.approx(max(x.compute_cycles, x.memory_cycles) + x.overhead_cycles)
    # boundaries: x to the dla (fp32 -> int8, NCHW -> NHWC), the relu output back to the host
    assert [(b.tensor, b.src, b.dst) for b in bounds] == [("in0", "cpu", "dla"), ("t2", "dla", "cpu")]
    b = bounds[0]
    assert b.bytes == 256 * 4 and b.transfer_us == pytest.approx(2.0 + 2 * 1024 / 1000)
    assert b.conversion == "layout NCHW->NHWC, quantize fp32->int8" and b.quantize_kind == "quantize"
    trace = {tr.figure: tr.formula for tr in c.trace}
    assert trace["overhead_cycles"] == "op_overhead 20 + call_overhead 1,000 (first op of the partition) = 1,020"
    assert trace["cycles"].endswith("= 1,436.0")


def test_timeline_by_hand():
    g, soc = hand_graph(), hand_soc()
    t = Tables(g)
    plan = _plan_conv_on_dla(g)
    ops, bounds = CostModel(t, soc).evaluate(plan, ["int8"] * 3 + ["fp32"] * 3)
    s = schedule(t, plan, soc, ops, bounds)
    items = {it.item: it for it in s.items}
    # x: layout then quantize on the dla (conversion on the destination), after its transfer
    tx = items["transfer x cpu->dla"]
    assert tx.start_us == 0 and tx.end_us == pytest.approx(bounds[0].transfer_us)
    conv = items["conv"]
    assert conv.lane == "dla" and conv.start_us == pytest.approx(tx.end_us + bounds[0].layout_us + bounds[0].quantize_us)
    assert items["relu"].end_us == conv.end_us  # the epilogue runs inside the kernel
    back = items["transfer relu dla->cpu"]  # (t2, unnamed: by its producer, as the boundaries table says)
    assert back.start_us == pytest.approx(conv.end_us)
    # the host converts t2 back (layout, dequantize) before the reshape, then runs fc and softmax in order
    assert items["flat"].start_us == pytest.approx(back.end_us + bounds[1].layout_us + bounds[1].quantize_us)
    assert items["fc"].start_us == pytest.approx(items["flat"].end_us) and items["sm"].start_us == pytest.approx(items["fc"].end_us)
    assert s.makespan_us == pytest.approx(max(it.end_us for it in s.items))
    lanes: dict[str, float] = {}
    for it in sorted(s.items, key=lambda it: it.start_us):  # one thing at a time per lane
        assert it.start_us >= lanes.get(it.lane, 0) - 1e-9
        lanes[it.lane] = it.end_us


def test_config_is_a_hashable_value_that_round_trips():
    c = Config().with_support("dla", "relu", False).with_pin("#3", "cpu").with_bits("int8", processor="dla")
    assert hash(c) == hash(Config.from_toml(c.to_toml())) and c == Config.from_json(c.to_json())
    ff = c.with_placement("first-fit")
    assert ff.partition_key == Config(disabled=c.disabled, pins=c.pins, placement="first-fit").partition_key  # bits never move ops
    assert c.partition_key != Config(disabled=c.disabled, pins=c.pins).partition_key  # the cost policy weighs bits


def test_these_steps_need_no_tvm():
    code = ("import sys; sys.path.insert(0, 'tests'); import test_pure_steps as t; "
            "t.test_work_formulas_by_hand(); t.test_verdicts_are_data_with_the_values_compared(); "
            "t.test_pattern_table_is_plain_data_in_priority_order(); "
            "t.test_cost_of_a_fused_kernel_by_hand_and_columns_add_up(); t.test_timeline_by_hand(); "
            "assert 'tvm' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules); print('ok')")  # fmt: skip
    from conftest import ROOT

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
