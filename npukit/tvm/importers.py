"""Model importers: ONNX, TFLite, PyTorch ExportedProgram, Relax IRModule -> OpGraph + tagged module.

Every format goes through TVM's own Relax frontend.  The frontends throw the model's names away
(bindings become ``lv``, ``lv1`` ...), so each is driven through a thin subclass that, after every
model node is converted, binds the node's result and records which node it came from.  Walking the
bindings in order then attributes every Relax call to the node whose conversion emitted it (helper
calls a converter emits, such as a bias ``add``, included).

After ``FoldConstant`` the module is rebuilt once into the *tagged* module: one dataflow block,
every op call bound to a readable name and carrying a span ``npukit:<op_id>``.  Spans survive
``FuseOpsByPattern`` and ``MergeCompositeFunctions``, so a partitioned module can be read back op
by op without trusting any generated name.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError, NpukitError, ShapeError, UnsupportedOpError, closest
from ..graph import Op, OpGraph, Tensor, freeze, short_op
from . import load as _load_tvm
from . import remapper

SPAN_PREFIX = "npukit:"
MODEL_EXTENSIONS = (".onnx", ".tflite", ".pt2")
MAC_KINDS = frozenset({"conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose",
                       "matmul", "attention", "dense", "linear", "einsum"})  # fmt: skip


@dataclass
class Imported:
    """An imported model: the OpGraph and the tagged Relax module it was read from."""

    graph: OpGraph
    mod: Any  # tvm.IRModule


@dataclass
class _Source:
    name: str
    op_type: str
    outputs: tuple[str, ...] = ()


@dataclass
class _Marks:
    """What the frontend hooks record while a model converts."""

    sources: list[_Source] = field(default_factory=list)
    owner: dict[str, int] = field(default_factory=dict)  # marked var name -> source index
    elided: dict[int, str] = field(default_factory=dict)  # source index -> what became of it
    current: str = ""  # the node being converted (for error messages)
    _by_name: dict[str, int] = field(default_factory=dict)  # source name -> index (merged sources)

    def index(self, src: _Source, merge: bool = False) -> int:
        """The index of ``src``; with ``merge``, one index per source name (the pieces a
        decomposition made of one model node all belong to that node)."""
        if merge and src.name in self._by_name:
            return self._by_name[src.name]
        idx = len(self.sources)
        self.sources.append(src)
        if merge:
            self._by_name[src.name] = idx
        return idx

    def record(self, bb, relax, sym, src: _Source, merge: bool = False):
        """Bind ``sym`` (a converter's result) and remember that ``src`` produced it."""
        idx = self.index(src, merge)
        if isinstance(sym, (relax.Call, relax.Tuple, relax.TupleGetItem)):
            sym = bb.emit(sym)
        if isinstance(sym, relax.Var):
            if sym.name in self.owner:
                first = self.sources[self.owner[sym.name]].name
                self.elided[idx] = f"identity: passes on the value of {first!r}"
            elif isinstance(sym, relax.DataflowVar) or sym.name not in self._params:
                self.owner[sym.name] = idx
            else:
                self.elided[idx] = "identity: passes on a model input"
        else:
            self.elided[idx] = "folded to a constant at import"
        return sym

    _params: frozenset = frozenset()


# ---------------------------------------------------------------------------------------------
# entry point


def import_model(model, input_shapes: dict | None = None) -> Imported:
    """Import a model file path, an ``onnx.ModelProto``, an ExportedProgram or a Relax IRModule."""
    if isinstance(model, (str, os.PathLike)):  # path checks first: they need no tvm
        path = Path(model)
        if not path.exists():
            raise ModelError(f"{path}: no such file")
        if path.is_dir():
            raise ModelError(f"{path}: is a directory, expected a model file ({', '.join(MODEL_EXTENSIONS)})")
        ext = path.suffix.lower()
        if ext not in MODEL_EXTENSIONS:
            raise ModelError(
                f"{path}: unknown model extension {ext or '(none)'!r}; accepted: "
                f"{', '.join(MODEL_EXTENSIONS)}, or pass a torch.export.ExportedProgram or a Relax IRModule"
            )
        if path.stat().st_size == 0:
            raise ModelError(f"{path}: file is empty")
        if ext == ".onnx":
            return _import_onnx_file(path, input_shapes)
        if ext == ".tflite":
            return _import_tflite(path, input_shapes)
        return _import_pt2(path, input_shapes)
    tvm = _load_tvm()
    if isinstance(model, tvm.IRModule):
        return _import_relax(model, input_shapes)
    tname = type(model).__module__ + "." + type(model).__name__
    if tname.startswith("onnx") and hasattr(model, "graph"):
        return _import_onnx(model, "<onnx.ModelProto>", input_shapes)
    if hasattr(model, "graph_signature") and hasattr(model, "graph_module"):
        return _import_exported_program(model, "<ExportedProgram>", input_shapes)
    raise ModelError(
        f"cannot import a {tname}: pass a path ({', '.join(MODEL_EXTENSIONS)}), an onnx.ModelProto, "
        "a torch.export.ExportedProgram or a tvm IRModule"
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # TVM errors carry a C++ backtrace; the message is the last meaningful line
    for ln in reversed(lines):
        if not ln.startswith(("File ", "at ", "0:", "1:")) and "Traceback" not in ln:
            return ln[:400]
    return lines[0][:400] if lines else type(err).__name__


def _fix_hint(name: str, shape_hint: str) -> str:
    import shlex  # noqa: PLC0415

    # quoted for a shell when the input's name needs it (spaces, quotes, newlines ...)
    arg = shlex.quote(f"{name}={shape_hint.replace(' ', '')}")
    return f"pin it with npukit.Study(..., input_shapes={{{name!r}: ({shape_hint})}}) or --input-shape {arg}"


def _check_input_shapes(path, declared: dict[str, list], input_shapes: dict | None) -> dict:
    """Validate user shapes against declared inputs; raise ShapeError for symbolic dims left."""
    input_shapes = dict(input_shapes or {})
    for k in input_shapes:
        if k not in declared:
            raise ShapeError(f"{path}: input_shapes names {k!r}, which is not a model input; {closest(k, declared)}")
    out = {}
    for name, dims in declared.items():
        if name in input_shapes:
            shp = tuple(input_shapes[name])
            if not all(isinstance(d, (int, np.integer)) and d > 0 for d in shp):
                raise ShapeError(f"{path}: input_shapes[{name!r}] = {shp}: every dim must be a positive integer")
            if dims is not None and len(shp) != len(dims):
                raise ShapeError(
                    f"{path}: input_shapes[{name!r}] has rank {len(shp)} but input {name!r} has rank {len(dims)}"
                )
            for i, (d, want) in enumerate(zip(dims or (), shp)):
                if isinstance(d, int) and d > 0 and d != int(want):
                    raise ShapeError(f"{path}: input {name!r} dim {i} is fixed at {d} in the model; input_shapes asks "
                                     f"for {int(want)} (only symbolic dims can be pinned)")  # fmt: skip
            out[name] = [int(d) for d in shp]
            continue
        if dims is None:
            raise ShapeError(f"{path}: input {name!r} has unknown rank; {_fix_hint(name, '1, 3, 224, 224')}")
        bad = [(i, d) for i, d in enumerate(dims) if not isinstance(d, int) or d <= 0]
        if bad:
            i, d = bad[0]
            label = f"{d!r}" if isinstance(d, str) and d else "unknown"
            hint = ", ".join(str(x if isinstance(x, int) and x > 0 else 1) for x in dims)
            raise ShapeError(
                f"{path}: input {name!r} dim {i} is symbolic ({label}) in shape "
                f"[{', '.join(str(x) if isinstance(x, int) and x > 0 else (x or '?') for x in dims)}]; "
                f"npukit needs static shapes: {_fix_hint(name, hint)}"
            )
        out[name] = list(dims)
    return out


# ---------------------------------------------------------------------------------------------
# ONNX


def _import_onnx_file(path: Path, input_shapes) -> Imported:
    import onnx  # noqa: PLC0415

    try:
        m = onnx.load(str(path))
    except Exception as e:  # noqa: BLE001 - protobuf raises several kinds
        raise ModelError(f"{path}: not a readable ONNX model, the file may be truncated ({_first_line(e)})") from None
    return _import_onnx(m, str(path), input_shapes)


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

    def node_name(n) -> str:
        return n.name or (n.output[0] if n.output else n.op_type)

    # every tensor read must be defined somewhere: catches truncated files that still parse
    inits = {t.name for t in graph.initializer}
    defined = set(inits) | {i.name for i in graph.input} | {""}
    for n in graph.node:
        for t in n.input:
            if t not in defined:
                raise ModelError(
                    f"{path}: node {node_name(n)!r} ({n.op_type}) reads tensor {t!r} that nothing defines "
                    "(is the file truncated?)"
                )
        defined.update(n.output)
    for o in graph.output:
        if o.name not in defined:
            raise ModelError(f"{path}: model output {o.name!r} is produced by no node (is the file truncated?)")

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
        declared[i.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "")
                            for d in tt.shape.dim]  # fmt: skip
    shapes = _check_input_shapes(path, declared, input_shapes)

    marks = _Marks()
    nodes = list(graph.node)
    const_names: dict[Any, str] = {}

    class Importer(F.ONNXGraphImporter):
        def _parse_graph_initializers(self, g):
            super()._parse_graph_initializers(g)
            for t in g.initializer:
                c = self._nodes.get(t.name)
                if c is not None:
                    const_names[c] = t.name

        def _convert_operator(self, op_name, inputs, attrs, opset):
            k = len(marks.sources)
            n = nodes[k] if k < len(nodes) else None
            name = node_name(n) if n is not None else attrs.get("tvm_custom", {}).get("name", op_name)
            marks.current = f"{name!r} ({op_name})"
            sym = super()._convert_operator(op_name, inputs, attrs, opset)
            outs = tuple(n.output) if n is not None else ()
            return marks.record(self.bb, relax, sym, _Source(name, op_name, outs))

    opset = None
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            opset = o.version
    if not opset:
        raise ModelError(f"{path}: the model declares no opset of the default ONNX domain (opset_import is "
                         "empty); is the file truncated?")  # fmt: skip
    marks._params = frozenset(i.name for i in graph.input)
    # the importer is made inside the call so that nothing outside holds its BlockBuilder when a
    # conversion fails (see _run_quietly)
    raw = _run_quietly(lambda: Importer(shapes, "float32", keep_params_in_input=False, sanitize=False).from_onnx(graph, opset),
                       lambda err: ModelError(
        f"{path}: TVM's ONNX importer failed{_at('node', marks)}: {err}"))
    input_names = [i.name for i in graph.input if i.name not in inits]
    out_names = [o.name for o in graph.output]
    return _finish(raw, marks, "onnx", path, input_names, out_names, const_names)


def _at(what: str, marks: _Marks) -> str:
    return f" at {what} {marks.current}" if marks.current else ""


def _run_quietly(fn, error):
    """``fn()`` with the frontends' output silenced; a failure becomes ``error(first line)``.

    The failed frontend's objects (a BlockBuilder with open blocks ...) are released while stderr
    is still silenced: otherwise TVM logs "BlockBuilder destroyed with remaining blocks!" when
    they are collected, after npukit's own one-line error.
    """
    keep: BaseException | None = None
    with _quiet():
        try:
            return fn()
        except NpukitError as e:
            keep = e.with_traceback(None)
        except Exception as e:  # noqa: BLE001 - every frontend failure becomes one ModelError
            keep = error(_first_line(e))
        gc.collect()
    raise keep


@contextlib.contextmanager
def _quiet():
    """Silence the frontends' prints, Python warnings and TVM's C++ log lines on stderr.

    The frontends print on every failure and TVM logs warnings such as "Fast mode segfaults ..."
    for ``take``; npukit reports problems itself, as NpukitErrors that name the node.
    """
    buf = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(buf), _silence_fd(2):
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _silence_fd(fd: int):
    try:
        saved = os.dup(fd)
    except OSError:  # no real file descriptor (some notebook front ends)
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


# ---------------------------------------------------------------------------------------------
# TFLite


def _import_tflite(path: Path, input_shapes) -> Imported:
    buf = path.read_bytes()
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ModelError(f"{path}: not a TFLite flatbuffer (no 'TFL3' file identifier)")
    try:
        import tflite  # noqa: PLC0415
    except ImportError:
        raise ModelError(f"{path}: reading .tflite files needs the 'tflite' package (pip install tflite)") from None
    _load_tvm()
    from tvm import relax  # noqa: PLC0415
    from tvm.relax.frontend.tflite import tflite_frontend as TF  # noqa: PLC0415

    try:
        model = tflite.Model.GetRootAsModel(buf, 0)
        if model.SubgraphsLength() < 1:
            raise ModelError(f"{path}: the TFLite model has no subgraph")
        sg = model.Subgraphs(0)
        nops = sg.OperatorsLength()
        # touch every tensor and buffer: truncated files fail here rather than deep inside TVM
        tensor_names = [sg.Tensors(i).Name().decode("utf-8", "replace") for i in range(sg.TensorsLength())]
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            b = model.Buffers(t.Buffer())
            if b is not None and b.DataLength():
                _ = b.DataAsNumpy()
            if t.ShapeLength():
                _ = t.ShapeAsNumpy()
            if t.ShapeSignatureLength():
                _ = t.ShapeSignatureAsNumpy()
        declared = {}
        for idx in sg.InputsAsNumpy():
            t = sg.Tensors(int(idx))
            sig = t.ShapeSignatureAsNumpy() if t.ShapeSignatureLength() else t.ShapeAsNumpy()
            shape = t.ShapeAsNumpy() if t.ShapeLength() else None
            dims = None if shape is None else [int(s) if int(g) > 0 else "" for s, g in zip(shape, sig, strict=False)]
            declared[tensor_names[int(idx)]] = dims
        outputs = [int(i) for i in sg.OutputsAsNumpy()]
    except ModelError:
        raise
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{path}: corrupt or truncated TFLite file ({_first_line(e)})") from None
    if nops == 0:
        raise ModelError(f"{path}: the model has no ops")

    shapes = _check_input_shapes(path, declared, input_shapes)

    marks = _Marks()
    marks._params = frozenset(declared)

    class Converter(TF.OperatorConverter):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.convert_map = {key: self._npk_wrap(key, fn) for key, fn in self.convert_map.items()}

        def _npk_wrap(self, code, fn):
            def wrapped(*args, **kwargs):
                op = kwargs["op"] if "op" in kwargs else args[0]
                outs = self.get_output_tensors(op)
                names = tuple(o.tensor.Name().decode("utf-8", "replace") for o in outs)
                name = names[0] if names else code
                marks.current = f"{name!r} ({code})"
                ret = fn(*args, **kwargs)
                if ret is None:  # prefetched constant: no op
                    marks.sources.append(_Source(name, code, names))
                    marks.elided[len(marks.sources) - 1] = "folded to a constant at import"
                    return None
                return marks.record(self.bb, relax, ret, _Source(name, code, names))

            return wrapped

        def check_unsupported_ops(self):
            bad = []
            for i in range(self.subgraph.OperatorsLength()):
                op = self.subgraph.Operators(i)
                code = self.get_op_code_str(op)
                if code not in self.convert_map:
                    outs = self.get_output_tensors(op)
                    nm = outs[0].tensor.Name().decode("utf-8", "replace") if outs else f"op{i}"
                    bad.append((nm, code))
            if bad:
                kinds = sorted({k for _, k in bad})
                listing = "; ".join(f"{n!r} ({k})" for n, k in bad[:20])
                raise UnsupportedOpError(
                    f"{path}: {len(bad)} op(s) TVM's TFLite frontend cannot import ({', '.join(kinds)}): {listing}"
                )
            super().check_unsupported_ops()

    raw = _run_quietly(
        lambda: TF.from_tflite(model, shape_dict={k: tuple(v) for k, v in shapes.items()}, op_converter=Converter),
        lambda err: ModelError(f"{path}: TVM's TFLite importer failed{_at('op', marks)}: {err}"),
    )
    ins = list(declared)
    outs = [tensor_names[i] for i in outputs]
    return _finish(raw, marks, "tflite", str(path), ins, outs, {})


# ---------------------------------------------------------------------------------------------
# PyTorch


def _import_pt2(path: Path, input_shapes) -> Imported:
    import zipfile  # noqa: PLC0415

    if not zipfile.is_zipfile(path):
        raise ModelError(f"{path}: not a torch.export archive (a .pt2 is a zip file); the file may be truncated "
                         "or of another format")  # fmt: skip
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise ModelError(f"{path}: loading .pt2 files needs PyTorch (pip install 'npukit[torch]')") from None
    ep = _run_quietly(lambda: torch.export.load(str(path)), lambda err: ModelError(
        f"{path}: not a readable torch.export program, the file may be truncated ({err})"))
    return _import_exported_program(ep, str(path), input_shapes)


def _import_exported_program(ep, path: str, input_shapes) -> Imported:
    # the user's program: its FX node names are the names npukit keeps.  Its inputs are checked
    # before the decomposition and the tvm import, so a bad program is answered quickly.
    user_nodes = {n.name: n for n in ep.graph.nodes if n.op == "call_function"}
    user_out = next((n for n in ep.graph.nodes if n.op == "output"), None)
    user_inputs = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    declared = {}
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs:
            val = node.meta.get("val")
            shape = getattr(val, "shape", None)
            declared[node.name] = None if shape is None else [
                int(d) if isinstance(d, int) or str(d).isdigit() else str(d) for d in shape]  # fmt: skip
    _check_input_shapes(path, declared, input_shapes)
    if not user_nodes:
        raise ModelError(f"{path}: the program has no ops")

    _load_tvm()
    import torch  # noqa: PLC0415, F401 - the frontend needs it
    from tvm import relax  # noqa: PLC0415
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter  # noqa: PLC0415

    ep = _run_quietly(ep.run_decompositions, lambda err: ModelError(f"{path}: torch decomposition failed: {err}"))
    user_inputs = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    if not calls:
        raise ModelError(f"{path}: the program has no ops")

    marks = _Marks()
    marks._params = frozenset(user_inputs)

    class Importer(ExportedProgramImporter):
        def create_convert_map(self):
            cmap = super().create_convert_map()
            return {k: self._npk_wrap(k, fn) for k, fn in cmap.items()}

        def _npk_wrap(self, key, fn):
            def wrapped(node, *rest):
                src = _user_source(node, user_nodes, key)
                marks.current = f"{src.name!r} ({src.op_type})"
                ret = fn(node, *rest)
                if not hasattr(ret, "same_as"):  # python values (shapes, ints): no op
                    idx = marks.index(src, merge=True)
                    marks.elided.setdefault(idx, "folded to a constant at import")
                    return ret
                return marks.record(self.block_builder, relax, ret, src, merge=True)

            return wrapped

    supported = set(Importer().convert_map)
    bad = [(n.name, n.target.__name__) for n in calls if getattr(n.target, "__name__", str(n.target)) not in supported]
    if bad:
        kinds = sorted({k for _, k in bad})
        listing = "; ".join(f"{n!r} ({k})" for n, k in bad[:20])
        raise UnsupportedOpError(f"{path}: {len(bad)} node(s) use ops TVM's PyTorch frontend cannot import ({', '.join(kinds)}): {listing}")
    raw = _run_quietly(lambda: Importer().from_exported_program(ep, False, False, False, None), lambda err: ModelError(
        f"{path}: TVM's PyTorch importer failed{_at('node', marks)}: {err}"))
    out_node = user_out if user_out is not None else next(n for n in ep.graph.nodes if n.op == "output")
    outs = [getattr(a, "name", str(a)) for a in _flatten(out_node.args[0])]
    raw = _bind_input_shapes(raw, user_inputs, input_shapes, path)
    return _finish(raw, marks, "torch", path, user_inputs, outs, {})


def _target_name(target) -> str:
    """An FX node's target as the user reads it: ``aten.conv2d.default``, ``getitem``."""
    return str(target) if hasattr(target, "_schema") else getattr(target, "__name__", str(target))


def _user_source(node, user_nodes: dict, key: str) -> _Source:
    """The node of the user's program a (possibly decomposed) FX node came from.

    ``run_decompositions`` renames what it rewrites (``conv2d`` -> ``convolution``, ``linear`` ->
    ``permute`` + ``addmm``); torch records the provenance in ``node.meta["from_node"]``, a chain
    of NodeSource objects, which leads back to the node the user sees in ``ep.graph``.
    """
    stack = list(node.meta.get("from_node") or ())
    seen = 0
    while stack and seen < 64:
        ns = stack.pop(0)
        seen += 1
        name = getattr(ns, "name", None)
        if name in user_nodes:
            return _Source(name, _target_name(user_nodes[name].target))
        stack.extend(getattr(ns, "from_node", None) or ())
    if node.name in user_nodes:
        return _Source(node.name, _target_name(user_nodes[node.name].target))
    return _Source(node.name, key)


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    else:
        yield x


# ---------------------------------------------------------------------------------------------
# Relax


def _import_relax(mod, input_shapes) -> Imported:
    _load_tvm()
    from tvm import relax  # noqa: PLC0415

    names = [gv.name_hint for gv in mod.functions]
    if "main" not in names:
        raise ModelError(f"<IRModule>: no 'main' function; it has {', '.join(sorted(names)) or 'none'}")
    f = mod["main"]
    if not isinstance(f, relax.Function):
        raise ModelError("<IRModule>: 'main' is not a Relax function")
    marks = _Marks()
    for blk in f.body.blocks:
        for b in blk.bindings:
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, _load_tvm().ir.Op):
                marks.owner[b.var.name] = len(marks.sources)
                marks.sources.append(_Source(b.var.name, b.value.op.name))
    ins = [p.name for p in f.params]
    declared = {}
    for p in f.params:
        shape = getattr(p.ty, "shape", None)
        declared[p.name] = None if shape is None else [_dim(d) for d in shape]
    _check_input_shapes("<IRModule>", declared, input_shapes)
    mod = _bind_input_shapes(mod, ins, input_shapes, "<IRModule>")
    return _finish(mod, marks, "relax", "<IRModule>", ins, [], {})


