"""``npukit build``: with ``--target`` where the target's tools are missing, the host's run is
reported, the target is named as not built with what is missing, and the exit status is 2, not 0 (a
script that deploys after the build must not take the host's run for the target's); a failed run
leaves no ``.runs/`` behind in the export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from npukit.cli import main
from npukit.codegen import build

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "digits"
    assert main(["study", str(ROOT / "sample_models" / "digits_cnn.onnx"), "--soc", "arm-dsp-dla", "--export",
                 str(out)]) == 0  # fmt: skip
    return out


def _missing(monkeypatch):
    monkeypatch.setattr(build, "available", lambda tgt: (False, f"missing {tgt.name}-gcc (Debian package x)"))


def test_build_target_with_its_tools_missing_exits_2_naming_them(exported, monkeypatch, capsys):
    _missing(monkeypatch)
    rc = main(["build", str(exported), "--target", "--samples", "2"])
    out, err = capsys.readouterr()
    assert rc == 2
    assert "host: output 'probs'" in out
    assert "aarch64-linux: skipped (missing aarch64-linux-gcc (Debian package x))" in out
    assert err.strip() == ("npukit: build: --target: the target's program was not built or run "
                           "(aarch64-linux: missing aarch64-linux-gcc (Debian package x))")  # fmt: skip


def test_build_target_json_with_its_tools_missing_exits_2(exported, monkeypatch, capsys):
    _missing(monkeypatch)
    rc = main(["build", str(exported), "--target", "--samples", "2", "--json"])
    out, err = capsys.readouterr()
    assert rc == 2
    assert json.loads(out)["runs"]["aarch64-linux"] == {"skipped": "missing aarch64-linux-gcc (Debian package x)"}
    assert "--target" in err


def test_build_without_target_still_exits_0(exported, capsys):
    assert main(["build", str(exported), "--samples", "2"]) == 0
    assert capsys.readouterr().err == ""


def test_a_failed_run_leaves_no_runs_directory_in_the_export(exported, monkeypatch, capsys):
    """The inputs and outputs of the program's runs (``.runs/``) are removed when a run fails too."""
    from npukit.codegen.build import BuildFailed

    def crash(*_a, **_k):
        raise BuildFailed("./model .runs/in0.npy .runs/out: killed by signal 11 (SIGSEGV): no output")

    monkeypatch.setattr(build, "run_program", crash)
    assert main(["build", str(exported), "--samples", "1"]) == 2
    assert "killed by signal 11" in capsys.readouterr().err
    assert not (exported / ".runs").exists()
