"""TFLite files checked before (and where TVM's frontend asserts, while) TVM's TFLite frontend reads
them: a malformed file is named in the model's words -- the file, the tensor or the operator (its
index, its output tensor's name and its code) and what is wrong -- instead of flatbuffer numbers,
a bare AssertionError or an IndexError from deep inside the frontend."""

from __future__ import annotations

import traceback
from pathlib import Path

from ...errors import ModelError, UnsupportedOpError

# The options table each builtin operator keeps its attributes in (TFLite's schema: the
# BuiltinOptions union), for the operators whose options TVM's frontend reads.
OPTIONS = {
    "ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions",
    "ARG_MAX": "ArgMaxOptions", "ARG_MIN": "ArgMinOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions", "L2_POOL_2D": "Pool2DOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions",
    "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
    "BUCKETIZE": "BucketizeOptions", "CAST": "CastOptions", "CONCATENATION": "ConcatenationOptions",
    "CONV_2D": "Conv2DOptions", "CONV_3D": "Conv3DOptions", "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "CUMSUM": "CumsumOptions", "DEPTH_TO_SPACE": "DepthToSpaceOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions", "FAKE_QUANT": "FakeQuantOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions", "GATHER": "GatherOptions", "L2_NORMALIZATION": "L2NormOptions",
    "LEAKY_RELU": "LeakyReluOptions", "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "LSTM": "LSTMOptions", "MIRROR_PAD": "MirrorPadOptions", "ONE_HOT": "OneHotOptions", "PACK": "PackOptions",
    "MEAN": "ReducerOptions", "SUM": "ReducerOptions", "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions", "REDUCE_PROD": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "RESHAPE": "ReshapeOptions", "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions", "REVERSE_SEQUENCE": "ReverseSequenceOptions",
    "SHAPE": "ShapeOptions", "SOFTMAX": "SoftmaxOptions", "SPACE_TO_DEPTH": "SpaceToDepthOptions",
    "SPLIT": "SplitOptions", "SQUEEZE": "SqueezeOptions", "STRIDED_SLICE": "StridedSliceOptions",
    "SVDF": "SVDFOptions", "TRANSPOSE_CONV": "TransposeConvOptions", "UNPACK": "UnpackOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
}  # fmt: skip


_ZERO_RANGE = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767), "INT32": (-(2**31), 2**31 - 1)}


def _enum_names(module: str) -> dict[int, str]:
    import importlib  # noqa: PLC0415

    cls = getattr(importlib.import_module(f"tflite.{module}"), module)
    return {v: k for k, v in vars(cls).items() if not k.startswith("_") and isinstance(v, int)}


def code_name(model, op) -> str:
    """The op's code as TFLite names it (CONV_2D, ...), or its custom code; an operator code index
    the model lacks is said as such."""
    if not 0 <= op.OpcodeIndex() < model.OperatorCodesLength():
        return f"operator code index {op.OpcodeIndex()}"
    oc = model.OperatorCodes(op.OpcodeIndex())
    num = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
    names = _enum_names("BuiltinOperator")
    if names.get(num) == "CUSTOM" and oc.CustomCode():
        return f"custom {oc.CustomCode().decode('utf-8', 'replace')}"
    return names.get(num, f"operator code {num}")


def op_label(model, sg, k: int, names: list[str]) -> str:
    """How an error names TFLite operator ``k`` of the subgraph: its index, the name of the first
    tensor it writes and its code, ``operator 3 'conv1' (CONV_2D)`` (no name when it writes no
    tensor the subgraph has, no code when the model lacks its operator code)."""
    op = sg.Operators(k)
    n = sg.TensorsLength()
    outs = [int(i) for i in (op.OutputsAsNumpy() if op.OutputsLength() else []) if 0 <= int(i) < n]
    code = f" ({code_name(model, op)})" if 0 <= op.OpcodeIndex() < model.OperatorCodesLength() else ""
    return f"operator {k}{f' {names[outs[0]]!r}' if outs else ''}{code}"


