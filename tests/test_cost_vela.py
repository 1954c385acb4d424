"""Issue 5: the cost model's hand-checkable figures (kernels, output stage, weight port, part-kernel
MAC utilisation, host epilogue fusion), the new profile fields, and the host calibration path.

Everything is computed by hand from the profile numbers below on tiny models built with
onnx.helper; Vela is not needed (it is a benchmark-only dependency: benchmarks/vs_vela.py).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import npukit
from npukit.errors import ProfileError
from npukit.soc import bundled, load_soc

NPU = {
    "kind": "npu", "clock_mhz": 500, "macs_per_cycle": {"int8": 256}, "vector_ops_per_cycle": {"int8": 8},
    "mac_array": {"channels_in": 32, "channels_out": 8, "pixels": 4, "kernel_taps": 4},
    "efficiency": {"*": 1.0, "conv2d": 0.75}, "output_elems_per_cycle": 4,
    "dram_bytes_per_cycle": 8, "weight_bytes_per_cycle": 1, "weight_port": "separate",
    "op_overhead_cycles": 64, "call_overhead_cycles": 1000,
    "energy_pj_per_mac": {"int8": 0.25}, "energy_pj_per_byte": 5.0,
    "ops": {"conv2d": {}, "add": {}, "relu": {}},
}  # fmt: skip
CPU = {
    "kind": "cpu", "host": True, "clock_mhz": 100, "macs_per_cycle": {"fp32": 1}, "dram_bytes_per_cycle": 4,
    "op_overhead_cycles": 10, "energy_pj_per_mac": {"fp32": 1.0}, "energy_pj_per_byte": 1.0,
}  # fmt: skip


def profile(npu_changes=None, with_npu=True) -> dict:
    procs = {"cpu": dict(CPU)}
    if with_npu:
        procs["npu"] = {**NPU, **(npu_changes or {})}
    doc = {"name": "hand", "description": "hand-checkable figures", "processors": procs}
    doc["links"] = [{"between": ["cpu", "npu"], "bandwidth_gbps": 4.0}] if with_npu else []
    return doc


def _save(path, nodes, x_shape, y_shape, inits):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.fixture(scope="module")
def pointwise(tmp_path_factory):
    """x[1,16,8,8] -> 1x1 Conv 16->32 (+bias) -> Relu -> y[1,32,8,8]."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((32, 16, 1, 1)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="pw/conv"),
             helper.make_node("Relu", ["c"], ["y"], name="pw/relu")]  # fmt: skip
    return _save(tmp_path_factory.mktemp("m") / "pw.onnx", nodes, [1, 16, 8, 8], [1, 32, 8, 8], [w, b])


