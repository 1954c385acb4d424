"""Issue 4: BYOC partition across N processors, every processor's verdict on every op, the Study's
support toggles and pins, and a Plan that says exactly what the partitioned module says."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import (
    DETECTOR,
    DIGITS_INT8,
    DIGITS_ONNX,
    DIGITS_TFLITE,
    ROOT,
    initializer,
    onnx_model,
    save_onnx,
    tensor_info,
)

import npukit
from npukit import pipeline
from npukit.tvm.importers import op_id_of_span

# These tests pin down the BYOC mechanics themselves (patterns, priorities, pins, pruning, read-back),
# so they run under the profile's first-fit placement; the cost policy has tests/test_placement.py.
FF = npukit.Config(placement="first-fit")


@pytest.fixture
def study_of():
    def make(model, soc="arm-dsp-dla", config=None, **kw):
        cfg = npukit.Study._coerce(config).with_placement("first-fit") if config is not None else FF
        return npukit.Study(model, soc, cfg, **kw)

    return make


@pytest.fixture
def digits(study_of):
    return study_of(DIGITS_ONNX, "arm-dsp-dla")

DIGITS_PLACEMENT = [
    ("/conv1/Conv", "conv2d", "dla"),
    ("/conv1/Conv/add", "add", "dla"),
    ("/relu1/Relu", "relu", "dla"),
    ("/conv2/Conv", "conv2d", "dla"),
    ("/conv2/Conv/add", "add", "dla"),
    ("/relu2/Relu", "relu", "dla"),
    ("/pool/MaxPool", "max_pool2d", "dla"),
    ("/flatten/Flatten", "reshape", "dla"),
    ("/fc1/Gemm", "matmul", "dla"),
    ("/fc1/Gemm/add", "add", "dla"),
    ("/relu3/Relu", "relu", "dla"),
    ("/fc2/Gemm", "matmul", "dla"),
    ("/fc2/Gemm/add", "add", "dla"),
    ("/softmax/Softmax", "softmax", "dsp"),
]


def _placed(s) -> list[tuple[str, str, str]]:
    pl = s.placement
    return list(zip(pl["name"], pl["op"], pl["processor"], strict=True))


# ---------------------------------------------------------------------------------------------
# the digits CNN on arm-dsp-dla


def test_digits_placement_follows_the_profile(digits):
    assert _placed(digits) == DIGITS_PLACEMENT
    pl = digits.placement
    assert {"op_id", "name", "op", "processor", "partition", "reason", "arm", "dsp", "dla"} <= set(pl.columns)
    assert list(pl["op_id"]) == list(range(14))
    # every op has a reason, led by the processor that won
    for row in pl.itertuples():
        assert row.reason.startswith(f"{row.processor}: "), row.reason
    by = pl.set_index("name")
    assert by.loc["/conv1/Conv", "reason"] == "dla: accepted as dla.conv2d_add_relu"
    assert by.loc["/pool/MaxPool", "reason"] == "dla: accepted as dla.max_pool2d"
    assert by.loc["/softmax/Softmax", "reason"] == "dsp: accepted as dsp.softmax"
    # one verdict column per processor
    assert by.loc["/conv1/Conv", "arm"] == "runs every op (host)"
    assert by.loc["/conv1/Conv", "dsp"] == "conv2d is not in processors.dsp.ops"
    assert by.loc["/conv1/Conv", "dla"] == "accepted"
    assert by.loc["/softmax/Softmax", "dla"] == "softmax is not in processors.dla.ops"
    assert by.loc["/softmax/Softmax", "dsp"] == "accepted"
    # two partitions: the DLA's, then the DSP's softmax
    parts = digits.plan.partitions
    assert [(p.processor, p.ops) for p in parts] == [("dla", tuple(range(13))), ("dsp", (13,))]
    assert list(digits.partitions["processor"]) == ["dla", "dsp"]
    assert [(b.src, b.dst) for b in digits.plan.boundaries] == [("arm", "dla"), ("dla", "dsp"), ("dsp", "arm")]


def test_an_op_the_profile_lacks_is_refused_naming_the_profile_table_to_add_it_to(digits):
    """The softmax on arm-dsp-dla's DLA: refused in the profile's terms, the key a user adds to
    ``processors.dla.ops`` (the short kind, not the Relax name), with the rule code and its detail as
    before; adding that very key to the profile lifts the refusal."""
    import tomllib  # noqa: PLC0415

    from npukit.rules import capability  # noqa: PLC0415
    from npukit.soc import bundled, load_soc  # noqa: PLC0415

    g = digits.graph
    op = next(o for o in g.ops if o.name == "/softmax/Softmax")
    v = capability(op, g, digits.soc.processor("dla"))
    assert not v.ok and v.text == "softmax is not in processors.dla.ops"
    assert [(f.rule, f.values) for f in v.failures] == [("unsupported", (("op", "relax.nn.softmax"),))]
    doc = tomllib.loads(bundled()["arm-dsp-dla"].read_text(encoding="utf-8"))
    doc["processors"]["dla"]["ops"]["softmax"] = {}
    assert not capability(op, g, load_soc(doc).processor("dla")).failed("unsupported")


@pytest.mark.parametrize("path", [DIGITS_TFLITE, DIGITS_INT8], ids=["tflite-float", "tflite-int8"])
def test_digits_tflite_placement(study_of, path):
    s = study_of(path, "arm-dsp-dla")
    procs = dict(zip(s.placement["op"], s.placement["processor"]))
    for kind in ("conv2d", "max_pool2d", "matmul"):
        assert procs[kind] == "dla"
    assert procs["softmax"] == "dsp"
    assert all(r.startswith(p + ": ") for r, p in zip(s.placement["reason"], s.placement["processor"]))


def test_disabling_conv_on_the_dla_moves_every_conv_to_the_host(digits):
    digits.set_support("dla", "conv2d", False)
    pl = digits.placement
    convs = pl[pl["op"] == "conv2d"]
    assert list(convs["processor"]) == ["arm", "arm"]
    assert list(convs["dla"]) == ["user disabled conv2d on dla"] * 2
    assert list(convs["dsp"]) == ["conv2d is not in processors.dsp.ops"] * 2
    assert list(convs["reason"]) == ["arm: fallback; dsp: conv2d is not in processors.dsp.ops; dla: user disabled conv2d on dla"] * 2
    # nothing else moved off its processor
    others = [(n, k, p) for n, k, p in _placed(digits) if k != "conv2d"]
    assert others == [(n, k, p) for n, k, p in DIGITS_PLACEMENT if k != "conv2d"]
    assert digits.config.disabled == frozenset({("dla", "conv2d")})
    # the full Relax name works too, and switching it back restores the plan
    digits.set_support("dla", "relax.nn.conv2d", True)
    assert _placed(digits) == DIGITS_PLACEMENT
    assert digits.config == FF


def test_disabling_conv_moves_it_to_the_next_processor_that_accepts_it(study_of):
    s = study_of(DIGITS_ONNX, "tda4vm-like")
    assert s.soc.order == ("mma", "c7x", "c66x")
    before = dict(zip(s.placement["name"], s.placement["processor"]))
    assert before["/conv1/Conv"] == before["/conv2/Conv"] == "mma"
    s.set_support("mma", "conv2d", False)
    pl = s.placement.set_index("name")
    for conv in ("/conv1/Conv", "/conv2/Conv"):
        assert pl.loc[conv, "processor"] == "c7x"
        assert pl.loc[conv, "mma"] == "user disabled conv2d on mma"
        assert pl.loc[conv, "reason"].startswith("c7x: accepted as c7x.conv2d")
        assert "preferred mma: user disabled conv2d on mma" in pl.loc[conv, "reason"]
    assert pl.loc["/fc1/Gemm", "processor"] == "mma"  # matmul untouched


def test_enabling_an_op_the_profile_lacks(digits):
    digits.set_support("dla", "softmax", True)
    last = digits.placement.iloc[-1]
    assert last["dla"] == "accepted"
    assert last["processor"] == "dsp"  # [placement.prefer] softmax = ["dsp"]: the DSP still comes first
    assert digits.config.enabled == frozenset({("dla", "softmax")})
    digits.set_support("dsp", "softmax", False)
    last = digits.placement.iloc[-1]
    assert last["processor"] == "dla"
    assert last["reason"] == "dla: accepted as dla.softmax (preferred dsp: user disabled softmax on dsp)"
    assert [p.processor for p in digits.plan.partitions] == ["dla"]  # softmax joins the DLA's partition
    digits.set_support("dla", "softmax", False).set_support("dsp", "softmax", True)  # back to the profile
    assert digits.config == FF
    assert _placed(digits) == DIGITS_PLACEMENT


def test_pin_and_unpin(digits):
    digits.pin("/relu3/Relu", "arm")
    pl = digits.placement.set_index("name")
    assert pl.loc["/relu3/Relu", "processor"] == "arm"
    assert pl.loc["/relu3/Relu", "reason"] == "pinned to arm by the user"
    assert pl.loc["/relu3/Relu", "dla"] == "'/relu3/Relu' is pinned to arm"
    assert pl.loc["/relu3/Relu", "dsp"] == "'/relu3/Relu' is pinned to arm"
    assert dict(digits.config.pins) == {"/relu3/Relu": "arm"}
    # the DLA partition splits around the pinned op
    assert [p.processor for p in digits.plan.partitions] == ["dla", "arm", "dla", "dsp"]
    digits.unpin("/relu3/Relu")
    assert digits.config == FF
    assert _placed(digits) == DIGITS_PLACEMENT
    with pytest.raises(npukit.ConfigError, match=r"'/relu3/Relu' is not pinned; pinned: none"):
        digits.unpin("/relu3/Relu")


def test_pin_a_node_moves_all_its_ops(digits):
    digits.pin("/conv1/Conv", "arm")  # the conv and its bias add are one model node
    assert digits.plan.processor[:2] == ("arm", "arm")
    assert digits.plan.processor[2:] == tuple(p for _, _, p in DIGITS_PLACEMENT[2:])


def test_pin_by_op_id_pins_that_op_only(digits):
    digits.pin(3, "arm")
    assert digits.plan.processor[3] == "arm"
    assert digits.plan.processor[4] == "dla"


def test_unpin_of_an_op_held_by_its_nodes_pin_says_so(digits):
    digits.pin("/conv1/Conv", "arm")  # the conv and its bias add
    assert digits.graph.resolve("/conv1/Conv") == (0, 1)
    with pytest.raises(npukit.ConfigError) as ei:
        digits.unpin(1)
    assert str(ei.value) == "1 is not pinned itself; it is held by the pin of '/conv1/Conv': unpin that"
    assert dict(digits.config.pins) == {"/conv1/Conv": "arm"}
    digits.unpin("/conv1/Conv")
    assert digits.config == FF


def test_pin_by_op_id(digits):
    digits.pin(13, "arm")
    assert digits.plan.processor[13] == "arm"
    # an op id is stored under its model node's name when the node became that one op
    assert dict(digits.config.pins) == {digits.graph.ops[13].source: "arm"}
    digits.unpin(13)
    assert digits.config.pins == ()


def test_one_op_named_three_ways_is_one_edit_and_the_last_one_wins(digits):
    g = digits.graph
    node = g.ops[13].source
    assert g.ops_of_source(node) == (13,)
    for first, second in ((13, node), (node, 13), ("13", 13), ("#13", node)):
        digits.pin(first, "dsp" if digits.soc.processor("dsp").ops.get(g.ops[13].kind) else "arm")
        digits.pin(second, "arm")
        assert digits.config.pins == ((node, "arm"),)
        assert digits.plan.processor[13] == "arm"
        digits.unpin(node if second == 13 else 13)
        assert digits.config.pins == ()
    # layer bit-widths alike
    digits.set_bits("int8", layer=node)
    digits.set_bits("fp16", layer=13)
    assert digits.config.layer_bits == ((node, "fp16"),) and digits.op_bits()[13] == "fp16"
    digits.set_bits(None, layer="13")
    assert digits.config.layer_bits == ()


def test_an_edit_of_one_op_inside_a_node_beats_the_node_and_a_node_edit_replaces_it(digits):
    g = digits.graph
    node = next(op.source for op in g.ops if len(g.ops_of_source(op.source)) > 1)
    first, second = g.ops_of_source(node)[:2]
    digits.set_bits("int8", layer=node)
    with pytest.warns(UserWarning, match="has no effect"):  # (the conv's bias add: inside the conv's kernel)
        digits.set_bits("fp16", layer=second)  # one op inside: it wins, whatever the spelling's sort order
    set_to = pipeline.settings(digits.soc, digits.config, digits.plan, g)
    assert set_to[first] == "int8" and set_to[second] == "fp16"
    assert digits.op_bits()[first] == digits.op_bits()[second] == "int8"  # (it runs at its kernel's width)
    digits.set_bits("fp16", layer=node)  # the whole node again: replaces the finer edit
    assert digits.config.layer_bits == ((node, "fp16"),)
    assert digits.op_bits()[first] == digits.op_bits()[second] == "fp16"


def _limits_model(tmp_path):
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w1"], ["a"], name="grouped", group=2, pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["a", "w2"], ["b"], name="big_kernel", pads=[4, 4, 4, 4]),
             h.make_node("Conv", ["b", "w3"], ["c"], name="big_and_strided", strides=[3, 3]),
             h.make_node("Conv", ["c", "w4"], ["y"], name="depthwise", group=8, pads=[1, 1, 1, 1])]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 4, 16, 16])], [tensor_info("y", None)],
                   [initializer("w1", [8, 2, 3, 3]), initializer("w2", [8, 8, 9, 9]), initializer("w3", [8, 8, 9, 9]),
                    initializer("w4", [8, 1, 3, 3])])  # fmt: skip
    return save_onnx(m, tmp_path / "limits.onnx")


def test_rule_verdicts_name_the_values(tmp_path, study_of):
    s = study_of(_limits_model(tmp_path), "arm-dsp-dla")
    pl = s.placement.set_index("name")
    assert pl.loc["grouped", "dla"] == "groups=2 (grouped conv) not supported"
    assert pl.loc["big_kernel", "dla"] == "kernel 9x9 > max 7x7"
    # every failing rule, not just the first
    assert pl.loc["big_and_strided", "dla"] == "kernel 9x9 > max 7x7; stride 3x3 not in allowed 1, 2"
    assert pl.loc["depthwise", "dla"] == "accepted"
    assert list(pl["processor"]) == ["arm", "arm", "arm", "dla"]
    assert pl.loc["grouped", "reason"] == "arm: fallback; dsp: conv2d is not in processors.dsp.ops; dla: groups=2 (grouped conv) not supported"


@pytest.mark.parametrize("node,rule", [
    ("grouped", "dla: groups=2 (grouped conv) not supported"),
    ("big_kernel", "dla: kernel 9x9 > max 7x7"),
    ("big_and_strided", "dla: kernel 9x9 > max 7x7; stride 3x3 not in allowed 1, 2"),
])  # fmt: skip
def test_impossible_pin_quotes_the_failing_rule(tmp_path, study_of, node, rule):
    s = study_of(_limits_model(tmp_path), "arm-dsp-dla")
    before = s.plan
    with pytest.raises(npukit.ConfigError) as ei:
        s.pin(node, "dla")
    assert str(ei.value) == f"cannot pin {node!r} (conv2d) to dla: {rule}"
    assert s.config == FF and s.plan == before  # the failed edit changed nothing


def test_impossible_pin_to_a_disabled_op(digits):
    digits.set_support("dla", "conv2d", False)
    with pytest.raises(npukit.ConfigError, match=r"cannot pin '/conv1/Conv' \(conv2d\) to dla: dla: user disabled conv2d on dla"):
        digits.pin("/conv1/Conv", "dla")


def test_unknown_names_list_the_closest(digits):
    with pytest.raises(npukit.ConfigError) as ei:
        digits.pin("/conv3/Conv", "dla")
    msg = str(ei.value)
    assert msg.startswith("unknown node '/conv3/Conv'; closest valid names: ")
    assert "'/conv1/Conv'" in msg and "'/conv2/Conv'" in msg
    with pytest.raises(npukit.ConfigError, match=r"unknown processor 'npu'; valid names: 'arm', 'dla', 'dsp'"):
        digits.pin("/conv1/Conv", "npu")
    with pytest.raises(npukit.ConfigError, match=r"unknown processor 'dsp2'; did you mean 'dsp'\? valid names: 'arm', 'dla', 'dsp'"):
        digits.set_support("dsp2", "softmax", False)
    with pytest.raises(npukit.ConfigError) as ei:
        digits.set_support("dsp", "sotfmax", False)
    # it starts as the unknown node and processor above do (it began 'op: unknown op', a placeholder where)
    assert str(ei.value).startswith("unknown op 'sotfmax'; closest valid names: 'softmax'"), str(ei.value)
    with pytest.raises(npukit.ConfigError, match=r"^unknown op id #99; the model.s ops are #0 \.\. #13$"):
        digits.pin(99, "arm")
    with pytest.raises(npukit.ConfigError, match="arm is the host"):
        digits.set_support("arm", "conv2d", False)
    assert digits.config == FF


# ---------------------------------------------------------------------------------------------
# the detector: ARM + DSP + DLA, and four processors


def test_detector_on_arm_dsp_dla(study_of):
    s = study_of(DETECTOR, "arm-dsp-dla")
    proc = dict(zip(s.placement["name"], s.placement["processor"]))
    kind = dict(zip(s.placement["name"], s.placement["op"]))
    assert proc["post/nms"] == "dsp" and proc["post/topk"] == "dsp"
    # CNN ops (convs, their bias adds, relus) on the DLA
    cnn = [n for n in proc if n.startswith(("backbone/", "head/conv"))]
    assert len(cnn) == 17 and all(proc[n] == "dla" for n in cnn)
    # the glue: shape ops, box decoding, the gather's index fix-up
    glue = ["head/split", "head/box_reshape", "head/box_transpose", "decode/slice_xy", "decode/concat",
            "decode/xy_center", "decode/add_anchor", "post/flatten_indices", "post/gather_boxes",
            "post/gather_boxes/where", "post/gather_boxes/less"]  # fmt: skip
    assert {n: proc[n] for n in glue} == {n: "arm" for n in glue}
    assert {kind[n] for n in proc if proc[n] == "dsp"} == {"all_class_non_max_suppression", "topk", "sigmoid"}
    reason = dict(zip(s.placement["name"], s.placement["reason"]))
    assert reason["post/nms"] == "dsp: accepted as dsp.all_class_non_max_suppression"
    assert reason["head/split"] == "arm: fallback; dsp: split is not in processors.dsp.ops; dla: split is not in processors.dla.ops"
    assert reason["decode/xy_scale"] == "arm: fallback (dla takes it only fused into a kernel); dsp: multiply is not in processors.dsp.ops"
    assert set(s.placement["processor"]) == {"arm", "dsp", "dla"}


def test_four_processors_all_used(study_of):
    s = study_of(DETECTOR, "tda4vm-like")
    assert len(s.soc.processors) == 4
    used = set(s.plan.processor)
    assert used == set(s.soc.names) == {"a72", "c7x", "mma", "c66x"}
    proc = dict(zip(s.placement["name"], s.placement["processor"]))
    assert proc["backbone/conv1"] == "mma" and proc["post/nms"] == "c7x" and proc["decode/concat"] == "c66x"
    assert proc["post/gather_boxes"] == "a72"
    _assert_plan_matches_module(s)


# ---------------------------------------------------------------------------------------------
# the Plan says exactly what the partitioned module says


def _walk(mod):
    """Read a partitioned module independently: offloaded functions, their composites, main's calls."""
    from npukit.tvm import load

    tvm = load()
    from tvm import relax

    functions = {}
    for gv, fn in mod.functions.items():
        if not isinstance(fn, relax.Function) or gv.name_hint == "main":
            continue
        assert fn.attrs is not None and "Codegen" in fn.attrs, f"{gv.name_hint} has no Codegen attribute"
        target = str(fn.attrs["Codegen"])
        comps = []
        for blk in fn.body.blocks:
            for b in blk.bindings:
                v = b.value
                if isinstance(v, relax.Function):
                    assert "Composite" in v.attrs and "npukit.ops" in v.attrs
                    name = str(v.attrs["Composite"])
                    ids = [int(x) for x in str(v.attrs["npukit.ops"]).split(",")]
                    calls = []
                    for ib in v.body.blocks:
                        for x in ib.bindings:
                            if isinstance(x.value, relax.Call):
                                calls.append((x.value.op.name, op_id_of_span(x.value.span)))
                    comps.append((name, ids, calls))
        functions[gv.name_hint] = (target, comps)
    order = []
    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            v = b.value
            if isinstance(v, relax.Call):
                if isinstance(v.op, relax.GlobalVar):
                    order.append(("call", v.op.name_hint))
                elif isinstance(v.op, tvm.ir.Op):
                    i = op_id_of_span(v.span)
                    assert i is not None, f"a call in main without an npukit span: {v.op.name}"
                    order.append(("op", i, v.op.name))
    return functions, order


