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