def check_tensor(path: Path, model, t, name: str, file_size: int) -> None:
    """A tensor's buffer index, type code and quantization parameters, before anything reads them
    (a buffer index past the model's buffers read other bytes as a buffer: "bad number ... for type
    uint32"; a scale without a zero point failed in a bare assert inside TVM's frontend)."""
    nbuf = model.BuffersLength()
    if not 0 <= t.Buffer() < nbuf:
        raise ModelError(f"{path}: tensor {name!r} refers to buffer {t.Buffer()}, but the model has {nbuf} buffers "
                         "(is the file corrupt?)")  # fmt: skip
    types = _enum_names("TensorType")
    if t.Type() not in types:
        raise ModelError(f"{path}: tensor {name!r} has type code {t.Type()}, which is not a TFLite tensor type "
                         f"(0-{max(types)}; is the file corrupt?)")  # fmt: skip
    b = model.Buffers(t.Buffer())
    if b is not None and b.Offset() > 1:  # data kept after the flatbuffer (files over 2 GB)
        end = b.Offset() + b.Size()
        if end > file_size:
            raise ModelError(f"{path}: tensor {name!r} keeps its data at bytes {b.Offset()}..{end} of the file, but "
                             f"the file has {file_size} bytes (is the file truncated?)")  # fmt: skip
        raise UnsupportedOpError(f"{path}: tensor {name!r} keeps its data outside the flatbuffer (buffer {t.Buffer()}, "
                                 f"{b.Size()} bytes at offset {b.Offset()}: TFLite's layout for models over 2 GB), "
                                 "which TVM's TFLite importer does not read")  # fmt: skip
    q = t.Quantization()
    if q is None:
        return
    ns, nz = q.ScaleLength(), q.ZeroPointLength()
    if ns != nz and (ns or nz):
        raise ModelError(f"{path}: tensor {name!r} has {ns} quantization scale(s) and {nz} zero point(s); TFLite "
                         "gives one zero point per scale (is the file corrupt?)")  # fmt: skip
    zeros = [int(z) for z in q.ZeroPointAsNumpy()] if nz else []
    span = _ZERO_RANGE.get(types[t.Type()])
    if span is not None and any(not span[0] <= z <= span[1] for z in zeros):
        bad = next(z for z in zeros if not span[0] <= z <= span[1])
        raise ModelError(f"{path}: tensor {name!r} has the zero point {bad}, outside {types[t.Type()].lower()}'s range "
                         f"{span[0]}..{span[1]} (is the file corrupt?)")  # fmt: skip
    if ns > 1 and any(zeros):
        raise ModelError(f"{path}: tensor {name!r} is quantized per channel with non-zero zero points "
                         f"({', '.join(map(str, zeros[:4]))}{', ...' if len(zeros) > 4 else ''}); TFLite's per-channel "
                         "quantization has them all 0 (is the file corrupt?)")  # fmt: skip
    shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
    if ns > 1:
        axis = q.QuantizedDimension()
        if not 0 <= axis < len(shape) or shape[axis] != ns:
            along = f"dimension {axis} of its shape {shape}"
            have = f"which has {shape[axis]}" if 0 <= axis < len(shape) else "which it does not have"
            raise ModelError(f"{path}: tensor {name!r} has {ns} per-channel quantization scales along {along}, "
                             f"{have} (is the file corrupt?)")  # fmt: skip


def check_structure(path: Path, model, sg, names: list[str]) -> None:
    """Every op has an operator code the model has and reads and writes tensors the subgraph has;
    the model's inputs and outputs are tensors of the subgraph and its inputs are not constants
    (TVM's frontend fails on each deep inside, in words about flatbuffer numbers)."""
    n = sg.TensorsLength()
    ncodes = model.OperatorCodesLength()
    for k in range(sg.OperatorsLength()):
        _check_op(path, model, sg, k, names, ncodes)
    if not sg.OutputsLength():
        raise ModelError(f"{path}: the model declares no outputs (is the file corrupt?)")
    for what, idxs in (("input", sg.InputsAsNumpy() if sg.InputsLength() else []), ("output", sg.OutputsAsNumpy())):
        for idx in idxs:
            if not 0 <= int(idx) < n:
                raise ModelError(f"{path}: the model's {what} {int(idx)} is not a tensor of the subgraph ({n} tensors; "
                                 "is the file corrupt?)")  # fmt: skip
    inputs = [int(i) for i in (sg.InputsAsNumpy() if sg.InputsLength() else [])]
    for idx in inputs:
        b = model.Buffers(sg.Tensors(idx).Buffer())
        if b is not None and b.DataLength():
            raise ModelError(f"{path}: the model input {names[idx]!r} is a constant (its buffer holds data): "
                             "a model input must be fed at run time")  # fmt: skip
    _check_order(path, model, sg, names, inputs)


def _check_op(path: Path, model, sg, k: int, names: list[str], ncodes: int) -> None:
    """Operator ``k`` has an operator code the model has and reads and writes tensors the subgraph has."""
    n = sg.TensorsLength()
    op = sg.Operators(k)
    if not 0 <= op.OpcodeIndex() < ncodes:
        raise ModelError(f"{path}: {op_label(model, sg, k, names)} uses operator code index {op.OpcodeIndex()}, "
                         f"but the model has {ncodes} operator codes (is the file corrupt?)")  # fmt: skip
    oc = model.OperatorCodes(op.OpcodeIndex())
    _ = oc.BuiltinCode(), oc.DeprecatedBuiltinCode(), oc.CustomCode()  # (a truncated file fails here)
    _ = op.BuiltinOptionsType(), op.BuiltinOptions()
    for what, idxs, low in (("reads", op.InputsAsNumpy() if op.InputsLength() else [], -1),
                            ("writes", op.OutputsAsNumpy() if op.OutputsLength() else [], 0)):  # fmt: skip
        for idx in idxs:
            if not low <= int(idx) < n:
                raise ModelError(f"{path}: {op_label(model, sg, k, names)} {what} tensor index {int(idx)}, but the "
                                 f"subgraph has {n} tensors (is the file corrupt?)")  # fmt: skip


