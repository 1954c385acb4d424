"""PyTorch: a .pt2 archive or an ExportedProgram through TVM's ExportedProgram importer."""

from __future__ import annotations

from pathlib import Path

from ...errors import ModelError, UnsupportedOpError
from ...progress import Progress
from .. import load as _load_tvm
from . import resize_scales
from .common import Imported, _at, _bind_input_shapes, _check_input_shapes, _Marks, _run_quietly, _Source
from .tagging import _finish
from .torch_dims import _check_ranges, _dims, _pinned_along, _shared_dims
from .torch_names import node_names


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


def _params(ep) -> dict[str, str]:
    """A placeholder of the program holding a weight (parameter, buffer, constant) -> its state_dict name."""
    return {s.arg.name: str(s.target) for s in ep.graph_signature.input_specs
            if s.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR") and s.target is not None}  # fmt: skip


def _import_exported_program(ep, path: str, input_shapes) -> Imported:
    # the user's program: its nodes are named by the module paths that made them (torch_names).  Its
    # inputs are checked before the decomposition and the tvm import, so a bad program is answered quickly.
    user_calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    user_nodes = {n.name: n for n in user_calls}
    user_out = next((n for n in ep.graph.nodes if n.op == "output"), None)
    user_inputs = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    declared, syms, ranges, words = _dims(ep, user_inputs)
    about = {k: words[sym] for k, sym in syms.items()}
    _check_input_shapes(path, _pinned_along(declared, syms, input_shapes), input_shapes, about)
    _check_ranges(path, declared, syms, ranges, input_shapes)
    if not user_nodes:
        raise ModelError(f"{path}: the program has no ops")
    param_of = _params(ep)
    names, aliases = node_names(user_calls, param_of)
    held = {name: tuple(int(x) for x in t.shape) for name, t in (*ep.state_dict.items(), *ep.constants.items())
            if hasattr(t, "shape")}  # fmt: skip

    _load_tvm()
    import torch  # noqa: PLC0415
    from tvm import relax  # noqa: PLC0415
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter  # noqa: PLC0415

    # aten.linear stays one op (TVM converts it to matmul + add): torch's decomposition of a linear
    # whose input is not contiguous (a MultiheadAttention's, batch_first) expands the weight to
    # one copy per batch row, which folding made a weight batch-times the model's
    table = torch.export.default_decompositions()
    table.pop(torch.ops.aten.linear.default, None)
    ep = _run_quietly(lambda: ep.run_decompositions(table), lambda err: ModelError(
        f"{path}: torch decomposition failed: {err}"))
    user_inputs = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    if not calls:
        raise ModelError(f"{path}: the program has no ops")

    marks = _Marks()

    _pool_strides(ep)
    # the program's weights by their module paths (stem.weight): TVM binds them as constants
    fqn = {id(v): n for n, v in (*ep.named_parameters(), *ep.named_buffers(), *ep.constants.items())}
    bound: dict = {}  # the tvm tensor a weight became -> its path
    params = _params(ep)

    def words_of(a) -> str:
        """An FX node of the decomposed program in the model's words: a weight's state_dict name, an
        input's name, else the user's node it came from."""
        if a.op == "placeholder":
            return params.get(a.name, a.name)
        return _user_source(a, user_nodes, names, _target_name(a.target)).name

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
            if "upsample_nearest2d.vec" in cmap:
                cmap["upsample_nearest2d.vec"] = self._npk_upsample_nearest
            if "upsample_bilinear2d.vec" in cmap:
                cmap["upsample_bilinear2d.vec"] = lambda node, base=cmap["upsample_bilinear2d.vec"]: (
                    self._npk_upsample_linear(node, base))
            if "grid_sampler_2d.default" in cmap:
                cmap["grid_sampler_2d.default"] = self._npk_grid_sample
            if "native_group_norm.default" in cmap:
                cmap["native_group_norm.default"] = lambda node, base=cmap["native_group_norm.default"]: (
                    self._npk_group_norm(node, base))
            return {k: self._npk_wrap(k, fn) for k, fn in cmap.items()}

        def _npk_group_norm(self, node, base):
            """``aten.native_group_norm`` (input, weight, bias, N, C, HxW, groups, eps) of a GroupNorm
            without affine: TVM's converter passes the missing weight and bias on as null (a crash
            further on); here gamma 1 and beta 0, as it writes an instance norm's."""
            x, w, b, *_, groups, eps = node.args
            if w is not None and b is not None:
                return base(node)
            import numpy as np  # noqa: PLC0415

            x = self.env[x]
            shape, dt = self.shape_of(x), str(x.ty.dtype)
            gamma, beta = (self.env[a] if a is not None else relax.const(np.full(int(shape[1]), v, dt), dt)
                           for a, v in ((w, 1.0), (b, 0.0)))  # fmt: skip
            return self.block_builder.emit(relax.op.nn.group_norm(x, gamma, beta, int(groups), 1, list(range(2, len(shape))),
                                                                  float(eps)))  # fmt: skip

        def _npk_upsample_nearest(self, node):
            """``aten.upsample_nearest2d.vec``: torch's "nearest" takes source pixel floor(dst * in / out)
            for a given size (TVM's converter wrote half_pixel coordinates rounded to the nearest,
            other pixels wherever out / in is not whole: 6 x 4 to 5 x 7), floor(dst * float(1 / scale))
            for a scale: ``resize_scales``."""
            x, size, scale, _ = resize_scales.torch_args(node, linear=False)
            x = self.env[x]
            if not size:
                size, takes = resize_scales.torch_plan(self.shape_of(x), scale, "nearest_neighbor")
                if takes is not None:
                    return self.block_builder.emit(resize_scales.emit(relax, x, takes))
            return self.block_builder.emit(relax.op.image.resize2d(
                x, [int(d) for d in size], layout="NCHW", method="nearest_neighbor",
                coordinate_transformation_mode="asymmetric", rounding_method="floor"))

        def _npk_upsample_linear(self, node, base):
            """``aten.upsample_bilinear2d.vec``: TVM's converter, where it maps pixels as torch does
            (``resize_scales``; torch.export decomposes bicubic into gathers and arithmetic)."""
            why = resize_scales.torch_linear_refusal(node, self.shape_of(self.env[node.args[0]]))
            if why is not None:
                raise UnsupportedOpError(f"{path}: node {marks.current}: {why}")
            return base(node)

        def _npk_grid_sample(self, node):
            """``aten.grid_sampler_2d`` (input, grid, interpolation, padding, align_corners): torch's
            grid is [N, H_out, W_out, 2]; Relax's ``image.grid_sample`` takes it as [N, 2, H_out, W_out]
            (as ONNX's converter permutes it). TVM's PyTorch converter passes torch's grid on as it is,
            which made the output [N, C, W_out, 2] (the grid's last two dims), not [N, C, H_out, W_out]."""
            args = self.retrieve_args(node)
            data, grid = args[0], args[1]
            given = list(args[2:5])
            mode, pad, align = given + [0, 0, False][len(given):]
            method = {0: "bilinear", 1: "nearest", 2: "bicubic"}.get(int(mode), "bilinear")
            padding = {0: "zeros", 1: "border", 2: "reflection"}.get(int(pad), "zeros")
            grid = self.block_builder.emit(relax.op.permute_dims(grid, [0, 3, 1, 2]))
            return self.block_builder.emit(relax.op.image.grid_sample(
                data, grid, method=method, layout="NCHW", padding_mode=padding, align_corners=bool(align)))

        def _npk_reduce(self, node, reduce):
            """``torch.amax`` / ``amin`` (which TVM's frontend has no converter for): a max / min
            over the given dims."""
            dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", ())
            keep = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
            dims = [dim] if isinstance(dim, int) else list(dim)
            return self.block_builder.emit(reduce(self.env[node.args[0]], dims or None, keepdims=bool(keep)))

        def _npk_wrap(self, key, fn):
            def wrapped(node, *rest):
                src = _user_source(node, user_nodes, names, key)
                ins = ", ".join(repr(words_of(a)) for a in node.all_input_nodes)
                marks.current = f"{src.name!r} ({src.op_type}{'; inputs ' + ins if ins else ''})"
                ret = fn(node, *rest)
                if not hasattr(ret, "same_as"):  # python values (shapes, ints): no op
                    idx = marks.index(src, merge=True)
                    marks.elided.setdefault(idx, "folded to a constant at import")
                    return ret
                return marks.record(self.block_builder, relax, ret, src, merge=True)

            return wrapped

    supported = set(Importer().convert_map)
    _check_supported(path, calls, supported, user_nodes, names)
    marks.progress = Progress(len(user_nodes), "npukit: importing")
    with marks.progress:
        raw = _run_quietly(lambda: Importer().from_exported_program(ep, False, False, False, None), lambda err: ModelError(
            f"{path}: TVM's PyTorch importer failed{_at('node', marks)}: {err}"))
    out_node = user_out if user_out is not None else next(n for n in ep.graph.nodes if n.op == "output")
    outs = [_output_name(a, names, param_of) for a in _flatten(out_node.args[0])]
    raw = _bind_input_shapes(raw, user_inputs, input_shapes, path, marks, _shared_dims(declared, syms))
    return _finish(raw, marks, "torch", path, user_inputs, outs, _weight_names(raw, bound), aliases, held)


def _output_name(a, names: dict, param_of: dict) -> str:
    """A program output by its node's name (an input's or a weight's where the program returns one)."""
    name = getattr(a, "name", None)
    if name is None:
        return str(a)
    return names.get(name) or param_of.get(name) or name


def _check_supported(path: str, calls, supported: set, user_nodes: dict, names: dict) -> None:
    """Every op of the decomposed program is one TVM's frontend converts: else refused, each named by
    the user's node it came from.  An op with side effects (printing, a custom op registered as
    effectful) reaches TVM as torch's internal ``with_effects`` wrapper: it is named for the op."""
    bad: dict = {}  # (node, op) -> is a side effect
    for n in calls:
        key = getattr(n.target, "__name__", str(n.target))
        if key in supported:
            continue
        effect = key == "with_effects" and len(n.args) > 1
        op = _target_name(n.args[1]) if effect else _target_name(n.target)
        bad.setdefault((_user_source(n, user_nodes, names, op).name, op), effect)
    if not bad:
        return
    kinds = sorted({op for _, op in bad})
    listing = "; ".join(f"{name!r} ({op}{', a side effect' if eff else ''})" for (name, op), eff in list(bad.items())[:20])
    more = " ..." if len(bad) > 20 else ""
    hint = ("; npukit studies what a program computes: leave side effects (printing, logging, effectful custom ops) "
            "out of forward() before torch.export") if any(bad.values()) else ""  # fmt: skip
    raise UnsupportedOpError(f"{path}: {len(bad)} node(s) use ops TVM's PyTorch frontend cannot import ({', '.join(kinds)}): "
                             f"{listing}{more}{hint}")  # fmt: skip


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


def _user_source(node, user_nodes: dict, names: dict, key: str) -> _Source:
    """The node of the user's program a (possibly decomposed) FX node came from, by its name
    (``names``: FX name -> the node's name, torch_names).

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
            return _Source(names.get(name, name), _target_name(user_nodes[name].target))
        stack.extend(getattr(ns, "from_node", None) or ())
    if node.name in user_nodes:
        return _Source(names.get(node.name, node.name), _target_name(user_nodes[node.name].target))
    return _Source(node.name, key)


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    else:
        yield x


