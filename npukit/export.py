"""Exports for external viewers (no tvm).

* Model Explorer: ``graph.json`` in the adapter's JSON graph format (``{"graphs": [Graph]}``: nodes
  with ``id``, ``label``, ``namespace``, ``attrs``, ``incomingEdges``, ``outputsMetadata``, ``style``)
  plus one node-data overlay per figure (``processor.json``, ``latency_us.json``, ``energy_uj.json``,
  ``error_snr_db.json``) in its node-data format (``{graph id: {"results": {node id: {"value": ...,
  "bgColor": ...}}, "gradient": [...]}}``).  Nodes are grouped by namespace ``<processor>/partition<N>``
  so Model Explorer shows partitions as collapsible layers.
* Netron: a copy of the ONNX model whose nodes carry ``npukit.*`` entries in ``metadata_props``
  (Netron lists them in the node's properties) and a one-line ``doc_string``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from .errors import ModelError, NpukitError
from .io import atomic_write_bytes, atomic_write_files
from .report import processor_colors

GRAPH_ID = "npukit"


def _num(x) -> float | None:  # JSON has no inf / nan
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def model_explorer_graph(study) -> dict:
    g = study.graph
    plan = study.plan
    costs = study.result
    colors = processor_colors(study.soc)
    reasons = study.reasons()
    nodes = []
    for tid in g.inputs:
        t = g.tensors[tid]
        nodes.append({
            "id": f"input:{tid}", "label": "Input", "namespace": "",
            "attrs": [{"key": "name", "value": t.name}, {"key": "shape", "value": str(list(t.shape))},
                      {"key": "dtype", "value": t.dtype}],
            "incomingEdges": [],
            "outputsMetadata": [{"id": "0", "attrs": [{"key": "tensor_name", "value": t.name or tid},
                                                      {"key": "shape", "value": str(list(t.shape))}]}],
        })  # fmt: skip
    for op in g.ops:
        i = op.op_id
        c = costs.ops[i]
        proc = plan.processor[i]
        edges = []
        for k, t in enumerate(op.inputs):
            tt = g.tensors[t]
            if tt.kind == "input":
                edges.append({"sourceNodeId": f"input:{t}", "sourceNodeOutputId": "0", "targetNodeInputId": str(k)})
            elif tt.kind == "act":
                out_idx = g.ops[tt.producer].outputs.index(t)
                edges.append({"sourceNodeId": str(tt.producer), "sourceNodeOutputId": str(out_idx), "targetNodeInputId": str(k)})
        attrs = [("name", op.name), ("source", f"{op.source} ({op.source_op})"), ("op", op.op), ("processor", proc),
                 ("partition", str(plan.partition[i])), ("composite", plan.pattern[i] or "-"), ("reason", reasons[i]),
                 ("bits", c.bits), ("macs", f"{c.macs:,}"), ("bytes", f"{c.bytes:,.0f}"), ("cycles", f"{c.cycles:,.1f}"),
                 ("latency_us", f"{c.latency_us:.4f}"), ("energy_uj", f"{c.energy_uj:.5f}")]  # fmt: skip
        attrs += [(f"verdict.{p}", costs.verdicts[(i, p)].text) for p in study.soc.names]
        attrs += [(f"attr.{k}", str(v)) for k, v in op.attrs.items()]
        nodes.append({
            "id": str(i), "label": op.kind, "namespace": f"{proc}/partition{plan.partition[i]}",
            "attrs": [{"key": k, "value": v} for k, v in attrs],
            "incomingEdges": edges,
            "outputsMetadata": [{"id": str(k), "attrs": [{"key": "tensor_name", "value": g.tensors[t].name or t},
                                                         {"key": "shape", "value": str(list(g.tensors[t].shape))},
                                                         {"key": "dtype", "value": g.tensors[t].dtype}]}
                                for k, t in enumerate(op.outputs)],
            "style": {"backgroundColor": colors[proc], "borderColor": colors[proc], "hoveredBorderColor": "#000000"},
        })  # fmt: skip
    group_cfgs = [{"namespaceRegex": f"^{p}/.*", "backgroundColor": colors[p] + "22", "borderColor": colors[p]}
                  for p in study.soc.names]  # fmt: skip
    return {"graphs": [{"id": GRAPH_ID, "nodes": nodes, "groupNodeConfigs": group_cfgs}]}


def _overlay(name: str, values: dict[str, float], colors: dict[str, str] | None = None) -> dict:
    results = {}
    for k, v in values.items():
        r = {"value": _num(v)}
        if colors and k in colors:
            r["bgColor"] = colors[k]
        results[k] = r
    finite = [v for v in values.values() if _num(v) is not None]
    data: dict = {"name": name, "results": results}
    if not colors and finite:
        lo, hi = min(finite), max(finite)
        data["gradient"] = [{"stop": 0, "bgColor": "#e8f0fe"}, {"stop": 1, "bgColor": "#c5221f"}] if hi > lo else []
    return {GRAPH_ID: data}


def model_explorer_node_data(study, include_error: bool = False) -> dict[str, dict]:
    r = study.result
    colors = processor_colors(study.soc)
    idx = {p: k for k, p in enumerate(study.soc.names)}
    out = {
        "processor": _overlay("processor", {str(i): idx[p] for i, p in enumerate(r.plan.processor)},
                              {str(i): colors[p] for i, p in enumerate(r.plan.processor)}),
        "latency_us": _overlay("latency_us", {str(c.op_id): c.latency_us for c in r.ops}),
        "energy_uj": _overlay("energy_uj", {str(c.op_id): c.energy_uj for c in r.ops}),
    }  # fmt: skip
    if include_error:
        err = study.error
        out["error_snr_db"] = _overlay("error_snr_db", {str(i): s for i, s in zip(err["op_id"], err["snr_db"])})
    return out


def to_model_explorer(study, out_dir, include_error: bool = False) -> Path:
    """Write graph.json + node-data overlays into ``out_dir``: everything is computed first, each
    file is written under a temporary name and renamed into place; other files there are kept, but
    an overlay of npukit's that this export does not write (``error_snr_db.json`` of an earlier
    export with the error) is removed: it described another graph."""
    files = {"graph.json": json.dumps(model_explorer_graph(study), indent=1, ensure_ascii=False).encode("utf-8")}
    for name, data in model_explorer_node_data(study, include_error).items():
        files[f"{name}.json"] = json.dumps(data, indent=1, allow_nan=False).encode("utf-8")
    out = atomic_write_files(out_dir, files)
    for name in OVERLAYS:
        stale = Path(out) / f"{name}.json"
        if f"{name}.json" not in files and stale.is_file():
            stale.unlink()
    return out


OVERLAYS = ("processor", "latency_us", "energy_uj", "error_snr_db")  # the node-data files npukit writes


def annotated_onnx(study, path) -> Path:
    """A copy of the study's ONNX model with npukit's placement and figures on every node."""
    if study.graph.source_format != "onnx" or str(study.graph.path).startswith("<"):
        raise ModelError(f"annotated_onnx needs a study of an .onnx file; this one is {study.graph.source_format} "
                         f"({study.graph.path}); use to_model_explorer() for other formats")  # fmt: skip
    import onnx  # noqa: PLC0415

    src = Path(study.graph.path)
    if Path(path).resolve() == src.resolve():
        raise NpukitError(f"{path}: is the study's own model; write the annotated copy elsewhere")
    try:
        m = onnx.load(str(src))
    except Exception as e:  # noqa: BLE001 - the file changed or vanished since the study read it
        raise ModelError(f"{src}: cannot re-read the model to annotate it ({e})") from None
    r = study.result
    reasons = study.reasons()
    g = study.graph
    made = {t.name: t.producer for t in g.tensors.values() if t.kind == "act" and t.name}  # tensor name -> op

    def ops_of(n) -> tuple[int, ...]:
        """The ops a model node became: found by the tensors it makes (two nodes may share a name;
        the second goes by ``<name>~2``), else by its name."""
        key = n.name or (n.output[0] if n.output else n.op_type)
        for out in n.output:
            i = made.get(out)
            if i is not None and (g.ops[i].source == key or g.ops[i].source.startswith(key + "~")):
                return g.ops_of_source(g.ops[i].source)
        return g.ops_of_source(key)

    for n in m.graph.node:
        key = n.name or (n.output[0] if n.output else n.op_type)
        ids = ops_of(n)
        del n.metadata_props[:]
        if not ids:
            reason = study.graph.elided.get(key, "no op after import")
            entry = n.metadata_props.add()
            entry.key, entry.value = "npukit.placement", f"none: {reason}"
            continue
        procs = sorted({r.plan.processor[i] for i in ids})
        fields = {
            "npukit.processor": ", ".join(procs),
            "npukit.partition": ", ".join(map(str, sorted({r.plan.partition[i] for i in ids}))),
            "npukit.ops": ", ".join(f"{g.ops[i].name} ({g.ops[i].kind})" for i in ids),
            "npukit.reason": " | ".join(reasons[i] for i in ids),
            "npukit.bits": ", ".join(r.ops[i].bits for i in ids),
            "npukit.macs": f"{sum(r.ops[i].macs for i in ids):,}",
            "npukit.latency_us": f"{sum(r.ops[i].latency_us for i in ids):.4f}",
            "npukit.energy_uj": f"{sum(r.ops[i].energy_uj for i in ids):.5f}",
        }
        for k, v in fields.items():
            entry = n.metadata_props.add()
            entry.key, entry.value = k, v
        n.doc_string = f"npukit: on {', '.join(procs)}, {fields['npukit.latency_us']} us — {fields['npukit.reason']}"
    if m.ir_version < 10:
        m.ir_version = 10  # NodeProto.metadata_props exists from IR version 10
    return atomic_write_bytes(path, m.SerializeToString())


def serve_netron(path, port: int | None = None):
    """Serve a model with netron on loopback (no browser); returns (host, port)."""
    import netron  # noqa: PLC0415

    address = ("127.0.0.1", port) if port else None
    return netron.serve(str(path), None, address, False)


def netron_frame(study, path=None, port: int | None = None, height: int = 600):
    """``Study.netron``: the annotated ONNX (at ``path``, else a temporary file) served by netron on
    loopback, as a notebook IFrame (its URL outside IPython)."""
    import tempfile  # noqa: PLC0415

    if path is None:
        path = Path(tempfile.mkdtemp(prefix="npukit-netron-")) / (Path(study.graph.path).stem + ".npukit.onnx")
    study.annotated_onnx(path)
    host, port = serve_netron(path, port)
    try:
        from IPython.display import IFrame  # noqa: PLC0415

        return IFrame(f"http://{host}:{port}", width="100%", height=height)
    except ImportError:
        return f"http://{host}:{port}"
