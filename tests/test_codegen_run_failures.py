"""How a failed run of the generated program is reported (``study.build()``, ``npukit build``):
the command, how it ended, and what it said.  A program a signal killed used to be reported as
``./model .runs/in0.npy .runs/out: exit -11:`` with nothing after the colon; now the signal is
named and an empty stderr is said to be empty.  The "programs" here are shell scripts run through
the same ``run_program`` the build uses."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import missing_tool

from npukit.codegen.build import BuildFailed, exit_status, run_program

X = [np.zeros((1, 2), np.float32)]


def _fails(tmp_path, script: str) -> str:
    """The message of running ``script`` as ./model on one input."""
    if shutil.which("sh") is None:
        missing_tool("sh is not installed")
    d = tmp_path / "export"
    d.mkdir()
    prog = d / "model"
    prog.write_text("#!/bin/sh\nulimit -c 0\n" + script)  # (no core file in the export)
    prog.chmod(0o755)
    (d / ".runs").mkdir()  # (the build makes it)
    with pytest.raises(BuildFailed) as e:
        run_program(d, ["./model"], X, [(1, 2)], d / ".runs")
    return str(e.value)


def test_a_program_killed_by_sigsegv_is_named_and_its_empty_stderr_said(tmp_path):
    msg = _fails(tmp_path, "kill -SEGV $$\n")
    assert msg == "./model .runs/in0.npy .runs/out: killed by signal 11 (SIGSEGV): no output (stderr and stdout empty)"


def test_a_killed_program_s_stderr_is_kept(tmp_path):
    msg = _fails(tmp_path, "echo 'npukit_model_run: about to fail' >&2\nkill -ABRT $$\n")
    assert msg == "./model .runs/in0.npy .runs/out: killed by signal 6 (SIGABRT): npukit_model_run: about to fail"


def test_an_exit_status_with_only_stdout_says_stderr_was_empty(tmp_path):
    msg = _fails(tmp_path, "echo partial results\nexit 3\n")
    assert msg == "./model .runs/in0.npy .runs/out: exit 3: nothing on stderr; stdout: partial results"


def test_exit_status_words():
    assert exit_status(1) == "exit 1"
    assert exit_status(-11) == "killed by signal 11 (SIGSEGV)"
    assert exit_status(-9) == "killed by signal 9 (SIGKILL)"
    assert exit_status(-200) == "killed by signal 200"  # no such signal: the number alone
