"""Sizes checked: declared ones before anything is allocated (a model declaring a 10^12-element
tensor, or an initializer whose data does not fill its declared shape, is refused with the tensor's
name), and inferred ones once TVM has worked them out (an op whose output would have a dimension
below 1 is refused with its node's name)."""

from __future__ import annotations

import math

from ...errors import ModelError, ShapeError

MAX_ELEMENTS = 1 << 31  # one tensor; 8 GiB of float32

_ONNX_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
_ONNX_FIELD = {1: "float_data", 6: "int32_data", 7: "int64_data", 11: "double_data", 12: "uint64_data",
               13: "uint64_data", 2: "int32_data", 3: "int32_data", 4: "int32_data", 5: "int32_data",
               9: "int32_data", 10: "int32_data", 16: "int32_data"}  # fmt: skip


def _fmt(n: int) -> str:
    return f"{n:,}" if n < 10**9 else f"{n:.3g}"


def too_big(path: str, what: str, shape) -> None:
    n = math.prod(int(d) for d in shape)
    if n > MAX_ELEMENTS:
        raise ModelError(f"{path}: {what} declares shape {list(shape)}, {_fmt(n)} elements; npukit refuses tensors "
                         f"of more than {_fmt(MAX_ELEMENTS)} elements (is the file corrupt?)")  # fmt: skip


def check_onnx_sizes(graph, path: str) -> None:
    for t in graph.initializer:
        if any(d < 0 for d in t.dims):
            raise ModelError(f"{path}: initializer {t.name!r} declares the negative shape {list(t.dims)} (is the file corrupt?)")
        too_big(path, f"initializer {t.name!r}", t.dims)
        if t.data_location == 1:  # external data: onnx checks it when it loads it
            continue
        n = math.prod(t.dims)
        size = _ONNX_ITEMSIZE.get(t.data_type)
        if t.HasField("raw_data") or t.raw_data:
            have = len(t.raw_data) // size if size else None
        else:
            fname = _ONNX_FIELD.get(t.data_type)
            have = len(getattr(t, fname)) if fname else None  # (float16 / bfloat16: one value per int32 too)
        if have is not None and have != n and not (n == 0 and have == 0):
            raise ModelError(f"{path}: initializer {t.name!r} declares shape {list(t.dims)} ({_fmt(n)} elements) but "
                             f"holds {_fmt(have)} (is the file truncated or corrupt?)")  # fmt: skip
    for i in graph.input:
        tt = i.type.tensor_type
        if tt.HasField("shape"):
            dims = [d.dim_value for d in tt.shape.dim if d.HasField("dim_value") and d.dim_value > 0]
            too_big(path, f"input {i.name!r}", dims)


_TFLITE_ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8, 11: 16, 12: 8, 15: 4, 16: 2}


def check_tflite_tensor(path: str, t, buffer, name: str) -> None:
    """A TFLite tensor's declared shape, and its buffer's length when it holds constant data."""
    shape = [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []
    if any(d < -1 for d in shape):
        raise ModelError(f"{path}: tensor {name!r} declares the shape {shape} (is the file corrupt?)")
    too_big(path, f"tensor {name!r}", [max(d, 1) for d in shape])
    if buffer is None or not buffer.DataLength() or t.Sparsity() is not None:
        return
    size = _TFLITE_ITEMSIZE.get(t.Type())
    n = math.prod(max(d, 0) for d in shape)
    if size and buffer.DataLength() != n * size:
        raise ModelError(f"{path}: tensor {name!r} declares shape {shape} ({_fmt(n)} elements of {size} B) but its "
                         f"buffer holds {_fmt(buffer.DataLength())} B (is the file truncated or corrupt?)")  # fmt: skip


def check_inferred(path, ops, names, tensors, sources) -> None:
    """Every op's output has positive dims: a window wider than its input (a 3x3 conv of a 1-row
    input) makes TVM infer a negative or zero dim, and its MACs came out negative."""
    ins = [(t.name or tid, list(t.shape)) for tid, t in tensors.items() if t.kind == "input"]
    for o in ops:
        for tid in o["outputs"]:
            shape = list(tensors[tid].shape)
            if any(d < 1 for d in shape):
                op_type = sources[o["op_id"]][1]
                given = ", ".join(f"{n} {sh}" for n, sh in ins)
                raise ShapeError(f"{path}: node {names[o['op_id']]!r} ({op_type or o['op']}) would make {shape}, a "
                                 f"dimension below 1, from the input shapes {given}: its input is smaller than its "
                                 f"window (kernel, pool) or its slice; give larger input shapes")  # fmt: skip
