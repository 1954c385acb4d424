"""The widget's Code tab and "build and run", Python side, without a browser: the code is sent only
when asked, the lines that run each op are the manifest's, the changed lines are difflib's against
the previous version, and a build runs in a thread while the widget keeps answering requests.
(The messages are recorded at the widget's comm, as in test_widget_python.py.)
"""

from __future__ import annotations

import difflib

import pytest

from .lab import REPO, recording_widget, request

DIGITS = REPO / "sample_models" / "digits_cnn.onnx"
CONV2 = 3  # op id of /conv2/Conv in the digits CNN


@pytest.fixture
def study():
    import npukit

    return npukit.Study(DIGITS, "arm-dsp-dla", placement="first-fit")  # one pin moves one call


@pytest.fixture
def widget(study):
    w = recording_widget(study)
    yield w
    if w.build_job is not None:
        w.build_job.wait(120)
    w.close()


def lines_of(w, path: str, op: int) -> list[int]:
    c = w.code
    flat = c["calls"][op]
    return [flat[k + 1] for k in range(0, len(flat), 2) if c["paths"][flat[k]] == path]


def rebuild_old(new: str, diff: dict) -> list[str]:
    """The previous version from the new text and the diff (unchanged lines + removed lines)."""
    changed = set(diff["changed"])
    removed = {after: lines for after, lines, more in diff["removed"]}
    assert all(more == 0 for _, _, more in diff["removed"])
    old = list(removed.get(0, []))
    for n, line in enumerate(new.splitlines(), start=1):
        if n not in changed:
            old.append(line)
        old.extend(removed.get(n, []))
    return old


def test_code_is_sent_only_when_asked(widget, study):
    assert widget.code == {}
    states = [
        request(widget, type="support", processor="dla", op="conv2d", enabled=False),
        request(widget, type="bits", processor="dla", bits="fp16"),
        request(widget, type="reset"),
    ]
    assert all("code" not in s for s in states)
    before = dict(widget.status)
    state = request(widget, type="code")
    assert set(state) == {"code", "status"}
    c = widget.code
    files = study.code
    assert c["paths"] == sorted(files) and [e["path"] for e in c["tree"]] == sorted(files)
    assert c["path"] == "src/model.c" and c["text"] == files["src/model.c"] and not c["truncated"]
    assert c["lines"] == files["src/model.c"].count("\n")
    assert c["diff"] is False and c["changed"] == [] and c["removed"] == []
    # the key tells the front end which config this code is of; fetching code keeps the last message,
    # and the time shown beside it is that message's (the reset's), not the code generation's
    assert c["key"] == widget.status["code_key"]
    assert (widget.status["level"], widget.status["text"], widget.status["ms"]) == (before["level"], before["text"], before["ms"])
    # every op's lines: the manifest's marker lines, each with the statement under it
    text = {p: files[p].splitlines() for p in files}
    for o in study.project.manifest["ops"]:
        flat = c["calls"][o["op_id"]]
        got = [[c["paths"][flat[k]], flat[k + 1]] for k in range(0, len(flat), 2)]
        want = []
        for f, n in o["calls"]:
            want.append([f, n])
            assert text[f][n - 1].strip().startswith("/* [op")
            k = n + 1
            while "[op" not in text[f][k - 1] and not text[f][k - 1].rstrip().endswith(";"):
                k += 1
            if "[op" not in text[f][k - 1]:
                want += [[f, j] for j in range(n + 1, k + 1)]
        assert got == [x for i, x in enumerate(want) if x not in want[:i]]
    assert sum(len(x) for x in c["calls"]) > 2 * sum(len(o["calls"]) for o in study.project.manifest["ops"])
    assert c["target"]["name"] == "aarch64-linux" and c["target"]["available"] is True  # the profile's target


