"""A minimal TFLite flatbuffer writer for tests (TensorFlow is not installed): float32 / float16 /
sparse constant tensors, builtin and custom operators.  Built with the ``tflite`` package's
generated builder functions and ``flatbuffers``."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class T:
    name: str | None  # None: the tensor has no name field (it is optional in the schema)
    shape: tuple[int, ...]
    dtype: str = "float32"  # float32 | float16 | int32 | int8 | uint8
    data: np.ndarray | None = None  # constant contents (for a sparse tensor: its non-zero values)
    sparse_csr: tuple[np.ndarray, np.ndarray] | None = None  # (row segments, column indices) of a 2-D CSR
    scale: list[float] | None = None  # quantization parameters (one per tensor, or per channel)
    zero_point: list[int] | None = None
    buffer: int | None = None  # the buffer index written (a malformed file: one the model lacks)
    external: tuple[int, int] | None = None  # (offset, size): data kept after the flatbuffer (over 2 GB)


@dataclass
class Op:
    code: str  # a BuiltinOperator name ("FULLY_CONNECTED") or "CUSTOM:<name>"
    inputs: list[str | int]  # tensors by name, or by index (two tensors may share a name, or have none)
    outputs: list[str | int]
    options: str | None = None  # "FullyConnectedOptions" | "AddOptions" | "TransposeConvOptions" | None
    fields: dict = field(default_factory=dict)  # the options' scalar fields: {"StrideW": 2, "Padding": 0}
    opcode_index: int | None = None  # the operator code index written (a malformed file: one the model lacks)


@dataclass
class Graph:
    tensors: list[T]
    ops: list[Op]
    inputs: list[str | int]
    outputs: list[str | int]
    extra: dict = field(default_factory=dict)
    subgraph: bool = True  # False: the model has no subgraph (a malformed file)


_TYPES = {"float32": 0, "float16": 1, "int32": 2, "uint8": 3, "int64": 4, "int16": 7, "int8": 9}


def build(g: Graph) -> bytes:
    import importlib

    import flatbuffers

    def mod(name):  # the generated module (``tflite.X`` is the class of the same name)
        return importlib.import_module(f"tflite.{name}")

    Buffer, DimensionMetadata, Int32Vector, Model, Operator, OperatorCode = map(
        mod, ["Buffer", "DimensionMetadata", "Int32Vector", "Model", "Operator", "OperatorCode"])
    SparsityParameters, SubGraph, Tensor = map(mod, ["SparsityParameters", "SubGraph", "Tensor"])
    from tflite.BuiltinOperator import BuiltinOperator
    from tflite.BuiltinOptions import BuiltinOptions
    from tflite.DimensionType import DimensionType
    from tflite.SparseIndexVector import SparseIndexVector

    b = flatbuffers.Builder(1024)
    names = {t.name: k for k, t in reversed(list(enumerate(g.tensors)))}  # (a name: its first tensor)

    def index(x) -> int:
        return x if isinstance(x, int) else names[x]

    def ivec(start, values, prepend=None, conv=int):
        start(b, len(values))
        for v in reversed(list(values)):
            (prepend or b.PrependInt32)(conv(v))
        return b.EndVector()

    # buffers: 0 is the empty buffer
    buf_offsets = []
    Buffer.Start(b)
    buf_offsets.append(Buffer.End(b))
    buf_of = {}
    for k, t in enumerate(g.tensors):
        if t.external is not None:
            Buffer.Start(b)
            Buffer.AddOffset(b, t.external[0])
            Buffer.AddSize(b, t.external[1])
            buf_of[k] = len(buf_offsets)
            buf_offsets.append(Buffer.End(b))
            continue
        if t.data is None:
            continue
        raw = np.ascontiguousarray(t.data.astype(t.dtype)).tobytes()
        data = b.CreateByteVector(raw)
        Buffer.Start(b)
        Buffer.AddData(b, data)
        buf_of[k] = len(buf_offsets)
        buf_offsets.append(Buffer.End(b))

    tensor_offsets = []
    for k, t in enumerate(g.tensors):
        name = b.CreateString(t.name) if t.name is not None else None
        shape = ivec(Tensor.StartShapeVector, t.shape)
        sparsity = None
        if t.sparse_csr is not None:
            segs, idx = t.sparse_csr

            def int32vec(vals):
                v = ivec(Int32Vector.StartValuesVector, vals)
                Int32Vector.Start(b)
                Int32Vector.AddValues(b, v)
                return Int32Vector.End(b)

            s_off, i_off = int32vec(segs), int32vec(idx)
            DimensionMetadata.Start(b)
            DimensionMetadata.AddFormat(b, DimensionType.DENSE)
            DimensionMetadata.AddDenseSize(b, t.shape[0])
            dense_dim = DimensionMetadata.End(b)
            DimensionMetadata.Start(b)
            DimensionMetadata.AddFormat(b, DimensionType.SPARSE_CSR)
            DimensionMetadata.AddArraySegmentsType(b, SparseIndexVector.Int32Vector)
            DimensionMetadata.AddArraySegments(b, s_off)
            DimensionMetadata.AddArrayIndicesType(b, SparseIndexVector.Int32Vector)
            DimensionMetadata.AddArrayIndices(b, i_off)
            csr_dim = DimensionMetadata.End(b)
            order = ivec(SparsityParameters.StartTraversalOrderVector, [0, 1])
            SparsityParameters.StartDimMetadataVector(b, 2)
            b.PrependUOffsetTRelative(csr_dim)
            b.PrependUOffsetTRelative(dense_dim)
            dims = b.EndVector()
            SparsityParameters.Start(b)
            SparsityParameters.AddTraversalOrder(b, order)
            SparsityParameters.AddDimMetadata(b, dims)
            sparsity = SparsityParameters.End(b)
        quant = None
        if t.scale is not None:
            QP = mod("QuantizationParameters")
            sc = ivec(QP.StartScaleVector, t.scale, prepend=b.PrependFloat32, conv=float)
            zp = ivec(QP.StartZeroPointVector, t.zero_point if t.zero_point is not None else [0] * len(t.scale), prepend=b.PrependInt64)
            QP.Start(b)
            QP.AddScale(b, sc)
            QP.AddZeroPoint(b, zp)
            quant = QP.End(b)
        Tensor.Start(b)
        Tensor.AddShape(b, shape)
        if quant is not None:
            Tensor.AddQuantization(b, quant)
        Tensor.AddType(b, _TYPES[t.dtype])
        Tensor.AddBuffer(b, t.buffer if t.buffer is not None else buf_of.get(k, 0))
        if name is not None:
            Tensor.AddName(b, name)
        if sparsity is not None:
            Tensor.AddSparsity(b, sparsity)
        tensor_offsets.append(Tensor.End(b))

    codes: list[str] = []
    for op in g.ops:
        if op.code not in codes:
            codes.append(op.code)
    code_offsets = []
    for c in codes:
        custom = b.CreateString(c.split(":", 1)[1]) if c.startswith("CUSTOM:") else None
        num = BuiltinOperator.CUSTOM if custom is not None else getattr(BuiltinOperator, c)
        OperatorCode.Start(b)
        OperatorCode.AddBuiltinCode(b, num)
        OperatorCode.AddDeprecatedBuiltinCode(b, min(num, 127))
        if custom is not None:
            OperatorCode.AddCustomCode(b, custom)
        OperatorCode.AddVersion(b, 1)
        code_offsets.append(OperatorCode.End(b))

    op_offsets = []
    for op in g.ops:
        ins = ivec(Operator.StartInputsVector, [-1 if x is None or x == "" else index(x) for x in op.inputs])
        outs = ivec(Operator.StartOutputsVector, [index(x) for x in op.outputs])
        opts = None
        if op.options is not None:
            table = mod(op.options)
            table.Start(b)
            for k, v in op.fields.items():
                getattr(table, f"Add{k}")(b, v)
            opts = table.End(b)
        Operator.Start(b)
        Operator.AddOpcodeIndex(b, op.opcode_index if op.opcode_index is not None else codes.index(op.code))
        Operator.AddInputs(b, ins)
        Operator.AddOutputs(b, outs)
        if opts is not None:
            Operator.AddBuiltinOptionsType(b, getattr(BuiltinOptions, op.options))
            Operator.AddBuiltinOptions(b, opts)
        op_offsets.append(Operator.End(b))

    def offvec(start, offs):
        start(b, len(offs))
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    tensors_v = offvec(SubGraph.StartTensorsVector, tensor_offsets)
    ops_v = offvec(SubGraph.StartOperatorsVector, op_offsets)
    in_v = ivec(SubGraph.StartInputsVector, [index(x) for x in g.inputs])
    out_v = ivec(SubGraph.StartOutputsVector, [index(x) for x in g.outputs])
    sg_name = b.CreateString("main")
    SubGraph.Start(b)
    SubGraph.AddTensors(b, tensors_v)
    SubGraph.AddInputs(b, in_v)
    SubGraph.AddOutputs(b, out_v)
    SubGraph.AddOperators(b, ops_v)
    SubGraph.AddName(b, sg_name)
    sg = SubGraph.End(b)
    sgs = offvec(Model.StartSubgraphsVector, [sg] if g.subgraph else [])
    codes_v = offvec(Model.StartOperatorCodesVector, code_offsets)
    bufs_v = offvec(Model.StartBuffersVector, buf_offsets)
    desc = b.CreateString("npukit test model")
    Model.Start(b)
    Model.AddVersion(b, 3)
    Model.AddOperatorCodes(b, codes_v)
    Model.AddSubgraphs(b, sgs)
    Model.AddDescription(b, desc)
    Model.AddBuffers(b, bufs_v)
    b.Finish(Model.End(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def dense_to_csr(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, row segments, column indices) of a 2-D matrix."""
    segs, idx, vals = [0], [], []
    for row in w:
        nz = np.nonzero(row)[0]
        idx.extend(nz.tolist())
        vals.extend(row[nz].tolist())
        segs.append(len(idx))
    return np.asarray(vals, w.dtype), np.asarray(segs, np.int32), np.asarray(idx, np.int32)


