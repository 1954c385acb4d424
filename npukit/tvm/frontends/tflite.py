"""TFLite: checks, then TVM's TFLite frontend driven through a converter that records op names."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import numpy as np

from ...errors import ModelError, UnsupportedOpError
from ...progress import Progress
from .. import load as _load_tvm
from .common import Imported, _at, _check_input_shapes, _first_line, _Marks, _run_quietly, _Source
from .naming import tilde_unique
from .sizes import check_tflite_tensor
from .tagging import _finish
from .tflite_checks import assertion_words, check_activations, check_structure, check_tensor, op_label

_IMPORTING = threading.Lock()  # (one import at a time reads the names it set)


def unique_names(raw: list[bytes | None]) -> list[str]:
    """The tensors' names, made unique: a tensor without a name (optional in the schema) is called
    ``tensor<index>``; the second of two alike ``name~2`` (as two ONNX nodes of one name are)."""
    names = [(r.decode("utf-8", "replace") if r else "") or f"tensor{i}" for i, r in enumerate(raw)]
    unique = tilde_unique(set(), set(names))
    return [unique(n) for n in names]


def _said(err: str, names: list[str]) -> str:
    """TVM's words made readable: a KeyError of a tensor's name (the frontend looked a constant up as
    a computed value) says so."""
    key = err.strip("'\"")
    if key in names and (err.startswith("'") or err.startswith('"')):
        return f"it reads {key!r} as a value computed at run time, but {key!r} is a constant TVM's frontend cannot take there"
    return err


def _import_tflite(path: Path, input_shapes) -> Imported:
    buf = path.read_bytes()
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ModelError(f"{path}: not a TFLite flatbuffer (no 'TFL3' file identifier)")
    try:
        import tflite  # noqa: PLC0415
    except ImportError:
        raise ModelError(f"{path}: reading .tflite files needs the 'tflite' package (pip install tflite)") from None
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415
    from tvm.relax.frontend.tflite import tflite_frontend as TF  # noqa: PLC0415

    try:
        model = tflite.Model.GetRootAsModel(buf, 0)
        if model.SubgraphsLength() < 1:
            raise ModelError(f"{path}: the TFLite model has no subgraph")
        sg = model.Subgraphs(0)
        nops = sg.OperatorsLength()
        # touch every tensor and buffer: truncated files fail here rather than deep inside TVM
        tensor_names = unique_names([sg.Tensors(i).Name() for i in range(sg.TensorsLength())])
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            check_tensor(path, model, t, tensor_names[i], len(buf))
            b = model.Buffers(t.Buffer())
            check_tflite_tensor(str(path), t, b, tensor_names[i])
            if b is not None and b.DataLength():
                _ = b.DataAsNumpy()
            if t.ShapeLength():
                _ = t.ShapeAsNumpy()
            if t.ShapeSignatureLength():
                _ = t.ShapeSignatureAsNumpy()
        check_structure(path, model, sg, tensor_names)
        declared = {}
        for idx in sg.InputsAsNumpy() if sg.InputsLength() else []:
            t = sg.Tensors(int(idx))
            sig = t.ShapeSignatureAsNumpy() if t.ShapeSignatureLength() else t.ShapeAsNumpy()
            shape = t.ShapeAsNumpy() if t.ShapeLength() else None
            dims = None if shape is None else [int(s) if int(g) >= 0 else "" for s, g in zip(shape, sig, strict=False)]
            declared[tensor_names[int(idx)]] = dims
        outputs = [int(i) for i in sg.OutputsAsNumpy()]
    except ModelError:
        raise
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{path}: corrupt or truncated TFLite file ({_first_line(e)})") from None
    check_activations(path, model, sg, tensor_names)
    if nops == 0:
        raise ModelError(f"{path}: the model has no ops")

    shapes = _check_input_shapes(path, declared, input_shapes)

    marks = _Marks()
    positions = {sg.Operators(k)._tab.Pos: k for k in range(nops)}  # an op read by the frontend -> its index
    const_names: dict = {}
    raw = [sg.Tensors(i).Name() for i in range(sg.TensorsLength())]
    count = Counter(raw)
    once = {r: tensor_names[i] for i, r in enumerate(raw) if r and count[r] == 1}  # a file's name -> its tensor's

    class Converter(TF.OperatorConverter):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.convert_map = {key: self._npk_wrap(key, fn) for key, fn in self.convert_map.items()}
            made = self.exp_tab.new_const

            def new_const(value, shape=None, dtype="float32", source_name=None):
                """A constant a converter makes directly (a bias) keeps its tensor's name, when that
                name is one tensor's."""
                c = made(value, shape=shape, dtype=dtype, source_name=source_name)
                name = once.get(source_name) if isinstance(source_name, bytes) else None
                if name is not None and c not in const_names:
                    const_names[c] = name
                return c

            self.exp_tab.new_const = new_const

        def _npk_wrap(self, code, fn):
            def wrapped(*args, **kwargs):
                op = kwargs["op"] if "op" in kwargs else args[0]
                outs = self.get_output_tensors(op)
                names = tuple(tensor_names[o.tensor_idx] for o in outs)
                name = names[0] if names else code
                ins = ", ".join(repr(tensor_names[t.tensor_idx]) for t in self.get_input_tensors(op))
                k = positions.get(op._tab.Pos) if self.subgraph._tab.Pos == sg._tab.Pos else None
                marks.current = f"{'' if k is None else f'{k} '}{name!r} ({code}{'; inputs ' + ins if ins else ''})"
                fault = None
                try:
                    ret = fn(*args, **kwargs)
                except AssertionError as e:  # TVM's converters assert what they need (their options table ...)
                    who = op_label(model, sg, k, tensor_names) if k is not None else f"operator {name!r} ({code})"
                    fault = f"{path}: {who}{assertion_words(op, code, e)}"
                if fault is not None:  # (raised here: the assert's frames, holding TVM's builder, are let go)
                    raise ModelError(fault)
                if ret is None:  # prefetched constant: no op
                    marks.sources.append(_Source(name, code, names))
                    marks.elided[len(marks.sources) - 1] = "folded to a constant at import"
                    return None
                return marks.record(self.bb, relax, ret, _Source(name, code, names))

            return wrapped

        def get_tensor_expr(self, tensor, is_sparse=False):
            """A constant the frontend makes of a tensor keeps the tensor's name (the tables and
            ``explain`` say 'W', not an id)."""
            e = super().get_tensor_expr(tensor, is_sparse)
            if isinstance(e, tvm.ir.GenericConst) and e not in const_names:
                const_names[e] = tensor_names[tensor.tensor_idx]
            return e

        def convert_dequantize(self, op):
            """fp16 weights: a DEQUANTIZE of a float16 constant (dense, or made dense by DENSIFY) is
            folded here to float32, as TFLite's runtime does once at load time."""
            from tflite.TensorType import TensorType  # noqa: PLC0415

            ins = self.get_input_tensors(op)
            if len(ins) == 1 and ins[0].tensor.Type() == TensorType.FLOAT16 and self.is_prefetched(ins[0].tensor_idx):
                value = np.asarray(self.get_prefetched_node(ins[0].tensor_idx))
                out = self.get_output_tensors(op)[0]
                self.set_prefetched_node(out.tensor_idx, value.astype(np.float16).astype(np.float32))
                return None
            return super().convert_dequantize(op)

        def check_unsupported_ops(self):
            bad = []
            for i in range(self.subgraph.OperatorsLength()):
                op = self.subgraph.Operators(i)
                try:
                    code = self.get_op_code_str(op)
                except NotImplementedError:  # a custom operator (or a code this schema does not know)
                    custom = self.model.OperatorCodes(op.OpcodeIndex()).CustomCode()
                    code = f"custom {custom.decode('utf-8', 'replace')}" if custom else "an unknown operator code"
                if code not in self.convert_map:
                    outs = self.get_output_tensors(op)
                    nm = tensor_names[outs[0].tensor_idx] if outs else f"op{i}"
                    bad.append((nm, code))
            if bad:
                kinds = sorted({k for _, k in bad})
                listing = "; ".join(f"{n!r} ({k})" for n, k in bad[:20])
                raise UnsupportedOpError(
                    f"{path}: {len(bad)} op(s) TVM's TFLite frontend cannot import ({', '.join(kinds)}): {listing}"
                )
            super().check_unsupported_ops()

    # TVM's frontend finds every value by its tensor's name (the first of two alike wins, a tensor
    # without one gets an internal name): it reads the unique names instead, for this import
    named = TF.get_tensor_name

    def get_tensor_name(subgraph, idx):
        return tensor_names[idx] if subgraph.TensorsLength() == len(tensor_names) else named(subgraph, idx)

    marks.progress = Progress(nops, "npukit: importing")
    with marks.progress, _IMPORTING:
        TF.get_tensor_name = get_tensor_name
        try:
            raw = _run_quietly(
                lambda: TF.from_tflite(model, shape_dict={k: tuple(v) for k, v in shapes.items()}, op_converter=Converter),
                lambda err: ModelError(f"{path}: TVM's TFLite importer failed{_at('operator', marks)}: {_said(err, tensor_names)}"),
            )
        finally:
            TF.get_tensor_name = named
    ins = list(declared)
    outs = [tensor_names[i] for i in outputs]
    return _finish(raw, marks, "tflite", str(path), ins, outs, const_names)


