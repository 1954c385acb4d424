"""Issue 5: boundary rows exactly where partitions meet, and the lane schedule's invariants."""

from __future__ import annotations

import itertools
import re
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
        helper.make_node("Softmax", ["x"], ["s"], name="branch_b/softmax", axis=1),
        helper.make_node("Softmax", ["s"], ["s2"], name="branch_b/softmax2", axis=1),
        helper.make_node("Sub", ["c2", "s2"], ["y"], name="join"),
    ]
    return _save(path, "branchy", nodes, [1, 16, 32, 32], [1, 16, 32, 32], [w])


def _save(path: Path, name: str, nodes, x_shape, y_shape, inits) -> Path:
    """An ONNX model of ``nodes`` from input ``x`` to output ``y`` (float), saved at ``path``."""
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.fixture(scope="module")
def branchy(tmp_path_factory):
    # the softmaxes pinned to the DSP: along C of an NCHW image, which the NHWC DSP holds innermost
    # (axis = "last" reads it there: along W it refuses them); C = 16 fills 16 of its 64 lanes, and
    # the cost policy would run them on the host
    s = npukit.Study(_branchy(tmp_path_factory.mktemp("m") / "branchy.onnx"), "arm-dsp-dla")
    return s.pin("branch_b/softmax", "dsp").pin("branch_b/softmax2", "dsp")


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
        assert (r.layout_us > 0) == (ps.layout != pd_.layout and rank == 4 and "float" in g.tensors[r.tensor_id].dtype)
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
    from npukit import pipeline, timeline  # the one-pass figure waits alike

    r = s.result
    assert timeline.makespan(pipeline.tables(s._model), plan, s.soc, r.ops, r.bounds) == r.schedule.makespan_us


def _reference_schedule(t, plan, soc, ops, bounds):
    """The list schedule stated directly, one item at a time with dicts of when each lane is free
    and when each tensor is ready where (the compiled ``timeline.Program`` must give the same)."""
    g = t.g
    free, busy, items, ready = {}, {}, [], {}

    def run(lane, at, dur, label, kind, op_id=-1, tensor="", resource=""):
        res = resource or lane
        start = max(free.get(res, 0.0), at)
        free[res] = start + dur
        busy[lane] = busy.get(lane, 0.0) + dur
        items.append((lane, label, kind, start, start + dur, op_id, tensor))
        return start + dur

    def ship(b, at):
        name = g.tensor_label(b.tensor)
        steps = []
        if b.layout_us:
            steps.append((b.layout_on != b.src, b.layout_on, b.layout_us, f"layout {name}", "layout"))
        if b.quantize_us:
            steps.append((b.quantize_on != b.src, b.quantize_on, b.quantize_us, f"{b.quantize_kind} {name}", "quantize"))
        for lane, dur, label, kind in [s[1:] for s in steps if not s[0]]:
            at = run(lane, at, dur, label, kind, tensor=b.tensor)
        at = run(f"{b.src} -> {b.dst}", at, b.transfer_us, f"transfer {name} {b.src}->{b.dst}", "transfer",
                 tensor=b.tensor, resource=b.lane)  # fmt: skip
        for lane, dur, label, kind in [s[1:] for s in steps if s[0]]:
            at = run(lane, at, dur, label, kind, tensor=b.tensor)
        ready[(b.tensor, b.dst)] = at

    for tid in g.inputs:
        for b in [b for b in bounds if b.tensor == tid]:
            ship(b, 0.0)
    for part in plan.partitions:
        call = 0.0
        if part.processor != soc.host:
            call = max([ready.get((x, part.processor), 0.0) for i in part.ops for x in t.act_inputs[i]
                        if g.tensors[x].producer is None or plan.partition[g.tensors[x].producer] != part.pid],
                       default=0.0)  # fmt: skip
        for i in part.ops:
            p = plan.processor[i]
            at = max([call] + [ready.get((x, p), 0.0) for x in t.act_inputs[i]])
            end = run(p, at, ops[i].latency_us, g.ops[i].name, "op", i)
            for x in g.ops[i].outputs:
                ready[(x, p)] = end
                for b in [b for b in bounds if b.tensor == x]:
                    ship(b, end)
    return items, max((it[4] for it in items), default=0.0), busy


