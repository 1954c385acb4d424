"""Issues 3 and 4: the console script as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import (
    DETECTOR,
    DIGITS_ONNX,
    ROOT,
    SAMPLES,
    assert_cli_error,
    missing_tool,
    onnx_model,
    run_cli,
    save_onnx,
    tensor_info,
)

import npukit
from npukit.soc import bundled, load_soc

REQUIRED_PROFILES = {"arm-dsp-dla", "vsi-npu", "riscv-accel", "hexagon-like", "cortex-m7-cmsis-nn", "ethos-u55-256"}


def test_socs_one_line_per_bundled_profile():
    r = run_cli("socs")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    names = sorted(bundled())
    assert len(lines) == len(names)
    assert [ln.split()[0] for ln in lines] == names
    assert REQUIRED_PROFILES <= set(names)
    for ln, name in zip(lines, names, strict=True):
        p = load_soc(name)
        assert f"[{','.join(p.names)}]" in ln
        assert ln.endswith(p.description)
    assert r.seconds < 60  # (a hang guard, not a timing)


def test_socs_json():
    r = run_cli("socs", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["name"] for row in rows] == sorted(bundled())
    for row in rows:
        p = load_soc(row["name"])
        assert row["host"] == p.host
        assert row["description"] == p.description
        assert row["processors"] == [f"{q.name}:{q.kind}" for q in p.processors]
    assert any(len(row["processors"]) >= 4 for row in rows)


def test_help_lists_the_commands():
    r = run_cli("--help")
    assert r.returncode == 0
    assert r.stdout.startswith("usage: npukit")
    for cmd in ("socs", "inspect", "study"):
        assert cmd in r.stdout
    r = run_cli("study", "--help")
    assert r.returncode == 0
    for opt in ("--soc", "--disable", "--pin", "--json", "--input-shape"):
        assert opt in r.stdout


def test_usage_errors_exit_2():
    r = run_cli("study", DIGITS_ONNX)  # --soc missing
    assert r.returncode == 2
    assert "--soc" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--pin", "no-equals-sign")
    assert r.returncode == 2 and "NODE=PROC" in r.stderr and "Traceback" not in r.stderr
    # an empty path (an unset shell variable) was taken as "not given": the export silently skipped
    for opt in ("--export", "--report", "--save-config"):
        r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", opt, "")
        assert r.returncode == 2 and f"argument {opt}: an empty path; give a file or directory" in r.stderr, r.stderr


def test_calibrate_refuses_an_empty_path_as_the_other_commands_do():
    """``npukit calibrate "$MODEL"`` with MODEL unset said ".: is a directory, expected a model file":
    the empty path was read as the current directory; study, sweep and build refuse it by name."""
    for args, opt in (([""], "model"), ([DIGITS_ONNX, "--holdout", ""], "--holdout"), ([DIGITS_ONNX, "--soc", ""], "--soc")):  # fmt: skip
        r = run_cli("calibrate", *args)
        assert assert_cli_error(r) == (f"calibrate: argument {opt}: an empty path; give a file or directory "
                                       "(see npukit calibrate --help)")  # fmt: skip


def test_an_option_that_takes_one_value_given_twice_is_refused(tmp_path):
    """``--save-config c.toml --save-config c.json`` wrote only c.json and ``--soc arm-dsp-dla --soc vsi-npu``
    studied vsi-npu, silently: the last one was kept, where --input-shape refuses an input given twice."""
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--save-config", "c.toml", "--save-config", "c.json",
                cwd=tmp_path)  # fmt: skip
    assert assert_cli_error(r) == ("study: argument --save-config: given twice ('c.toml', then 'c.json'); give it once "
                                   "(see npukit study --help)")  # fmt: skip
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--soc", "vsi-npu", "--grid", "g.toml", "--out", "r.parquet")  # fmt: skip
    assert assert_cli_error(r) == ("sweep: argument --soc: given twice ('arm-dsp-dla', then 'vsi-npu'); give it once "
                                   "(see npukit sweep --help)")  # fmt: skip
    r = run_cli("build", "some/dir", "--samples", "2", "--samples=3")
    assert assert_cli_error(r) == "build: argument --samples: given twice (2, then 3); give it once (see npukit build --help)"  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def _imported_modules(code_or_args: list[str]) -> set[str]:
    p = subprocess.run([sys.executable, "-X", "importtime", *code_or_args], capture_output=True, text=True,
                       cwd=str(ROOT), timeout=120)  # fmt: skip
    mods = set()
    for ln in p.stderr.splitlines():
        if ln.startswith("import time:") and "|" in ln:
            name = ln.split("|")[-1].strip()
            if name != "imported package":
                mods.add(name)
    assert "npukit" in mods or "npukit.cli" in mods, p.stderr[-2000:]
    return mods


def _heavy(mods: set[str]) -> set[str]:
    return {m for m in mods if m.split(".")[0] in ("tvm", "tvm_ffi", "torch")}


def test_import_npukit_loads_neither_tvm_nor_torch():
    mods = _imported_modules(["-c", "import npukit"])
    assert _heavy(mods) == set()


def test_socs_and_help_load_neither_tvm_nor_torch():
    assert _heavy(_imported_modules(["-m", "npukit", "socs"])) == set()
    assert _heavy(_imported_modules(["-m", "npukit", "--help"])) == set()


def test_onnx_study_does_not_load_torch():
    code = ("import sys, npukit; s = npukit.Study(sys.argv[1], 'arm-dsp-dla'); s.placement; "
            "print('torch' in sys.modules, 'tvm' in sys.modules)")  # fmt: skip
    p = subprocess.run([sys.executable, "-c", code, str(DIGITS_ONNX)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "True"]


# ---------------------------------------------------------------------------------------------
# npukit study


@pytest.fixture(scope="module")
def study_json():
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_study_json_sections(study_json):
    d = study_json
    assert {"placement", "partitions", "costs", "boundaries", "timeline", "totals", "config", "soc", "model"} <= set(d)
    assert d["soc"] == "arm-dsp-dla"
    assert d["config"] == {}
    assert len(d["placement"]) == 14
    row = d["placement"][0]
    assert {"op_id", "name", "op", "processor", "partition", "reason", "arm", "dsp", "dla"} <= set(row)
    assert (row["op_id"], row["name"], row["op"], row["processor"]) == (0, "/conv1/Conv", "conv2d", "dla")
    assert row["arm"] == "runs every op (host)"
    assert row["dsp"] == "conv2d is not in processors.dsp.ops"
    assert row["dla"] == "accepted"
    # the cost policy keeps the 10-element softmax on the host: a DSP call costs more than it saves
    assert [p["processor"] for p in d["partitions"]] == ["dla", "arm"]
    assert "kept on arm by cost" in d["placement"][-1]["reason"]
    assert len(d["costs"]) == 14 and {"macs", "latency_us", "energy_uj", "processor", "bits"} <= set(d["costs"][0])
    assert sum(c["macs"] for c in d["costs"]) == 95_360
    assert {b["src"] + "->" + b["dst"] for b in d["boundaries"]} == {"arm->dla", "dla->arm"}
    assert {"lane", "item", "start_us", "end_us"} <= set(d["timeline"][0])
    assert {"latency_us", "energy_uj", "busy_us"} <= set(d["totals"])
    assert d["totals"]["latency_us"] > 0


def test_study_json_equals_the_python_api(study_json):
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    pl = s.placement
    assert [r["name"] for r in study_json["placement"]] == list(pl["name"])
    assert [r["processor"] for r in study_json["placement"]] == list(pl["processor"])
    assert [r["reason"] for r in study_json["placement"]] == list(pl["reason"])
    for p in s.soc.names:
        assert [r[p] for r in study_json["placement"]] == list(pl[p])


def test_study_edits_on_the_command_line():
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--disable", "dla:conv2d", "--pin", "/relu3/Relu=arm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["config"] == {"disabled": ["dla:conv2d"], "pins": {"/relu3/Relu": "arm"}}
    by = {row["name"]: row for row in d["placement"]}
    assert by["/conv1/Conv"]["processor"] == "arm" and by["/conv2/Conv"]["processor"] == "arm"
    assert by["/conv1/Conv"]["dla"] == "user disabled conv2d on dla"
    assert by["/relu3/Relu"]["processor"] == "arm"
    assert by["/relu3/Relu"]["reason"] == "pinned to arm by the user"


def test_study_text_output():
    r = run_cli("study", DETECTOR, "--soc", "arm-dsp-dla")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.splitlines()[0] == f"{DETECTOR} on arm-dsp-dla: 40 ops in 2 partitions"
    rows = {ln.split()[1]: ln.split() for ln in out.splitlines() if ln[:1].isdigit()}
    assert rows["post/nms"][2:4] == ["all_class_non_max_suppression", "arm"]  # cheaper than a DSP call + transfers
    assert rows["post/topk"][2:4] == ["topk", "arm"]
    r = run_cli("study", DETECTOR, "--soc", "arm-dsp-dla", "--placement", "first-fit")
    assert r.stdout.splitlines()[0] == f"{DETECTOR} on arm-dsp-dla: 40 ops in 7 partitions"
    rows = {ln.split()[1]: ln.split() for ln in r.stdout.splitlines() if ln[:1].isdigit()}
    assert rows["post/nms"][2:4] == ["all_class_non_max_suppression", "dsp"]
    assert rows["backbone/conv1"][2:4] == ["conv2d", "dla"]
    assert "partitions:" in out and "totals: latency" in out


def test_study_text_says_one_op_and_one_partition():
    """The digits network: 13 ops on the DLA, the softmax alone on the host ("1 op"); with every op
    the accelerator runs switched off, "14 ops in 1 partition"."""
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla")
    parts = r.stdout.split("partitions:\n", 1)[1].split("boundaries:", 1)[0].splitlines()
    assert [ln.split()[:4] for ln in parts] == [["0", "dla", "13", "ops"], ["1", "arm", "1", "op"]]
    r = run_cli("study", DIGITS_ONNX, "--soc", "riscv-accel", "--disable", "accel:conv2d", "--disable", "accel:matmul",
                "--disable", "accel:add", "--disable", "accel:relu", "--disable", "accel:max_pool2d",
                "--disable", "accel:reshape", "--disable", "accel:softmax")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"{DIGITS_ONNX} on riscv-accel: 14 ops in 1 partition"


def test_study_text_columns_line_up_with_processor_names_of_any_length():
    """cmsis_nn and m7: each partition's op count and each boundary's byte count start in one column."""
    r = run_cli("study", SAMPLES / "digits_cnn_int8.tflite", "--soc", "cortex-m7-cmsis-nn")
    assert r.returncode == 0, r.stderr
    parts = r.stdout.split("partitions:\n", 1)[1].split("boundaries:", 1)[0].splitlines()
    bounds = r.stdout.split("boundaries:\n", 1)[1].split("totals:", 1)[0].splitlines()
    assert {ln.split()[1] for ln in parts} == {"cmsis_nn", "m7"} and len(bounds) >= 4
    assert len({ln.index(" op") for ln in parts}) == 1, parts
    assert len({ln.index(" B  transfer") for ln in bounds}) == 1, bounds


@pytest.mark.slow
def test_study_config_file_round_trip(tmp_path):
    cfg = tmp_path / "whatif.toml"
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--disable", "dsp:softmax", "--save-config", cfg)
    assert r.returncode == 0, r.stderr
    assert npukit.Config.from_toml(cfg.read_text()) == npukit.Config(disabled=frozenset({("dsp", "softmax")}))
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--config", cfg, "--json")
    d = json.loads(r.stdout)
    assert d["placement"][-1]["processor"] == "arm"
    assert d["placement"][-1]["dsp"] == "user disabled softmax on dsp"
    # a config saved from another model: the error names the config file
    other = tmp_path / "other.toml"
    other.write_text('[pins]\n"/conv9/Conv" = "arm"\n')
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--config", other)
    assert assert_cli_error(r, limit_s=60).startswith(f"{other}: pins.\"/conv9/Conv\": unknown node '/conv9/Conv'; closest valid names: ")


def test_explain_of_an_unknown_node_fails_before_anything_is_printed_or_written(tmp_path):
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--explain", "/conv1/Conv", "--explain", "conv9",
                "--report", "r.html", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("npukit: error: unknown node 'conv9'; closest valid names: ")
    assert not (tmp_path / "r.html").exists()
    ok = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--explain", "/conv1/Conv", cwd=tmp_path)
    assert ok.returncode == 0 and "/conv1/Conv" in ok.stdout.split("totals:")[1]


def test_study_export_writes_a_project_that_builds_and_agrees(tmp_path):
    """`npukit study --export DIR` writes the project (one summary line with the memory figures) and
    `npukit build DIR` builds it, runs it and finds it within tolerance of the simulation."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make and a C compiler are needed")
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--export", "proj", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("export: proj (")]
    m = json.loads((tmp_path / "proj" / "manifest.json").read_text())["memory"]
    assert line == [f"export: proj ({len([p for p in (tmp_path / 'proj').rglob('*') if p.is_file()])} files; arena "
                    f"{m['arena_bytes']:,} B, live-tensor lower bound {m['lower_bound_bytes']:,} B, weights "
                    f"{m['weight_bytes']:,} B); build it with make"]  # fmt: skip
    b = run_cli("build", tmp_path / "proj", "--json", cwd=tmp_path, timeout=600)
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["outputs_agree"] is True


def test_export_never_replaces_a_directory_it_did_not_write(tmp_path):
    """An export replaces its directory whole, so a directory holding the user's files (the model,
    notes) is refused and left exactly as it was; a new, empty or earlier-export directory is taken,
    and the current directory never is.  The CLI checks it before writing --save-config or --report."""
    user = tmp_path / "work"
    (user / "sub").mkdir(parents=True)
    shutil.copy(DIGITS_ONNX, user / "digits_cnn.onnx")
    (user / "notes.txt").write_text("important\n")
    before = sorted(str(q.relative_to(user)) for q in user.rglob("*"))
    r = run_cli("study", "work/digits_cnn.onnx", "--soc", "arm-dsp-dla", "--export", "work", "--save-config", "c.toml",
                "--report", "r.html", cwd=tmp_path)  # fmt: skip
    msg = assert_cli_error(r, limit_s=60)
    assert msg == ("work: the directory is not empty and no npukit export wrote it (no npukit manifest.json); "
                   "an export replaces its directory whole, so give a new or empty directory")  # fmt: skip
    assert sorted(str(q.relative_to(user)) for q in user.rglob("*")) == before  # nothing gone
    assert not (tmp_path / "c.toml").exists() and not (tmp_path / "r.html").exists()  # nothing written
    r = run_cli("study", "work/digits_cnn.onnx", "--soc", "arm-dsp-dla", "--export", "new", "--report", "new/r.html",
                cwd=tmp_path)  # fmt: skip
    assert assert_cli_error(r, limit_s=60) == ("new/r.html: inside the --export directory new, which the export "
                                               "writes; write it elsewhere")  # fmt: skip
    assert not (tmp_path / "new").exists()
    assert (user / "notes.txt").read_text() == "important\n"
    r = run_cli("study", "digits_cnn.onnx", "--soc", "arm-dsp-dla", "--export", ".", cwd=user)
    assert assert_cli_error(r, limit_s=60) == (".: is the current directory or holds it; an export replaces its "
                                               "directory whole, so give a new directory (e.g. export)")
    assert sorted(str(q.relative_to(user)) for q in user.rglob("*")) == before

    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    with pytest.raises(npukit.NpukitError, match=r"not empty and no npukit export wrote it"):
        s.export(user)
    assert sorted(str(q.relative_to(user)) for q in user.rglob("*")) == before
    (tmp_path / "empty").mkdir()
    s.export(tmp_path / "empty")  # an empty directory is taken
    first = {str(q.relative_to(tmp_path / "empty")) for q in (tmp_path / "empty").rglob("*") if q.is_file()}
    assert "manifest.json" in first and "Makefile" in first
    exp = tmp_path / "empty"
    (exp / "model").write_text("the program make builds\n")
    (exp / ".runs" / "0").mkdir(parents=True)
    (exp / ".runs" / "0" / "0.npy").write_text("npukit build's run\n")
    (exp / "notes.txt").write_text("mine\n")
    (exp / "out").mkdir()
    (exp / "out" / "0.npy").write_text("a make run output\n")
    (exp / "empty").mkdir()
    (tmp_path / "data").mkdir()
    (exp / "data").symlink_to(tmp_path / "data")  # links stay links, never followed; a dangling one too
    (exp / "note-link").symlink_to("notes.txt")
    (exp / "gone").symlink_to(tmp_path / "nowhere")
    s.set_bits("fp16", processor="dla")
    s.export(exp)  # what the earlier export and its build wrote is replaced; the user's files are kept
    again = {str(q.relative_to(exp)) for q in exp.rglob("*") if q.is_file() and not q.is_symlink()}
    assert again == set(s.code) | {"notes.txt", "out/0.npy"}
    assert (exp / "notes.txt").read_text() == "mine\n" and (exp / "out" / "0.npy").read_text() == "a make run output\n"
    assert (exp / "empty").is_dir() and not any((exp / "empty").iterdir())
    assert [os.readlink(exp / n) for n in ("data", "note-link", "gone")] == [str(tmp_path / "data"), "notes.txt",
                                                                          str(tmp_path / "nowhere")]  # fmt: skip
    (exp / "gone").unlink()
    # a file of the user's where the new export writes one: refused, the directory left as it was
    m = json.loads((exp / "manifest.json").read_text())
    m["files"].remove("src/main.c")
    (exp / "manifest.json").write_text(json.dumps(m))
    before = {str(q.relative_to(exp)): q.read_bytes() for q in exp.rglob("*") if q.is_file()}
    with pytest.raises(npukit.NpukitError) as e:
        s.export(exp)
    assert str(e.value) == (f"{exp}: the export would write src/main.c, where the directory holds a file of yours "
                            "(no earlier export wrote it); move it out first or give a new directory")  # fmt: skip
    assert {str(q.relative_to(exp)): q.read_bytes() for q in exp.rglob("*") if q.is_file()} == before


def test_study_output_files_under_a_file_name_the_file_in_the_way(tmp_path):
    """``--report afile/r.html`` where ``afile`` is a regular file said "cannot create its directory:
    File exists"; it names the file in the way, as an export into ``afile/sub`` does, and nothing is
    written (not the other output either)."""
    (tmp_path / "afile").write_text("x")
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--save-config", "c.toml", "--report", "afile/r.html",
                cwd=tmp_path)  # fmt: skip
    assert assert_cli_error(r, limit_s=60) == "afile/r.html: cannot create its directory: afile is a file, not a directory"
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--save-config", "afile/sub/c.toml", "--report", "r.html",
                cwd=tmp_path)  # fmt: skip
    assert assert_cli_error(r, limit_s=60) == ("afile/sub/c.toml: cannot create its directory: afile is a file, not a "
                                               "directory")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"] and (tmp_path / "afile").read_text() == "x"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, where no file can be created")
