"""Issue 14, exports under faults: an export killed (SIGKILL) at any step leaves the target directory
either as it was or complete, never a mix; two exports into one directory at once leave one complete
result; the temporary siblings a killed export leaves are cleared by the next export.

The files are a real generated project (the MobileNet sample's); each writer is a separate process
running the same ``atomic_write_tree`` that ``Study.export`` and ``npukit study --export`` use.  The
kill is placed by step, not by a timer: the writer counts its own filesystem operations (an audit hook
sees every directory made, file opened for writing, mode change, rename and removal) and kills itself
with SIGKILL just before the k-th, for every k, so every point of the write is tried on every machine,
however fast its disk."""

from __future__ import annotations

import pickle
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES

import npukit
import npukit.io

pytestmark = pytest.mark.slow

WRITER = """
import os, pickle, signal, sys
import npukit.export_dir as export_dir
import npukit.io as io
files = pickle.load(open(sys.argv[1], "rb"))
kill_at, no_exchange = int(sys.argv[3]), sys.argv[4] == "1"
steps = 0
def step():
    global steps
    steps += 1
    if steps == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
OPS = {"os.mkdir", "os.chmod", "os.rename", "os.replace", "os.remove", "os.rmdir", "shutil.rmtree"}
def audit(event, args):
    if event in OPS or (event == "open" and isinstance(args[1], str) and "w" in args[1]):
        step()
exchange = io._exchange
def counted_exchange(a, b):
    step()
    return False if no_exchange else exchange(a, b)
io._exchange = counted_exchange
print("ready", flush=True)
sys.stdin.readline()
sys.addaudithook(audit)
export_dir.atomic_write_tree(sys.argv[2], files)
print("done", steps, flush=True)
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


def writer(files: Path, target: Path, kill_at: int = 0, no_exchange: bool = False) -> subprocess.Popen:
    """A writer process, started and waiting for a line on stdin; it kills itself just before its
    ``kill_at``-th filesystem step (0: never), and with ``no_exchange`` it takes the path for
    filesystems without an atomic directory exchange (two renames)."""
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(files), str(target), str(kill_at), "1" if no_exchange else "0"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert p.stdout.readline() == "ready\n"
    return p


def run(p: subprocess.Popen) -> tuple[int, str]:
    p.stdin.write("\n")
    p.stdin.flush()
    return p.wait(60), p.stdout.read()


def leftovers(d: Path) -> list[str]:
    return sorted(x.name for x in d.iterdir() if x.name.startswith("."))


@pytest.mark.parametrize("no_exchange", [False, True], ids=["exchange", "two-renames"])
def test_an_export_killed_at_any_step_leaves_the_old_or_the_new_tree(projects, tmp_path, no_exchange):
    (old_p, old), (new_p, new) = projects
    target = tmp_path / "export"
    assert run(writer(old_p, target))[0] == 0 and tree(target) == old  # into a new directory
    # how many steps replacing one existing tree by the other takes: every one of them is a kill point
    steps = {}
    for first_p, second_p in ((old_p, new_p), (new_p, old_p)):
        probe = tmp_path / "probe"
        assert run(writer(first_p, probe))[0] == 0
        code, out = run(writer(second_p, probe, no_exchange=no_exchange))
        assert code == 0 and out.startswith("done ")
        steps[second_p] = int(out.split()[1])
        shutil.rmtree(probe)
        # a make-dir or open and a mode change per file, then the swap and the clean-up of the other
        assert steps[second_p] > 2 * len(pickle.loads(second_p.read_bytes()))
    outcomes = {"old": 0, "new": 0, "moved aside": 0}
    for k in range(1, max(steps.values()) + 1):
        npukit.io._sweep_stale(tmp_path, target.name)  # what every export does first: clear the last one's
        assert leftovers(tmp_path) == []
        before = tree(target)
        other, other_p = (new, new_p) if before == old else (old, old_p)
        code, _ = run(writer(other_p, target, kill_at=k, no_exchange=no_exchange))
        assert code == (-signal.SIGKILL if k <= steps[other_p] else 0), (k, code)
        if not target.exists():
            # only possible between the two renames, and the old tree is whole in its ".old" sibling
            assert no_exchange, k
            aside = [x for x in tmp_path.iterdir() if x.name.endswith(".old")]
            assert len(aside) == 1 and tree(aside[0]) == before, k
            outcomes["moved aside"] += 1
            npukit.io._sweep_stale(tmp_path, target.name)  # what the next export does first
            assert tree(target) == before and leftovers(tmp_path) == [], k
            continue
        after = tree(target)
        assert after in (before, other), f"an export killed at step {k} of {steps[other_p]} left a mix of two trees"
        outcomes["old" if after == before else "new"] += 1
    # the kills before the swap kept the old tree and the ones after it (clean-up) the new one
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes
    assert outcomes["moved aside"] == (1 if no_exchange else 0), outcomes
    # the next export clears what the killed ones left behind
    assert run(writer(new_p, target, no_exchange=no_exchange))[0] == 0 and tree(target) == new
    assert leftovers(tmp_path) == []


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
        assert [p.wait(60) for p in ps] == [0, 0], [p.stdout.read() for p in ps]
        assert tree(target) in (a, b)
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith(".")) == []


def test_an_export_through_a_link_writes_the_directory_it_names_and_keeps_its_mode(tmp_path):
    """``--export out`` where ``out`` is a symbolic link: the link itself was swapped for the new
    tree (its target left empty, or on the old config) and a stray ``.out.*.tmp`` link stayed; an
    existing directory lost its mode (a shared group directory became the umask's).  The export is
    now written into the directory the link names, and a replaced directory keeps its mode."""
    import os
    import stat

    s = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    disk = tmp_path / "disk" / "exp"
    disk.parent.mkdir()
    link = tmp_path / "out"
    link.symlink_to(disk.relative_to(tmp_path), target_is_directory=True)
    s.export(link)
    assert link.is_symlink() and os.readlink(link) == str(disk.relative_to(tmp_path))
    assert (disk / "manifest.json").is_file()
    s.set_bits("int16", processor="dsp")
    s.export(link)  # over the earlier export, through the link
    assert link.is_symlink()
    import json

    assert json.loads((disk / "manifest.json").read_text())["config"]["bits"] == {"dsp": "int16"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "out"]
    assert sorted(p.name for p in disk.parent.iterdir()) == ["exp"]
    # a directory's mode (and setgid bit, where it can be set) survives the export that replaces it
    shared = tmp_path / "shared"
    shared.mkdir()
    want = 0o2750 if os.geteuid() == 0 else 0o750
    os.chmod(shared, want)
    s.export(shared)
    assert stat.S_IMODE(os.stat(shared).st_mode) == want
    s.export(shared)
    assert stat.S_IMODE(os.stat(shared).st_mode) == want
