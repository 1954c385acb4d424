"""The widget's Python side without a browser: the view model is plain JSON data, every request is
answered by exactly one state update, bad edits become a status message.  (Runs with the browser
tests' files but needs no browser; the messages are recorded at the widget's comm.)
"""

from __future__ import annotations

import json

import pytest

from .lab import REPO, recording_widget, request

DIGITS = REPO / "sample_models" / "digits_cnn.onnx"


@pytest.fixture
def study():
    import npukit

    return npukit.Study(DIGITS, "arm-dsp-dla")


@pytest.fixture
def widget(study):
    w = recording_widget(study)
    yield w
    w.close()


def test_view_model_is_plain_json(study):
    from npukit.report import processor_colors
    from npukit.ui import view_model

    vm = view_model(study)
    text = json.dumps(vm)  # no bytes, numpy scalars or NaN
    assert "NaN" not in text
    g, p, v, c = vm["graph"], vm["placement"], vm["values"], vm["controls"]
    assert g["n_ops"] == len(study.graph.ops) == 14
    assert g["name"] == [op.name for op in study.graph.ops]
    assert [x["color"] for x in g["processors"]] == list(processor_colors(study.soc).values())
    pl = study.placement
    names = [x["name"] for x in g["processors"]]
    assert [names[i] for i in p["proc"]] == pl["processor"].tolist()
    assert [p["strings"][i] for i in p["reason"]] == pl["reason"].tolist()
    assert [p["strings"][i] for i in p["verdicts"]["dsp"]] == pl["dsp"].tolist()
    assert v["latency_us"] == study.costs["latency_us"].tolist()
    assert v["totals"] == json.loads(json.dumps(study.totals))
    b = v["boundaries"]
    assert b["n"] == len(study.boundaries) == 2  # the input onto the DLA, its logits back for softmax
    assert b["tensor"] == study.boundaries["tensor"].tolist()
    tl = study.timeline
    assert v["timeline"]["item"] == tl["item"].tolist()
    assert [v["timeline"]["lanes"][i] for i in v["timeline"]["lane"]] == tl["lane"].tolist()
    assert c["support"]["dla"]["conv2d"] is True and c["support"]["dla"]["softmax"] is False
    assert c["support"]["dsp"]["softmax"] is True


def test_each_request_is_one_update(widget, study):
    state = request(widget, type="support", processor="dla", op="conv2d", enabled=False)
    assert {"placement", "values", "controls", "status"} <= set(state)
    assert widget.status["level"] == "ok"
    assert widget.status["text"].startswith("dla: conv2d off \u2192 latency")
    assert study.placement.set_index("name").loc["/conv1/Conv", "processor"] == "arm"
    assert widget.controls["support"]["dla"]["conv2d"] is False
    assert widget.controls["edited"] == ["dla:conv2d"]

    request(widget, type="support", processor="dla", op="conv2d", enabled=True)
    assert widget.controls["edited"] == []

    # under the cost policy a bit-width can move ops, so the placement is recomputed with it
    state = request(widget, type="bits", processor="dla", bits="fp16")
    assert "values" in state
    assert widget.placement["reason"] == vm_placement(study)["reason"]
    assert dict(study.config.bits) == {"dla": "fp16"}
    request(widget, type="bits", processor="dla", bits=None)
    assert dict(study.config.bits) == {}

    # the front end names a node by op id; the controls say under which key the Study keeps it
    request(widget, type="layer_bits", node=8, bits="fp16")
    assert study.op_bits()[8] == "fp16"
    (entry,) = widget.controls["layer_bits"]
    assert entry["bits"] == "fp16" and entry["ops"] == [8] and dict(study.config.layer_bits) == {entry["node"]: "fp16"}
    request(widget, type="layer_bits", node=entry["node"], bits=None)
    assert study.config.layer_bits == () and study.op_bits()[8] == "int8"

    assert study.placement["processor"][13] == "arm"  # softmax: kept on the host by cost
    request(widget, type="pin", node=13, processor="dsp")
    (pin,) = widget.controls["pins"]
    assert pin["processor"] == "dsp" and pin["ops"] == [13]
    assert study.placement["processor"][13] == "dsp"
    request(widget, type="unpin", node=pin["node"])
    assert study.config.pins == () and study.placement["processor"][13] == "arm"
    request(widget, type="reset")
    assert study.config.to_dict() == {}


def test_first_fit_bits_edit_is_cost_only():
    """Under first-fit a bit-width never moves an op: the edit sends new values, not a placement."""
    import npukit
    w = recording_widget(npukit.Study(DIGITS, "arm-dsp-dla", placement="first-fit"))
    try:
        state = request(w, type="bits", processor="dla", bits="fp16")
        assert "values" in state and "placement" not in state
        assert w.study.placement["processor"][13] == "dsp"  # first-fit: softmax goes to the DSP
    finally:
        w.close()