def test_an_output_where_nothing_can_be_written_fails_before_any_output_is_written(tmp_path):
    """``--save-config c.toml --report r.html --export /proc/x``: the config and the report were written,
    then the export failed (exit 2), leaving half of what was asked for; a place where no file can be
    created is now found before anything is written, for each of the three outputs."""
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--save-config", "c.toml", "--report", "r.html",
                "--export", "/proc/npukit-x", cwd=tmp_path)  # fmt: skip
    assert assert_cli_error(r) == "/proc/npukit-x: cannot create a directory there: No such file or directory"
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--save-config", "c.toml", "--export", "exp",
                "--report", "/proc/npukit-r.html", cwd=tmp_path)  # fmt: skip
    assert assert_cli_error(r) == "/proc/npukit-r.html: cannot write there: No such file or directory"
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--save-config", "/proc/npukit-c.toml", "--report",
                "r.html", cwd=tmp_path)  # fmt: skip
    assert assert_cli_error(r) == "/proc/npukit-c.toml: cannot write there: No such file or directory"
    assert list(tmp_path.iterdir()) == []


def test_build_runs_an_export_on_the_data_it_was_calibrated_on(tmp_path):
    """An export made after set_data(path) records that file (and its digest) in its manifest;
    `npukit build` reads it again, so the comparison uses the calibration baked into the C (it once
    recalibrated on seeded random inputs and reported a mismatch).  Data given as arrays cannot be
    read again: build refuses to compare rather than report a false mismatch."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make and a C compiler are needed")
    import numpy as np

    rng = np.random.default_rng(5)
    x = rng.standard_normal((24, 1, 8, 8)).astype(np.float32) * 3
    np.savez(tmp_path / "mine.npz", x=x)
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    assert "int8" in s.result.bits  # the DLA's ops are calibrated
    s.set_data(tmp_path / "mine.npz")
    s.export(tmp_path / "ex")
    rec = json.loads((tmp_path / "ex" / "manifest.json").read_text())["data"]
    assert rec == {"source": "mine.npz (24 samples)", "key": s.data.key, "path": str((tmp_path / "mine.npz").resolve()),
                   "calibrated": True}  # fmt: skip
    b = run_cli("build", tmp_path / "ex", "--json", cwd=ROOT, timeout=600)
    assert b.returncode == 0, b.stderr
    out = json.loads(b.stdout)
    assert out["outputs_agree"] is True and out["samples"] == 16 and out["data"] == "mine.npz (24 samples)"
    s.set_data(x[:12])  # arrays: not readable again
    s.export(tmp_path / "ex2")
    r = run_cli("build", tmp_path / "ex2", cwd=ROOT, timeout=600)
    assert assert_cli_error(r, limit_s=120) == (
        f"{tmp_path / 'ex2' / 'manifest.json'}: the code was calibrated on data passed to set_data() as arrays at "
        "the export; npukit build cannot compare it with the same calibration: export again, or build it from "
        "Python with study.build()")
    np.savez(tmp_path / "same.npz", x=x[:12])  # the same arrays, now from a file: the manifest names the file
    s.set_data(tmp_path / "same.npz")
    assert s.project.manifest["data"]["path"] == str((tmp_path / "same.npz").resolve())
    np.savez(tmp_path / "mine.npz", x=x[:20])  # the file changed since the first export
    r = run_cli("build", tmp_path / "ex", cwd=ROOT, timeout=600)
    assert "the code was calibrated on the data in " in assert_cli_error(r, limit_s=120)
    # nothing calibrated (every processor at a float width): the data file may go
    f = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_bits("fp16", processor="dla").set_bits("fp32", processor="dsp")
    f.set_data(tmp_path / "same.npz")
    f.export(tmp_path / "exf")
    assert json.loads((tmp_path / "exf" / "manifest.json").read_text())["data"]["calibrated"] is False
    (tmp_path / "same.npz").unlink()
    b = run_cli("build", tmp_path / "exf", "--json", cwd=ROOT, timeout=600)
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["outputs_agree"] is True


def test_export_refuses_paths_outside_its_directory(tmp_path):
    from npukit import export_dir

    for bad in ("../escape.c", "/tmp/abs.c", "a/../../b.c"):
        with pytest.raises(npukit.NpukitError, match=r"refusing to write .*: outside the export directory"):
            export_dir.atomic_write_tree(tmp_path / "out", {"ok.c": "int x;\n", bad: "int y;\n"})
        assert not (tmp_path / "out").exists() and not (tmp_path / "escape.c").exists()


def test_build_needs_at_least_one_sample(tmp_path):
    r = run_cli("build", tmp_path, "--samples", "0")
    assert assert_cli_error(r) == "build: argument --samples: 0: must be at least 1 (see npukit build --help)"
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    with pytest.raises(npukit.NpukitError, match=r"^samples=-3: run at least 1 input$"):
        s.build(tmp_path / "b", samples=-3)
    assert not (tmp_path / "b").exists()


def test_build_names_a_missing_directory_and_a_file(tmp_path):
    """``npukit build`` of a path that does not exist, or of a file, says so (it said "no manifest.json")."""
    r = run_cli("build", tmp_path / "nope")
    assert assert_cli_error(r) == f"{tmp_path / 'nope'}: no such directory; give a directory written by npukit's export"
    (tmp_path / "afile").write_text("x")
    r = run_cli("build", tmp_path / "afile")
    assert assert_cli_error(r) == f"{tmp_path / 'afile'}: is a file, not a directory written by npukit's export"
    (tmp_path / "empty").mkdir()
    r = run_cli("build", tmp_path / "empty")
    assert assert_cli_error(r) == f"{tmp_path / 'empty'}: no manifest.json; not a directory written by npukit's export"


def test_an_export_carries_its_profile(tmp_path):
    """The export holds the profile as studied (profile.toml): an edited profile, or a file given by a
    relative path, builds from any directory."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make and a C compiler are needed")
    soc = load_soc("arm-dsp-dla").with_changes({"processors.dla.clock_mhz": 333})
    s = npukit.Study(DIGITS_ONNX, soc)
    s.export(tmp_path / "ex")
    m = json.loads((tmp_path / "ex" / "manifest.json").read_text())
    assert m["profile_file"] == "profile.toml" and "profile.toml" in m["files"]
    assert load_soc(tmp_path / "ex" / "profile.toml").raw == soc.raw
    (tmp_path / "elsewhere").mkdir()
    b = run_cli("build", tmp_path / "ex", "--json", cwd=tmp_path / "elsewhere", timeout=600)
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["outputs_agree"] is True


