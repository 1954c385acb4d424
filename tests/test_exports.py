"""Model Explorer JSON (checked strictly against Model Explorer's own dataclasses) and the
annotated ONNX for Netron."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import dacite
import onnx
import pytest
from model_explorer import graph_builder as gb
from model_explorer import node_data_builder as nd

import npukit
from npukit.report import processor_colors

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
STRICT = dacite.Config(strict=True)


@pytest.fixture(scope="module")
def study():
    return npukit.Study(SAMPLES / "tiny_detector.onnx", "arm-dsp-dla")


def test_model_explorer_graph_follows_the_adapter_schema(study, tmp_path):
    out = study.to_model_explorer(tmp_path / "me", include_error=True)
    assert sorted(p.name for p in out.iterdir()) == ["energy_uj.json", "error_snr_db.json", "graph.json",
                                                     "latency_us.json", "processor.json"]  # fmt: skip
    doc = json.loads((out / "graph.json").read_text())
    assert list(doc) == ["graphs"] and len(doc["graphs"]) == 1
    graph = dacite.from_dict(gb.Graph, doc["graphs"][0], config=STRICT)  # unknown or mistyped field -> error
    g, plan = study.graph, study.plan
    ops = {n.id: n for n in graph.nodes if not n.id.startswith("input:")}
    assert sorted(ops, key=int) == [str(op.op_id) for op in g.ops]
    colors = processor_colors(study.soc)
    for op in g.ops:
        node = ops[str(op.op_id)]
        attrs = {kv.key: kv.value for kv in node.attrs}
        assert attrs["name"] == op.name and attrs["processor"] == plan.processor[op.op_id]
        assert node.namespace == f"{plan.processor[op.op_id]}/partition{plan.partition[op.op_id]}"
        assert node.style.backgroundColor == colors[plan.processor[op.op_id]]
        assert {f"verdict.{p}" for p in study.soc.names} <= set(attrs)
        producers = {e.sourceNodeId for e in node.incomingEdges if not e.sourceNodeId.startswith("input:")}
        assert producers == {str(p) for p in g.producers(op)}
    for name in ("processor", "latency_us", "energy_uj", "error_snr_db"):
        data = json.loads((out / f"{name}.json").read_text())
        per_graph = dacite.from_dict(nd.ModelNodeData, {"graphsData": data}, config=STRICT).graphsData["npukit"]
        assert per_graph.name == name
    lat = json.loads((out / "latency_us.json").read_text())["npukit"]["results"]
    costs = study.costs.set_index("op_id")
    assert all(lat[str(i)]["value"] == pytest.approx(costs.loc[i, "latency_us"]) for i in costs.index)
    proc = json.loads((out / "processor.json").read_text())["npukit"]["results"]
    assert all(proc[str(i)]["bgColor"] == colors[plan.processor[i]] for i in range(len(g.ops)))


def test_model_explorer_export_is_all_or_nothing(study, tmp_path):
    target = tmp_path / "me"
    (target / "sub").mkdir(parents=True)
    (target / "notes.txt").write_text("mine")
    study.to_model_explorer(target)
    before = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}
    assert "notes.txt" in before and (target / "sub").is_dir()  # other files are kept

    class Boom(Exception):
        pass

    def broken(*a, **k):
        raise Boom

    import npukit.export as ex

    orig = ex.model_explorer_node_data
    ex.model_explorer_node_data = broken
    try:
        with pytest.raises(Boom):
            study.to_model_explorer(target)
    finally:
        ex.model_explorer_node_data = orig
    after = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}
    assert after == before  # nothing half-written, no temporary files left


def test_exports_name_the_bad_path(study, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(npukit.NpukitError, match=r"file: is a file; give a directory"):
        study.to_model_explorer(tmp_path / "file")
    with pytest.raises(npukit.NpukitError, match=r": is a directory; give a file path"):
        study.annotated_onnx(tmp_path)
    with pytest.raises(npukit.NpukitError) as e:  # (was: "cannot create a directory there: File exists")
        study.export(tmp_path / "file" / "sub")
    assert str(e.value) == f"{tmp_path / 'file' / 'sub'}: cannot create a directory there: {tmp_path / 'file'} is a file, not a directory"
    assert not (tmp_path / "sub").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    with pytest.raises(npukit.NpukitError, match="is the study's own model"):
        study.annotated_onnx(SAMPLES / "tiny_detector.onnx")


def test_export_over_an_earlier_one_names_the_parent_it_cannot_write(study, tmp_path, monkeypatch):
    """Over an existing (earlier or empty) export directory whose parent takes no new entry (read-only,
    immutable), the message names the parent where the new tree is written first, not "cannot create a
    directory there" of a directory that exists; the earlier export is left as it was."""
    from npukit import export_dir

    study.export(tmp_path / "ex")
    before = {p: p.read_bytes() for p in (tmp_path / "ex").rglob("*") if p.is_file()}

    def refuse(*a, **k):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(export_dir.tempfile, "mkdtemp", refuse)
    with pytest.raises(npukit.NpukitError) as e:
        study.export(tmp_path / "ex")
    assert str(e.value) == (f"{tmp_path / 'ex'}: cannot write the new export beside it in {tmp_path} (it is written "
                            f"there first, then swapped in): Operation not permitted; make {tmp_path} writable or "
                            "give another directory")  # fmt: skip
    assert {p: p.read_bytes() for p in (tmp_path / "ex").rglob("*") if p.is_file()} == before
    with pytest.raises(npukit.NpukitError, match=r"new: cannot create a directory there: Operation not permitted$"):
        study.export(tmp_path / "new")  # (a new directory: nothing is there yet)
    assert not (tmp_path / "new").exists()