def test_a_selected_node_opens_the_file_of_its_call(widget, study):
    request(widget, type="code", follow=CONV2)
    c = widget.code
    assert c["path"] == "src/partitions_nvdla.c"
    lines = lines_of(widget, c["path"], CONV2)
    assert lines == [30, 31, 32, 33]
    text = c["text"].splitlines()
    assert text[30 - 1] == "    /* [ops 3,4,5] kernel dla.conv2d_add_relu: /conv2/Conv, /conv2/Conv/add, /relu2/Relu */"
    assert text[31 - 1].startswith("    nvdla_conv2d_params conv_2 = {1, 1, 1, 1,")
    assert text[32 - 1] == "    /* [op 3] /conv2/Conv (conv2d, fused bias, clamp [0, inf]) */"
    assert text[33 - 1] == "    if ((st = nvdla_conv2d(&t_t2, &t_t5, &conv_2)) != 0) return st;"
    # the function that holds it: the DLA wrapper, defined on line 12
    assert c["where"][CONV2] == [c["paths"].index(c["path"]), 12, "partition_dla_0"]
    assert text[12 - 1] == "int32_t partition_dla_0(uint8_t *arena) {"
    # a file asked for by path, and a bad one falls back to the last file shown
    request(widget, type="code", path="include/npukit_model.h")
    assert widget.code["path"] == "include/npukit_model.h"
    request(widget, type="code", path="no/such/file.c")
    assert widget.code["path"] == "include/npukit_model.h"


def test_pin_moves_the_call_and_the_diff_shows_it(widget, study):
    request(widget, type="code", follow=CONV2)
    old = dict(study.code)
    request(widget, type="pin", node=CONV2, processor="arm")
    assert widget.code["key"] != widget.status["code_key"]  # what the tab shows is out of date
    request(widget, type="code", path="src/partitions_nvdla.c", follow=CONV2)
    new = study.code
    c = widget.code
    # the call moved from the DLA's wrapper to the entry point, which now calls TVM's host C
    assert c["path"] == "src/model.c" and c["diff"] is True
    marker, line = lines_of(widget, "src/model.c", CONV2)
    assert new["src/model.c"].splitlines()[marker - 1] == "    /* [ops 3] host: /conv2/Conv */"
    assert new["src/model.c"].splitlines()[line - 1] == (
        "    if ((st = npk_host_0((const float *)(npukit_arena + 4096), c_conv2_weight, "
        "(float *)(npukit_arena + 0))) != 0) return npukit__failed(st, \"host kernel npk_host_0 (/conv2/Conv)\");"
    )
    assert marker in c["changed"] and line in c["changed"]
    # it now runs in TVM's host C: the function and the line that defines it
    f, n, fn = c["where"][CONV2]
    assert (c["paths"][f], fn) == ("host/npk_host.c", "npk_host_0")
    assert new["host/npk_host.c"].splitlines()[n - 1].startswith("int32_t npk_host_0(const float* in0")
    # the changed lines are difflib's, and with the removed lines they give back the old file
    a, b = old["src/model.c"].splitlines(), new["src/model.c"].splitlines()
    want = [j + 1 for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
            if tag != "equal" for j in range(j1, j2)]  # fmt: skip
    assert c["changed"] == want
    assert rebuild_old(new["src/model.c"], c) == a
    tree = {e["path"]: e["change"] for e in c["tree"]}
    assert tree["host/npk_host.c"] == "added" and tree["src/model.c"] == "changed"
    assert tree["kernels/npk_ref_conv.c"] == ""
    # the DLA wrapper: the old conv2 call is among the removed lines
    request(widget, type="code", path="src/partitions_nvdla.c")
    c = widget.code
    removed = [line for _, lines, _ in c["removed"] for line in lines]
    assert "    if ((st = nvdla_conv2d(&t_t2, &t_t5, &conv_2)) != 0) return st;" in removed
    assert rebuild_old(new["src/partitions_nvdla.c"], c) == old["src/partitions_nvdla.c"].splitlines()
    # a file that only came with the edit is all new
    request(widget, type="code", path="host/npk_host.c")
    c = widget.code
    assert c["added_file"] is True and c["changed"] == list(range(1, c["lines"] + 1))
    # asking again without an edit: still marked against the same previous version
    request(widget, type="code", path="src/model.c")
    assert widget.code["changed"] == want
    # unpin: marked against the pinned version now
    request(widget, type="unpin", node=f"#{CONV2}")
    request(widget, type="code", path="src/model.c", follow=CONV2)
    c = widget.code
    assert c["path"] == "src/partitions_nvdla.c" and lines_of(widget, c["path"], CONV2) == [30, 31, 32, 33]
    assert rebuild_old(c["text"], c) == new["src/partitions_nvdla.c"].splitlines()
    assert {e["path"]: e["change"] for e in c["tree"]}["host/npk_host.c"] == "removed"