@pytest.fixture(scope="module")
def depthwise(tmp_path_factory):
    """x[1,8,8,8] -> 3x3 depthwise Conv (groups 8, pad 1, no bias) -> y[1,8,8,8]."""
    w = numpy_helper.from_array(np.ones((8, 1, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="dw/conv", group=8, pads=[1, 1, 1, 1])]
    return _save(tmp_path_factory.mktemp("m") / "dw.onnx", nodes, [1, 8, 8, 8], [1, 8, 8, 8], [w])


def _kernel(study, name="pw/conv"):
    g = study.graph
    ids = g.resolve(name)
    r = study.result
    conv = next(i for i in ids if g.ops[i].kind == "conv2d")
    return r, conv, [r.ops[i] for i in ids]


def test_output_stage_and_separate_weight_port(pointwise):
    s = npukit.Study(pointwise, profile())
    r, conv, costs = _kernel(s)
    assert {s.plan.processor[c.op_id] for c in costs} == {"npu"}
    c = r.ops[conv]
    # MACs 8*8*32*16 = 32,768; util = max(fill(16,32), fill(16,8)*fill(1,4)) * fill(32,8) * fill(64,4) = 0.5
    mac = 32768 / (256 * 0.5 * 0.75)  # 341.33
    stage = 32 * 8 * 8 / 4  # output stage: 2,048 elements at 4 per cycle = 512
    assert c.compute_cycles == pytest.approx(max(mac, stage))
    # activations at int8 through SRAM: in 1,024 B + out 2,048 B at 8 B/cycle = 384;
    # weights 512 B int8 + bias 32 x int32 = 640 B at 1 B/cycle on their own port = 640
    assert c.weight_bytes == 640 and c.dram_bytes == 3072 + 640
    assert c.memory_cycles == pytest.approx(max(3072 / 8, 640 / 1))
    assert c.cycles == pytest.approx(640 + 64 + 1000)  # + op overhead + the partition's call overhead
    assert c.latency_us == pytest.approx((640 + 64 + 1000) / 500)
    # the bias add and the relu run in the output stage: no cycles, costed on the conv
    for m in costs:
        assert m.kernel == conv
        if m.op_id != conv:
            assert m.cycles == 0 and m.latency_us == 0 and m.bytes == 0
            assert "costed with pw/conv" in m.trace[0].formula
    relu = s.graph.resolve("pw/relu")[0]
    assert r.ops[relu].kernel == conv and r.ops[relu].cycles == 0
    t = {tr.figure: tr for tr in c.trace}
    assert "output_elems_per_cycle" in t["compute_cycles"].fields and "2,048 / 4" in t["compute_cycles"].formula
    assert {"weight_bytes_per_cycle", "weight_port"} <= set(t["memory_cycles"].fields)
    assert "640 / 1 = 640.0" in t["memory_cycles"].formula and "separate" in t["memory_cycles"].formula
    assert t["cycles"].formula.endswith("= 1,704.0")
    assert "kernel" in t and "relu=epilogue" in t["kernel"].formula


def test_shared_weight_port_adds_and_no_output_stage_costs_the_epilogue(pointwise):
    s = npukit.Study(pointwise, profile({"weight_port": "shared"}))
    _r, conv, _ = _kernel(s)
    c = s.result.ops[conv]
    assert c.memory_cycles == pytest.approx(3072 / 8 + 640 / 1)
    assert c.cycles == pytest.approx(max(512, 1024) + 64 + 1000)
    s2 = npukit.Study(pointwise, profile({"output_elems_per_cycle": 0}))
    c2 = s2.result.ops[_kernel(s2)[1]]
    # no output stage: MACs, then the add and the relu as vector work (2,048 ops each at 8/cycle) at
    # the conv's efficiency (they run inside its loop nest)
    mac = 32768 / (256 * 0.5 * 0.75)
    assert c2.compute_cycles == pytest.approx(mac + 2 * 2048 / (8 * 0.75))
    assert c2.cycles == pytest.approx(max(c2.compute_cycles, 640) + 64 + 1000)


def test_depthwise_uses_kernel_taps(depthwise):
    s = npukit.Study(depthwise, profile())
    c = s.result.ops[s.graph.resolve("dw/conv")[0]]
    # 4,608 MACs; input lanes: max(fill(1,32), fill(1,32/4) * fill(3*3, 4)) = 1/8 * 9/12
    u = (1 / 8) * (9 / 12)
    assert c.compute_cycles == pytest.approx(max(4608 / (256 * u * 0.75), 512 / 4))
    assert c.cycles == pytest.approx(256 + 64 + 1000)
    util = next(t for t in c.trace if t.figure == "util_mac")
    assert "kernel_taps=4" in util.formula and util.formula.endswith("= 0.09375")  # (the figure computed with)
    # without kernel_taps the taps do not share the lanes: fill(1, 32)
    s2 = npukit.Study(depthwise, profile({"mac_array": {"channels_in": 32, "channels_out": 8, "pixels": 4}}))
    c2 = s2.result.ops[0]
    assert c2.compute_cycles == pytest.approx(4608 / (256 * (1 / 32) * 0.75))


def test_host_fuses_the_epilogue_chain_after_a_conv(pointwise):
    s = npukit.Study(pointwise, profile(with_npu=False))
    r, conv, _ = _kernel(s)
    costs = list(r.ops)  # conv2d, its bias add (node pw/conv) and the relu (node pw/relu)
    assert len(costs) == 3 and all(m.kernel == conv for m in costs)
    c = r.ops[conv]
    # one kernel: MACs at 1/cycle + add + relu at 1 op/cycle; fp32 tensors, the intermediates stay inside
    assert c.compute_cycles == pytest.approx(32768 + 2048 + 2048)
    assert c.memory_cycles == pytest.approx((4096 + 8192) / 4 + (2048 + 128) / 4)
    assert c.cycles == pytest.approx(32768 + 4096 + 10)
    assert sum(m.cycles for m in costs) == pytest.approx(c.cycles)
    assert s.totals["latency_us"] == pytest.approx(c.cycles / 100)


def test_new_profile_fields_default_and_validate():
    for name in bundled():
        load_soc(name)
    p = load_soc(profile()).processor("cpu")
    assert p.weight_bytes_per_cycle == p.dram_bytes_per_cycle and p.weight_port == "shared"
    assert p.output_elems_per_cycle == 0 and p.mac_array["kernel_taps"] == 1
    with pytest.raises(ProfileError, match=r"processors\.npu\.mac_array\.kernel_taps: must divide channels_in"):
        load_soc(profile({"mac_array": {"channels_in": 32, "kernel_taps": 3}}))
    with pytest.raises(ProfileError, match=r"processors\.npu\.weight_port: must be one of 'shared', 'separate'"):
        load_soc(profile({"weight_port": "flash"}))
    with pytest.raises(ProfileError, match=r"processors\.npu\.output_elems_per_cycle"):
        load_soc(profile({"output_elems_per_cycle": -1}))


def test_ethos_profile_states_the_vela_setup():
    npu = load_soc("ethos-u55-256").processor("npu")
    assert (npu.dram_bytes_per_cycle, npu.weight_bytes_per_cycle, npu.weight_port) == (8.0, 1.0, "separate")
    assert npu.output_elems_per_cycle == 4 and npu.mac_array["kernel_taps"] == 4
    assert npu.clock_mhz == 500 and npu.macs_per_cycle["int8"] == 256


def test_cost_model_memo_and_traces_are_lazy_but_equal(pointwise):
    from npukit.cost import CostModel

    s = npukit.Study(pointwise, profile())
    plan, bits = s.plan, s.op_bits()
    cm = CostModel(s.result.tables, s.soc)
    a, _ = cm.evaluate(plan, bits)
    assert cm.recomputed == len(s.graph.ops)
    b, _ = cm.evaluate(plan, bits)
    assert cm.recomputed == 0 and all(x is y for x, y in zip(a, b))
    fresh, _ = CostModel(s.result.tables, s.soc).evaluate(plan, bits)
    assert [x.trace for x in fresh] == [x.trace for x in a] and all(x.trace for x in a)


def test_calibration_writes_a_loadable_profile(pointwise, tmp_path):
    from npukit.calibrate import calibrate

    out = tmp_path / "fitted.toml"
    res = calibrate([pointwise], "arm-dsp-dla", repeat=2, out=out, holdout=[pointwise])
    fitted = load_soc(out)
    host = fitted.processor(fitted.host)
    assert res["processor"] == "arm" and res["soc"] == "arm-dsp-dla"
    assert dict(host.efficiency) == pytest.approx(res["efficiency"])
    assert host.op_overhead_cycles == res["op_overhead_cycles"] and host.clock_mhz == res["clock_mhz"]
    assert [m["fit"] for m in res["models"]] == [True, False]
    for m in res["models"]:
        assert m["measured_us"] > 0 and m["estimated_us"] > 0
        assert math.isfinite(m["ratio"]) and m["ratio"] > 0 and math.isfinite(m["median_op_error"])
    # the fitted profile keeps the other processors and drives a study with the host as its lane
    assert fitted.names == load_soc("arm-dsp-dla").names
    assert npukit.Study(pointwise, fitted).totals["latency_us"] > 0


def test_measure_attributes_every_op_to_a_kernel(pointwise):
    from npukit.tvm.importers import import_model
    from npukit.tvm.measure import measure

    imp = import_model(pointwise)
    m = measure(imp.mod, imp.graph, repeat=2)
    assert m.unattributed_ops == ()
    held = sorted(i for k in m.kernels for i in k.ops)
    assert held == list(range(len(imp.graph.ops)))
    assert m.total_us > 0 and all(k.us >= 0 for k in m.kernels)