def _dim(d) -> int | str:
    """A Relax shape dim as an int, or the name of its symbolic variable."""
    try:
        return int(d)
    except (TypeError, ValueError):
        return str(d)


def _bind_input_shapes(mod, labels, input_shapes, path: str):
    """Pin the symbolic dims of ``main``'s inputs to the user's ``input_shapes`` (BindSymbolicVars).

    Used where the frontend itself cannot take the shapes (ExportedProgram, Relax IRModule)."""
    if not input_shapes:
        return mod
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    binding: dict = {}
    for p, label in zip(mod["main"].params, labels, strict=False):
        dims, shape = input_shapes.get(label), getattr(p.ty, "shape", None)
        if dims is None or shape is None:
            continue
        for i, (d, v) in enumerate(zip(shape, dims, strict=False)):
            if isinstance(_dim(d), int):
                if int(d) != int(v):
                    raise ShapeError(f"{path}: input {label!r} dim {i} is fixed at {int(d)} in the model; "
                                     f"input_shapes asks for {int(v)} (only symbolic dims can be pinned)")  # fmt: skip
            elif isinstance(d, tvm.ir.expr.Var):
                if binding.get(d, int(v)) != int(v):
                    raise ShapeError(f"{path}: input_shapes gives the symbolic dim {d} both {binding[d]} and {int(v)}")
                binding[d] = int(v)
    return relax.transform.BindSymbolicVars(binding, "main")(mod) if binding else mod


