"""Shapes computed in an ONNX graph, evaluated at import.

torch's ONNX exporter writes ``Shape -> Gather -> Div -> Unsqueeze -> Concat -> Reshape`` for
every ``x.view(b, h // ws, ...)``: the Reshape's shape is a tensor computed at run time.  With the
model's input shapes pinned, every such chain has one value, so it is evaluated here (onnx's shape
inference for the tensors a ``Shape`` reads, onnx's reference evaluator for the ops) and replaced by
an initializer: Reshape, Expand, Slice, Tile, Range, Resize, Pad and ConstantOfShape then import as
static ops.  Nodes whose shape inputs truly depend on the data are refused with the node, its op type
and the input at fault.  Nothing here imports tvm.
"""

from __future__ import annotations

import warnings

import numpy as np

from ...errors import ModelError

# node inputs that decide an output shape: op -> input positions
SHAPE_INPUTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Range": (0, 1, 2),
    "Resize": (2, 3), "Upsample": (1,), "Pad": (1, 3), "ConstantOfShape": (0,), "TopK": (1,),
    "OneHot": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "ReduceSum": (1,), "ReduceMean": (1,),
    "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,), "CenterCropPad": (1,),
}  # fmt: skip
# outputs whose shape depends on the data itself
DATA_SHAPED = {"NonZero", "Unique", "NonMaxSuppression", "Compress", "StringSplit", "RegexFullMatch"}
_NEVER = {"If", "Loop", "Scan", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
          "Multinomial", "Bernoulli", "SequenceConstruct", "Optional"}  # fmt: skip
_MAX_FOLD = 1 << 16  # elements: a shape computation, not a weight


def _display(n) -> str:
    return n.name or next((o for o in n.output if o), n.op_type)


def fold_shapes(model, shapes: dict[str, list[int]], path: str, node_name=_display):
    """``(model', folded)``: ``model`` with its shape computations replaced by initializers, and the
    display names of the nodes removed.  Returns ``model`` itself when nothing folds.

    Folding repeats while it folds something: onnx's shape inference stops at a Reshape whose shape
    a Shape computes when it cannot propagate that Shape's value (Shape-1, before opset 13: torch's
    GroupNorm at opset 9), so the shapes after it are known only once that Shape has folded."""
    removed: dict = {}
    for _ in range(_MAX_ROUNDS):
        model, more = _fold_once(model, shapes, node_name)
        removed.update(more)
        if not more:
            break
    _check_data_dependent(model.graph, {}, path, node_name)
    return model, removed


_MAX_ROUNDS = 8


def _fold_once(model, shapes: dict[str, list[int]], node_name):
    """One round of ``fold_shapes``: (model', {removed node's display name: why})."""
    import onnx  # noqa: PLC0415
    from onnx import numpy_helper  # noqa: PLC0415

    graph = model.graph
    if not any(n.op_type in ("Shape", "Size") for n in graph.node) and not _computed_shape_inputs(graph):
        return model, {}
    static = _static_shapes(model, shapes)
    inits = {t.name: t for t in graph.initializer}
    value: dict[str, np.ndarray] = {}  # tensors known at import (shape-derived or constant)
    derived: set[str] = set()  # ... of which computed from a Shape / Size
    folded: list = []
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    cnodes = {n.output[0]: n for n in graph.node if n.op_type == "Constant" and n.output}

    def known(t: str) -> np.ndarray | None:
        if t in value:
            return value[t]
        if t in inits:
            arr = numpy_helper.to_array(inits[t])
            if arr.size <= _MAX_FOLD:
                value[t] = arr
                return arr
        return None

    outputs = {o.name for o in graph.output}
    for n in graph.node:
        if n.domain not in ("", "ai.onnx") or n.op_type in _NEVER or any(o in outputs for o in n.output):
            continue  # (a node that makes a model output stays: the output needs its producer)
        if n.op_type in ("Shape", "Size") and n.input and n.input[0] in static:
            dims = np.asarray(static[n.input[0]], dtype=np.int64)
            if n.op_type == "Size":
                out = np.asarray(int(np.prod(dims)), dtype=np.int64)
            else:
                a = {x.name: x.i for x in n.attribute}
                rank = len(dims)
                start, end = a.get("start", 0), a.get("end", rank)
                start, end = (max(0, min(rank, v + rank if v < 0 else v)) for v in (start, end))
                out = dims[start:end]
            value[n.output[0]] = out
            derived.add(n.output[0])
            folded.append(n)
            continue
        if n.op_type == "Constant":
            continue  # a Constant stays unless everything reading it folds (below)
        ins = [t for t in n.input if t]
        if not ins:
            continue
        from_shape = any(t in derived for t in ins)
        vals = []
        for t in ins:
            v = known(t) if t not in value else value[t]
            if v is None:
                v = _constant_node_value(cnodes, t)
            if v is None:
                break
            vals.append(v)
        else:
            # integer arithmetic on small constants is shape arithmetic too (torch writes Mod / Add of
            # Constants for slice bounds); float constants (weights, scales) stay for TVM to fold
            if not from_shape and not all(v.dtype.kind in "iub" for v in vals):
                continue
            outs = _evaluate(n, [known(t) if t else None for t in n.input], cnodes, opset)
            if not from_shape and outs is not None and not all(o.dtype.kind in "iub" for o in outs):
                continue
            if outs is not None and all(o.size <= _MAX_FOLD for o in outs):
                for name, o in zip(n.output, outs, strict=False):
                    if name:
                        value[name] = o
                        derived.add(name)
                folded.append(n)
    if not folded:
        return model, {}

    gone = {id(n) for n in folded}
    keep = [n for n in graph.node if id(n) not in gone]
    used = {t for n in keep for t in n.input} | {o.name for o in graph.output}
    # Constant nodes that only folded nodes read go too
    read_by_folded = {t for f in folded for t in f.input}
    consts_gone = [n for n in keep if n.op_type == "Constant" and not any(o in used for o in n.output)
                   and any(o in read_by_folded for o in n.output)]  # fmt: skip
    gone |= {id(n) for n in consts_gone}
    keep = [n for n in keep if id(n) not in gone]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(keep)
    have = {t.name for t in out.graph.initializer}
    for name in sorted(t for t in derived if t in used and t not in have):
        out.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value[name]), name))
    return out, {node_name(n): "computes a shape from the static input shapes: folded to a constant at import"
                 for n in list(folded) + consts_gone}  # fmt: skip