def fc_model(kind: str, seed: int = 0) -> tuple[bytes, np.ndarray, np.ndarray]:
    """x[1,4] -> FULLY_CONNECTED(W[3,4], b[3]) -> y[1,3]; W stored as ``kind``: float32 | float16 |
    sparse | sparse_float16 | custom (a CUSTOM op after the FC).  Returns (file bytes, W, b)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    w[w < 0.3] = 0.0  # sparse enough for CSR
    w = w.astype(np.float16).astype(np.float32)  # representable in fp16, so every variant computes the same
    bias = rng.standard_normal(3).astype(np.float32)
    ts = [T("x", (1, 4)), T("b", (3,), data=bias), T("y", (1, 3))]
    ops = []
    if kind in ("float32", "custom"):
        ts.append(T("W", (3, 4), data=w))
    elif kind == "float16":
        ts += [T("W16", (3, 4), "float16", data=w), T("W", (3, 4))]
        ops.append(Op("DEQUANTIZE", ["W16"], ["W"]))
    elif kind in ("sparse", "sparse_float16"):
        vals, segs, idx = dense_to_csr(w)
        dt = "float16" if kind == "sparse_float16" else "float32"
        ts += [T("W_sparse", (3, 4), dt, data=vals, sparse_csr=(segs, idx)), T("W", (3, 4))]
        if dt == "float16":
            ts.append(T("W16", (3, 4), "float16"))
            ops += [Op("DENSIFY", ["W_sparse"], ["W16"]), Op("DEQUANTIZE", ["W16"], ["W"])]
        else:
            ops.append(Op("DENSIFY", ["W_sparse"], ["W"]))
    ops.append(Op("FULLY_CONNECTED", ["x", "W", "b"], ["y"], "FullyConnectedOptions"))
    outputs = ["y"]
    if kind == "custom":
        ts += [T("z", (1, 3)), T("v", (1, 3))]
        ops += [Op("CUSTOM:MyPostprocess", ["y"], ["z"]), Op("CUSTOM:Another.Custom-Op", ["z"], ["v"])]
        outputs = ["v"]
    return build(Graph(ts, ops, ["x"], outputs)), w, bias