def vm_placement(study) -> dict:
    from npukit.ui.viewmodel import placement_model

    return placement_model(study, pack=True)


def test_bad_edits_become_status_messages(widget, study):
    before = study.config
    request(widget, type="pin", node=13, processor="dla")
    assert widget.status["level"] == "error"
    assert (
        widget.status["text"]
        == "cannot pin '/softmax/Softmax' (softmax) to dla: dla: softmax is not in processors.dla.ops"
    )
    assert study.config == before
    request(widget, type="support", processor="arm", op="add", enabled=False)
    assert widget.status["level"] == "error" and "arm is the host" in widget.status["text"]
    request(widget, type="support", processor="dla")  # a malformed request: no op, no enabled
    assert (widget.status["level"], widget.status["text"]) == ("error", "support: the request has no 'enabled'")
    request(widget, type="no-such-request")
    assert widget.status["text"] == "the widget sent an unknown request 'no-such-request'"
    # and it still works
    request(widget, type="support", processor="dla", op="conv2d", enabled=False)
    assert widget.status["level"] == "ok"


def test_edits_made_in_python_reach_the_widget(widget, study):
    rev = widget.status["rev"]
    n = len(widget.sent)
    study.set_support("dla", "conv2d", False)
    updates = [m for m in widget.sent[n:] if m["data"]["method"] == "update"]
    assert len(updates) == 1
    assert widget.status["rev"] == rev + 1 and widget.status["text"] == "updated from Python"
    assert widget.controls["support"]["dla"]["conv2d"] is False


def test_error_panel_measures_only_on_request(widget, study):
    assert widget.errors["state"] in ("idle", "missing")
    if widget.errors["state"] == "missing":
        pytest.skip("this npukit has no Study.error")
    request(widget, type="measure_error")
    e = widget.errors
    assert e["state"] == "ok"
    assert e["outputs"][0]["name"] == "probs"
    assert e["accuracy"] == pytest.approx(study.error_dict()["accuracy"])
    assert e["ops"]["name"] == study.error["name"].tolist()
    # an edit marks it stale (it is not re-measured unless asked to)
    request(widget, type="bits", processor="dla", bits="fp16")
    assert widget.errors.get("stale") is True
    request(widget, type="bits", processor="dla", bits=None)  # back to the measured config
    assert widget.errors.get("stale") is False


def test_exports(widget, study, tmp_path):
    request(widget, type="export", what="annotated_onnx", path=str(tmp_path / "a.onnx"))
    if widget.status["level"] == "info":
        assert "not available" in widget.status["text"]
    else:
        assert widget.status["level"] == "ok", widget.status["text"]
        assert (tmp_path / "a.onnx").is_file()
    request(widget, type="export", what="model_explorer", path=str(tmp_path / "me"))
    assert widget.status["level"] in ("ok", "info"), widget.status["text"]
    request(widget, type="export", what="model_explorer", path="")
    assert widget.status["level"] == "error"


def test_measuring_after_every_edit_needs_no_press_of_measure(widget, study):
    """Checking the box alone said "on" and then never measured: it waited for a press of "measure error"."""
    if widget.errors["state"] == "missing":
        pytest.skip("this npukit has no Study.error")
    request(widget, type="auto_error", on=True)
    assert widget.errors["state"] == "ok" and not widget.errors.get("stale")
    request(widget, type="bits", processor="dla", bits="fp16")
    assert widget.errors["state"] == "ok" and not widget.errors.get("stale")
    assert widget.errors["accuracy"] == pytest.approx(study.error_dict()["accuracy"])


def test_the_pin_of_one_op_is_named_by_the_model_in_every_message(widget, study):
    """Pinning the conv of /conv2/Conv (its op id, as the front end sends it) said "pinned
    '/conv2/Conv'", but unpinning it said "unpinned '#3'" and the selection panel "pinned (#3) to
    arm": the config's key, not a name in the model."""
    request(widget, type="pin", node=3, processor="arm")
    assert widget.status["text"].startswith("pinned '/conv2/Conv' to arm \u2192")
    (pin,) = widget.controls["pins"]
    assert pin["node"] == "#3" and pin["label"] == "/conv2/Conv" and pin["ops"] == [3]
    request(widget, type="layer_bits", node=pin["node"], bits="int16")
    assert widget.status["text"].startswith("'/conv2/Conv': int16 \u2192"), widget.status["text"]
    (lb,) = widget.controls["layer_bits"]
    assert lb["label"] == "/conv2/Conv"
    request(widget, type="unpin", node=pin["node"])
    assert widget.status["level"] == "ok"
    assert widget.status["text"].startswith("unpinned '/conv2/Conv' \u2192"), widget.status["text"]