def _check_order(path: Path, model, sg, names: list[str], inputs: list[int]) -> None:
    """Every tensor an operator reads is a model input, a constant, a variable (state) or written by
    an earlier operator, no tensor is written twice, and every model output is made (TVM's frontend
    failed in "a bytes-like object is required, not 'int'")."""
    consts, variables = set(), set()
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        b = model.Buffers(t.Buffer())
        if t.IsVariable():
            variables.add(i)
        elif (b is not None and b.DataLength()) or (t.ShapeLength() and 0 in t.ShapeAsNumpy()):
            consts.add(i)  # (a tensor of no elements holds no data to read)
    ready = set(inputs) | consts | variables
    written: dict[int, int] = {}  # tensor -> the operator that writes it
    for k in range(sg.OperatorsLength()):
        for idx in (int(i) for i in (sg.Operators(k).OutputsAsNumpy() if sg.Operators(k).OutputsLength() else [])):
            if idx in written or (idx in ready and idx not in variables):
                was = (f"{op_label(model, sg, written[idx], names)} writes it too" if idx in written else
                       "it is a model input" if idx in inputs else "it is a constant")  # fmt: skip
                raise ModelError(f"{path}: {op_label(model, sg, k, names)} writes tensor {names[idx]!r}, but {was} "
                                 "(is the file corrupt?)")  # fmt: skip
            written[idx] = k
    for idx in (int(i) for i in sg.OutputsAsNumpy()):
        if idx not in written and idx not in ready:
            raise ModelError(f"{path}: the model's output {names[idx]!r} is written by no operator and is neither a "
                             "model input nor a constant (is the file corrupt?)")  # fmt: skip
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        for idx in (int(i) for i in (op.InputsAsNumpy() if op.InputsLength() else [])):
            if idx < 0 or idx in ready:
                continue
            w = written.get(idx)
            why = ("which no operator writes, is not a model input and holds no data" if w is None else
                   "which it writes itself" if w == k else
                   f"which only the later {op_label(model, sg, w, names)} writes (TFLite lists operators in the order "
                   "they run)")  # fmt: skip
            raise ModelError(f"{path}: {op_label(model, sg, k, names)} reads tensor {names[idx]!r}, {why} (is the file "
                             "corrupt?)")  # fmt: skip
        ready.update(int(i) for i in (op.OutputsAsNumpy() if op.OutputsLength() else []))


def check_activations(path: Path, model, sg, names: list[str]) -> None:
    """Quantized activations of a type TVM's TFLite frontend does not import (int16: the 16x8
    quantization scheme) are named up front: it failed with "Unsupported input datatype ... float32"."""
    from tflite.TensorType import TensorType  # noqa: PLC0415

    bad = []
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        b = model.Buffers(t.Buffer())
        q = t.Quantization()
        if t.Type() == TensorType.INT16 and q is not None and q.ScaleLength() and not (b is not None and b.DataLength()):
            bad.append(names[i])
    if bad:
        raise UnsupportedOpError(f"{path}: int16 activations (TFLite's 16x8 quantization) are not supported by TVM's "
                                 f"TFLite importer: {', '.join(repr(x) for x in bad[:6])}"
                                 f"{f' and {len(bad) - 6} more' if len(bad) > 6 else ''}")  # fmt: skip


def assertion_words(op, code: str, err: AssertionError) -> str:
    """What a bare assert of TVM's converter for ``op`` found wrong, as the end of a sentence
    naming the operator: its options table absent or of another kind (TFLite keeps an operator's
    attributes there), else the check that failed, as TVM wrote it."""
    want = OPTIONS.get(code)
    got = op.BuiltinOptionsType()
    if got == 0 or op.BuiltinOptions() is None:
        if want:
            return (f" has no builtin options: its {want} table (the operator's attributes) is absent, and TVM's "
                    f"{code} converter needs it (is the file corrupt?)")  # fmt: skip
        return f" has no builtin options, and TVM's {code} converter needs them (is the file corrupt?)"
    kinds = _enum_names("BuiltinOptions")
    if want and kinds.get(got) != want:
        return (f" carries {kinds.get(got, f'options of type {got}')} where its {want} belong (is the file "
                "corrupt?)")  # fmt: skip
    if str(err):
        return f": TVM's {code} converter refused it: {str(err).splitlines()[0]}"
    frames = traceback.extract_tb(err.__traceback__)
    line = (frames[-1].line or "").strip() if frames else ""
    check = line.removeprefix("assert ").strip() if line.startswith("assert ") else ""
    if check and check.count("(") == check.count(")") and check.count("[") == check.count("]"):
        said = f"its check `{check}` failed"
    elif frames:
        said = f"a check failed ({Path(frames[-1].filename).name}, line {frames[-1].lineno})"
    else:
        said = "a check failed"
    return f": TVM's {code} converter refused it: {said}"