# ---------------------------------------------------------------------------------------------
# the common part: fold, walk, name, tag


def _const_array(c) -> np.ndarray:
    data = getattr(c, "data", None)
    if data is not None and hasattr(data, "numpy"):
        return data.numpy()
    v = c.value
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


def _static(x):
    """A non-tensor argument (shape, prim value, string, dtype) as plain Python, else None."""
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    if isinstance(x, relax.ShapeExpr):
        return tuple(int(v) for v in x.values)
    value = getattr(x, "value", None)  # IntImm, FloatImm, StringImm (modules moved between releases)
    if isinstance(value, (int, float, str)) and not isinstance(x, tvm.ir.GenericConst):
        return value
    return None


def _plain(v):
    """Relax attribute values as plain Python (tuples, ints, floats, strs)."""
    if isinstance(v, str):  # tvm_ffi dtypes subclass str
        return str(v)
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if hasattr(v, "__len__") and not isinstance(v, (str, bytes)) and not hasattr(v, "dtype"):
        try:
            return tuple(_plain(x) for x in v)
        except TypeError:
            pass
    for attr in ("value",):
        if hasattr(v, attr) and isinstance(getattr(v, attr), (int, float, str)):
            return getattr(v, attr)
    return str(v)


def _attrs(call) -> dict:
    a = call.attrs
    if a is None:
        return {}
    out = {}
    for k in dir(a):
        if k.startswith("_") or k == "id_":
            continue
        try:
            v = getattr(a, k)
        except Exception:  # noqa: BLE001, S112
            continue
        if callable(v):
            continue
        out[k] = _plain(v)
    return out


