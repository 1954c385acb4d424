"""What ``load`` is given, checked before anything is imported: the input shapes (a mapping input
name -> dims, each a positive integer; else a ShapeError naming the model and ``input_shapes[name]``)
and a model file's identity (its path and a digest of its bytes, so that a file rewritten in place is
read again whatever its size and time stamps say: ``cp -p``, ``rsync -t`` and ``tar x`` restore them)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ..errors import ShapeError
from .caches import DIGESTS

SETTLED_NS = 2_000_000_000  # a file unchanged this long before it was read: its stat vouches for its bytes


def model_label(model) -> str:
    """How messages name a model: its path as given, or what kind of object it is."""
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    if type(model).__module__.startswith("onnx"):
        return "<onnx.ModelProto>"
    if hasattr(model, "graph_signature"):
        return "<ExportedProgram>"
    return f"<{type(model).__name__}>"


def input_shapes_of(input_shapes, where: str) -> dict[str, tuple[int, ...]] | None:
    """``input_shapes`` as {input name: tuple of ints} (None for none), or a ShapeError naming
    ``where`` (the model) and the entry at fault.  A bool is not a dim (``True`` is not batch 1); the
    dims' values (positive, the model's rank) are checked by the importer against the model."""
    if input_shapes is None:
        return None
    if not isinstance(input_shapes, Mapping):
        eg = _dims(input_shapes)
        eg = f"({', '.join(map(str, eg))})" if eg else "(1, 3, 224, 224)"
        name = input_shapes.rsplit("=", 1)[0] if isinstance(input_shapes, str) and "=" in input_shapes else "<input name>"
        raise ShapeError(f"{where}: input_shapes must map each input's name to its shape, e.g. "
                         f"input_shapes={{{name!r}: {eg}}}; got {_what(input_shapes)}")  # fmt: skip
    out = {}
    for name, dims in input_shapes.items():
        if not isinstance(name, str):
            raise ShapeError(f"{where}: input_shapes key {name!r} is not an input name (a str)")
        at = f"{where}: input_shapes[{name!r}] = {dims!r}"
        if isinstance(dims, (str, bytes, Mapping)) or not isinstance(dims, (Iterable, np.ndarray)):
            raise ShapeError(f"{at}: a shape is a sequence of dims, e.g. (1, 3, 224, 224)")
        dims = tuple(dims)
        for i, d in enumerate(dims):
            if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
                raise ShapeError(f"{at}: dim {i} is {d!r}, not an integer; every dim must be a positive integer")
        out[name] = tuple(int(d) for d in dims)
    return out or None


def _dims(value) -> tuple[int, ...] | None:
    """The dims ``value`` reads as (a tuple / list of ints, or the command line's ``NAME=D1,D2,...``),
    to show how to give them."""
    if isinstance(value, str) and "=" in value:
        try:
            value = [int(d) for d in value.rsplit("=", 1)[1].split(",")]
        except ValueError:
            return None
    if isinstance(value, (tuple, list)) and value and all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        return tuple(value)
    return None


def _what(value) -> str:
    return f"the {type(value).__name__} {value!r}" if value is not None else "None"


def file_key(path: Path) -> tuple[str, str] | None:
    """(resolved path, digest of the bytes) of a model file, or None if it cannot be read.  The
    digest (SHA-256, hardware-accelerated: about 1 ms for the 1.5 MB transformer sample) is kept per
    stat signature (device, inode, size, mtime, ctime), and only for a file whose ctime was settled
    when it was read -- as git treats a racily clean file: a rewrite moves the ctime, which no tool
    can set back, so a later load of an unchanged file costs one stat, and one of a rewritten file
    reads its bytes again."""
    try:
        st = path.stat()
        sig = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        digest = DIGESTS.get(sig)
        if digest is None:
            with open(path, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()[:32]
            if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > SETTLED_NS:
                DIGESTS.put(sig, digest)
    except OSError:
        return None
    return sig[0], digest
