"""Issue 15, the widget's Python side (no browser): an edit under the cost policy is answered at
once with first-fit estimates, marked as still placing, and then with its cost placement from a
thread; edits made meanwhile build on it; other requests settle it first."""

from __future__ import annotations

import dataclasses
import threading
from contextlib import contextmanager

import pytest

from npukit.ui.codeview import code_key

from .lab import REPO
from .test_widget_polish_python import attach

SAMPLES = REPO / "sample_models"


@pytest.fixture
def held(monkeypatch):
    """Placements wait for ``release`` (so the test sees the first answer before the second)."""
    from npukit import pipeline
    from npukit.ui import pending

    gate = threading.Event()
    run = pending.Placing._run

    def slow(self):
        gate.wait(120)
        run(self)

    monkeypatch.setattr(pending.Placing, "_run", slow)
    pipeline.clear_caches()  # every placement below is computed, never a cache hit
    yield gate
    gate.set()


@contextmanager
def widget(sample: str):
    """(Study on arm-dsp-dla under the cost policy, its widget recording what it sends)."""
    import npukit

    s = npukit.Study(SAMPLES / sample, "arm-dsp-dla")
    w = attach(s)
    try:
        yield s, w
    finally:
        w.close()


def updates(w, n0: int) -> list[dict]:
    return [m["state"] for m in w.sent[n0:] if m["method"] == "update"]


def test_a_cost_edit_shows_first_fit_at_once_then_its_placement(held):
    from npukit import pipeline
    from npukit.opset import canonical
    from npukit.ui import viewmodel as vm

    with widget("mobilenet_v1_025_int8.tflite") as (s, w):
        old = s.config
        n0 = len(w.sent)
        w._on_msg(w, {"seq": 7, "type": "support", "processor": "dla", "op": "clip", "enabled": False}, [])
        first = updates(w, n0)
        assert len(first) == 1 and w.pending is not None
        # the first answer answers no request: the front end stays "working"; it says why
        assert w.status["seq"] is None and w.status["text"].startswith("placing ops by cost (first-fit estimates")
        assert s.config == old  # the Study switches only when its placement is ready
        new = old.with_support("dla", canonical("clip"), False)
        ff = pipeline.evaluate(s._model, s.soc, dataclasses.replace(new, placement="first-fit"))
        assert w.values["totals"]["latency_us"] == pytest.approx(ff.totals["latency_us"], rel=1e-12)
        assert w.controls["placement"] == "cost" and ("dla", canonical("clip")) in {
            tuple(e.split(":")) for e in w.controls["edited"]
        }
        assert w.placement["key"].endswith("(first-fit estimates meanwhile)")  # clip ran on the DLA
        job = w.pending
        held.set()
        job.wait(120)
        final = updates(w, n0)
        assert len(final) == 2 and w.pending is None
        assert s.config == new and w.status["seq"] == 7 and w.status["level"] == "ok"
        assert w.status["text"].startswith("dla: clip off \u2192 latency ")
        assert w.values["totals"]["latency_us"] == pytest.approx(s.totals["latency_us"], rel=1e-12)
        assert w.placement == vm.placement_model(s, pack=True) and w.values == vm.values_model(s, pack=True)


def test_a_bit_width_edit_is_first_estimated_on_the_placement_on_screen(held):
    """Nothing moves on the screen until the cost placement of the new widths is known."""
    from npukit import pipeline
    from npukit.ui import viewmodel as vm

    with widget("mobilenet_v1_025_int8.tflite") as (s, w):
        part = s.result.partitioned
        before = {k: v for k, v in w.placement.items() if k != "key"}
        w._on_msg(w, {"seq": 3, "type": "bits", "processor": "dla", "bits": "fp16"}, [])
        job = w.pending
        assert job is not None and w.status["text"].startswith(
            "placing ops by cost (estimates on the current placement meanwhile)"
        )
        assert {k: v for k, v in w.placement.items() if k != "key"} == before
        want = pipeline.estimate(s._model, s.soc, s.config.with_bits("fp16", processor="dla"), part)
        assert w.values["totals"] == vm.values_model(pending_view(s, want), pack=True)["totals"]
        assert w.values["totals"]["latency_us"] == want.totals["latency_us"]
        held.set()
        job.wait(120)
        assert dict(s.config.bits) == {"dla": "fp16"} and w.status["seq"] == 3
        assert w.values == vm.values_model(s, pack=True)


def pending_view(s, result):
    from npukit.ui.pending import Draft

    return Draft(s, result.config, result)