_IDENT = re.compile(r"[^A-Za-z0-9_]")


def _var_name(s: str) -> str:
    s = _IDENT.sub("_", s).strip("_") or "op"
    if s[0].isdigit():
        s = "n" + s
    if s == "main":  # a binding named "main" would push the function itself to "main1"
        s = "main_"
    return s[:48]


def _shape_of(ty, what: str, path: str) -> tuple[tuple[int, ...], str]:
    shape = getattr(ty, "shape", None)
    dtype = str(getattr(ty, "dtype", "float32"))
    if shape is None:
        raise ShapeError(f"{path}: {what} has an unknown shape; npukit needs static shapes")
    dims = []
    for i, d in enumerate(shape):
        try:
            dims.append(int(d))
        except (TypeError, ValueError):
            raise ShapeError(
                f"{path}: {what} has a symbolic dim {i} ({d}); npukit needs static shapes "
                "(pin the model's input shapes, or this op's output size is data-dependent)"
            ) from None
    return tuple(dims), dtype


def _finish(raw, marks: _Marks, fmt: str, path: str, input_names, output_names, const_names) -> Imported:
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    _attribute_pending(raw["main"], marks)
    computes = {marks.owner[b.var.name] for blk in raw["main"].body.blocks for b in blk.bindings
                if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op) and b.var.name in marks.owner}  # fmt: skip
    # FoldConstant works only inside dataflow blocks: a Relax module written with plain bindings
    # would keep its constant-only ops.  Only such modules are converted (the conversion also
    # collapses var-to-var bindings, which would move a frontend's op onto a renamed binding).
    plain = any(not isinstance(blk, relax.DataflowBlock) and any(isinstance(b.value, relax.Call) for b in blk.bindings)
                for blk in raw["main"].body.blocks)  # fmt: skip
    folded = _run_quietly(
        lambda: relax.transform.FoldConstant()(relax.transform.ConvertToDataflow(min_size=1)(raw) if plain else raw),
        lambda err: ModelError(f"{path}: FoldConstant failed: {err}"),
    )
    f = folded["main"]

    tensors: dict[str, Tensor] = {}
    consts: dict[str, np.ndarray] = {}
    ops: list[dict] = []
    env: dict[str, Any] = {}  # var name -> tid | tuple of tids

    labels = []
    for i, p in enumerate(f.params):
        label = input_names[i] if i < len(input_names) else p.name
        shape, dtype = _shape_of(p.ty, f"input {label!r}", path)
        tid = f"in{i}"
        tensors[tid] = Tensor(tid, shape, dtype, "input", None, label)
        env[p.name] = tid
        labels.append(label)

    def const_tid(c) -> str:
        tid = f"c{len(consts)}"
        arr = _const_array(c)
        consts[tid] = arr
        tensors[tid] = Tensor(tid, tuple(int(s) for s in arr.shape), str(arr.dtype), "const", None,
                              const_names.get(c, ""))  # fmt: skip
        return tid

    def tids_of(x, argname: str, static: dict) -> list[str]:
        """Tensor ids of an argument (tuples flattened); static values go to ``static``."""
        if isinstance(x, relax.Var):
            return _as_list(env[x.name])
        if isinstance(x, tvm.ir.GenericConst) and isinstance(x.ty, relax.TensorType):
            return [const_tid(x)]
        if isinstance(x, relax.Tuple):
            return [t for y in x.fields for t in tids_of(y, argname, static)]
        val = _static(x)
        static[argname] = val if val is not None else str(x)
        return []

    owner_at = _owners_after_fold([b for blk in f.body.blocks for b in blk.bindings], marks)
    k = -1
    for blk in f.body.blocks:
        for b in blk.bindings:
            k += 1
            v = b.value
            vname = b.var.name
            if isinstance(b, relax.MatchCast) or isinstance(v, relax.Var):
                env[vname] = env.get(v.name) if isinstance(v, relax.Var) else None
            elif isinstance(v, relax.Call):
                if not isinstance(v.op, tvm.ir.Op):
                    raise ModelError(f"{path}: binding {vname!r} calls {v.op}, which is not a Relax operator")
                op_id = len(ops)
                static: dict = {}
                argnames = [a.name for a in v.op.arguments]
                in_tids = [t for j, arg in enumerate(v.args)
                           for t in tids_of(arg, argnames[j] if j < len(argnames) else f"arg{j}", static)]  # fmt: skip
                ty = b.var.ty
                if isinstance(ty, relax.TupleType):
                    fields = [(f"t{op_id}.{k}", fty) for k, fty in enumerate(ty.fields)]
                elif isinstance(ty, relax.TensorType):
                    fields = [(f"t{op_id}", ty)]
                else:
                    raise ModelError(f"{path}: op {v.op.name} ({vname}) returns {ty}, not a tensor")
                for tid, fty in fields:
                    label = f"node {marks.sources[owner_at[k]].name!r}" if owner_at[k] is not None else vname
                    shp, dt = _shape_of(fty, f"output of {v.op.name} ({label})", path)
                    tensors[tid] = Tensor(tid, shp, dt, "act", op_id)
                outs = tuple(t for t, _ in fields)
                env[vname] = outs if isinstance(ty, relax.TupleType) else outs[0]
                attrs = _attrs(v)
                attrs.update(static)
                ops.append(dict(op_id=op_id, op=v.op.name, attrs=attrs, inputs=tuple(in_tids), outputs=outs,
                                src=owner_at[k], var=vname))  # fmt: skip
            elif isinstance(v, relax.TupleGetItem):
                tup = env.get(v.tuple_value.name) if isinstance(v.tuple_value, relax.Var) else None
                env[vname] = tup[v.index] if isinstance(tup, tuple) else tup
            elif isinstance(v, relax.Tuple):
                env[vname] = tuple(t for y in v.fields for t in _as_list(_env_of(y, env, const_tid)))
            elif isinstance(v, tvm.ir.GenericConst):
                env[vname] = const_tid(v)
            elif isinstance(v, relax.If):
                raise UnsupportedOpError(f"{path}: control flow (relax.If at {vname!r}) is not supported")
            else:
                raise ModelError(f"{path}: binding {vname!r} holds a {type(v).__name__}, which npukit cannot read")
    if not ops:
        raise ModelError(f"{path}: the model has no ops left after constant folding")
    out_tids = _as_list(_env_of(f.body.body, env, const_tid))

    names, sources = _name_ops(ops, marks)
    # a node's declared outputs name the tensors of its last op
    by_src: dict[int, list[int]] = {}
    for o in ops:
        if o["src"] is not None:
            by_src.setdefault(o["src"], []).append(o["op_id"])
    for s, ids in by_src.items():
        src, last = marks.sources[s], ops[ids[-1]]
        if len(src.outputs) == len(last["outputs"]):
            for tid, nm in zip(last["outputs"], src.outputs, strict=True):
                tensors[tid] = _with_name(tensors[tid], nm)
    for i, tid in enumerate(out_tids):
        if i < len(output_names) and output_names[i] and tensors[tid].kind == "act":
            tensors[tid] = _with_name(tensors[tid], output_names[i])

    tagged, var_names = _emit_tagged(relax, tvm, f, ops, names, labels)

    op_objs = tuple(
        Op(op_id=o["op_id"], name=names[o["op_id"]], source=sources[o["op_id"]][0],
           source_op=sources[o["op_id"]][1], op=o["op"], attrs=freeze(o["attrs"]),
           inputs=o["inputs"], outputs=o["outputs"], var=var_names[o["op_id"]])
        for o in ops
    )  # fmt: skip
    used = {o["src"] for o in ops}
    elided = {src.name: marks.elided.get(i, "folded away at import (FoldConstant): its value became a constant"
                                         if i in computes else "no computation of its own: passes on another node's value")
              for i, src in enumerate(marks.sources) if i not in used}  # fmt: skip
    graph = OpGraph(
        ops=op_objs, tensors=freeze(tensors), inputs=tuple(t for t, v in tensors.items() if v.kind == "input"),
        outputs=tuple(out_tids), consts=freeze(consts), elided=freeze(elided), source_format=fmt, path=path,
    )  # fmt: skip
    return Imported(graph, tagged)


