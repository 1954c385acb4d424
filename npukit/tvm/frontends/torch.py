"""PyTorch: a .pt2 archive or an ExportedProgram through TVM's ExportedProgram importer."""

from __future__ import annotations

from pathlib import Path

from ...errors import ModelError, UnsupportedOpError
from ...progress import Progress
from .. import load as _load_tvm
from .common import Imported, _at, _bind_input_shapes, _check_input_shapes, _Marks, _run_quietly, _Source
from .tagging import _finish


def _import_pt2(path: Path, input_shapes) -> Imported:
    import zipfile  # noqa: PLC0415

    if not zipfile.is_zipfile(path):
        raise ModelError(f"{path}: not a torch.export archive (a .pt2 is a zip file); the file may be truncated "
                         "or of another format")  # fmt: skip
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    with open(path, "rb") as f:  # a zip ends with its directory's end record: PyTorch's writer adds no comment
        f.seek(max(Path(path).stat().st_size - 22, 0))
        whole = f.read(4) == b"PK\x05\x06"
    program = any("/models/" in n and n.endswith(".json") for n in names)
    if not program and not whole:  # (the directory found is a nested archive's: the end is cut off)
        raise ModelError(f"{path}: not a readable torch.export archive: its end is missing, the file may be truncated")
    if not program and any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
        raise ModelError(f"{path}: a TorchScript file (torch.jit.save), not a torch.export program; save one with "
                         "torch.export.save(torch.export.export(model, example_inputs), path)")  # fmt: skip
    if not program and any(n.endswith("/data.pkl") for n in names):
        raise ModelError(f"{path}: a torch.save() file (a pickled module or state dict), not a torch.export program; "
                         "save one with torch.export.save(torch.export.export(model, example_inputs), path)")  # fmt: skip
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise ModelError(f"{path}: loading .pt2 files needs PyTorch (pip install 'npukit[torch]')") from None
    ep = _run_quietly(lambda: torch.export.load(str(path)), lambda err: ModelError(
        f"{path}: not a readable torch.export program, the file may be truncated ({err})"))
    return _import_exported_program(ep, str(path), input_shapes)


def _check_ranges(ep, path: str, declared: dict, input_shapes) -> None:
    """A size given for a dynamic dim must lie in the range the program was exported for
    (``torch.export.Dim(min=, max=)``): the program's guards hold only there."""
    ranges = {str(k): v for k, v in (getattr(ep, "range_constraints", None) or {}).items()}
    for name, dims in declared.items():
        given = (input_shapes or {}).get(name)
        if dims is None or given is None:
            continue
        for ax, (d, n) in enumerate(zip(dims, given)):
            r = ranges.get(str(d)) if isinstance(d, str) else None
            if r is None:
                continue
            lo, hi = _bound(r.lower), _bound(r.upper)
            if (lo is not None and n < lo) or (hi is not None and n > hi):
                span = f"{'-inf' if lo is None else lo}..{'inf' if hi is None else hi}"
                raise ModelError(f"{path}: input {name!r} dim {ax} = {n} is outside the range the program was exported "
                                 f"for ({d} in {span})")  # fmt: skip


def _bound(x) -> int | None:
    """A range bound as an int, None when unbounded (sympy's and torch's infinities)."""
    try:
        v = int(x)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return None
    return v if abs(v) < 2**62 else None


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
    _check_ranges(ep, path, declared, input_shapes)
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

    _pool_strides(ep)
    # the program's weights by their module paths (stem.weight): TVM binds them as constants
    fqn = {id(v): n for n, v in (*ep.named_parameters(), *ep.named_buffers(), *ep.constants.items())}
    bound: dict = {}  # the tvm tensor a weight became -> its path

    class Importer(ExportedProgramImporter):
        def _convert_pytorch_tensor_to_tvm(self, tensor):
            out = super()._convert_pytorch_tensor_to_tvm(tensor)
            name = fqn.get(id(tensor))
            if name is not None:
                bound[out] = name
            return out

        def create_convert_map(self):
            cmap = super().create_convert_map()
            for key, reduce in (("amax.default", relax.op.max), ("amin.default", relax.op.min)):
                cmap.setdefault(key, lambda node, reduce=reduce: self._npk_reduce(node, reduce))
            return {k: self._npk_wrap(k, fn) for k, fn in cmap.items()}

        def _npk_reduce(self, node, reduce):
            """``torch.amax`` / ``amin`` (which TVM's frontend has no converter for): a max / min
            over the given dims."""
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", ())
            keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
            dims = [dim] if isinstance(dim, int) else list(dim)
            return self.block_builder.emit(reduce(self.env[node.args[0]], dims or None, keepdims=bool(keep)))

        def _npk_wrap(self, key, fn):
            def wrapped(node, *rest):
                src = _user_source(node, user_nodes, key)
                ins = ", ".join(repr(a.name) for a in node.all_input_nodes)
                marks.current = f"{src.name!r} ({src.op_type}{'; inputs ' + ins if ins else ''})"
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
    marks.progress = Progress(len(user_nodes), "npukit: importing")
    with marks.progress:
        raw = _run_quietly(lambda: Importer().from_exported_program(ep, False, False, False, None), lambda err: ModelError(
            f"{path}: TVM's PyTorch importer failed{_at('node', marks)}: {err}"))
    out_node = user_out if user_out is not None else next(n for n in ep.graph.nodes if n.op == "output")
    outs = [getattr(a, "name", str(a)) for a in _flatten(out_node.args[0])]
    raw = _bind_input_shapes(raw, user_inputs, input_shapes, path, marks)
    return _finish(raw, marks, "torch", path, user_inputs, outs, _weight_names(raw, bound))


def _weight_names(mod, bound: dict) -> dict:
    """The constants of ``main`` that are the program's weights -> their module paths."""
    tvm = _load_tvm()
    out: dict = {}

    def visit(x) -> None:
        if isinstance(x, tvm.ir.GenericConst):
            name = bound.get(getattr(x, "value", None)) if bound else None
            if name is not None:
                out[x] = name
        for y in getattr(x, "fields", None) or ():
            visit(y)

    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            for a in getattr(b.value, "args", None) or ():
                visit(a)
    return out


def _pool_strides(ep) -> None:
    """A pool whose stride torch wrote as ``[]`` (``F.max_pool2d(x, 2, ceil_mode=True)``: the stride
    is the kernel size) gets its kernel size as the stride, which TVM's converters require."""
    for node in ep.graph.nodes:
        name = getattr(node.target, "__name__", "")
        if node.op == "call_function" and name.split(".")[0] in ("max_pool2d", "max_pool2d_with_indices", "avg_pool2d",
                                                                  "max_pool1d", "avg_pool1d", "max_pool3d", "avg_pool3d"):
            args = list(node.args)
            if len(args) > 2 and isinstance(args[2], (list, tuple)) and not args[2]:
                args[2] = args[1]
                node.args = tuple(args)


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


