"""Data for the error figures: the model's inputs (and labels), validated against the model, from
arrays, an .npz file, the model's sidecar, or seeded random inputs (numpy only, no tvm)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DataError, closest
from ..graph import OpGraph, Tensor

DEFAULT_RANDOM_SAMPLES = 16
CALIB_SAMPLES = 32

@dataclass(frozen=True, eq=False)
class Data:
    """Inputs (one list of arrays per sample, model dtype), optional labels, provenance; ``key`` is a
    digest of the arrays, so results measured on other data are never taken for these."""

    samples: tuple[tuple[np.ndarray, ...], ...]
    labels: np.ndarray | None
    calib: tuple[tuple[np.ndarray, ...], ...]
    source: str
    key: str = field(default="", compare=False)
    path: str = field(default="", compare=False)  # the .npz it was read from (absolute), "" for arrays

    def __post_init__(self) -> None:
        if not self.key:
            h = hashlib.sha256()
            for part in (self.samples, self.calib):
                h.update(b"|")
                for row in part:
                    for a in row:
                        a = np.ascontiguousarray(a)
                        h.update(f"{a.dtype}{a.shape}".encode())
                        h.update(a.tobytes())
            if self.labels is not None:
                h.update(np.ascontiguousarray(self.labels).tobytes())
            object.__setattr__(self, "key", h.hexdigest()[:24])

    def __repr__(self) -> str:
        """A line, not the arrays (a notebook printed every sample in full)."""
        first = self.samples[0] if self.samples else ()
        shapes = ", ".join(f"{list(a.shape)} {a.dtype}" for a in first)
        labels = f", {len(self.labels)} labels" if self.labels is not None else ""
        calib = f", {len(self.calib)} calibration samples" if self.calib is not self.samples else ""
        return f"<npukit Data: {len(self.samples)} samples of {shapes}{labels}{calib}; {self.source}; key {self.key}>"


def _input_quant(g: OpGraph, tid: str) -> tuple[float, int] | None:
    """(scale, zero point) of an integer model input, read from the dequantize that consumes it."""
    for c in g.consumers(tid):
        op = g.ops[c]
        if op.kind == "dequantize" and len(op.inputs) >= 3:
            s, z = g.consts.get(op.inputs[1]), g.consts.get(op.inputs[2])
            if s is not None and z is not None and np.size(s) == 1 and np.size(z) == 1:
                return float(np.ravel(s)[0]), int(np.ravel(z)[0])
    return None


def index_limit(g: OpGraph, tid: str) -> int | None:
    """If integer tensor ``tid`` ends up indexing another tensor (``take``, through the index
    arithmetic frontends emit for negative indices), the size of the axis it indexes."""
    seen, frontier, limit = {tid}, [tid], None
    for _ in range(8):
        nxt = []
        for t in frontier:
            for c in g.consumers(t):
                op = g.ops[c]
                if op.kind in ("take", "gather_elements", "gather_nd") and len(op.inputs) > 1 and op.inputs[1] == t:
                    data = g.tensors[op.inputs[0]]
                    axis = int(op.attrs.get("axis", 0) or 0) if op.kind == "take" else 0
                    n = int(data.shape[axis]) if data.shape else 1
                    limit = n if limit is None else min(limit, n)
                elif op.kind != "take":
                    for o in op.outputs:
                        if "int" in g.tensors[o].dtype and o not in seen:
                            seen.add(o)
                            nxt.append(o)
        frontier = nxt
    return limit


def _first_line(e: Exception) -> str:
    """An exception raised reading the caller's object as an array, said in a line with its kind."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _largest(dtype: str) -> str:
    """`` (largest X)``: the largest finite value of a float dtype, where numpy (or ml_dtypes, for
    bfloat16) knows it."""
    try:
        return f" (largest {float(np.finfo(dtype).max):g})"
    except (TypeError, ValueError):
        try:
            import ml_dtypes  # noqa: PLC0415 - numpy's finfo does not know bfloat16

            return f" (largest {float(ml_dtypes.finfo(dtype).max):g})"
        except Exception:  # noqa: BLE001 - the figure is a courtesy
            return ""