def test_explain_is_in_the_json_output():
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--explain", "/conv1/Conv", "--explain", "3", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla")
    assert d["explain"] == {"/conv1/Conv": s.explain("/conv1/Conv"), "3": s.explain(3)}


def test_a_reader_that_goes_away_is_no_error():
    """`npukit inspect MODEL --json | head -c 1` (400 KB, more than a pipe holds): exit 0 and nothing
    on stderr (a broken pipe once printed 'npukit: error: [Errno 32] Broken pipe')."""
    p = subprocess.Popen([sys.executable, "-m", "npukit", "inspect", str(ROOT / "sample_models" / "transformer_encoder.onnx"),
                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)  # fmt: skip
    assert p.stdout.read(1) == b"{"
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(60) == 0 and err == ""


def _dyn_batch_model(path, c: float, relu: str = "relu"):
    """``y = relu(x + c)``, ``x`` of shape (N, 4) with a symbolic batch N."""
    import numpy as np
    from onnx import helper as h
    from onnx import numpy_helper

    nodes = [h.make_node("Add", ["x", "c"], ["s"], name="add_c"), h.make_node("Relu", ["s"], ["y"], name=relu)]
    m = onnx_model(nodes, [tensor_info("x", ["N", 4])], [tensor_info("y", ["N", 4])],
                   [numpy_helper.from_array(np.full((1, 4), c, np.float32), "c")])  # fmt: skip
    return save_onnx(m, path)


def test_build_takes_the_input_shapes_and_model_of_the_export(tmp_path):
    """`npukit build` imports the model with the --input-shape the export was made with (it used to
    import it without them and fail on the symbolic batch), and says so when the model file changed
    since the export instead of reporting a mismatch or a data error."""
    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make and a C compiler are needed")
    model = _dyn_batch_model(tmp_path / "dyn.onnx", 0.5)
    r = run_cli("study", model, "--soc", "arm-dsp-dla", "--input-shape", "x=2,4", "--pin", "relu=arm", "--export", "e",
                cwd=tmp_path, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert m["input_shapes"] == {"x": [2, 4]}
    b = run_cli("build", "e", "--json", cwd=tmp_path, timeout=600)
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["outputs_agree"] is True
    _dyn_batch_model(tmp_path / "dyn.onnx", -0.25, relu="act")  # the model changes after the export (the pinned node too)
    b = run_cli("build", "e", cwd=tmp_path, timeout=600)
    assert assert_cli_error(b, limit_s=120) == (
        f"e/manifest.json: the model {model.resolve()} changed since the export (it no longer "
        "imports as the graph the code was generated from); export again")  # fmt: skip


def test_save_config_writes_toml_or_json_by_name(tmp_path):
    """--save-config c.yaml was written as TOML without a word; now it is refused before anything runs,
    and .json / .toml (any case) write what they say."""
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--save-config", "c.yaml", cwd=tmp_path)
    assert assert_cli_error(r, limit_s=30) == ("c.yaml: --save-config writes TOML (.toml) or JSON (.json); give the file "
                                               "one of those suffixes")  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--report", "r.pdf", cwd=tmp_path)
    assert assert_cli_error(r, limit_s=30) == "r.pdf: --report writes one HTML page; give the file the suffix .html"
    assert list(tmp_path.iterdir()) == []
    for name in ("c.JSON", "c.toml"):
        r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--pin", "/conv1/Conv=arm", "--save-config", name,
                    cwd=tmp_path, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "c.JSON").read_text())["pins"] == {"/conv1/Conv": "arm"}
    assert npukit.Config.from_toml((tmp_path / "c.toml").read_text()) == npukit.Config.from_json((tmp_path / "c.JSON").read_text())
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--config", "c.JSON", "--json", cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr  # read back as JSON too
    assert json.loads(r.stdout)["config"]["pins"] == {"/conv1/Conv": "arm"}