def _assert_plan_matches_module(s):
    g, plan = s.graph, s.plan
    functions, order = _walk(s.partitioned_module)
    seen: list[int] = []
    parts = []  # (processor, op ids, function name) in main's order
    host_run: list[int] = []
    for item in order:
        if item[0] == "op":
            _, i, opname = item
            assert g.ops[i].op == opname
            host_run.append(i)
            continue
        if host_run:
            parts.append((s.soc.host, tuple(host_run), ""))
            host_run = []
        target, comps = functions[item[1]]
        ids = []
        for name, comp_ids, calls in comps:
            assert name.split(".")[0] == target, (name, target)  # dla.conv2d_add_relu lives in a dla function
            assert [c[1] for c in calls] == comp_ids  # spans inside the composite = its npukit.ops
            assert [c[0] for c in calls] == [g.ops[i].op for i in comp_ids]
            for i in comp_ids:
                assert plan.pattern[i] == name
            ids += comp_ids
        parts.append((target, tuple(sorted(ids)), item[1]))
    if host_run:
        parts.append((s.soc.host, tuple(host_run), ""))
    for _, ids, _ in parts:
        seen += ids
    assert sorted(seen) == list(range(len(g.ops))), "every op exactly once"
    assert len(seen) == len(set(seen))
    assert [(p.processor, p.ops, p.function) for p in plan.partitions] == parts
    for pid, (proc, ids, _) in enumerate(parts):
        for i in ids:
            assert plan.processor[i] == proc and plan.partition[i] == pid
    # partitions are in execution order: every input of a partition comes from an earlier (or the same) one
    for pid, (_, ids, _) in enumerate(parts):
        for i in ids:
            for p in g.producers(g.ops[i]):
                assert plan.partition[p] <= pid
    # the placement table agrees
    assert list(s.placement["processor"]) == list(plan.processor)
    assert list(s.placement["partition"]) == list(plan.partition)
    # each boundary joins two different processors, as the plan places producer and consumers
    for b in plan.boundaries:
        assert b.src != b.dst
        t = g.tensors[b.tensor]
        assert b.src == (plan.processor[t.producer] if t.kind == "act" else s.soc.host)
        assert all(plan.processor[c] == b.dst for c in b.consumers)