def test_the_error_panel_says_what_made_its_figures_stale(widget, study):
    """New data from Python marked the measured error stale as "the config changed since this was
    measured": the config had not changed, the data had."""
    import numpy as np

    if widget.errors["state"] == "missing":
        pytest.skip("this npukit has no Study.error")
    request(widget, type="measure_error")
    assert widget.errors["state"] == "ok" and not widget.errors.get("stale")
    study.set_data(np.random.default_rng(1).random((8, 1, 8, 8), dtype=np.float32))
    assert widget.errors["stale"] is True
    assert widget.errors["stale_text"] == "stale: the data changed since this was measured"
    request(widget, type="bits", processor="dla", bits="fp16")
    assert widget.errors["stale_text"] == "stale: the config and the data changed since this was measured"
    request(widget, type="measure_error")
    assert not widget.errors.get("stale") and not widget.errors.get("stale_text")
    request(widget, type="bits", processor="dla", bits=None)
    assert widget.errors["stale_text"] == "stale: the config changed since this was measured"


def test_the_selection_shows_the_pin_and_width_that_decide_an_op(widget, study):
    """A node pinned (or given a width) whole and one of its ops pinned apart: the op follows its own
    pin, but the selection panel, which shows the first entry whose ops include the op, showed the
    node's ("pinned (/conv1/Conv) to arm" on an op running on the DLA) and its unpin button
    removed the node's pin.  Each entry lists the ops it decides."""
    study.pin("/conv1/Conv", "arm")
    study.pin("/conv1/Conv/add", "dla")
    study.set_bits("fp16", layer="/conv1/Conv")
    study.set_bits("int8", layer="/conv1/Conv/add")
    assert study.placement["processor"][1] == "dla" and study.op_bits()[1] == "int8"

    def first(entries, op):  # what the front end's _pinOf / _layerBitsOf pick
        return next(e for e in entries if op in e["ops"])

    c = widget.controls
    assert first(c["pins"], 0)["processor"] == "arm" and first(c["pins"], 1)["processor"] == "dla"
    assert first(c["layer_bits"], 0)["bits"] == "fp16" and first(c["layer_bits"], 1)["bits"] == "int8"
    request(widget, type="unpin", node=first(c["pins"], 1)["node"])  # the unpin button of op 1
    assert dict(study.config.pins) == {"/conv1/Conv": "arm"}


@pytest.mark.parametrize("placement", ["cost", "first-fit"])
def test_a_layer_width_that_has_no_effect_says_so_in_the_status_line(placement):
    """study.set_bits(w, layer=...) warns when the width has no effect (the op's values never leave
    its kernel); the same edit in the widget said only "ok ... latency 25.66 us -> 25.66 us": the
    warning went to the kernel's log, or (under the cost policy, made on a draft) nowhere."""
    import warnings

    import npukit

    s = npukit.Study(DIGITS, "arm-dsp-dla", placement=placement)
    s.set_bits("int8", layer="/conv1/Conv/add")  # the bias add inside the conv's kernel (at the kernel's width)
    w = recording_widget(s)  # (its layer-width menu on op 1 now names "/conv1/Conv/add")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said in the status line, not in the kernel's log
            request(w, type="layer_bits", node="/conv1/Conv/add", bits="fp16")
        assert w.status["level"] == "ok", w.status["text"]
        text = w.status["text"]
        assert text.startswith("'/conv1/Conv/add': fp16 \u2192 latency "), text
        assert text.endswith("; layer '/conv1/Conv/add' at fp16 has no effect: its values never leave the kernel "
                             "of '/conv1/Conv' (conv2d), where nothing rounds, stores or converts them, so it runs "
                             "at that kernel's width (int8)"), text  # fmt: skip
        request(w, type="layer_bits", node="/conv1/Conv", bits="fp16")  # the whole layer: it has an effect
        assert "no effect" not in w.status["text"]
    finally:
        w.close()


def test_a_plan_the_runtime_would_refuse_is_flagged():
    """The VSI NPU takes one partition (max_partitions = 1): under first-fit a pin that splits its ops
    in two gives a plan its runtime would refuse.  The CLI says so, study.partition_limits says so,
    export() and build() warn; the widget showed the plan's figures without a word."""
    import npukit

    s = npukit.Study(REPO / "sample_models" / "mobilenet_v1_025_int8.tflite", "vsi-npu", placement="first-fit")
    w = recording_widget(s)
    try:
        assert w.placement["limits"] == []
        request(w, type="pin", node=26, processor="a53")
        assert w.placement["limits"] == list(s.partition_limits) != []
        assert w.placement["limits"][0].startswith("npu is given 2 offloaded partitions (0, 2), and its runtime "
                                                   "takes at most 1 (processors.npu.max_partitions = 1)")  # fmt: skip
        request(w, type="placement", placement="cost")  # the cost policy holds the plan to the limit
        assert w.placement["limits"] == [] == list(s.partition_limits)
    finally:
        w.close()
