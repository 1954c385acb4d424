"""The standalone HTML report (``study.report`` / ``npukit study --report``): self-contained and small,
the model's names escaped and shortened with the whole name on hover, the config as a table,
integer byte counts, and "1 op" for one op."""

from __future__ import annotations

import html
import re

from conftest import DIGITS_ONNX as DIGITS
from conftest import initializer, onnx_model, save_onnx, tensor_info

import npukit

# a node name that is markup, quotes and 60+ characters: it must reach the page as text only
HOSTILE = "</script><img src=x onerror=alert(1)> conv \"a\" & 'b' " + "x" * 30


def _model(tmp_path):
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], name=HOSTILE, pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("Softmax", ["r"], ["y"], name="soft", axis=1)]  # fmt: skip
    inits = [initializer("w", [4, 4, 3, 3], 1), initializer("b", [4], 2)]
    x, y = tensor_info("x", [1, 4, 8, 8]), tensor_info("y", [1, 4, 8, 8])
    return save_onnx(onnx_model(nodes, [x], [y], inits), tmp_path / "hostile.onnx")


def test_report_is_self_contained_escaped_and_readable(tmp_path):
    s = npukit.Study(_model(tmp_path), "arm-dsp-dla").pin("soft", "dsp").set_bits("int16", processor="dsp")
    page = s.report(tmp_path / "r.html").read_text(encoding="utf-8")

    assert len(page.encode()) < 2_000_000  # plotly's basic bundle, not the full one
    assert not re.search(r"<(script|link|img)[^>]*\s(src|href)=", page, re.I)  # nothing fetched at view time
    # the hostile name is text: never markup, escaped everywhere it appears
    assert "<img src=x" not in page and "</script><img" not in page  # the timeline's JSON escapes it too
    esc = html.escape(HOSTILE, quote=True)
    assert f"<span class='name' title='{esc}'>{esc}</span>" in page  # shortened in the cell, whole on hover

    # the config as a table of readable rows
    assert "<tr><td>placement policy</td><td><b>cost</b></td></tr>" in page
    assert "<tr><td>pin soft</td><td><b>dsp</b></td></tr>" in page
    assert "<tr><td>bits dsp</td><td><b>int16</b></td></tr>" in page

    # one op on the DSP: "1 op", never "1 ops"
    ops = s.totals["ops"]
    assert ops["dsp"] == 1
    assert "<b>dsp</b> 1 op, busy" in page and not re.search(r"\b1 ops\b", page)
    assert f"<b>{s.soc.host}</b> {ops[s.soc.host]:,} op" in page

    # byte counts are integers (with thousands separators), in the boundaries table
    b = s.boundaries
    assert len(b) >= 2  # into and out of the DSP
    head = page.split("<h2>boundaries</h2>", 1)[1].split("</tr>", 1)[0]
    col = [c for c in re.findall(r"<th>(.*?)</th>", head)].index("bytes")
    table = page.split("<h2>boundaries</h2>", 1)[1].split("</table>", 1)[0]
    rows = table.split("</tr>")[1:-1]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r)[col] for r in rows]
    assert cells == [f"{int(v):,}" for v in b["bytes"]]


def test_exports_keep_a_hostile_node_name_as_data(tmp_path):
    """Model Explorer's graph and the annotated ONNX carry the hostile name unchanged, as data: the
    JSON parses and names the node exactly; the ONNX passes the checker, keeps the node's name and
    carries npukit's fields on it."""
    import json

    import onnx

    s = npukit.Study(_model(tmp_path), "arm-dsp-dla")
    out = s.to_model_explorer(tmp_path / "me")
    doc = json.loads((out / "graph.json").read_text(encoding="utf-8"))
    names = {a["value"] for n in doc["graphs"][0]["nodes"] for a in n["attrs"] if a["key"] == "name"}
    assert HOSTILE in names
    path = s.annotated_onnx(tmp_path / "annotated.onnx")
    m = onnx.load(str(path))
    onnx.checker.check_model(m)
    node = next(n for n in m.graph.node if n.op_type == "Conv")
    meta = {e.key: e.value for e in node.metadata_props}
    assert node.name == HOSTILE and meta["npukit.processor"] == dict(zip(s.placement["name"], s.placement["processor"]))[HOSTILE]


def test_a_report_over_its_budget_keeps_the_same_share_of_every_table(tmp_path, monkeypatch):
    """The page stays under the byte budget (2 MB; lowered here so the digits model reaches it): each
    big table keeps the same share of its rows and says how many it shows."""
    from npukit import report

    s = npukit.Study(DIGITS, "arm-dsp-dla")
    full = report.report_html(s)
    assert "rows (the file is kept under" not in full
    budget = len(full.encode()) - 3000
    monkeypatch.setattr(report, "REPORT_BUDGET", budget)
    page = report.report_html(s)
    assert len(page.encode()) <= budget
    kept = re.findall(r"<p>the first (\d+) of (\d+) rows \(the file is kept under", page)
    assert kept and all(int(k) < int(n) for k, n in kept)
    assert "14" in [n for _, n in kept]  # the placement (14 ops) is cut
    assert page.count("<table class='t'") == full.count("<table class='t'")  # every table is still there


def test_the_same_study_writes_the_same_report_in_two_processes(tmp_path):
    """The report is deterministic: two processes (different hash seeds) write the same bytes (the
    timeline's plotly div had a random id: every report differed)."""
    import os
    import subprocess
    import sys

    code = ("import sys, npukit; s = npukit.Study(sys.argv[1], 'arm-dsp-dla'); s.set_bits('fp16', processor='dla');"
            "s.report(sys.argv[2])")  # fmt: skip
    pages = []
    for k, seed in enumerate(("1", "2")):
        out = tmp_path / f"r{k}.html"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", code, str(DIGITS), str(out)], check=True, env=env, timeout=300)
        pages.append(out.read_bytes())
    assert pages[0] == pages[1]
    assert b'id="npukit-timeline"' in pages[0]