def test_build_and_run_in_a_thread_while_the_widget_keeps_working(widget, study):
    state = request(widget, type="build")
    assert widget.build["state"] == "running" and state["build"]["state"] == "running"
    assert widget.status["level"] == "info" and widget.status["text"].startswith("building and running")
    job = widget.build_job
    assert job.running
    # an edit while it builds: answered at once; the build is of the config of the click
    state = request(widget, type="pin", node=CONV2, processor="arm")
    assert widget.status["level"] == "ok" and "build" not in state
    assert job.running, "the build finished before the edit; the test proves nothing"
    n = len(widget.sent)
    view = job.wait(120)
    assert view is not None and widget.build is view
    updates = [m for m in widget.sent[n:] if m["data"]["method"] == "update"]
    assert len(updates) == 1 and set(updates[0]["data"]["state"]) == {"build", "status"}
    assert view["config"] == {"placement": "first-fit"} and view["state"] == "ok", view
    assert view["key"] != widget.status["code_key"]  # the front end says "for an earlier config"
    # the same figures as study.build() of that config, as rows
    from npukit.ui.codeview import build_view

    first = study.copy()
    first.unpin(CONV2)  # the config of the click
    direct = build_view(first.build())
    assert {k: view[k] for k in direct} == direct
    (run,) = view["runs"]
    (out,) = run["outputs"]
    # softmax on the DSP at int16: the program's probabilities are within a few int16 steps
    assert run["name"] == "host" and run["kind"] == "close" and out["argmax_agreement"] == 1.0
    assert 0 < out["max_abs"] < 1e-3
    assert run["verdict"] == f"matches the simulation (same top-1, max error {out['max_rel']:.2%} of the largest value)"
    assert view["samples"] == 16
    assert {k: v for k, _, v in view["memory"]} == first.project.manifest["memory"]
    assert [label for _, label, _ in view["memory"]] == [
        "arena (working memory)",
        "lower bound (live tensors at the peak)",
        "weights (constant memory)",
    ]
    secs = {k: v for k, _, v in view["sections"]}
    assert secs["text"] > 0 and secs["bss"] >= first.project.manifest["memory"]["arena_bytes"]
    assert widget.status["seq"] is None and widget.status["level"] == "ok"
    assert widget.status["text"].startswith("build and run (16 inputs, ")
    assert widget.status["text"].endswith(f"host: {run['verdict']}; arena 2,048 B")

    # the pinned config (the conv on the host's float path) is bit-exact
    request(widget, type="build")
    view = widget.build_job.wait(120)
    assert view["config"] == {"pins": {"#3": "arm"}, "placement": "first-fit"} and view["key"] == widget.status["code_key"]
    assert view["runs"][0]["kind"] == "exact" and view["runs"][0]["verdict"] == "bit-exact with the simulation"


def test_a_failed_build_shows_the_compilers_messages(widget, study, monkeypatch):
    monkeypatch.setenv("CFLAGS", "-include npk_no_such_header.h")
    request(widget, type="build")
    view = widget.build_job.wait(120)
    assert view["state"] == "failed"
    assert "npk_no_such_header.h: No such file or directory" in view["messages"]
    assert "make" in view["messages"] and "failed" in view["messages"]
    assert widget.status["level"] == "error" and widget.status["text"].startswith("build and run failed: ")
    # and the next build works
    monkeypatch.delenv("CFLAGS")
    request(widget, type="build")
    assert widget.build_job.wait(120)["state"] == "ok"


def test_one_build_at_a_time(widget):
    request(widget, type="build")
    job = widget.build_job
    request(widget, type="build")
    assert widget.build_job is job
    assert widget.status["text"] == "a build is already running; its result will show in the Code tab"
    job.wait(120)