def _computed_shape_inputs(graph) -> bool:
    """Whether some node's shape input (``SHAPE_INPUTS``) is computed by a node other than a Constant:
    torch's ONNX export of ``F.pad`` writes its pads as ConstantOfShape -> Concat -> Reshape -> Slice
    -> Transpose -> Reshape -> Cast of Constants, with no Shape anywhere, and TVM's importer refuses
    such a Pad ("Dynamic pads are not supported yet") unless the chain is folded first."""
    computed = {o for n in graph.node if n.op_type != "Constant" for o in n.output}
    return any(k < len(n.input) and n.input[k] in computed
               for n in graph.node for k in SHAPE_INPUTS.get(n.op_type, ()))  # fmt: skip


def _constant_node_value(cnodes: dict, t: str):
    """The value of tensor ``t`` when a Constant node makes it (``cnodes``: output -> node), else None."""
    from onnx import numpy_helper  # noqa: PLC0415

    n = cnodes.get(t)
    if n is not None:
        for a in n.attribute:
            if a.name == "value":
                return numpy_helper.to_array(a.t)
            if a.name == "value_int":
                return np.asarray(a.i, dtype=np.int64)
            if a.name == "value_ints":
                return np.asarray(list(a.ints), dtype=np.int64)
            if a.name == "value_float":
                return np.asarray(a.f, dtype=np.float32)
            if a.name == "value_floats":
                return np.asarray(list(a.floats), dtype=np.float32)
    return None


def _static_shapes(model, shapes: dict) -> dict[str, list[int]]:
    """Static shapes of the graph's tensors, from onnx's shape inference with the inputs pinned."""
    import onnx  # noqa: PLC0415

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i in m.graph.input:
        if i.name in shapes and i.type.tensor_type.HasField("shape"):
            for d, v in zip(i.type.tensor_type.shape.dim, shapes[i.name], strict=False):
                d.Clear()
                d.dim_value = int(v)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    except Exception:  # noqa: BLE001 - an inference failure leaves the shapes unknown, nothing worse
        pass
    out: dict[str, list[int]] = {}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if all(isinstance(d, int) and d >= 0 for d in dims):
            out[vi.name] = dims
    for t in m.graph.initializer:
        out[t.name] = list(t.dims)
    return out


def _evaluate(node, inputs, cnodes, opset):
    """The outputs of one node on known inputs, by onnx's reference evaluator; None if it fails."""
    from onnx import helper  # noqa: PLC0415
    from onnx.reference import ReferenceEvaluator  # noqa: PLC0415

    names = [f"i{k}" if t else "" for k, t in enumerate(node.input)]
    feeds = {}
    vis = []
    for nm, t, v in zip(names, node.input, inputs, strict=True):
        if not t:
            continue
        if v is None:
            v = _constant_node_value(cnodes, t)
        if v is None:
            return None
        feeds[nm] = v
        vis.append(helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
    outs = [f"o{k}" for k in range(len(node.output))]
    n = helper.make_node(node.op_type, names, outs, domain=node.domain)
    n.attribute.extend(node.attribute)
    g = helper.make_graph([n], "shape", vis, [helper.make_value_info(o, helper.TypeProto()) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            res = ReferenceEvaluator(m).run(None, feeds)
    except Exception:  # noqa: BLE001 - TVM gets the node as it is
        return None
    return [np.asarray(r) for r in res]


def _check_data_dependent(graph, _unused, path: str, node_name) -> None:
    """Refuse a shape input that is computed from the data at run time, naming the node, its op
    type, the input and where its value comes from."""
    import onnx  # noqa: PLC0415

    consts = {t.name for t in graph.initializer} | {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    origin: dict[str, str] = {i.name: f"the model input {i.name!r}" for i in graph.input if i.name not in consts}
    for n in graph.node:
        src = None
        if n.op_type in DATA_SHAPED:
            src = f"node {node_name(n)!r} ({n.op_type}), whose output size depends on the data"
        elif n.op_type not in ("Shape", "Size"):
            src = next((origin[t] for t in n.input if t in origin), None)
        elif n.input and n.input[0] in origin and origin[n.input[0]].startswith("node "):
            src = origin[n.input[0]]  # the shape of a data-sized tensor
        for o in n.output:
            if src is not None:
                origin[o] = src
        for k in SHAPE_INPUTS.get(n.op_type, ()):
            if k < len(n.input) and n.input[k] and n.input[k] in origin and n.domain in ("", "ai.onnx"):
                try:
                    formal_inputs = onnx.defs.get_schema(n.op_type).inputs
                    formal = formal_inputs[min(k, len(formal_inputs) - 1)].name
                except Exception:  # noqa: BLE001 - an op onnx does not know: its input by position
                    formal = f"#{k}"
                raise ModelError(
                    f"{path}: node {node_name(n)!r} ({n.op_type}) has a data-dependent output shape: its input "
                    f"{formal!r} (tensor {n.input[k]!r}) is computed at run time from {origin[n.input[k]]}; "
                    "npukit needs shapes known at import"
                )