def test_every_cli_argument_has_help():
    """`npukit <cmd> --help` explains every argument (socs/inspect/build's --json, inspect's and
    study's positional model and study's --disable/--enable/--pin/--bits/--bits-layer/--input-shape once
    showed a bare name)."""
    from npukit.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    bare = sorted(f"{name} {a.option_strings[0] if a.option_strings else a.dest}"
                  for name, p in sub.choices.items() for a in p._actions if not a.help)  # fmt: skip
    assert bare == []


def test_data_help_names_the_npz_keys_and_the_default():
    """study's and sweep's --data say what the .npz may hold (x or one array per input, y, calib) and
    what is used without it (the sidecar, else seeded random inputs); they once named x and y only."""
    from npukit.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    helps = {name: next(a.help for a in sub.choices[name]._actions if "--data" in a.option_strings)
             for name in ("study", "sweep")}  # fmt: skip
    assert helps["study"] == helps["sweep"]
    for words in ("x (the inputs; or one array per input name)", "y (class labels)", "calib (calibration inputs",
                  "<stem>.npz", "seeded random inputs"):  # fmt: skip
        assert words in helps["study"], words


def test_socs_reference_with_json_is_refused_not_printed_as_markdown():
    """``npukit socs --reference --json`` printed the markdown reference, exit 0: a script piping it to a
    JSON reader failed on '# SoC profile reference'."""
    r = run_cli("socs", "--reference", "--json")
    assert assert_cli_error(r) == ("socs: --reference prints the profile field reference as markdown, --json the "
                                   "bundled profiles as JSON; give one of them")  # fmt: skip
    assert r.stdout == ""


