"""Issue 14, "progress on long steps" in the widget: the steps that show a bar in a terminal report
lines of text to a listener registered for the current context (npukit.progress.listen); short
steps stay silent; the innermost running step speaks; a step's end hands the line back."""

from __future__ import annotations

import threading
import time

from npukit import progress


def record(**kw):
    lines: list[str | None] = []
    return lines, progress.listen(lines.append, **kw)


def test_a_counted_step_reports_each_advance_once_it_is_long():
    lines, listening = record(delay=0, every=0)
    with listening, progress.Progress(3, "npukit: measuring error", unit="sample") as bar:
        for i in range(3):
            bar(i)
    assert lines == [
        "measuring error: 1/3 samples",
        "measuring error: 2/3 samples",
        "measuring error: 3/3 samples",
        None,
    ]


def test_short_steps_stay_silent():
    lines, listening = record()  # the default delay: DELAY_S = 1 s
    with listening, progress.step("placing ops (cost policy)"), progress.Progress(100, "npukit: importing") as bar:
        for i in range(100):
            bar(i)
    assert lines == []


def test_reports_are_throttled():
    lines, listening = record(delay=0, every=60)
    with listening, progress.Progress(1000, "npukit: importing") as bar:
        for i in range(1000):
            bar(i)
    assert lines == ["importing: 1/1000 ops", None]


def test_the_innermost_step_speaks_and_the_outer_one_resumes():
    lines, listening = record(delay=0, every=0)
    with listening, progress.step("measuring error"):
        time.sleep(0.05)  # the outer step's clock reports first
        with progress.Progress(2, "npukit: calibrating ranges", unit="sample") as bar:
            bar(0)
            bar(1)
    assert lines[0] == "measuring error\u2026 0 s"
    assert lines[1:4] == [
        "calibrating ranges: 1/2 samples",
        "calibrating ranges: 2/2 samples",
        "measuring error\u2026 0 s",
    ]
    assert lines[-1] is None


def test_a_request_of_short_steps_reports_once_it_is_long_as_a_whole():
    """Each inner step is shorter than the delay, but the request around them is not."""
    lines, listening = record(delay=0.2, every=0)
    with listening, progress.step("measuring error"):
        for name in ("calibrating ranges", "fp32 reference", "measuring error"):
            with progress.Progress(3, f"npukit: {name}", unit="sample") as bar:
                for i in range(3):
                    time.sleep(0.04)
                    bar(i)
    said = [x for x in lines if x and ":" in x]
    assert said[0].startswith("fp32 reference: ") or said[0].startswith("calibrating ranges: ")
    assert said[-1] == "measuring error: 3/3 samples"
    assert not any(x.startswith("calibrating ranges: 1/") for x in said)  # before the delay


def test_only_the_listening_context_hears():
    lines, listening = record(delay=0, every=0)
    other: list[str] = []

    def elsewhere():  # another thread has its own context: no listener
        with progress.Progress(2, "npukit: importing") as bar:
            bar(0)
            bar(1)
        other.append("done")

    with listening:
        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
    with progress.Progress(2, "npukit: importing") as bar:  # after the block: nobody listens
        bar(0)
    assert other == ["done"] and lines == []


def test_a_listeners_failure_does_not_stop_the_step():
    def boom(_line):
        raise RuntimeError("the widget's comm is closed")

    with progress.listen(boom, delay=0, every=0), progress.Progress(2, "npukit: importing") as bar:
        bar(0)
        bar(1)


def test_step_shows_no_bar(capfd, monkeypatch):
    """progress.step() is for listeners only: no tqdm bar even where bars show."""
    monkeypatch.setenv("NPUKIT_PROGRESS", "1")
    with progress.step("placing ops (cost policy)", delay=0):
        time.sleep(0.6)
    assert capfd.readouterr().err == ""
    with progress.phase("npukit: compiling the simulation", delay=0):
        time.sleep(0.6)
    assert "compiling the simulation" in capfd.readouterr().err
