"""Issue 14, exports under faults: an export killed at a random point (SIGKILL) leaves the target
directory either as it was or complete, never a mix; two exports into one directory at once leave one
complete result; the temporary siblings a killed export leaves are cleared by the next export.

The files are a real generated project (the MobileNet sample's, a few MB of weights, so a write takes
long enough to be killed in the middle); each writer is a separate process running the same
``atomic_write_tree`` that ``Study.export`` and ``npukit study --export`` use."""

from __future__ import annotations

import pickle
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES

import npukit

pytestmark = pytest.mark.slow

WRITER = """
import pickle, sys
from npukit.io import atomic_write_tree
files = pickle.load(open(sys.argv[1], "rb"))
print("ready", flush=True)
sys.stdin.readline()
atomic_write_tree(sys.argv[2], files)
print("done", flush=True)
"""


def tree(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """Two different complete exports of one model (the cost and the first-fit placement)."""
    d = tmp_path_factory.mktemp("projects")
    model = SAMPLES / "mobilenet_v1_025_int8.tflite"
    out = []
    for k, placement in enumerate(("cost", "first-fit")):
        files = {k2: v.encode() if isinstance(v, str) else v
                 for k2, v in npukit.Study(model, "arm-dsp-dla", placement=placement).project.files.items()}  # fmt: skip
        path = d / f"p{k}.pickle"
        path.write_bytes(pickle.dumps(files))
        out.append((path, files))
    assert out[0][1] != out[1][1] and sum(len(v) for v in out[0][1].values()) > 1_000_000
    return out


def writer(files: Path, target: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(files), str(target)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert p.stdout.readline() == "ready\n"
    return p


def test_a_killed_export_leaves_the_old_or_the_new_tree(projects, tmp_path):
    (old_p, old), (new_p, new) = projects
    target = tmp_path / "export"
    p = writer(old_p, target)
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.wait(60) == 0 and tree(target) == old
    # how long one uncontended write takes: the kills land anywhere in it (and a bit after)
    t0 = time.perf_counter()
    p = writer(new_p, tmp_path / "timing")
    p.stdin.write("\n")
    p.stdin.flush()
    p.wait(60)
    span = time.perf_counter() - t0
    rng = random.Random(14)
    outcomes = {"old": 0, "new": 0}
    for _trial in range(50):
        before = tree(target)
        p = writer(new_p if before == old else old_p, target)
        p.stdin.write("\n")
        p.stdin.flush()
        time.sleep(rng.uniform(0, span * 1.2))
        p.send_signal(signal.SIGKILL)
        p.wait(60)
        after = tree(target)
        assert after in (old, new), "a killed export left a mix of two trees"
        outcomes["old" if after == before else "new"] += 1
    # the kills did land mid-write (kept the old tree) and some writes finished first
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes
    # the next export clears what the killed ones left behind
    p = writer(new_p, target)
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.wait(60) == 0 and tree(target) == new
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith(".export.")) == []


def test_two_exports_at_once_leave_one_complete_result(projects, tmp_path):
    (a_p, a), (b_p, b) = projects
    for trial in range(5):
        target = tmp_path / f"export{trial}"
        if trial % 2:
            target.mkdir()  # into an existing directory as well as a new one
        ps = [writer(a_p, target), writer(b_p, target)]
        for p in ps:
            p.stdin.write("\n")
            p.stdin.flush()
        assert [p.wait(60) for p in ps] == [0, 0]
        assert tree(target) in (a, b)
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith(".")) == []