def test_the_text_output_reads_the_data_only_where_the_json_does(tmp_path):
    """A float model on the host needs no data; its sidecar .npz (here of batch 3, which the pinned batch
    of 2 does not take) was read anyway by the table's closing note: the whole table was printed, then
    "npukit: error: ...npz ... does not fit" with exit 2, where --json printed everything with exit 0."""
    import numpy as np
    from onnx import helper as h

    nodes = [h.make_node("Mul", ["x", "mask"], ["t"], name="mul"), h.make_node("Relu", ["t"], ["y"], name="relu")]
    model = save_onnx(onnx_model(nodes, [tensor_info("x", ["N", 4]), tensor_info("mask", ["N", 4])],
                                 [tensor_info("y", ["N", 4])]), tmp_path / "two.onnx")  # fmt: skip
    np.savez(tmp_path / "two.npz", x=np.ones((3, 4), np.float32), mask=np.ones((3, 4), np.float32))
    args = ("study", model, "--soc", "arm-dsp-dla", "--input-shape", "x=2,4;mask=2,4", "--pin", "mul=arm", "--pin", "relu=arm")  # fmt: skip
    j = run_cli(*args, "--json")
    assert j.returncode == 0, j.stderr
    r = run_cli(*args)
    assert (r.returncode, r.stderr) == (0, "")
    assert f"totals: latency {json.loads(j.stdout)['totals']['latency_us']:.2f} us" in r.stdout