def test_edits_made_meanwhile_build_on_the_pending_one(held):
    from npukit.opset import canonical
    from npukit.ui.requests import us

    with widget("mobilenet_v1_025_int8.tflite") as (s, w):
        old, settled = s.config, s.totals["latency_us"]
        n0 = len(w.sent)
        w._on_msg(w, {"seq": 1, "type": "support", "processor": "dla", "op": "clip", "enabled": False}, [])
        first = w.pending
        assert w.values["totals"]["latency_us"] != settled  # (on screen: the first edit's provisional figures)
        w._on_msg(w, {"seq": 2, "type": "bits", "processor": "dsp", "bits": "int16"}, [])
        second = w.pending
        assert second is not None and second is not first and w.status["seq"] is None
        held.set()
        first.wait(120)
        second.wait(120)
        want = old.with_support("dla", canonical("clip"), False).with_bits("int16", processor="dsp")
        assert s.config == want and w.status["seq"] == 2 and w.status["level"] == "ok"
        # three answers: two provisional ones and the last edit's; the first placement's was dropped
        assert [u["status"]["seq"] for u in updates(w, n0)] == [None, None, 2]
        # its "before" is the last figure reported as settled, not the first edit's provisional one
        assert w.status["text"].startswith(f"dsp: int16 \u2192 latency {us(settled)} \u2192 {us(s.totals['latency_us'])},")


def test_another_request_settles_the_pending_edit_first(held):
    """A request that reads the Study (here the generated code) waits for the pending placement
    (its thread's result, not a second computation) and acts on the edited Study."""
    with widget("digits_cnn.onnx") as (s, w):
        node = s.graph.ops[0].source
        w._on_msg(w, {"seq": 1, "type": "pin", "node": node, "processor": "arm"}, [])
        job = w.pending
        assert job is not None
        held.set()
        w._on_msg(w, {"seq": 2, "type": "code"}, [])
        assert w.pending is None and job.computed.is_set()
        assert dict(s.config.pins) == {node: "arm"} and s.config.placement == "cost"
        assert w.status["seq"] == 2 and w.code["key"] == code_key(s)


def test_an_edit_from_python_replaces_a_pending_one(held):
    with widget("digits_cnn.onnx") as (s, w):
        w._on_msg(w, {"seq": 1, "type": "support", "processor": "dsp", "op": "softmax", "enabled": False}, [])
        job = w.pending
        assert job is not None
        s.set_bits("int16", processor="dsp")  # another cell
        text = "updated from Python (it replaced the widget's pending edit)"
        assert w.pending is None and w.status["text"] == text
        assert w.status["seq"] == 1  # the request is answered: the front end stops "working"
        held.set()
        job.wait(120)
        assert not s.config.disabled  # the toggle was replaced by the edit from Python
        assert dict(s.config.bits) == {"dsp": "int16"} and w.status["text"] == text


def test_new_data_from_python_keeps_the_pending_edit(held):
    """``set_data`` changes no config: the placement goes on and answers its request."""
    import numpy as np

    with widget("digits_cnn.onnx") as (s, w):
        w._on_msg(w, {"seq": 4, "type": "support", "processor": "dsp", "op": "softmax", "enabled": False}, [])
        job = w.pending
        s.set_data(np.random.default_rng(0).standard_normal((4, 1, 8, 8)).astype("float32"))
        assert w.pending is job and w.status["seq"] is None and w.status["text"] == "updated from Python"
        held.set()
        job.wait(120)
        assert s.config.disabled and w.status["seq"] == 4 and w.status["level"] == "ok"


def test_a_bad_edit_while_placing_keeps_the_view_working(held):
    """An edit that fails while a placement runs says why but answers nothing yet: the view stays
    on the pending edit and the placement's answer answers both requests, the refusal first (it was
    replaced by the placement's "ok": nothing on screen said the edit had failed)."""
    with widget("digits_cnn.onnx") as (s, w):
        w._on_msg(w, {"seq": 5, "type": "support", "processor": "dsp", "op": "softmax", "enabled": False}, [])
        job, controls = w.pending, w.controls
        w._on_msg(w, {"seq": 6, "type": "unpin", "node": s.graph.ops[0].source}, [])
        assert w.status["level"] == "error" and "is not pinned" in w.status["text"]
        assert w.status["seq"] is None and w.pending is job and w.controls == controls
        held.set()
        job.wait(120)
        assert s.config.disabled and w.status["seq"] == 6 and w.status["level"] == "error"
        assert "is not pinned" in w.status["text"] and "(the edit before it stands: dsp: softmax off" in w.status["text"]