def _attribute_pending(f, marks: _Marks) -> None:
    """Give every unmarked binding to the node whose conversion emitted it.

    The hooks bind each node's result right after converting it, so a binding belongs to the
    first marked binding at or after it in emission order (helpers a converter emitted, such as
    the reshape + add of an ONNX Conv bias, come just before the node's own result).
    """
    pending: list[str] = []
    last = None
    for blk in f.body.blocks:
        for b in blk.bindings:
            name = b.var.name
            owner = marks.owner.get(name)
            if owner is None:
                pending.append(name)
                continue
            for p in pending:
                marks.owner[p] = owner
            pending.clear()
            last = owner
    if last is not None:  # trailing bindings (output tuples) belong to the last node
        for p in pending:
            marks.owner.setdefault(p, last)


def _owners_after_fold(bindings, marks: _Marks) -> list[int | None]:
    """The source node of each binding of the folded function.

    Bindings keep their names through FoldConstant, but the normaliser binds nested calls (the
    ``R.nonzero`` inside a frontend's ``match_cast``) to fresh vars whose names may repeat an
    earlier one.  A repeated or unknown name belongs, like the helpers before the fold, to the
    node of the next binding whose name is known.
    """
    out: list[int | None] = [None] * len(bindings)
    seen: set[str] = set()
    pending: list[int] = []
    last = None
    for k, b in enumerate(bindings):
        name = b.var.name
        own = None if name in seen else marks.owner.get(name)
        seen.add(name)
        if own is None:
            pending.append(k)
            continue
        out[k] = last = own
        for j in pending:
            out[j] = own
        pending.clear()
    for j in pending:
        out[j] = last
    return out


