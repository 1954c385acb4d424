"""Issues 13 and 14, the widget's Python side (no browser): the placement-policy request, the
support rules the checkboxes show, the error panel's sample counts, and the interim "working:"
lines a long request sends while its traits are held."""

from __future__ import annotations

import numpy as np
import pytest

from npukit.ui.requests import uj, us

from .lab import REPO

SAMPLES = REPO / "sample_models"


def attach(study):
    from npukit.ui import StudyWidget

    w = StudyWidget(study)
    w.sent = []
    w.comm.send = lambda data=None, metadata=None, buffers=None: w.sent.append(data)
    return w


def request(w, **msg) -> tuple[dict, list[dict]]:
    """One request as the front end sends it: (the one state update, the custom messages before it)."""
    n = len(w.sent)
    seq = 500 + n
    w._on_msg(w, {"seq": seq, **msg}, [])
    job = w.pending
    if job is not None:  # answered at once with first-fit estimates, then when placed by cost
        job.wait(600)
    new = w.sent[n:]
    updates = [m for m in new if m["method"] == "update"]
    assert 1 <= len(updates) <= 2 and new[-1] is updates[-1]
    assert w.status["seq"] == seq
    return updates[-1]["state"], [m["content"] for m in new if m["method"] == "custom"]


@pytest.fixture
def digits():
    import npukit

    w = attach(npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla"))
    yield w
    w.close()


def test_placement_policy_request(digits):
    s = digits.study
    assert digits.controls["placement"] == "cost" and digits.controls["placements"] == ["cost", "first-fit"]
    before = dict(s.totals)
    assert s.placement["processor"][13] == "arm"  # softmax: the cost model keeps it on the host
    state, progress = request(digits, type="placement", placement="first-fit")
    assert progress == []  # a short edit says nothing until its answer
    assert {"placement", "values", "controls", "status"} <= set(state)
    assert s.config.placement == "first-fit" and digits.controls["placement"] == "first-fit"
    assert s.placement["processor"][13] == "dsp"  # first-fit: the DSP accepts softmax, so it takes it
    after = s.totals
    assert digits.status["level"] == "ok"
    assert digits.status["text"] == (
        f"placement policy first-fit (was cost) \u2192 latency {us(before['latency_us'])} \u2192 "
        f"{us(after['latency_us'])}, energy {uj(before['energy_uj'])} \u2192 {uj(after['energy_uj'])}, "
        f"{after['partitions']} partitions"
    )
    request(digits, type="placement", placement="best")
    assert digits.status["level"] == "error"
    assert digits.status["text"] == "unknown placement policy 'best'; one of 'cost', 'first-fit'"
    assert s.config.placement == "first-fit"
    request(digits, type="reset")  # (the edits go, the policy stays)
    assert s.config.placement == "first-fit" and digits.controls["placement"] == "first-fit"
    request(digits, type="placement", placement="cost")
    assert s.config.placement == "cost" and digits.controls["placement"] == "cost"


def test_the_status_line_writes_figures_as_the_header_does():
    """The status line's "a -> b" figures are written as widgets/src/format.js writes the header's
    (its ``us`` and ``uj``): the same energy showed 17.412 in one and 17.4123 in the other."""
    assert [us(x) for x in (1142.04, 64.9213, 3.14159, 0.0012, 0.0)] == [
        "1,142.0 us", "64.92 us", "3.142 us", "1.20e-3 us", "0.000 us"]  # fmt: skip
    assert [uj(x) for x in (17.41234, 17.4, 2.0, 0.0005, 1234.56789, 12345678.0, float("nan"))] == [
        "17.4123 uJ", "17.4 uJ", "2 uJ", "5.00e-4 uJ", "1,234.5679 uJ", "1.23e+7 uJ", "\u2013"]  # fmt: skip


def test_support_rules_are_empty_when_the_rules_accept_every_op(digits):
    assert digits.controls["rules"] == {"dsp": {}, "dla": {}}


@pytest.fixture(scope="module")
def transformer():
    import npukit

    return npukit.Study(SAMPLES / "transformer_encoder.onnx", "arm-dsp-dla")


def test_support_rules_name_the_rule_that_keeps_ops_off(transformer):
    """The DLA's add and matmul are enabled, but its rank rules refuse every op of the
    transformer's rank-3 tensors: the checkbox says so, in the rules' own words."""
    from npukit.ui.viewmodel import controls_model

    c = controls_model(transformer)
    assert c["support"]["dla"]["matmul"] is True and c["support"]["dla"]["add"] is True
    assert c["rules"]["dsp"] == {}
    assert c["rules"]["dla"] == {
        "add": {"n": 320, "ok": 0, "text": "add: 0 of 320 ops accepted: rank-3 tensor, supports ranks 2, 4"},
        "matmul": {"n": 320, "ok": 0,
                   "text": "matmul: 0 of 320 ops accepted: rank-3 tensor, supports ranks 2 (and 1 other reason)"},
        "reshape": {"n": 160, "ok": 40, "text": "reshape: 40 of 160 ops accepted: rank-3 tensor, supports ranks 4"},
    }  # fmt: skip
    # the counts are the verdicts' own: every matmul refused by dla's rank rule, the most common
    # refusal first (240 rank-3 matmuls; the "other reason" is the 80 rank-4 ones)
    pl = transformer.placement
    mm = pl[pl["op"].str.endswith("matmul")]
    assert len(mm) == 320 and mm["dla"].str.contains("supports ranks 2", regex=False).all()
    assert (
        mm["dla"].str.startswith("rank-3 tensor").sum() == 240 and mm["dla"].str.startswith("rank-4 tensor").sum() == 80
    )
    # a user's "off" does not hide what the rules say
    transformer.set_support("dla", "matmul", False)
    try:
        assert controls_model(transformer)["rules"]["dla"]["matmul"]["ok"] == 0
    finally:
        transformer.set_support("dla", "matmul", True)


def test_error_panel_says_how_many_samples_the_per_op_figures_use(digits):
    request(digits, type="measure_error")
    e = digits.errors
    assert e["state"] == "ok"
    assert (e["samples"], e["per_op_samples"]) == (450, 64)
    assert (
        e["per_op_note"] == "per-op figures over the first 64 of the 450 samples (every op's output is kept for them)"
    )
    # with fewer samples than the per-op limit both figures are over the same samples
    x = np.random.default_rng(0).standard_normal((20, 1, 8, 8)).astype("float32")
    digits.study.set_data(x)
    request(digits, type="measure_error")
    e = digits.errors
    assert (e["samples"], e["per_op_samples"]) == (20, 20)
    assert e["per_op_note"] == "per-op figures over all 20 samples, like the outputs above"


def test_a_long_request_sends_working_lines_before_its_answer(digits, monkeypatch):
    """Every step counts as long here (delay 0): the measurement's steps report as they run, as
    custom messages (the traits are held until the request ends), then the one update."""
    from npukit import progress

    x = np.random.default_rng(1).standard_normal((90, 1, 8, 8)).astype("float32")
    digits.study.set_data(x)  # new data: calibration and the fp32 reference run again
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    _state, lines = request(digits, type="measure_error")
    seqs = {m["seq"] for m in lines}
    assert seqs == {digits.status["seq"]} and all(m["type"] == "progress" for m in lines)
    texts = [m["text"] for m in lines]
    assert texts[0].startswith("measuring error\u2026 ")  # the request's own step first
    for step in ("calibrating ranges: ", "fp32 reference: ", "measuring error: "):
        assert any(t and t.startswith(step) for t in texts), (step, texts)
    assert any(t and t.startswith("measuring error: ") and t.endswith("/90 samples") for t in texts)
    assert digits.status["text"] == "error measured"


def test_an_edit_on_a_large_model_says_it_is_placing_ops(transformer, monkeypatch):
    from npukit import progress

    w = attach(transformer)
    try:
        monkeypatch.setattr(progress, "DELAY_S", 0.0)
        _state, lines = request(w, type="support", processor="dsp", op="softmax", enabled=False)
        assert lines and lines[0]["text"].startswith("placing ops (cost policy)\u2026 ")
        monkeypatch.setattr(progress, "DELAY_S", 60.0)
        _state, lines = request(w, type="support", processor="dsp", op="softmax", enabled=True)
        assert lines == []  # under the delay: silent
    finally:
        transformer.reset()
        w.close()


def test_exports_go_to_a_directory_git_ignores(digits, tmp_path, monkeypatch):
    """The Export tab's default paths are under npukit_out/, which the repository ignores both at
    its root and in notebooks/ (where the notebooks' kernels run); an export there writes it."""
    import subprocess

    paths = digits.options["export_paths"]
    assert paths == {"model_explorer": "npukit_out/model_explorer", "annotated_onnx": "npukit_out/annotated.onnx"}
    for base in ("", "notebooks/"):
        for p in paths.values():
            r = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", f"{base}{p}/file"], check=False)
            assert r.returncode == 0, f"{base}{p} is not ignored by git"
    monkeypatch.chdir(tmp_path)
    request(digits, type="export", what="annotated_onnx", path=paths["annotated_onnx"])
    assert digits.status["level"] == "ok", digits.status["text"]
    assert digits.status["text"] == "annotated ONNX: wrote npukit_out/annotated.onnx"
    assert (tmp_path / "npukit_out" / "annotated.onnx").is_file()
    request(digits, type="export", what="model_explorer", path=paths["model_explorer"])
    assert digits.status["level"] == "ok", digits.status["text"]
    assert (tmp_path / "npukit_out" / "model_explorer").is_dir()