def _fit(g: OpGraph, t: Tensor, arr: np.ndarray, name: str) -> np.ndarray:
    """Rows of ``arr`` as model inputs of tensor ``t``: [N, *shape] or [N, *shape[1:]] when batch 1."""
    try:
        arr = np.asarray(arr)
    except ValueError:  # (numpy's words: "setting an array element with a sequence ... inhomogeneous")
        raise DataError(f"{name}: its samples are not all of one shape; input {t.name!r} takes arrays of shape "
                        f"{list(t.shape)}: give one array [N, {', '.join(map(str, t.shape))}]") from None  # fmt: skip
    except (TypeError, RuntimeError) as e:  # (a torch tensor that requires grad, of a dtype numpy lacks ...)
        raise DataError(
            f"{name}: cannot be read as an array of numbers for input {t.name!r}: {_first_line(e)}"
        ) from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise DataError(f"{name}: dtype {arr.dtype} is not numeric; input {t.name!r} takes {t.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise DataError(f"{name}: holds NaN or infinite values; the error figures need finite inputs")
    shape = tuple(t.shape)
    if arr.ndim == len(shape) + 1 and tuple(arr.shape[1:]) == shape:
        rows = arr
    elif shape and shape[0] == 1 and arr.ndim == len(shape) and tuple(arr.shape[1:]) == shape[1:]:
        rows = arr[:, None]
    else:
        raise DataError(
            f"{name}: shape {list(arr.shape)} does not fit input {t.name!r} of shape {list(shape)}; "
            f"expected [N, {', '.join(map(str, shape))}]" + (f" or [N, {', '.join(map(str, shape[1:]))}]" if shape and shape[0] == 1 else "")
        )
    if "float" in t.dtype:  # (float16 / 32 / 64, and bfloat16)
        if not np.issubdtype(rows.dtype, np.floating) and not np.issubdtype(rows.dtype, np.integer):
            raise DataError(f"{name}: dtype {rows.dtype} cannot feed float input {t.name!r}")
        with np.errstate(over="ignore"):
            out = rows.astype(t.dtype)
        if not np.all(np.isfinite(out)):  # (finite in the data's own dtype, past the input's: inf, measured as such)
            big = float(np.max(np.abs(rows.astype(np.float64))))
            raise DataError(f"{name}: values up to {big:g} overflow input {t.name!r}, which is {t.dtype}"
                            f"{_largest(t.dtype)}; the error figures need finite inputs")  # fmt: skip
        return out
    if "int" in t.dtype:
        if np.issubdtype(rows.dtype, np.floating):
            qp = _input_quant(g, t.tid)
            if qp is None:
                raise DataError(f"{name}: float data for integer input {t.name!r} ({t.dtype}) and no input "
                                "quantization in the model to convert it; pass data of that dtype")  # fmt: skip
            s, z = qp
            info = np.iinfo(t.dtype)
            return np.clip(np.round(rows / s) + z, info.min, info.max).astype(t.dtype)
        info = np.iinfo(t.dtype)
        if rows.size and (rows.min() < info.min or rows.max() > info.max):  # (astype wrapped them round)
            raise DataError(f"{name}: values {rows.min()}..{rows.max()} out of range for input {t.name!r}, which is "
                            f"{t.dtype} ({info.min}..{info.max})")  # fmt: skip
        limit = index_limit(g, t.tid)
        if limit is not None and rows.size and (rows.min() < -limit or rows.max() >= limit):
            raise DataError(f"{name}: values {rows.min()}..{rows.max()} out of range for input {t.name!r}, which "
                            f"indexes an axis of size {limit} (valid: -{limit}..{limit - 1})")  # fmt: skip
        return rows.astype(t.dtype)
    return rows.astype(t.dtype)


def make_data(g: OpGraph, x, y=None, calib=None, source: str = "user data") -> Data:
    """Validate user data against the model's inputs.  ``x``: array (single input), a sequence of
    arrays (one per input) or a mapping input name -> array."""
    ins = [g.tensors[t] for t in g.inputs]
    idle = unread_inputs(g)
    read = [t for t in ins if t.name not in idle]
    if isinstance(x, Mapping):
        names = [t.name for t in ins]
        _no_stray("x", x, names)  # (a misspelt name was once dropped in silence, its input fed zeros)
        # (an input given as None is not given: it was fed zeros, or nothing was given at all)
        missing = [t.name for t in ins if x.get(t.name) is None and t.name not in idle]
        if missing or all(x.get(t.name) is None for t in ins):
            raise DataError(f"x: no array for input(s) {missing or [t.name for t in ins]}; the model's inputs are "
                            f"{[t.name for t in ins]}" + (f" (no op reads {sorted(idle)}: they may be left out)" if idle else ""))  # fmt: skip
        arrays = [x.get(t.name) for t in ins]
    elif isinstance(x, (list, tuple)) and len(ins) > 1:
        if len(x) != len(ins):
            raise DataError(f"x: {len(x)} arrays for {len(ins)} model inputs {[t.name for t in ins]}")
        arrays = list(x)
        missing = [
            t.name for t, a in zip(ins, arrays) if a is None and (t.name not in idle or all(b is None for b in x))
        ]
        if missing:
            raise DataError(f"x: no array for input(s) {missing} (given as None); the model's inputs are "
                            f"{[t.name for t in ins]}" + (f" (no op reads {sorted(idle)}: they may be None)" if idle else ""))  # fmt: skip
    elif len(ins) != 1 and len(read) == 1:  # the one input an op reads; the others are filled with zeros
        arrays = [x if t is read[0] else None for t in ins]
    else:
        if len(ins) != 1:
            raise DataError(f"x: the model has {len(ins)} inputs {[t.name for t in ins]}; pass a dict name -> array")
        arrays = [x]
    given = {t.name: _fit(g, t, a, f"x[{t.name!r}]" if len(ins) > 1 else "x") for t, a in zip(ins, arrays) if a is not None}
    n = len(next(iter(given.values())))
    rows = [given[t.name] if t.name in given else np.zeros((n, *t.shape), t.dtype) for t in ins]
    if n == 0:
        raise DataError("x: no samples")
    if any(len(r) != n for r in rows):
        raise DataError(f"x: inputs have different sample counts {[len(r) for r in rows]}")
    labels = None
    if y is not None:
        try:
            labels = np.array(y)  # (a copy: the user's array may change after, under a key hashed now)
        except (ValueError, TypeError, RuntimeError) as e:
            raise DataError(f"y: cannot be read as an array of class labels: {_first_line(e)}") from None
        if not np.issubdtype(labels.dtype, np.number):
            raise DataError(f"y: class labels must be integers, got dtype {labels.dtype}")
        if labels.ndim != 1 or len(labels) != n:
            raise DataError(f"y: expected {n} class labels (shape [{n}]), got shape {list(labels.shape)}")
        if not np.issubdtype(labels.dtype, np.integer):
            if np.all(np.mod(labels, 1) == 0):
                labels = labels.astype(np.int64)
            else:
                raise DataError(f"y: class labels must be integers, got dtype {labels.dtype}")
        out = g.tensors[g.outputs[0]]
        from .error import is_class_output  # noqa: PLC0415

        if not is_class_output(out.shape):
            raise DataError(f"y: class labels are scored against output 0, and output {g.output_name(0)!r} (shape "
                            f"{list(out.shape)}) is not one row of class scores; accuracy cannot be measured "
                            "on it: give no labels")  # fmt: skip
        classes = out.shape[-1] if out.shape else 1
        if labels.min() < 0 or labels.max() >= classes:
            raise DataError(f"y: labels span {int(labels.min())}..{int(labels.max())} but output "
                            f"{g.output_name(0)!r} has {classes} classes (shape {list(out.shape)})")  # fmt: skip
    samples = tuple(tuple(r[i] for r in rows) for i in range(n))
    if calib is not None:
        crow = [_fit(g, ins[0], calib, "calib")] if len(ins) == 1 else _calib_rows(g, ins, calib)
        if any(len(r) != len(crow[0]) for r in crow):
            raise DataError(f"calib: inputs have different sample counts {[len(r) for r in crow]}")
        if len(crow[0]) == 0:  # (it once calibrated every scale on nothing: figures of no meaning)
            raise DataError(f"calib: no samples; give some, or no calib (the first {CALIB_SAMPLES} samples of x calibrate)")
        cal = tuple(tuple(r[i] for r in crow) for i in range(len(crow[0])))
    else:
        cal = samples[: min(CALIB_SAMPLES, n)]
    return Data(samples, labels, cal, source)


def _calib_rows(g: OpGraph, ins: list[Tensor], calib) -> list[np.ndarray]:
    """The calibration rows of a model of several inputs: one array per input, as a dict name -> array
    or a list in input order.  One array is refused: it was once split along its first axis, its first
    sample calibrating one input and its second the next."""
    names = [t.name for t in ins]
    if isinstance(calib, Mapping):
        _no_stray("calib", calib, names)
        missing = [n for n in names if n not in calib]
        if missing:
            raise DataError(f"calib: no array for input(s) {missing}; the model's inputs are {names}")
        arrays = [calib[n] for n in names]
    elif isinstance(calib, (list, tuple)) and len(calib) == len(ins):
        arrays = list(calib)
    else:
        raise DataError(f"calib: the model has {len(ins)} inputs {names} and one calibration array cannot feed "
                        f"them; leave calib out (the first {CALIB_SAMPLES} samples of x calibrate)")  # fmt: skip
    return [_fit(g, t, c, f"calib[{t.name!r}]") for t, c in zip(ins, arrays)]


def _no_stray(what: str, arrays: Mapping, names: list[str]) -> None:
    """Refuse the first key of ``arrays`` (given as ``what``) that names no model input."""
    for k in arrays:
        if k not in names:
            raise DataError(f"{what}: {str(k)!r} is not an input of the model; {closest(str(k), names)}")


def unread_inputs(g: OpGraph) -> list[str]:
    """The model inputs no op reads and no output is (an export may keep an input its graph no longer
    uses): ``set_data`` fills those left out with zeros."""
    return [g.tensors[t].name for t in g.inputs if not g.consumers(t) and t not in g.outputs]


def load_npz(g: OpGraph, path: str | Path) -> Data:
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: no such data file")
    if p.is_dir():
        raise DataError(f"{p}: is a directory, expected a data file (.npz)")
    try:
        z = np.load(p, allow_pickle=False)
    except Exception:  # noqa: BLE001
        # numpy's own words suggest allow_pickle= for anything it cannot place: never advice to follow
        # for a data file, so only the file's kind is said
        try:
            with open(p, "rb") as f:
                zipped = f.read(4) == b"PK\x03\x04"
        except OSError:
            zipped = False
        why = "truncated or damaged" if zipped else "not an .npz (zip) archive of arrays"
        raise DataError(f"{p}: not a readable .npz file: {why}; save one with numpy.savez(path, x=...)") from None
    if not hasattr(z, "files"):
        raise DataError(f"{p}: a single array (.npy); give an .npz holding 'x' (and optionally 'y', 'calib')")
    keys = set(z.files)
    names = [g.tensors[t].name for t in g.inputs]
    # one array per input (one may be named x), unless a single input's array is given as x
    idle = unread_inputs(g)
    both = [n for n in names if n in keys and n != "x"] if "x" in keys and "x" not in names else []
    if both:  # (one of the two was read and the other dropped in silence)
        raise DataError(f"{p}: holds both 'x' and the array of input {both[0]!r}; give the inputs one way: x, or one "
                        f"array per input {names}")  # fmt: skip
    needed = [n for n in names if n not in idle] or names
    per_input = all(n in keys for n in needed) and (len(names) > 1 or "x" not in keys) and not (
        "x" in keys and "x" not in names and len(needed) == 1)  # (x for the one input an op reads)
    if per_input:
        x = {n: _npz_get(z, n, p) for n in names if n in keys}
    elif "x" in keys:
        x = _npz_get(z, "x", p)
    else:
        raise DataError(f"{p}: no array 'x' (or one per input {names}); it holds {sorted(keys)}")
    # an input's own array is never also the labels or the calibration set
    taken = set(names) if per_input else set()
    y = _npz_get(z, "y", p) if "y" in keys and "y" not in taken else None
    calib = _npz_get(z, "calib", p) if "calib" in keys and "calib" not in taken else None
    try:
        d = make_data(g, x, y, calib)
    except DataError as e:
        raise DataError(f"{p}: {e}") from None
    n = len(d.samples)
    return Data(d.samples, d.labels, d.calib, f"{p.name} ({n} samples{', labelled' if d.labels is not None else ''})",
                path=str(p.resolve()))  # fmt: skip


def _npz_get(z, key: str, p: Path) -> np.ndarray:
    try:
        return z[key]
    except ValueError as e:  # object arrays need pickle, which we never load
        raise DataError(f"{p}: array {key!r} cannot be read without pickle ({e}); save plain numeric arrays") from None


def random_data(g: OpGraph, n: int = DEFAULT_RANDOM_SAMPLES, seed: int = 0) -> Data:
    """Seeded random inputs: uniform [0, 1) for float inputs; the full range for quantized integer
    inputs (read by a dequantize); [0, axis size) for integer inputs that index a tensor; else {0, 1}."""
    rng = np.random.default_rng(seed)
    rows = []
    for tid in g.inputs:
        t = g.tensors[tid]
        try:
            rows.append(_random_input(g, tid, t, rng, n))
        except MemoryError:
            size = n * int(np.prod(t.shape, dtype=np.float64)) * np.dtype(t.dtype).itemsize
            raise DataError(f"seeded random inputs: {n} samples of input {t.name or tid!r} {list(t.shape)} {t.dtype} "
                            f"({size / 2**30:.3g} GiB) do not fit in this machine's memory; give fewer, smaller "
                            "samples of your own with study.set_data() or --data") from None  # fmt: skip
    samples = tuple(tuple(r[i] for r in rows) for i in range(n))
    return Data(samples, None, samples[: min(CALIB_SAMPLES, n)], random_source(g, n, seed))


def _random_input(g: OpGraph, tid: str, t: Tensor, rng, n: int) -> np.ndarray:
    """``n`` seeded random samples of one input (see ``random_data``)."""
    if t.dtype == "bool":
        return rng.integers(0, 2, size=(n, *t.shape)).astype(bool)
    if "int" in t.dtype:
        info = np.iinfo(t.dtype)
        if _input_quant(g, tid) is not None:
            lo, hi = info.min, info.max + 1
        else:
            lo, hi = 0, index_limit(g, tid) or 2
        return rng.integers(lo, hi, size=(n, *t.shape), dtype=np.int64).astype(t.dtype)
    return rng.random((n, *t.shape), dtype=np.float64).astype(t.dtype)


def random_source(g: OpGraph, n: int = DEFAULT_RANDOM_SAMPLES, seed: int = 0) -> str:
    """What ``random_data`` says of itself (``Data.source``): what its float inputs are, since
    integer ranges calibrated on them hold only for inputs like them."""
    floats = any("float" in g.tensors[t].dtype for t in g.inputs)
    what = "; float inputs uniform in [0, 1)" if floats else ""
    return (
        f"seeded random inputs ({n} samples, seed {seed}{what}): no data shipped with the model; "
        "give your own with study.set_data() or --data"
    )


def sidecar(model_path: str | None) -> Path | None:
    """The data sidecar of a model file: ``<stem>.npz`` beside it; None for a model that is no file
    (no path, or an in-memory model's ``<...>``)."""
    if not model_path or str(model_path).startswith("<"):
        return None
    try:
        p = Path(model_path)
    except TypeError:
        return None
    side = p.with_suffix(".npz")
    return side if side.exists() and side != p else None