def test_switching_to_first_fit_while_placing_does_not_wait_for_the_placement(held):
    with widget("mobilenet_v1_025_int8.tflite") as (s, w):
        w._on_msg(w, {"seq": 1, "type": "support", "processor": "dla", "op": "clip", "enabled": False}, [])
        job = w.pending
        w._on_msg(w, {"seq": 2, "type": "placement", "placement": "first-fit"}, [])
        assert not job.computed.is_set()  # (held: it never ran)
        assert w.pending is None and s.config.placement == "first-fit" and s.config.disabled
        assert w.status["seq"] == 2 and w.status["level"] == "ok"


def test_idle_widths_are_costed_before_the_first_width_edit(monkeypatch):
    """The first click of a processor's width costed every kernel of the placement on screen at it
    (~50 ms on the transformer, 125 ms to the first answer in the browser).  Once the view is shown,
    a thread costs each width each processor runs while the kernel is idle; the first width edit then
    finds its estimate made.  A request stops it; without an event loop it does not start."""
    import asyncio

    import npukit
    from npukit import pipeline
    from npukit.ui import pending

    monkeypatch.setattr(pending.Warmer, "DELAY_S", 0.01)
    pipeline.clear_caches()
    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    w = attach(s)  # (no event loop here: nothing starts)
    assert not w.warmer.thread.is_alive() and not w.warmer.done.is_set()
    w.close()

    async def shown():
        v = attach(s)
        await asyncio.sleep(0.05)
        assert await asyncio.to_thread(v.warmer.done.wait, 120)
        return v

    v = asyncio.run(shown())
    try:
        want = v.warmer.widths()
        assert want and v.warmer.warmed == want  # every width but the current one, processor by processor
        p, b = want[0]
        cfg = dataclasses.replace(s.config, bits=((p, b),))
        part = s.result.partitioned
        key = (s._model.key, s.soc.digest, part.plan, pipeline.op_bits(s._model, s.soc, cfg, part.plan))
        assert pipeline.partitioning.COSTED.get(key) is not None  # the first answer's costs: made
        before = len(v.sent)
        v._on_msg(v, {"seq": 1, "type": "bits", "processor": p, "bits": b}, [])
        assert v.warmer.stopped.is_set() and len(v.sent) > before
    finally:
        if v.pending is not None:
            v.pending.wait(600)
        v.close()


def test_an_edit_refused_while_a_placement_runs_keeps_its_error_when_it_lands(held):
    """The refusal was shown, then the placement's "ok" replaced it a fraction of a second later:
    nothing on screen said the pin had failed."""
    with widget("digits_cnn.onnx") as (s, w):
        w._on_msg(w, {"seq": 1, "type": "support", "processor": "dla", "op": "relu", "enabled": False}, [])
        job = w.pending
        assert job is not None
        w._on_msg(w, {"seq": 2, "type": "pin", "node": "/softmax/Softmax", "processor": "dla"}, [])
        assert w.status["level"] == "error" and "cannot pin '/softmax/Softmax'" in w.status["text"]
        held.set()
        job.wait(120)
        assert w.pending is None and w.status["seq"] == 2 and w.status["level"] == "error"
        assert w.status["text"].startswith("cannot pin '/softmax/Softmax' (softmax) to dla: ")
        assert "(the edit before it stands: dla: relu off \u2192 latency " in w.status["text"]
        assert ("dla", "relu") in s.config.disabled


def test_two_views_of_one_widget_each_see_their_own_requests_answered(held):
    """One widget shown twice (``w`` in two cells): each view numbers its requests from 1 and took
    the status's ``seq`` as the answer to its own.  View A's edit (its 7th request) was pending when
    view B's (its 2nd) replaced it: the answer said seq 2, and A stayed "working" until its next
    request; B, for its part, took A's answers as its own and never showed "working".  The status
    says, per view, the last request it has answered (``acks``)."""
    with widget("mobilenet_v1_025_int8.tflite") as (s, w):
        w._on_msg(w, {"seq": 7, "view": "a", "type": "support", "processor": "dla", "op": "clip", "enabled": False}, [])
        assert w.pending is not None and w.status.get("acks", {}).get("a") is None  # (working in A)
        w._on_msg(w, {"seq": 2, "view": "b", "type": "bits", "processor": "dsp", "bits": "int16"}, [])
        job = w.pending
        held.set()
        job.wait(120)
        assert w.pending is None and w.status["level"] == "ok"
        assert w.status["acks"] == {"a": 7, "b": 2}  # A's edit is settled too: the answer built on it
        w._on_msg(w, {"seq": 8, "view": "a", "type": "code"}, [])
        assert w.status["acks"] == {"a": 8, "b": 2}