def test_annotated_onnx_carries_npukit_fields_on_every_node(study, tmp_path):
    path = study.annotated_onnx(tmp_path / "annotated.onnx")
    m = onnx.load(str(path))
    pl = study.placement
    by_source = pl.groupby("source").processor.apply(lambda s: ", ".join(sorted(set(s))))
    for n in m.graph.node:
        meta = {e.key: e.value for e in n.metadata_props}
        key = n.name or n.output[0]
        if key in by_source.index:
            assert meta["npukit.processor"] == by_source[key]
            parts = sorted(set(pl[pl.source == key].partition))
            assert meta["npukit.partition"] == ", ".join(map(str, parts))  # each partition once
            assert "npukit.reason" in meta and "npukit.latency_us" in meta
            assert n.doc_string.startswith("npukit: on ")
        else:
            assert meta["npukit.placement"].startswith("none:")
    # the graph itself is unchanged: same nodes, same initializers
    orig = onnx.load(str(SAMPLES / "tiny_detector.onnx"))
    assert [n.op_type for n in m.graph.node] == [n.op_type for n in orig.graph.node]
    assert len(m.graph.initializer) == len(orig.graph.initializer)


def test_annotated_onnx_needs_an_onnx_study(tmp_path):
    s = npukit.Study(SAMPLES / "digits_cnn_float.tflite", "arm-dsp-dla")
    with pytest.raises(npukit.ModelError, match="annotated_onnx needs a study of an .onnx file; this one is tflite"):
        s.annotated_onnx(tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


def test_netron_serves_the_annotated_model(study, tmp_path):
    from npukit.export import serve_netron

    path = study.annotated_onnx(tmp_path / "a.onnx")
    host, port = serve_netron(path)
    try:
        page = urllib.request.urlopen(f"http://{host}:{port}/", timeout=10).read().decode()
        assert "netron" in page.lower()
        model = urllib.request.urlopen(f"http://{host}:{port}/data/a.onnx", timeout=10).read()
        assert model == path.read_bytes()
    finally:
        import netron

        netron.stop((host, port))


def test_a_model_explorer_export_leaves_no_overlay_of_an_earlier_graph(study, tmp_path):
    """Exporting another study, without the error, into the same directory kept the first export's
    error_snr_db.json: an overlay of npukit's that described another graph."""
    target = tmp_path / "me"
    study.to_model_explorer(target, include_error=True)
    (target / "notes.txt").write_text("mine")
    other = npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")
    other.to_model_explorer(target)
    assert sorted(p.name for p in target.iterdir()) == ["energy_uj.json", "graph.json", "latency_us.json", "notes.txt",
                                                        "processor.json"]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Exports over earlier ones: read-only trees, build outputs, a corrupt manifest, a file in the way


def _an_export(d: Path, text: str = "one") -> dict[str, str]:
    """Write a small earlier export into ``d`` (a manifest listing its files, as ``is_export`` reads
    it) with ``atomic_write_tree``, the writer of ``Study.export``; returns its files."""
    from npukit.export_dir import atomic_write_tree

    files = {"Makefile": f"# {text}\n", "src/model.c": f"/* {text} */\n", "include/model.h": "/* h */\n"}
    files["manifest.json"] = json.dumps({"files": sorted(files), "profile": "p", "ops": []})
    atomic_write_tree(d, files)
    return files


def _tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def as_a_user(monkeypatch):
    """Permission checks as an ordinary user gets them, also where the tests run as root (CI): a
    directory without the owner's write bit holds its entries -- ``shutil.rmtree`` fails on them
    with PermissionError (or skips them under ignore_errors) and ``os.access`` says it is not
    writable."""
    import errno
    import os
    import shutil
    import stat

    real_rmtree, real_access = shutil.rmtree, os.access

    def stuck(path):
        for root, dirs, files in os.walk(path):
            if (dirs or files) and not os.lstat(root).st_mode & stat.S_IWUSR:
                return os.path.join(root, (dirs + files)[0])
        return None

    def rmtree(path, ignore_errors=False, onerror=None, **kw):
        where = stuck(path)
        if where is None:
            return real_rmtree(path, ignore_errors=ignore_errors, onerror=onerror, **kw)
        if not ignore_errors:
            raise PermissionError(errno.EACCES, "Permission denied", where)
        return None

    def access(path, mode, **kw):
        if mode & os.W_OK and not os.stat(path).st_mode & stat.S_IWUSR:
            return False
        return real_access(path, mode, **kw)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    monkeypatch.setattr(os, "access", access)


def _chmod_tree(d: Path, write: bool) -> None:
    import os
    import stat

    for p in [d, *d.rglob("*")]:
        m = stat.S_IMODE(os.lstat(p).st_mode)
        os.chmod(p, m | stat.S_IWUSR if write else m & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_an_export_over_a_read_only_earlier_export_is_refused_and_leaves_nothing(tmp_path, as_a_user):
    """``chmod -R a-w`` on an export, then an export over it: every one "succeeded" and left the old
    tree behind as one more ``.exp.<pid>.*.tmp`` in the parent (its removal failed silently).  It
    is now refused before anything is written, naming the directory and why; the earlier export is
    left as it was and nothing is left beside it.  Made writable again, the export replaces it."""
    from npukit.export_dir import atomic_write_tree

    exp = tmp_path / "exp"
    _an_export(exp)
    (exp / "notes.txt").write_text("mine\n")
    before = _tree(exp)
    _chmod_tree(exp, write=False)
    want = (f"{exp}: cannot replace the earlier export: {exp} is not writable, so its files cannot be removed; "
            f"make it writable (chmod -R u+w {exp}) or give a new directory")  # fmt: skip
    for _ in range(2):
        with pytest.raises(npukit.NpukitError) as e:
            atomic_write_tree(exp, {"Makefile": "# two\n", "manifest.json": "{}"})
        assert str(e.value) == want
        assert _tree(exp) == before and sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    # only a directory deeper in is read-only: that one is named
    _chmod_tree(exp, write=True)
    _chmod_tree(exp / "src", write=False)
    with pytest.raises(npukit.NpukitError) as e:
        atomic_write_tree(exp, {"Makefile": "# two\n", "manifest.json": "{}"})
    assert str(e.value) == (f"{exp}: cannot replace the earlier export: {exp / 'src'} is not writable, so its files "
                            f"cannot be removed; make it writable (chmod -R u+w {exp}) or give a new directory")  # fmt: skip
    assert _tree(exp) == before and sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    _chmod_tree(exp, write=True)
    new = _an_export(exp, "two")
    assert _tree(exp) == {**{k: v.encode() for k, v in new.items()}, "notes.txt": b"mine\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


def test_an_export_removes_the_tree_it_replaced_or_says_it_could_not(tmp_path, as_a_user, monkeypatch):
    """Once the new tree is swapped in, the old one (now a temporary sibling) must go: read-only
    directories in it are made writable first (it is npukit's own by then), and where it still
    cannot be removed the export raises, naming it, instead of returning as if all went well.  The
    read-only leftovers of earlier exports (``.exp.<pid>.*.tmp`` of a process gone) are removed by
    the next export."""
    import shutil

    import npukit.io as io

    exp = tmp_path / "exp"
    _an_export(exp)
    # a read-only tree that passed the check (changed meanwhile): removed all the same
    _chmod_tree(exp / "src", write=False)
    monkeypatch.setattr(io, "_unremovable", lambda d, shown: None)
    new = _an_export(exp, "two")
    assert _tree(exp) == {k: v.encode() for k, v in new.items()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    # leftovers of an earlier version's exports (of a process no longer running: 2**22 + 1 is above
    # any process id), read-only
    debris = tmp_path / f".exp.{2**22 + 1}.x1y2z3.tmp"
    shutil.copytree(exp, debris)
    _chmod_tree(debris, write=False)
    _an_export(exp, "three")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    # a tree that cannot be removed at all: an error, never a quiet success
    real = shutil.rmtree

    def rmtree(path, *a, **kw):
        if Path(path).name.startswith(".exp."):  # the tree moved aside (.tmp, or .old without an exchange)
            raise PermissionError(13, "Permission denied", str(Path(path) / "src"))
        return real(path, *a, **kw)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with pytest.raises(npukit.NpukitError) as e:
        _an_export(exp, "four")
    left = [p for p in tmp_path.iterdir() if p.name != "exp"]
    assert len(left) == 1 and left[0].name.startswith(".exp.")
    assert str(e.value) == (f"{exp}: the export is written, but the tree it replaced, moved to {left[0]}, could "
                            f"not be removed ({left[0] / 'src'}: Permission denied); remove it")  # fmt: skip
    assert (exp / "Makefile").read_text() == "# four\n" and (left[0] / "Makefile").read_text() == "# three\n"


@pytest.fixture(scope="module")
def digits():
    return npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla")


def test_build_outputs_list_every_file_the_generated_makefile_writes():
    """The Makefile's build writes ``./model``, the target's program and the stamp file ``.build``
    (its ``$(shell echo ... > .build)`` runs on every make); ``build_outputs`` listed the programs
    and ``.runs/`` but not ``.build``, so an export over a built one kept the stamp as the user's."""
    import re

    from npukit.codegen.makefile import makefile
    from npukit.codegen.project import PROGRAM, build_outputs
    from npukit.codegen.targets import TARGETS

    def expand(s: str, var: dict[str, str]) -> str:
        return re.sub(r"\$\((\w+)\)", lambda m: var.get(m.group(1), m.group(0)), s)

    outs = build_outputs()
    assert outs == ("model", "model-aarch64-linux", "model-riscv64-linux", "model.elf", ".build", ".runs/")
    for name, t in TARGETS.items():
        text = makefile(name, ["src/main.c"], program=PROGRAM)
        var = dict(re.findall(r"^([A-Z_]+) = (.*)$", text, re.M))
        written = set(re.findall(r"> *([\w./-]+)\)?$", text, re.M))  # $(shell echo ... > FILE)
        written |= {expand(r, var) for r in re.findall(r"^(\S+):[^\n]*\n\t[^\n]*-o \$@", text, re.M)}  # cc -o $@
        clean = re.search(r"^clean:\n\trm -f (.*)$", text, re.M).group(1)
        assert {expand(w, var) for w in clean.split()} == written, name  # make clean removes what it wrote
        assert written == {"model", ".build", t.program_name(PROGRAM)}, name
        assert written <= set(outs), name


def test_an_export_over_a_built_one_replaces_all_the_build_wrote(digits, tmp_path):
    """After ``make``, an export over the project leaves exactly its own files and the user's: the
    program and ``.build`` are gone (``.build`` stayed, as if it were the user's file)."""
    import shutil
    import subprocess

    from conftest import missing_tool

    from npukit.codegen.project import build_outputs

    if shutil.which("make") is None or shutil.which("cc") is None:
        missing_tool("make and a C compiler are needed")
    exp = tmp_path / "exp"
    digits.export(exp)
    exported = set(_tree(exp))
    subprocess.run(["make", "-s"], cwd=exp, check=True, capture_output=True, timeout=600)
    (exp / "notes.txt").write_text("mine\n")
    built = set(_tree(exp)) - exported - {"notes.txt"}
    assert built == {"model", ".build"} and built <= set(build_outputs())
    s = digits.copy()
    s.set_bits("fp16", processor="dla")
    s.export(exp)
    assert set(_tree(exp)) == set(s.code) | {"notes.txt"}
    assert not (exp / ".build").exists() and not (exp / "model").exists()


def test_an_export_over_a_corrupt_manifest_says_what_is_wrong_with_it(digits, tmp_path):
    """An earlier export whose manifest.json is corrupt: the export said "no npukit manifest.json"
    though the file is there; it now says the file is not an npukit manifest and why, as ``npukit
    build`` says it of the same file."""
    from npukit.codegen.build import study_of_export

    exp = tmp_path / "exp"
    digits.export(exp)
    tail = "; an export replaces its directory whole, so give a new or empty directory"
    for text, why in [("{broken", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
                      ("[1, 2]", "a JSON list, not an object"),
                      ('{"files": []}', "missing 'profile', 'ops'"),
                      ('{"files": "x", "profile": "p", "ops": []}', "'files' is not a list")]:  # fmt: skip
        (exp / "manifest.json").write_text(text)
        before = _tree(exp)
        with pytest.raises(npukit.NpukitError) as e:
            digits.export(exp)
        assert str(e.value) == f"{exp}: the directory is not empty and its manifest.json is not an npukit manifest ({why}){tail}"
        assert _tree(exp) == before and sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    (exp / "manifest.json").write_text("{broken")
    with pytest.raises(npukit.NpukitError) as b:
        study_of_export(exp)
    assert str(b.value) == f"{exp / 'manifest.json'}: not an npukit manifest (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"
    (exp / "manifest.json").unlink()  # no manifest at all: as before
    with pytest.raises(npukit.NpukitError) as e:
        digits.export(exp)
    assert str(e.value) == f"{exp}: the directory is not empty and no npukit export wrote it (no npukit manifest.json){tail}"


def test_a_report_under_a_file_names_the_file_in_the_way(digits, tmp_path):
    """``report("afile/r.html")`` with ``afile`` a file said "cannot create its directory: File
    exists"; it names the file, as an export to ``afile/sub`` does, and writes nothing."""
    (tmp_path / "afile").write_text("x")
    with pytest.raises(npukit.NpukitError) as e:
        digits.report(tmp_path / "afile" / "r.html")
    assert str(e.value) == f"{tmp_path / 'afile' / 'r.html'}: cannot create its directory: {tmp_path / 'afile'} is a file, not a directory"
    with pytest.raises(npukit.NpukitError) as e:
        digits.export(tmp_path / "afile" / "sub")
    assert str(e.value) == f"{tmp_path / 'afile' / 'sub'}: cannot create a directory there: {tmp_path / 'afile'} is a file, not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"] and (tmp_path / "afile").read_text() == "x"


def test_a_read_only_earlier_export_is_refused_with_the_kernels_own_permission_checks(tmp_path):
    """The same refusal without emulation: a process without CAP_DAC_OVERRIDE (an ordinary user, or
    root with it dropped through ``setpriv``) exports over a ``chmod -R a-w`` export."""
    import os
    import shutil
    import subprocess
    import sys

    from conftest import ROOT as root

    exp = tmp_path / "exp"
    before_files = _an_export(exp)
    _chmod_tree(exp, write=False)
    script = ("import sys, npukit, npukit.export_dir as export_dir\n"
              "try:\n"
              "    export_dir.atomic_write_tree(sys.argv[1], {'Makefile': '# two\\n', 'manifest.json': '{}'})\n"
              "except npukit.NpukitError as e:\n"
              "    print(e)\n")  # fmt: skip
    cmd = [sys.executable, "-c", script, str(exp)]
    if os.geteuid() == 0:
        caps = "-dac_override,-dac_read_search"
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: cannot drop CAP_DAC_OVERRIDE")
        cmd = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", *cmd]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
        if r.returncode and r.stderr.startswith("setpriv"):
            pytest.skip(f"setpriv cannot drop the capability here: {r.stderr.strip()}")
        assert r.returncode == 0, r.stderr
        assert r.stdout == (f"{exp}: cannot replace the earlier export: {exp} is not writable, so its files cannot be "
                            f"removed; make it writable (chmod -R u+w {exp}) or give a new directory\n")  # fmt: skip
        assert _tree(exp) == {k: v.encode() for k, v in before_files.items()}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]
    finally:
        _chmod_tree(exp, write=True)