def _name_ops(ops: list[dict], marks: _Marks) -> tuple[dict[int, str], dict[int, tuple[str, str]]]:
    """Unique op names: a node's main op takes the node's own name, helpers ``<node>/<kind>``."""
    by_src: dict[int, list[int]] = {}
    for o in ops:
        if o["src"] is not None:
            by_src.setdefault(o["src"], []).append(o["op_id"])
    primary = {}
    for s, ids in by_src.items():
        macs_ids = [i for i in ids if short_op(ops[i]["op"]) in MAC_KINDS]
        primary[s] = macs_ids[0] if macs_ids else ids[-1]
    taken: set[str] = set()
    # the model's own names are reserved, so a made-up "a~2" never takes a real node's name
    reserved = {marks.sources[s].name for s in primary}

    def unique(n: str) -> str:
        k, cand = 1, n
        while cand in taken or (k > 1 and cand in reserved):
            k += 1
            cand = f"{n}~{k}"
        taken.add(cand)
        return cand

    names: dict[int, str] = {}
    sources: dict[int, tuple[str, str]] = {}
    for o in ops:  # main ops first, so the model's names stay exact
        s = o["src"]
        if s is not None and primary[s] == o["op_id"]:
            names[o["op_id"]] = unique(marks.sources[s].name)
    for o in ops:
        s = o["src"]
        if s is None:
            sources[o["op_id"]] = (o["var"], o["op"])
            names.setdefault(o["op_id"], unique(o["var"]))
        else:
            src = marks.sources[s]
            sources[o["op_id"]] = (src.name, src.op_type)
            if o["op_id"] not in names:
                names[o["op_id"]] = unique(f"{src.name}/{short_op(o['op'])}")
    return names, sources