@pytest.mark.parametrize("sample", ["digits_cnn.onnx", "mobilenet_v1_025_int8.tflite", "tiny_detector.onnx",
                                    "digits_cnn_qdq.onnx"])  # fmt: skip
def test_compiled_schedule_equals_the_list_schedule_stated_directly(sample):
    """Every bundled profile, both placements, per-processor bit-widths that add quantize steps and
    pins that move ops: items, makespan and busy time equal to the last bit."""
    from npukit import pipeline, timeline

    m = pipeline.load(SAMPLES / sample)
    t = pipeline.tables(m)
    names = [op.source for op in m.graph.ops]
    n = 0
    for prof in sorted(p.stem for p in (ROOT / "npukit" / "profiles").glob("*.toml")):
        soc = npukit.load_soc(prof)
        cfgs = [npukit.Config(), npukit.Config(placement="first-fit"),
                npukit.Config(placement="first-fit", bits=tuple((p.name, p.bits[0]) for p in soc.processors)),
                npukit.Config(placement="first-fit", pins=((names[len(names) // 2], soc.host),))]  # fmt: skip
        for cfg in cfgs:
            try:
                r = pipeline.evaluate(m, soc, cfg)
            except npukit.NpukitError:
                continue
            items, makespan, busy = _reference_schedule(t, r.plan, soc, r.ops, r.bounds)
            assert [tuple(it) for it in r.schedule.items] == items, (prof, cfg)
            assert r.schedule.makespan_us == makespan and r.schedule.busy_us == busy, (prof, cfg)
            assert timeline.makespan(t, r.plan, soc, r.ops, r.bounds) == makespan, (prof, cfg)  # the one-pass figure
            _same_as_the_program(t, r, soc)
            n += 1
    assert n >= 14  # (at least two configurations on each of the seven profiles)


def _same_as_the_program(t, r, soc) -> None:
    """An estimate's schedule (its figures from one pass, its items from the program when read) gives
    the figures of the plan's ``Program`` run on it, to the bit and with the lanes in one order."""
    from npukit import timeline

    full = timeline.program(t, r.plan, soc, r.bounds).run(r.ops, r.bounds)
    busy: dict = {}
    conv: dict = {}
    assert timeline._one_pass(t, r.plan, soc, r.ops, r.bounds, busy, conv) == full.makespan_us
    assert list(busy.items()) == list(full.busy_us.items())
    assert list(conv.items()) == list(full.conv_us.items())
    assert r.schedule.items == full.items
    again = timeline.schedule(t, r.plan, soc, r.ops, r.bounds)  # (a plan estimated again: on its program)
    assert (again.makespan_us, again.busy_us, again.conv_us) == (full.makespan_us, full.busy_us, full.conv_us)


def _fanout(path: Path) -> Path:
    """A conv whose output is read by a relu (and 24 convs) after it and by a softmax beside it,
    joined by a sub: on a DLA + DSP chip the conv's tensor crosses to the DSP while the DLA goes on
    with the relu, on the critical path."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.1, "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r0"], name="relu")]
    nodes += [helper.make_node("Conv", [f"r{k}", "w"], [f"r{k + 1}"], name=f"conv{k + 2}", pads=[1, 1, 1, 1])
              for k in range(24)]  # (the DLA's branch the longer one)
    nodes += [helper.make_node("Softmax", ["c"], ["s"], name="softmax", axis=-1),
              helper.make_node("Sub", ["r24", "s"], ["y"], name="join")]
    return _save(path, "fanout", nodes, [1, 8, 16, 16], [1, 8, 16, 16], [w])


def _split(path: Path) -> Path:
    """A conv, then a split whose two halves go different ways: one to a softmax, one through a chain
    of convs; a concat joins them.  On a chip with two links the halves can leave on different ones."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal((64, 64, 3, 3)).astype(np.float32) * 0.1, "w")
    w2 = numpy_helper.from_array(rng.standard_normal((60, 60, 3, 3)).astype(np.float32) * 0.1, "w2")
    sizes = numpy_helper.from_array(np.array([4, 60], dtype=np.int64), "sizes")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Split", ["c", "sizes"], ["s1", "s2"], name="split", axis=1),
             helper.make_node("Softmax", ["s1"], ["a"], name="softmax", axis=-1)]
    nodes += [helper.make_node("Conv", [f"b{k}" if k else "s2", "w2"], [f"b{k + 1}"], name=f"conv_b{k}", pads=[1, 1, 1, 1])
              for k in range(6)]  # (the convs' half the longer way) # fmt: skip
    nodes.append(helper.make_node("Concat", ["b6", "a"], ["y"], name="join", axis=1))
    return _save(path, "split", nodes, [1, 64, 64, 64], [1, 64, 64, 64], [w, w2, sizes])


def test_one_pass_makespan_equals_the_schedule_where_conversions_hold_a_busy_processor(tmp_path, branchy):
    """``timeline.makespan`` (the figure the placement search and the cost policy compare plans by)
    equals the full schedule's makespan to the bit, on three small models with every op pinned to
    every processor in turn and conversions on the producer's, the consumer's or the host's side.
    A layout or quantize step on the side that made the tensor holds that processor, so the op it
    runs next waits for it (checked to happen), but not the op's other outputs: a split's halves
    leave when it ends, each on its own link."""
    from npukit import pipeline, timeline

    fanout = npukit.Study(_fanout(tmp_path / "fanout.onnx"), "arm-dsp-dla")
    split = npukit.Study(_split(tmp_path / "split.onnx"), "hexagon-like")
    cases = [(branchy, (("dla", "int8"), ("dsp", "fp16")), []), (fanout, (("dla", "int8"), ("dsp", "fp16")), []),
             (split, (), [(("split", a), ("softmax", b)) for a in ("hvx", "hmx") for b in ("cpu", "hvx")])]  # fmt: skip
    n = held = 0
    for study, bits, pairs in cases:
        m = study._model
        t = pipeline.tables(m)
        names = [op.name for op in study.graph.ops]
        for lay, qua in itertools.product(("src", "dst", "host"), ("src", "host")):
            soc = study.soc.with_changes({"conversion.layout_on": lay, "conversion.quantize_on": qua})
            for pins in [(), *((pin,) for pin in itertools.product(names, soc.names)), *pairs]:
                cfg = npukit.Config(placement="first-fit", pins=pins, bits=bits)
                try:
                    r = pipeline.evaluate(m, soc, cfg)
                except npukit.NpukitError:  # (a pin the processor refuses)
                    continue
                items, makespan, _busy = _reference_schedule(t, r.plan, soc, r.ops, r.bounds)
                assert r.schedule.makespan_us == makespan, (lay, qua, pins)
                assert timeline.makespan(t, r.plan, soc, r.ops, r.bounds) == makespan, (lay, qua, pins)
                _same_as_the_program(t, r, soc)
                n += 1
                # an op that starts the moment a conversion on its processor ends, later than its
                # own input was ready there: the conversion held it
                ends = {it[4]: it for it in items if it[2] in ("layout", "quantize")}
                held += any(it[2] == "op" and it[3] in ends and ends[it[3]][0] == it[0] for it in items)
    assert n >= 90 and held >= 3, (n, held)


def test_the_timeline_and_the_boundaries_name_each_tensor_alike_and_apart():
    """A boundary tensor without a name of its own: the timeline said its id ("transfer t1 m7->...")
    where the boundaries table and explain() said its producer's name; and that name can be another
    tensor's own (a TFLite fused conv's output tensor names the conv op too), so two boundary rows
    read alike.  Now one label per tensor everywhere, and the timeline's rows carry the tensor id."""
    conv1 = "digits_cnn_1/conv1_1/Relu;digits_cnn_1/conv1_1/BiasAdd;digits_cnn_1/conv1_1/convolution;digits_cnn_1/conv1_1/Squeeze1"
    s = npukit.Study(SAMPLES / "digits_cnn_int8.tflite", "cortex-m7-cmsis-nn")
    s.pin(conv1, "m7").pin(2, "cmsis_nn").pin("digits_cnn_1/pool_1/MaxPool2d", "cmsis_nn")
    b, tl = s.boundaries, s.timeline
    rows = list(zip(b.tensor, b.src, b.dst))
    assert len(set(rows)) == len(rows)
    assert {s.graph.tensors["t1"].name, s.graph.tensor_label("t1"), s.graph.tensor_label("t4")} == {"", f"{conv1} [t1]", conv1}
    tr = tl[tl.kind == "transfer"]
    assert sorted(tr.item) == sorted(f"transfer {t} {a}->{c}" for t, a, c in rows)
    assert all(s.graph.tensor_label(tid) in item for tid, item in zip(tr.tensor_id, tr.item))
    assert "boundary " + f"{conv1} [t1]" in s.explain(1) or "boundary " + f"{conv1} [t1]" in s.explain(2)


def test_a_tensor_converted_before_it_is_sent_travels_at_the_width_it_was_converted_to():
    """``[conversion] quantize_on = "src"``: the sender (de/re)quantizes before the transfer (the
    timeline put the conversion first), so the link carries the converted width.  It carried the
    sender's width, so quantizing at the source could never shrink a transfer."""
    from npukit.cost import boundary_trace

    base = npukit.load_soc("arm-dsp-dla")
    got = {}
    for where in ("dst", "src"):
        s = npukit.Study(SAMPLES / "digits_cnn.onnx", base.with_changes({"conversion.quantize_on": where}),
                         placement="first-fit")  # fmt: skip
        got[where] = {(r.tensor, r.src, r.dst): (r.bytes, r.transfer_us) for r in s.boundaries.itertuples()}
        if where == "src":
            r = s.result
            c = next(c for c in r.bounds if c.tensor == r.graph.inputs[0])
            tr = {x.figure: x for x in boundary_trace(c, r.tables)}
            assert tr["bytes"].formula == "elements * bits/8 = 64 * 8/8 = 64 B (int8: quantized on arm before it is sent)"
            assert "conversion.quantize_on" in tr["bytes"].fields
    link = base.link("arm", "dla")
    # the model input (64 floats) leaves the ARM as int8; fc2's int8 output reaches the DSP's int16 as
    # int16 (10 values); the DSP's int16 probabilities reach the ARM as fp32
    assert got["dst"][("input", "arm", "dla")][0] == 256 and got["src"][("input", "arm", "dla")][0] == 64
    assert got["dst"][("/fc2/Gemm_output_0", "dla", "dsp")][0] == 10 and got["src"][("/fc2/Gemm_output_0", "dla", "dsp")][0] == 20
    assert got["dst"][("probs", "dsp", "arm")][0] == 20 and got["src"][("probs", "dsp", "arm")][0] == 40
    k = 2 if link.via_dram else 1
    assert got["src"][("input", "arm", "dla")][1] == pytest.approx(link.latency_us + k * 64 / (link.bandwidth_gbps * 1000))


@pytest.mark.parametrize(("model", "soc"), [("digits_cnn.onnx", "arm-dsp-dla"), ("digits_cnn.onnx", "cortex-m7-cmsis-nn"),
                                            ("tiny_detector.onnx", "hexagon-like")])  # fmt: skip
def test_a_processors_busy_time_and_energy_count_the_same_work(model, soc):
    """busy_us counted a processor's boundary conversions, energy_by_processor_uj did not (a processor
    could be busy and spend nothing).  Both now count its ops and the conversions it runs; the links'
    energy is the rest of the total."""
    s = npukit.Study(SAMPLES / model, soc, placement="first-fit")
    r, t = s.result, s.totals
    convs = [cv for b in r.bounds for cv in (b.layout, b.quantize) if cv is not None]
    assert convs  # (every case converts something at a boundary)
    for p in s.soc.names:
        busy = sum(c.latency_us for c in r.ops if c.processor == p) + sum(cv.us for cv in convs if cv.on == p)
        energy = sum(c.energy_uj for c in r.ops if c.processor == p) + sum(cv.energy_uj for cv in convs if cv.on == p)
        assert t["busy_us"][p] == pytest.approx(busy, rel=1e-12, abs=1e-12)
        assert t["energy_by_processor_uj"][p] == pytest.approx(energy, rel=1e-12, abs=1e-12)
    links = sum(b.link_energy_uj for b in r.bounds)
    assert t["energy_uj"] == pytest.approx(sum(t["energy_by_processor_uj"].values()) + links, rel=1e-12)


@pytest.mark.parametrize(("model", "soc"), [("digits_cnn.onnx", "arm-dsp-dla"), ("tiny_detector.onnx", "tda4vm-like"),
                                            ("digits_cnn.onnx", "cortex-m7-cmsis-nn")])  # fmt: skip
def test_a_boundarys_trace_computes_its_figures_from_the_values_it_shows(model, soc):
    """The layout and quantize traces showed only their total ('= 33.0 / 1000') and the conversions'
    energy no formula: every boundary figure is now its formula, the values put in, and the result,
    and the values computed as shown give the figure."""
    from npukit.cost import boundary_trace

    s = npukit.Study(SAMPLES / model, soc, placement="first-fit")
    r = s.result
    seen = set()
    for c in r.bounds:
        tr = {x.figure: x.formula for x in boundary_trace(c, r.tables)}
        for fig, value in (("transfer_us", c.transfer_us), ("layout_us", c.layout_us), ("quantize_us", c.quantize_us)):
            if fig not in tr:
                continue
            seen.add(fig)
            shown = tr[fig].split(" = ")[1].replace(",", "")  # the formula with the values put in
            assert eval(shown) == pytest.approx(value, rel=1e-12), (fig, tr[fig])  # noqa: S307 - arithmetic the test made
        parts = tr["energy_uj"].split(" = ")
        link = float(parts[2].split(" ")[0])
        convs = [float(x) for x in re.findall(r"/1e3 = ([0-9.e-]+)\)", tr["energy_uj"])]
        assert len(convs) == (c.layout is not None) + (c.quantize is not None)
        assert link + sum(convs) == pytest.approx(c.energy_uj, rel=1e-4), tr["energy_uj"]
    assert {"transfer_us", "quantize_us"} <= seen


def test_plans_are_equal_exactly_when_every_field_of_theirs_is():
    """A plan compares by its per-op tuples and plain tuples of its partitions and boundaries (kept
    once per plan): a copy is equal, and a change of any field of any part of it makes it unequal."""
    import dataclasses
    import pickle

    from npukit import Study
    from npukit.plan import Boundary, Partition

    p = Study(ROOT / "sample_models" / "tiny_detector.onnx", "arm-dsp-dla", placement="first-fit").plan
    q = pickle.loads(pickle.dumps(p))
    assert p == q and hash(p) == hash(q) and p is not q
    assert p.boundaries and any(part.function for part in p.partitions)
    changed = []
    for f in dataclasses.fields(p):
        v = getattr(p, f.name)
        changed.append(dataclasses.replace(p, **{f.name: v[:-1]}))
    for cls, name in ((Partition, "partitions"), (Boundary, "boundaries")):
        parts = getattr(p, name)
        k = next(i for i, x in enumerate(parts) if cls is Boundary or x.function)
        for f in dataclasses.fields(cls):
            v = getattr(parts[k], f.name)
            new = v + 1 if isinstance(v, int) else v + ("x" if isinstance(v, str) else ((),))
            changed.append(dataclasses.replace(p, **{name: parts[:k] + (dataclasses.replace(parts[k], **{f.name: new}),) + parts[k + 1 :]}))
    assert len(changed) == 5 + 5 + 6
    for c in changed:
        assert c != p and p != c and not (c == q)
        assert c._plain() != p._plain()  # (and so when the hashes of two different plans collide)