def test_save_config_never_writes_over_the_profile_it_studies(tmp_path):
    """``--soc my_soc.toml --save-config my_soc.toml`` (a slip of the same name) replaced the user's profile
    with the config, empty here, with exit 0: the profile was gone.  npukit sweep's --report already
    refuses to write over its inputs."""
    prof = tmp_path / "my_soc.toml"
    shutil.copy(ROOT / "npukit" / "profiles" / "arm-dsp-dla.toml", prof)
    before = prof.read_bytes()
    r = run_cli("study", DIGITS_ONNX, "--soc", "my_soc.toml", "--save-config", prof, cwd=tmp_path)
    assert assert_cli_error(r) == f"{prof}: --save-config would write over the --soc profile; give the config a file of its own"  # fmt: skip
    assert prof.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["my_soc.toml"]


def test_a_json_config_with_a_key_written_twice_is_refused_as_a_json_profile_is(tmp_path):
    """``{"bits": {"dla": "int8"}, "bits": {}}`` studied the second, silently (exit 0): JSON keeps the last
    of two equal keys, where TOML, and a JSON profile, refuse them."""
    cfg = tmp_path / "c.json"
    cfg.write_text('{"bits": {"dla": "fp16"}, "pins": {"/relu3/Relu": "arm", "/relu3/Relu": "dla"}, "bits": {}}')
    want = "'bits' is written twice in one JSON object (the second would replace the first); write it once"
    with pytest.raises(npukit.ConfigError) as ei:
        npukit.Config.from_json(cfg.read_text(), str(cfg))
    assert str(ei.value) == f"{cfg}: {want}".replace("'bits'", "'/relu3/Relu'")  # (the inner object is read first)
    r = run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--config", cfg)
    assert assert_cli_error(r) == f"{cfg}: {want}".replace("'bits'", "'/relu3/Relu'")
    cfg.write_text('{"bits": {"dla": "fp16"}, "bits": {}}')
    assert assert_cli_error(run_cli("study", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--config", cfg)) == f"{cfg}: {want}"


def test_a_missing_or_misspelt_command_is_named_as_a_command():
    """``npukit`` alone said "the following arguments are required: cmd" and ``npukit stdy`` "argument cmd:
    invalid choice": the parser's own name for the slot, not a word of npukit's."""
    r = run_cli()
    assert assert_cli_error(r) == "the following arguments are required: COMMAND (see npukit --help)"
    r = run_cli("stdy")
    assert assert_cli_error(r) == ("argument COMMAND: invalid choice: 'stdy' (choose from 'socs', 'inspect', 'study', "
                                   "'sweep', 'build', 'calibrate') (see npukit --help)")  # fmt: skip
    assert run_cli("--help").stdout.startswith("usage: npukit [-h] COMMAND ...\n")


def test_a_grid_or_config_given_by_process_substitution_is_read(tmp_path):
    """``--grid <(sed ... grid.toml)`` and ``--config <(...)``: the shell passes /dev/fd/63, a pipe, which
    exists but is no regular file; npukit said "/dev/fd/63: no such grid file" (and config file)."""
    grid = tmp_path / "g.toml"
    grid.write_text('[grid]\n"bits.dla" = ["int8", "fp16"]\n')
    cfg = tmp_path / "c.toml"
    cfg.write_text('[bits]\ndla = "fp16"\n')
    py = f"{sys.executable} -m npukit"
    sweep = f"{py} sweep {DIGITS_ONNX} --soc arm-dsp-dla --grid <(cat {grid}) --out {tmp_path / 'r.parquet'} --workers 0 --json"
    study = f"{py} study {DIGITS_ONNX} --soc arm-dsp-dla --config <(cat {cfg}) --json"
    for line in (sweep, study):
        p = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=str(ROOT), timeout=120)
        assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["config"] == {"bits": {"dla": "fp16"}}