def test_plan_matches_module_digits(digits):
    _assert_plan_matches_module(digits)
    digits.set_support("dla", "conv2d", False).pin("/fc2/Gemm", "arm")
    _assert_plan_matches_module(digits)


def test_plan_matches_module_detector(study_of):
    s = study_of(DETECTOR, "arm-dsp-dla")
    _assert_plan_matches_module(s)
    s.set_support("dsp", "topk", False)
    assert s.plan.processor[[op.name for op in s.graph.ops].index("post/topk")] == "arm"
    _assert_plan_matches_module(s)


def test_plan_matches_module_int8(study_of):
    _assert_plan_matches_module(study_of(DIGITS_INT8, "arm-dsp-dla"))


# ---------------------------------------------------------------------------------------------
# determinism across processes

_DUMP = """
import hashlib, json, sys
import npukit
from npukit import pipeline
s = npukit.Study(sys.argv[1], sys.argv[2], sys.argv[3], placement="first-fit")
print(json.dumps({
    "plan": repr(s.plan),
    "module": hashlib.sha256(s.partitioned_module.script().encode()).hexdigest(),
    "placement": s.placement.to_json(),
}))
"""


def _dump(model, soc, cfg_toml, seed):
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    p = subprocess.run([sys.executable, "-c", _DUMP, str(model), soc, cfg_toml], capture_output=True, text=True,
                       env=env, cwd=str(ROOT), timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_same_inputs_same_plan_and_module_in_two_processes(study_of):
    cfg = FF.with_support("c7x", "topk", False).with_pin("head/split", "a72")
    a = _dump(DETECTOR, "tda4vm-like", cfg.to_toml(), 1)
    b = _dump(DETECTOR, "tda4vm-like", cfg.to_toml(), 2)
    assert a == b
    here = study_of(DETECTOR, "tda4vm-like", cfg)
    assert repr(here.plan) == a["plan"]


# ---------------------------------------------------------------------------------------------
# Config: an immutable, hashable, serialisable value; edits recompute only what they invalidate


def test_config_round_trip(digits):
    digits.set_support("dla", "conv2d", False).set_support("dla", "softmax", True).pin("/relu3/Relu", "arm")
    digits.set_bits("fp16", processor="dla")
    cfg = digits.config
    assert isinstance(hash(cfg), int)
    assert {cfg: 1}[npukit.Config.from_toml(cfg.to_toml())] == 1
    assert npukit.Config.from_toml(cfg.to_toml()) == cfg
    assert npukit.Config.from_json(cfg.to_json()) == cfg
    with pytest.raises(Exception):  # noqa: B017 - frozen dataclass
        cfg.pins = ()  # type: ignore[misc]
    again = npukit.Study(DIGITS_ONNX, "arm-dsp-dla", cfg, placement="first-fit")
    assert again.config == cfg
    assert again.plan == digits.plan
    assert list(again.placement["reason"]) == list(digits.placement["reason"])
    assert npukit.Study(DIGITS_ONNX, "arm-dsp-dla", cfg.to_toml(), placement="first-fit").plan == digits.plan
    assert npukit.Study(DIGITS_ONNX, "arm-dsp-dla", cfg.to_dict(), placement="first-fit").plan == digits.plan


def test_bad_config_is_refused(digits):
    with pytest.raises(npukit.ConfigError, match="unknown node"):
        npukit.Study(DIGITS_ONNX, "arm-dsp-dla", npukit.Config(pins=(("/nope", "dla"),)))
    with pytest.raises(npukit.ConfigError, match="unknown field 'pin'"):
        npukit.Config.from_toml('pin = { x = "dla" }')
    with pytest.raises(npukit.ConfigError, match="not valid TOML"):
        npukit.Config.from_toml("pins = {")


def test_bits_edit_does_not_repartition_but_a_toggle_does(digits, monkeypatch):
    """The partition step is keyed by support edits and pins only: count the BYOC partitions (the
    replay of TVM's passes an edit runs), and TVM's own runs (only when the module is asked for)."""
    import npukit.byocsim as bs
    import npukit.tvm.partition as tp
    from npukit import pipeline

    real, real_tvm = bs.partition, tp.run_once
    runs, tvm_runs = [], []

    def counting(*a, **kw):
        runs.append(1)
        return real(*a, **kw)

    def counting_tvm(*a, **kw):
        tvm_runs.append(1)
        return real_tvm(*a, **kw)

    monkeypatch.setattr(bs, "partition", counting)
    monkeypatch.setattr(tp, "run_once", counting_tvm)
    pipeline.clear_partition_caches()
    pipeline.RESULTS.clear()
    plan = digits.plan
    assert len(runs) == 1 and not tvm_runs  # the module is built when first asked for
    module = digits.partitioned_module
    assert len(tvm_runs) == 1
    assert digits.partitioned_module is module and len(tvm_runs) == 1
    digits.set_bits("fp16", processor="dla")
    digits.set_bits("int16", processor="dsp")
    digits.set_bits("int8", layer="/fc1/Gemm")
    digits.costs, digits.totals  # noqa: B018 - evaluate everything that depends on bits
    assert len(runs) == 1
    assert digits.plan is plan and digits.partitioned_module is module
    digits.set_support("dla", "relu", False)
    assert len(runs) == 2
    assert digits.plan != plan
    digits.pin("/softmax/Softmax", "arm")
    assert len(runs) == 3
    digits.set_support("dla", "relu", True).unpin("/softmax/Softmax")  # back to a config seen before: cached
    assert len(runs) == 4  # the intermediate state (relu back on, softmax pinned) is new
    assert digits.plan == plan
    assert len(tvm_runs) == 1


def test_edits_return_the_study(digits):
    assert digits.set_support("dla", "relu", False) is digits
    assert digits.pin("/softmax/Softmax", "arm") is digits
    assert digits.unpin("/softmax/Softmax") is digits


def test_relax_module_study():
    """A Relax IRModule (power users) partitions like a file."""
    from test_import_names import _relax_module

    s = npukit.Study(_relax_module(dataflow=False), "arm-dsp-dla", placement="first-fit")
    assert list(s.placement["name"]) == ["my_conv", "bias", "act"]
    assert list(s.placement["processor"]) == ["dla", "dla", "dla"]
    _assert_plan_matches_module(s)


def test_fused_only_op_alone_says_so_under_the_cost_policy():
    """Under the cost policy an op an accelerator takes only fused into a kernel, standing alone,
    is refused by that rule (not by a cost sentence claiming no one else accepts it): the reason
    names every processor and a pin to it says why it cannot hold."""
    s = npukit.Study(DETECTOR, "arm-dsp-dla")
    assert s.config.placement == "cost"
    row = s.placement.set_index("name").loc["decode/xy_scale"]
    assert row["processor"] == "arm"
    assert row["dla"] == "accepted only fused into a kernel; not fused here"
    assert row["reason"] == ("arm: fallback; dsp: multiply is not in processors.dsp.ops; "
                             "dla: accepted only fused into a kernel; not fused here")  # fmt: skip
    with pytest.raises(npukit.ConfigError) as ei:
        s.pin("decode/xy_scale", "dla")
    assert str(ei.value) == ("cannot pin 'decode/xy_scale' to dla: pinned, it would run on arm "
                             "(dla: accepted only fused into a kernel; not fused here)")  # fmt: skip
    assert s.config.pins == ()


def test_lone_view_ops_are_pruned_unless_pinned(study_of):
    s = study_of(DETECTOR, "arm-dsp-dla")
    row = s.placement.set_index("name").loc["head/box_reshape"]
    # the DLA accepts this rank-4 reshape, but alone it would cost a call and two transfers
    assert row["processor"] == "arm"
    assert row["dla"] == "pruned: a partition holding only reshape is not worth an offload call"
    # the user's pin wins over the pruning heuristic
    s.pin("head/box_reshape", "dla")
    row = s.placement.set_index("name").loc["head/box_reshape"]
    assert (row["processor"], row["reason"]) == ("dla", "pinned to dla by the user")
    _assert_plan_matches_module(s)


def test_fused_only_op_cannot_be_pinned_alone(study_of):
    s = study_of(DETECTOR, "arm-dsp-dla")
    with pytest.raises(npukit.ConfigError) as ei:
        s.pin("decode/xy_scale", "dla")
    assert str(ei.value) == ("cannot pin 'decode/xy_scale' to dla: pinned, it would run on arm "
                             "(dla: accepted, only fused into a kernel)")  # fmt: skip
    assert s.config == FF


def test_few_valid_names_lead_with_the_closest_and_shorten_long_ones():
    """Few choices are all listed, in order, after the ones as close as the closest (a name of 300
    characters does not hide the one the user meant)."""
    from npukit.errors import closest

    names = ["R" * 300, "add node with spaces", "mul/x", "sig:0"]
    assert closest("sig", names) == ("did you mean 'sig:0'? valid names: '" + "R" * 57 + "...', 'add node with spaces', "
                                     "'mul/x', 'sig:0'")  # fmt: skip
    assert closest("int3", ["fp16", "fp32", "int16", "int2", "int4", "int8"]) == (
        "did you mean 'int2', 'int4' or 'int8'? valid names: 'fp16', 'fp32', 'int16', 'int2', 'int4', 'int8'")
    assert closest("npu", ["arm", "dla", "dsp"]) == "valid names: 'arm', 'dla', 'dsp'"


def test_a_host_op_one_accelerator_takes_only_fused_keeps_the_others_refusals():
    """decode/xy_scale (a multiply) on the ARM under first-fit: the DLA takes it only fused, and the
    DSP's profile does not list it; the reason dropped the DSP's refusal (the cost policy's said it)."""
    s = npukit.Study(DETECTOR, "arm-dsp-dla", placement="first-fit")
    r = s.placement.set_index("name").loc["decode/xy_scale"]
    assert r["processor"] == "arm"
    assert r["reason"] == ("arm: fallback (dla takes it only fused into a kernel); dsp: multiply is not in "
                           "processors.dsp.ops")  # fmt: skip


def test_an_accelerator_refuses_an_op_its_generated_code_could_not_call(tmp_path):
    """A profile may list any op for an accelerator; one npukit's kernel library has no call for
    (argmax) was placed there, costed, and then failed to export.  The accelerator now refuses it
    with rule 'codegen', the op runs on the host, and the export builds."""
    soc = npukit.load_soc("arm-dsp-dla").with_changes({"processors.dsp.ops.argmax": {}})
    _argmax_refused_on_the_dsp(npukit.Study(_relu_argmax(tmp_path), soc, placement="first-fit"))


def _relu_argmax(tmp_path):
    """A relu, then an argmax ('pick'): an op npukit's kernel library has no call for."""
    from conftest import onnx_model, save_onnx, tensor_info
    from onnx import TensorProto
    from onnx import helper as h

    m = onnx_model([h.make_node("Relu", ["x"], ["r"], name="relu"),
                    h.make_node("ArgMax", ["r"], ["y"], name="pick", axis=1, keepdims=0)],
                   [tensor_info("x", [1, 16])], [tensor_info("y", [1], TensorProto.INT64)])  # fmt: skip
    return save_onnx(m, tmp_path / "argmax.onnx")


def _argmax_refused_on_the_dsp(s) -> None:
    """The DSP refuses the argmax by rule 'codegen', it runs on the host, and the code is generated."""
    i = next(op.op_id for op in s.graph.ops if op.kind == "argmax")
    v = s.result.verdicts[(i, "dsp")]
    assert not v.ok and v.rule == "codegen"
    assert v.text == "code generation cannot run it here: the kernel library has no call for argmax"
    assert s.plan.processor[i] == "arm"
    assert "include/npukit_model.h" in s.code


def test_an_op_the_user_enables_is_refused_where_its_generated_code_could_not_call_it(tmp_path):
    """set_support(proc, op, True) for an op the profile does not list: the accelerator accepted it
    whatever npukit's kernel library could call, so first-fit placed an argmax on the DSP and the
    export then failed ('code generation has no kernel call for argmax on dsp').  The enabled op is
    refused with rule 'codegen', as one the profile lists is; a pin there says why."""
    s = npukit.Study(_relu_argmax(tmp_path), "arm-dsp-dla", placement="first-fit")
    s.set_support("dsp", "argmax", True)
    assert s.config.enabled == frozenset({("dsp", "argmax")})
    _argmax_refused_on_the_dsp(s)
    with pytest.raises(npukit.NpukitError) as ei:
        s.pin("pick", "dsp")
    assert str(ei.value) == ("cannot pin 'pick' (argmax) to dsp: dsp: code generation cannot run it here: the "
                             "kernel library has no call for argmax")  # fmt: skip
    s.set_support("dla", "relu", False).set_support("dsp", "relu", True)  # an op it can call: accepted
    assert s.result.verdicts[(0, "dsp")].ok and s.plan.processor[0] == "dsp"


def test_a_partition_that_only_converts_is_pruned_like_one_that_only_views(tmp_path):
    """matmul (DLA) -> softmax (DSP) -> quantize of the model output: first-fit sent the quantize
    alone back to the DLA (dla -> dsp -> dla, a call and two transfers to convert 10 numbers).
    Such a partition computes nothing: it is pruned, and the quantize runs on the host."""
    import numpy as np
    from conftest import initializer, onnx_model, save_onnx, tensor_info
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="fc"),
             h.make_node("Softmax", ["m"], ["p"], name="softmax", axis=-1),
             h.make_node("QuantizeLinear", ["p", "s", "z"], ["y"], name="q")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 64])], [tensor_info("y", [1, 10], TensorProto.INT8)],
                   [initializer("w", [64, 10]), nh.from_array(np.array(1 / 256, np.float32), "s"),
                    nh.from_array(np.array(-128, np.int8), "z")], opset=13)  # fmt: skip
    s = npukit.Study(save_onnx(m, tmp_path / "tail.onnx"), "arm-dsp-dla", placement="first-fit")
    assert [s.plan.processor[op.op_id] for op in s.graph.ops] == ["dla", "dsp", "arm"]
    i = next(op.op_id for op in s.graph.ops if op.kind == "quantize")
    assert s.result.verdicts[(i, "dla")].text == "pruned: a partition holding only quantize is not worth an offload call"


