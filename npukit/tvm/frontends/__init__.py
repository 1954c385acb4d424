"""Model importers: ONNX, TFLite, PyTorch ExportedProgram, Relax IRModule -> OpGraph + tagged module.

Every format goes through TVM's own Relax frontend.  The frontends throw the model's names away
(bindings become ``lv``, ``lv1`` ...), so each is driven through a thin subclass that, after every
model node is converted, binds the node's result and records which node it came from.  Walking the
bindings in order then attributes every Relax call to the node whose conversion emitted it (helper
calls a converter emits, such as a bias ``add``, included).

After constant folding the module is rebuilt once into the *tagged* module: one dataflow block,
every op call bound to a readable name and carrying a span ``npukit:<op_id>``.  Spans survive
``FuseOpsByPattern`` and ``MergeCompositeFunctions``, so a partitioned module can be read back op
by op without trusting any generated name.

Between folding and tagging, ``canon`` rewrites the function into one canonical form, so that one
network gives the same ops whichever exporter wrote it (BatchNorm folded into the conv, one gelu for
GELU's erf arithmetic, one layer / instance / group norm for a norm's arithmetic, one clip for a
clamp, roll as slices + concat, ...; the rules are in ``canon_rules``, ``canon_moves``,
``canon_norms`` and ``canon_clamps``).

Modules: ``common`` (marks, shape checks, quiet runs), ``onnx``, ``tflite``, ``torch``, ``relax``
(one per format), ``tagging`` (fold, canonical form, walk, name, tag).
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import ModelError
from .. import load as _load_tvm
from ..spans import op_id_of_span
from .common import MAC_KINDS, MODEL_EXTENSIONS, SPAN_PREFIX, Imported


def import_model(model, input_shapes: dict | None = None) -> Imported:
    """Import a model file path, an ``onnx.ModelProto``, an ExportedProgram or a Relax IRModule."""
    from ...pipeline.source import input_shapes_of, model_label  # noqa: PLC0415

    input_shapes = input_shapes_of(input_shapes, model_label(model))
    if isinstance(model, (str, os.PathLike)):  # path checks first: they need no tvm
        path = Path(model)
        if not path.exists():
            raise ModelError(f"{path}: no such file")
        if path.is_dir():
            raise ModelError(f"{path}: is a directory, expected a model file ({', '.join(MODEL_EXTENSIONS)})")
        ext = path.suffix.lower()
        looks = _format_of_contents(path)
        if looks == ".npz":  # model and data swapped: no name makes a model of it
            raise ModelError(f"{path}: the file is a NumPy .npz archive of arrays, not a model; give it as the "
                             "study's data (--data FILE.npz, study.set_data(path)) and the model file "
                             f"({', '.join(MODEL_EXTENSIONS)}) as the model")  # fmt: skip
        if ext == ".py" and not looks:  # (TVMScript, a BlockBuilder, a torch module: code, not a model file)
            raise ModelError(f"{path}: a Python file is code, not a model file; a Relax IRModule it builds (TVMScript "
                             "@I.ir_module, a BlockBuilder) or a torch.export.ExportedProgram is studied from Python by "
                             f"passing the object: npukit.Study(mod, soc); files accepted: {', '.join(MODEL_EXTENSIONS)}")  # fmt: skip
        if ext not in MODEL_EXTENSIONS:
            raise ModelError(
                f"{path}: unknown model extension {ext or '(none)'!r}; accepted: "
                f"{', '.join(MODEL_EXTENSIONS)}, or pass a torch.export.ExportedProgram or a Relax IRModule"
                + (f" (the file looks like {_FORMATS[looks]}: name it {looks})" if looks else "")
            )
        if path.stat().st_size == 0:
            raise ModelError(f"{path}: file is empty")
        if looks and looks != ext:
            raise ModelError(f"{path}: the file is {_FORMATS[looks]}, not {_FORMATS[ext]}: its extension "
                             f"says which importer reads it, so name it {path.stem}{looks}")  # fmt: skip
        if ext == ".onnx":
            from .onnx import _import_onnx_file  # noqa: PLC0415

            return _import_onnx_file(path, input_shapes)
        if ext == ".tflite":
            from .tflite import _import_tflite  # noqa: PLC0415

            return _import_tflite(path, input_shapes)
        from .torch import _import_pt2  # noqa: PLC0415

        return _import_pt2(path, input_shapes)
    tvm = _load_tvm()
    if isinstance(model, tvm.IRModule):
        from .relax import _import_relax  # noqa: PLC0415

        return _import_relax(model, input_shapes)
    tname = type(model).__module__ + "." + type(model).__name__
    if tname.startswith("onnx") and hasattr(model, "graph"):
        from .onnx import _import_onnx  # noqa: PLC0415

        return _import_onnx(model, "<onnx.ModelProto>", input_shapes)
    if hasattr(model, "graph_signature") and hasattr(model, "graph_module"):
        from .torch import _import_exported_program  # noqa: PLC0415

        return _import_exported_program(model, "<ExportedProgram>", input_shapes)
    raise ModelError(
        f"cannot import a {tname}: pass a path ({', '.join(MODEL_EXTENSIONS)}), an onnx.ModelProto, "
        "a torch.export.ExportedProgram or a tvm IRModule"
    )


_FORMATS = {".onnx": "an ONNX model", ".tflite": "a TFLite flatbuffer", ".pt2": "a torch.export archive (.pt2, a zip file)"}


def _format_of_contents(path: Path) -> str | None:
    """The extension of the format the file's first bytes identify (a zip file: ``.pt2``, or ``.npz``
    when it holds only ``.npy`` arrays, numpy's data archive; a flatbuffer
    with the ``TFL3`` identifier: ``.tflite``), else None (ONNX has no signature; an unreadable file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return None
    if head[:4] == b"PK\x03\x04":
        import zipfile  # noqa: PLC0415

        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
        except (OSError, zipfile.BadZipFile):
            return ".pt2"
        return ".npz" if names and all(n.endswith(".npy") for n in names) else ".pt2"
    if head[4:8] == b"TFL3":
        return ".tflite"
    return None


__all__ = ["Imported", "import_model", "op_id_of_span", "SPAN_PREFIX", "MODEL_EXTENSIONS", "MAC_KINDS"]
