"""ONNX: checks, then TVM's ONNX frontend driven through a subclass that records node names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import ModelError, UnsupportedOpError
from ...progress import Progress
from .. import load as _load_tvm
from .common import (
    _NAMES,
    Imported,
    _at,
    _check_input_shapes,
    _first_line,
    _Marks,
    _pinned_along,
    _run_quietly,
    _Source,
    check_input_dtype,
)
from .onnx_convert import convert
from .onnx_qop import piece_of
from .onnx_qop import rewrite as rewrite_qop
from .onnx_shapes import fold_shapes
from .sizes import check_onnx_sizes as check_sizes
from .tagging import _finish


def _import_onnx_file(path: Path, input_shapes) -> Imported:
    import onnx  # noqa: PLC0415

    try:
        m = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf raises several kinds
        raise ModelError(f"{path}: not a readable ONNX model, the file may be truncated ({_first_line(e)})") from None
    files = _load_external_data(m, Path(path))
    imp = _import_onnx(m, str(path), input_shapes)
    imp.files = files
    return imp


def _load_external_data(m, path: Path) -> tuple[Path, ...]:
    """Initializers kept in files beside the model (saved with ``save_as_external_data``): a missing
    or short file is named with the initializer, not blamed on the model file.  The files read."""
    import onnx  # noqa: PLC0415
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data  # noqa: PLC0415

    files: dict[Path, None] = {}
    for t in m.graph.initializer:
        if not uses_external_data(t):
            continue
        info = ExternalDataInfo(t)
        f = path.parent / info.location
        files[f] = None
        if not info.location or not f.is_file():
            raise ModelError(f"{path}: initializer {t.name!r} keeps its data in the file {info.location!r} beside the "
                             f"model, which {'is not a file' if f.exists() else 'is missing'}; copy it next to "
                             f"{path.name}")  # fmt: skip
    try:
        onnx.load_external_data_for_model(m, str(path.parent))
    except Exception as e:  # noqa: BLE001 - onnx raises several kinds
        raise ModelError(f"{path}: cannot read the model's external data ({_first_line(e)})") from None
    return tuple(files)


def _import_onnx(m, path: str, input_shapes) -> Imported:
    _load_tvm()
    from tvm import relax  # noqa: PLC0415
    from tvm.relax.frontend.onnx import onnx_frontend as F  # noqa: PLC0415

    if not m.HasField("graph") or m.ir_version == 0:
        raise ModelError(f"{path}: not an ONNX model (no graph / ir_version); is it the right file?")
    graph = m.graph
    if len(graph.node) == 0:
        raise ModelError(f"{path}: the model has no ops (graph {graph.name!r} is empty)")
    if m.ir_version < 3:
        raise ModelError(f"{path}: ONNX IR version {m.ir_version} is too old; TVM needs >= 3")
    opset = _default_opset(m, path)

    def node_name(n) -> str:
        # an unnamed RNN/LSTM/GRU's first output may be an empty optional: its first real output names it
        return n.name or next((o for o in n.output if o), n.op_type)

    # protobuf hands back bytes for a string field that is not UTF-8: a corrupt file
    for k, n in enumerate(graph.node):
        for what, v in (("name", n.name), ("op type", n.op_type), ("domain", n.domain), *(("tensor name", x) for x in
                        list(n.input) + list(n.output))):  # fmt: skip
            if not isinstance(v, str):
                raise ModelError(f"{path}: node #{k} has a {what} that is not valid UTF-8 ({v!r}); is the file corrupt?")
    for coll in (graph.input, graph.output, graph.initializer):
        for t in coll:
            if not isinstance(t.name, str):
                raise ModelError(f"{path}: a tensor name is not valid UTF-8 ({t.name!r}); is the file corrupt?")

    # element types TVM's importer has no dtype for (it said "unknown dtype `object`"), or whose values
    # no numpy array holds: named here, in the model's words
    inits = {t.name for t in graph.initializer}
    for i in graph.input:
        kind = i.type.WhichOneof("value")
        if i.name in inits or kind is None:
            continue
        if kind != "tensor_type":  # a sequence, map, optional or sparse tensor: no shape would help
            what = {"sequence_type": "a sequence", "map_type": "a map", "optional_type": "an optional value",
                    "sparse_tensor_type": "a sparse tensor"}.get(kind, kind)  # fmt: skip
            raise ModelError(f"{path}: input {i.name!r} is {what}, not a tensor; npukit studies models whose inputs "
                             "are dense tensors")  # fmt: skip
        if i.type.tensor_type.elem_type not in _FED:
            check_input_dtype(path, i.name, _elem_name(i.type.tensor_type.elem_type))
    for t in graph.initializer:
        if t.data_type in (8, 14, 15):  # STRING, COMPLEX64, COMPLEX128
            raise ModelError(f"{path}: initializer {t.name!r} is {_elem_name(t.data_type)}, which npukit cannot read; "
                             "only numeric and boolean constants")  # fmt: skip

    # every tensor read must be defined somewhere: catches truncated files that still parse
    defined = set(inits) | {i.name for i in graph.input} | {""}
    maker = {o: n for n in graph.node for o in n.output if o}
    for n in graph.node:
        for t in n.input:
            if t not in defined:
                later = maker.get(t)
                if later is not None:
                    raise ModelError(f"{path}: node {node_name(n)!r} ({n.op_type}) reads tensor {t!r}, which node "
                                     f"{node_name(later)!r} ({later.op_type}) makes later: the graph has a cycle or "
                                     "its nodes are out of order")  # fmt: skip
                raise ModelError(
                    f"{path}: node {node_name(n)!r} ({n.op_type}) reads tensor {t!r} that nothing defines "
                    "(is the file truncated?)"
                )
        for o in n.output:
            if o and o in defined:
                raise ModelError(f"{path}: node {node_name(n)!r} ({n.op_type}) writes tensor {o!r}, which is already "
                                 "defined; every tensor must have one producer")  # fmt: skip
        defined.update(n.output)
    check_sizes(graph, path)
    for o in graph.output:
        if o.name not in defined:
            raise ModelError(f"{path}: model output {o.name!r} is produced by no node (is the file truncated?)")

    # quantized operators (QLinearConv, QGemm ...) become DequantizeLinear -> float op -> QuantizeLinear
    m = rewrite_qop(m, path, node_name)
    graph = m.graph
    cmap = F._get_convert_map()
    control = {"If", "Loop", "Scan"}
    bad = [(node_name(n), n.op_type if not n.domain or n.domain == "ai.onnx" else f"{n.domain}.{n.op_type}")
           for n in graph.node if n.op_type not in cmap or n.op_type in control or n.domain not in ("", "ai.onnx")]  # fmt: skip
    if bad:
        kinds = sorted({k for _, k in bad})
        listing = "; ".join(f"{name!r} ({k})" for name, k in bad[:20]) + (" ..." if len(bad) > 20 else "")
        raise UnsupportedOpError(
            f"{path}: {len(bad)} node(s) use ops TVM's ONNX frontend cannot import "
            f"({', '.join(kinds)}): {listing}"
            + ("; control flow (If/Loop/Scan) is not supported" if control & set(kinds) else "")
        )

    declared = {}
    for i in graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        if not tt.HasField("shape"):
            declared[i.name] = None
            continue
        declared[i.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "")
                            for d in tt.shape.dim]  # fmt: skip
    shapes = _check_input_shapes(path, _pinned_along(declared, input_shapes, path), input_shapes)

    # shapes the graph computes from the (now static) input shapes become constants
    m, pre_elided = fold_shapes(m, shapes, path, node_name)
    graph = m.graph
    marks = _Marks(pre_elided=pre_elided)
    nodes = list(graph.node)
    const_names: dict[Any, str] = {}
    # TVM sees internal names only: a model's tensor named "main", "lv1" or "R" never meets TVM's own
    # identifiers, and names that differ by case or by characters a sanitiser drops stay distinct
    work, original = _internal_names(graph)
    shapes = {work.input[k].name: v for k, v in ((i, shapes.get(x.name)) for i, x in enumerate(graph.input))
              if v is not None}  # fmt: skip

    class Importer(F.ONNXGraphImporter):
        def _parse_graph_initializers(self, g):
            super()._parse_graph_initializers(g)
            for t in g.initializer:
                c = self._nodes.get(t.name)
                if c is not None:
                    const_names[c] = original.get(t.name, t.name)

        seen = 0  # nodes converted so far (the pieces of a quantized node share one source)

        def _convert_operator(self, op_name, inputs, attrs, opset):
            k = self.seen
            self.seen += 1
            n = nodes[k] if k < len(nodes) else None
            name = node_name(n) if n is not None else attrs.get("tvm_custom", {}).get("name", op_name)
            ins = ", ".join(repr(original.get(t, t)) for t in (n.input if n is not None else ()) if t)
            marks.current = f"{name!r} ({op_name}{'; inputs ' + ins if ins else ''})"
            sym, attrs = convert(relax, op_name, inputs, attrs, opset, f"{path}: node {name!r} ({op_name})")
            if sym is None:
                sym = super()._convert_operator(op_name, inputs, attrs, opset)
            outs = tuple(n.output) if n is not None else ()
            whole = piece_of(n) if n is not None else None  # a piece of a quantized node: that node's
            if whole is not None:
                return marks.record(self.bb, relax, sym, _Source(*whole), merge=True)
            return marks.record(self.bb, relax, sym, _Source(name, op_name, outs))

    # the importer is made inside the call so that nothing outside holds its BlockBuilder when a
    # conversion fails (see _run_quietly)
    _NAMES.clear()
    _NAMES.update(original)
    marks.progress = Progress(len(nodes), "npukit: importing")
    with marks.progress:
        raw = _run_quietly(lambda: Importer(shapes, "float32", keep_params_in_input=False, sanitize=False).from_onnx(work, opset),
                           lambda err: ModelError(
            f"{path}: TVM's ONNX importer failed{_at('node', marks)}: {err}"))
    input_names = [i.name for i in graph.input if i.name not in inits]
    out_names = [o.name for o in graph.output]
    return _finish(raw, marks, "onnx", path, input_names, out_names, const_names)




def _default_opset(m, path: str) -> int:
    """The opset of the default ONNX domain the model declares.  One newer than the installed onnx
    package knows (a typo, a file from a future exporter) is refused: TVM's importer took opset 99
    without a word and read every op as the latest version it knows, which may not be what the
    file means."""
    import onnx  # noqa: PLC0415

    opset = None
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            opset = o.version
    if not opset:
        raise ModelError(f"{path}: the model declares no opset of the default ONNX domain (opset_import is "
                         "empty); is the file truncated?")  # fmt: skip
    newest = onnx.defs.onnx_opset_version()
    if opset > newest:
        raise ModelError(f"{path}: the model declares ONNX opset {opset}, which the installed onnx "
                         f"{onnx.__version__} does not know; npukit reads opsets up to {newest} (export the model "
                         f"at opset {newest} or lower)")  # fmt: skip
    return opset


# ONNX element types npukit feeds (TensorProto.DataType): the numeric ones numpy holds, bool, float8
_FED = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20})


def _elem_name(et: int) -> str:
    import onnx  # noqa: PLC0415

    try:
        return onnx.TensorProto.DataType.Name(et).lower()
    except ValueError:
        return f"element type {et}"


def _internal_names(graph):
    """A copy of ``graph`` whose tensors are named ``npk_t<k>`` and nodes ``npk_n<k>``; and the map
    internal tensor name -> the model's own name."""
    work = type(graph)()
    work.CopyFrom(graph)
    names: dict[str, str] = {"": ""}

    def ren(x: str) -> str:
        if x not in names:
            names[x] = f"npk_t{len(names) - 1}"
        return names[x]

    for coll in (work.input, work.initializer, work.output, work.value_info):
        for t in coll:
            t.name = ren(t.name)
    for k, n in enumerate(work.node):
        n.name = f"npk_n{k}"
        n.input[:] = [ren(x) for x in n.input]
        n.output[:] = [ren(x) for x in n.output]
    for t in work.sparse_initializer:
        t.values.name = ren(t.values.name)
    return work, {v: k for k, v in names.items()}