def _residual_module():
    """x + matmul(x, W): the matmul's output is the add's second argument (a residual add as torch
    writes ``x + f(x)``), then a relu."""
    import numpy as np

    from npukit.tvm import load

    load()
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 16), "float32"))
    w = relax.const(np.full((16, 16), 0.5, np.float32))
    with bb.function("main", [x]):
        with bb.dataflow():
            m = bb.emit(relax.op.matmul(x, w), name_hint="fc")
            a = bb.emit(relax.op.add(x, m), name_hint="residual")
            r = bb.emit_output(bb.emit(relax.op.nn.relu(a), name_hint="act"))
        bb.emit_func_output(r)
    return bb.get()


def test_a_chain_through_the_second_argument_of_an_add_fuses_as_tvm_fuses_it():
    """TVM's pattern matcher tries relax.add / relax.multiply with their arguments swapped, so
    ``x + matmul(x, W)`` is one matmul_add_relu kernel.  The replay of its passes matched a chain
    through the first argument only: it made matmul and add_relu two kernels, the estimates costed
    that, and asking for the partitioned module (an export) failed with 'npukit's replay of TVM's
    BYOC passes disagrees with TVM'."""
    s = npukit.Study(_residual_module(), "arm-dsp-dla", placement="first-fit")
    assert list(s.placement["name"]) == ["fc", "residual", "act"]
    assert list(s.plan.processor) == ["dla", "dla", "dla"]
    assert list(s.plan.pattern) == ["dla.matmul_add_relu"] * 3
    _assert_plan_matches_module(s)  # TVM's own passes read back the same plan