def _with_name(t: Tensor, name: str) -> Tensor:
    return Tensor(t.tid, t.shape, t.dtype, t.kind, t.producer, name)


def _as_list(x) -> list:
    if x is None:
        return []
    if isinstance(x, tuple):
        return list(x)
    return [x]


def _env_of(e, env, const_tid):
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    if isinstance(e, relax.Var):
        return env.get(e.name)
    if isinstance(e, relax.Tuple):
        return tuple(t for y in e.fields for t in _as_list(_env_of(y, env, const_tid)))
    if isinstance(e, tvm.ir.GenericConst):
        return const_tid(e)
    return None


def _emit_tagged(relax, tvm, f, ops, names, labels):
    """Rebuild main as one dataflow block: op calls get readable names and an op-id span."""
    by_var = {o["var"]: o for o in ops}
    var_names: dict[int, str] = {}
    params = [relax.Var(_var_name(lb), p.ty) for p, lb in zip(f.params, labels, strict=True)]
    mapping: dict[str, Any] = {p.name: q for p, q in zip(f.params, params, strict=True)}
    m = remapper(mapping)
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            for blk in f.body.blocks:
                for b in blk.bindings:
                    v, vname = b.value, b.var.name
                    o = by_var.get(vname)
                    if isinstance(b, relax.MatchCast) or isinstance(v, relax.Var):
                        mapping[vname] = m(v)
                    elif o is not None:
                        i = o["op_id"]
                        span = tvm.ir.Span(tvm.ir.SourceName(f"{SPAN_PREFIX}{i}"), i, i, 0, 0)
                        call = relax.Call(v.op, [m(a) for a in v.args], v.attrs, v.ty_args, span)
                        mapping[vname] = bb.emit(call, name_hint=_var_name(names[i]))
                        var_names[i] = mapping[vname].name
                    elif isinstance(v, relax.TupleGetItem):
                        mapping[vname] = bb.emit(relax.TupleGetItem(m(v.tuple_value), v.index))
                    else:
                        mapping[vname] = bb.emit(m(v))
            out = bb.emit_output(m(f.body.body))
        bb.emit_func_output(out)
    return bb.get(), var_names


def op_id_of_span(span) -> int | None:
    """The op id a tagged call carries, or None."""
    if span is None:
        return None
    name = getattr(getattr(span, "source_name", None), "name", "")
    if name.startswith(SPAN_PREFIX):
        try:
            return int(name[len(SPAN_PREFIX):])
        except ValueError:
            return None
    return None


__all__ = ["Imported", "import_model", "op_id_of_span", "SPAN_PREFIX", "MODEL_EXTENSIONS"]
