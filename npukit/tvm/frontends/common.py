"""What every frontend shares: the marks the conversion hooks record, input-shape checks, and
running a TVM frontend quietly so that a failure becomes one NpukitError line."""

from __future__ import annotations

import contextlib
import gc
import io
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ModelError, NpukitError, ShapeError, closest
from ...graph import OpGraph
from ...opset import KINDS
from .. import load as _load_tvm
from ..spans import SPAN_PREFIX  # noqa: F401 - re-exported
from .sizes import MAX_ELEMENTS
from .sizes import _fmt as fmt_count

MODEL_EXTENSIONS = (".onnx", ".tflite", ".pt2")
MAC_KINDS = frozenset(k for k, v in KINDS.items() if v.mac)  # the op that takes a model node's own name


@dataclass
class Imported:
    """An imported model: the OpGraph and the tagged Relax module it was read from."""

    graph: OpGraph
    mod: Any  # tvm.IRModule
    files: tuple[Path, ...] = ()  # the files it read beside the model file (an ONNX model's external data)


@dataclass
class _Source:
    name: str
    op_type: str
    outputs: tuple[str, ...] = ()


@dataclass
class _Marks:
    """What the frontend hooks record while a model converts.

    Everything is keyed by the Relax ``Var`` objects themselves, never by their names: a model's
    names may be anything, TVM's own included."""

    sources: list[_Source] = field(default_factory=list)
    owner: dict[Any, int] = field(default_factory=dict)  # raw binding var -> source index
    elided: dict[int, str] = field(default_factory=dict)  # source index -> what became of it
    results: list[tuple[int, Any]] = field(default_factory=list)  # (source index, var) as converted
    current: str = ""  # the node being converted (for error messages)
    pre_elided: dict[str, str] = field(default_factory=dict)  # nodes a pre-pass removed -> why
    # source index -> the elided node whose outputs its last op now makes (a conv that took in the
    # batch_norm after it makes what the model's readers read as the batch_norm's output)
    outputs_of: dict[int, int] = field(default_factory=dict)
    progress: Any = None  # called with each new source index (a progress bar)
    _by_name: dict[str, int] = field(default_factory=dict)  # source name -> index (merged sources)
    # (source index, shape) of a converter whose result is a shape (ONNX Shape): bound later, e.g. as
    # a model output, it is still that node's, in an error message
    values: list[tuple[int, Any]] = field(default_factory=list)

    def index(self, src: _Source, merge: bool = False) -> int:
        """The index of ``src``; with ``merge``, one index per source name (the pieces a
        decomposition made of one model node all belong to that node)."""
        if merge and src.name in self._by_name:
            return self._by_name[src.name]
        idx = len(self.sources)
        self.sources.append(src)
        if self.progress is not None:
            self.progress(idx)
        if merge:
            self._by_name[src.name] = idx
        return idx

    def record(self, bb, relax, sym, src: _Source, merge: bool = False):
        """Bind ``sym`` (a converter's result) and remember that ``src`` produced it."""
        idx = self.index(src, merge)
        if isinstance(sym, (relax.Call, relax.Tuple, relax.TupleGetItem)):
            sym = bb.emit(sym)
        if isinstance(sym, relax.Var):
            self.results.append((idx, sym))
        else:
            if isinstance(sym, relax.ShapeExpr):
                self.values.append((idx, sym))
            self.elided[idx] = "folded to a constant at import"
        return sym

    def resolve(self, params) -> None:
        """Give each converted result's var to its node; a var that is a model input or another
        node's result makes the node an identity."""
        params = set(params)
        for idx, var in self.results:
            if var in self.owner:
                first = self.sources[self.owner[var]].name
                self.elided[idx] = f"identity: passes on the value of {first!r}"
            elif var in params:
                self.elided[idx] = "identity: passes on a model input"
            else:
                self.owner[var] = idx
        self.results.clear()



def _first_line(err: BaseException) -> str:
    """The message of ``err`` as one line, in the model's words: TVM's C++ backtrace, TVMScript
    fragments and internal Relax names (``lv1``, ``R.ExternFunc``, ``T.int64(3)``, metadata
    references, npukit's internal tensor names) are dropped or rewritten."""
    text = str(err).strip() or type(err).__name__
    text = text.replace("# Metadata omitted. Use show_meta=True in script() method to show it.", "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith(("File ", "at ", "0:", "1:", "# ", "Stack trace", "Traceback"))]
    msg = " ".join(keep) if keep else (lines[0] if lines else type(err).__name__)
    return _model_words(msg)[:400]


_REWRITES = [
    (re.compile(r'ir\.Op\(span=[^"]*name="([\w.]+)".*?support_level=\d+\)'), r"\1"),  # an operator's repr: its name
    (re.compile(r"T\.u?int\d+\((-?\d+)\)"), r"\1"),
    (re.compile(r"T\.float\d+\(([-+.\deE]+)\)"), r"\1"),
    (re.compile(r"R\.shape\(\[([^\]]*)\]\)"), r"[\1]"),
    (re.compile(r"R\.Shape\(\[([^\]]*)\]\)"), r"shape [\1]"),
    (re.compile(r'R\.Tensor\(\(([^)]*)\), dtype="(\w+)"\)'), r"\2[\1]"),
    (re.compile(r'R\.Tensor\(dtype="(\w+)", ndim=(\d+)\)'), r"a \1 tensor of rank \2"),
    (re.compile(r'metadata\["[^"]*"\]\[\d+\]'), "a constant"),
    (re.compile(r"R\.ExternFunc\S*"), "an external function"),
    (re.compile(r"relax\.(tensor_to_shape|shape_to_tensor|shape_of)\b"), "a shape conversion"),
    (re.compile(r"relax\.ShapeType|ShapeExpr|ShapeType"), "a shape"),
    (re.compile(r"relax\.TensorType|TensorType"), "a tensor"),
    (re.compile(r"\b(?:lv|gv)\d*\b"), "an intermediate value"),
    (re.compile(r"\bR\.(\w+)"), r"\1"),
    (re.compile(r"\s+"), " "),
]
_INTERNAL = re.compile(r"npk_[tn]\d+")
_NAMES: dict[str, str] = {}  # npukit's internal ONNX names -> the model's, for the import under way


def _model_words(msg: str) -> str:
    msg = msg.replace("# Metadata omitted. Use show_meta=True in script() method to show it.", "")
    for pat, rep in _REWRITES:  # TVM's words first, so that a model's own "lv1" is left alone below
        msg = pat.sub(rep, msg)
    msg = _INTERNAL.sub(lambda m: repr(_NAMES.get(m.group(0), "?")), msg)
    return msg.strip() or "TVM gave no reason"


def _fix_hint(name: str, shape_hint: str) -> str:
    import shlex  # noqa: PLC0415

    # quoted for a shell when the input's name needs it (spaces, quotes, newlines ...)
    arg = shlex.quote(f"{name}={shape_hint.replace(' ', '')}")
    return f"pin it with npukit.Study(..., input_shapes={{{name!r}: ({shape_hint})}}) or --input-shape {arg}"


_PLACEHOLDER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,15}")


def _shape_hint(dims) -> tuple[str, list[str]]:
    """The shape to suggest for an input with symbolic dims, and the placeholders in it: the batch
    (a symbolic dim 0, and every dim of the same name) is 1; any other symbolic dim is a size only
    the user can choose (1 would be no image row, no sequence), so it stands as a placeholder named
    after the dim (``H`` for ``'h'``, ``D2`` for an unnamed dim 2), one per name."""
    first = dims[0] if dims and not isinstance(dims[0], int) else None
    out, open_ = [], []
    for k, d in enumerate(dims):
        if isinstance(d, int) and d > 0:
            out.append(str(d))
        elif k == 0 or (first and d == first):
            out.append("1")
        else:
            named = isinstance(d, str) and _PLACEHOLDER.fullmatch(d) and not d.startswith("unk__")  # (ONNX's unnamed)
            ph = d.upper() if named else f"D{k}"
            out.append(ph)
            if ph not in open_:
                open_.append(ph)
    return ", ".join(out), open_


def _pinned_along(declared: dict, input_shapes: dict | None, path: str | None = None) -> dict:
    """``declared`` with each symbolic dim an input of ``input_shapes`` pins given its value in the
    inputs it does not name: one symbolic variable is one size in main (BindSymbolicVars binds it
    everywhere), so ``x: (n, m)`` pinned to ``(2, 4)`` makes ``y: (m, 3)`` ``(4, 3)``; an ONNX
    ``dim_param`` likewise names one size in every input it shapes.  With ``path``, two inputs of
    ``input_shapes`` that give one named dim two sizes are refused (a Relax module's are, as the
    shapes are bound)."""
    known: dict[str, tuple[int, str, int]] = {}  # dim name -> (size, the input that gave it, its axis)
    for name, dims in (input_shapes or {}).items():
        have = declared.get(name)
        if have is not None and len(have) == len(dims):
            for i, (d, v) in enumerate(zip(have, dims, strict=True)):
                if isinstance(d, str) and d.isidentifier():
                    size, first, axis = known.setdefault(d, (int(v), name, i))
                    if path is not None and size != int(v):
                        raise ShapeError(f"{path}: input {first!r} dim {axis} and input {name!r} dim {i} are one "
                                         f"size in the model ({d!r}); input_shapes gives it both {size} and "
                                         f"{int(v)}")  # fmt: skip
    return {name: dims if dims is None or name in (input_shapes or {}) else
            [known[d][0] if isinstance(d, str) and d in known else d for d in dims]
            for name, dims in declared.items()}  # fmt: skip


def _check_input_shapes(path, declared: dict[str, list], input_shapes: dict | None, about: dict | None = None) -> dict:
    """Validate user shapes against declared inputs; raise ShapeError for symbolic dims left.
    ``about``: (input, axis) -> a symbolic dim in the model's words, where its name alone does not
    say it (a .pt2's ``torch.export.Dim``)."""
    input_shapes = dict(input_shapes or {})
    for k in input_shapes:
        if k not in declared:
            raise ShapeError(f"{path}: input_shapes names {k!r}, which is not a model input; {closest(k, declared)}")
    out = {}
    for name, dims in declared.items():
        if name in input_shapes:
            shp = tuple(input_shapes[name])
            if not all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and d > 0 for d in shp):
                raise ShapeError(f"{path}: input_shapes[{name!r}] = {shp}: every dim must be a positive integer")
            if dims is not None and len(shp) != len(dims):
                raise ShapeError(
                    f"{path}: input_shapes[{name!r}] has rank {len(shp)} but input {name!r} has rank {len(dims)}"
                )
            for i, (d, want) in enumerate(zip(dims or (), shp)):
                if isinstance(d, int) and d > 0 and d != int(want):
                    raise ShapeError(f"{path}: input {name!r} dim {i} is fixed at {d} in the model; input_shapes asks "
                                     f"for {int(want)} (only symbolic dims can be pinned)")  # fmt: skip
            n = math.prod(int(d) for d in shp)
            if n > MAX_ELEMENTS:  # (the limit a model's own declared shapes are held to)
                raise ShapeError(f"{path}: input_shapes[{name!r}] = {tuple(int(d) for d in shp)}: {fmt_count(n)} "
                                 f"elements; npukit refuses tensors of more than {fmt_count(MAX_ELEMENTS)} elements")  # fmt: skip
            out[name] = [int(d) for d in shp]
            continue
        if dims is None:
            raise ShapeError(f"{path}: input {name!r} has unknown rank; {_fix_hint(name, '1, 3, 224, 224')}")
        shown = f"[{', '.join(str(x) if isinstance(x, int) else (x or '?') for x in dims)}]"
        for i, d in enumerate(dims):  # a static size of 0 (or less) is what it is, not a symbolic dim
            if isinstance(d, int) and d == 0:
                raise ShapeError(f"{path}: input {name!r} dim {i} has size 0 in shape {shown}: the input is "
                                 "empty, so the model has no work to study; give the input a non-zero size")  # fmt: skip
            if isinstance(d, int) and d < 0:
                raise ShapeError(f"{path}: input {name!r} dim {i} has the invalid size {d} in shape {shown}; "
                                 "is the file corrupt?")  # fmt: skip
        bad = [(i, d) for i, d in enumerate(dims) if not isinstance(d, int)]
        if bad:
            i, d = bad[0]
            label = (about or {}).get((name, i)) or (f"{d!r}" if isinstance(d, str) and d else "unknown")
            hint, open_ = _shape_hint(dims)
            sizes = ""
            if open_:
                these = " and ".join(open_) if len(open_) < 3 else ", ".join(open_[:-1]) + f" and {open_[-1]}"
                sizes = (f", with {these} the size{'s' if len(open_) > 1 else ''} to study (the model leaves "
                         f"{'them' if len(open_) > 1 else 'it'} open{'; dim 0 is given 1, a batch of one' if bad[0][0] == 0 else ''})")  # fmt: skip
            raise ShapeError(
                f"{path}: input {name!r} dim {i} is symbolic ({label}) in shape "
                f"[{', '.join(str(x) if isinstance(x, int) and x > 0 else (x or '?') for x in dims)}]; "
                f"npukit needs static shapes: {_fix_hint(name, hint)}{sizes}"
            )
        out[name] = list(dims)
    return out



def check_input_dtype(path: str, label: str, dtype: str) -> None:
    """A model input npukit can feed: a dtype of ``soc.schema.DTYPES`` or a float format numpy reads
    (float8 ...); not a 4-bit integer, a string, a complex number or no type at all, whose values no
    numpy array holds (seeded random inputs, the error figures and ``set_data`` all need one)."""
    from ...soc.schema import DTYPES  # noqa: PLC0415

    ok = dtype in DTYPES
    if not ok and dtype.startswith("float"):
        try:
            ok = np.dtype(dtype).itemsize > 0
        except TypeError:
            ok = False
    if not ok:
        untyped = dtype in ("", "None", "undefined")
        raise ModelError(f"{path}: input {label!r} {'has no element type' if untyped else 'is ' + dtype}, which "
                         f"npukit cannot feed (it feeds {', '.join(DTYPES)} and float8 inputs); "
                         f"{'declare one' if untyped else 'cast it in the model'}")  # fmt: skip


def _at(what: str, marks: _Marks) -> str:
    return f" at {what} {marks.current}" if marks.current else ""


def _run_quietly(fn, error):
    """``fn()`` with the frontends' output silenced; a failure becomes ``error(first line)``.

    The failed frontend's objects (a BlockBuilder with open blocks ...) are released while stderr
    is still silenced: otherwise TVM logs "BlockBuilder destroyed with remaining blocks!" when
    they are collected, after npukit's own one-line error.
    """
    keep: BaseException | None = None
    with _quiet():
        try:
            return fn()
        except NpukitError as e:
            keep = e.with_traceback(None)
        except Exception as e:  # noqa: BLE001 - every frontend failure becomes one ModelError
            keep = error(_first_line(e))
        gc.collect()
    raise keep


@contextlib.contextmanager
def _quiet():
    """Silence the frontends' prints, Python warnings and TVM's C++ log lines on stderr.

    The frontends print on every failure and TVM logs warnings such as "Fast mode segfaults ..."
    for ``take``; npukit reports problems itself, as NpukitErrors that name the node.
    """
    buf = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(buf), _silence_fd(2):
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _silence_fd(fd: int):
    try:
        saved = os.dup(fd)
    except OSError:  # no real file descriptor (some notebook front ends)
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)



def _dim(d) -> int | str:
    """A Relax shape dim as an int, or the name of its symbolic variable."""
    try:
        return int(d)
    except (TypeError, ValueError):
        return str(d)


def _bind_input_shapes(mod, labels, input_shapes, path: str, marks: _Marks | None = None, words: dict | None = None):
    """Pin the symbolic dims of ``main``'s inputs to the user's ``input_shapes`` (BindSymbolicVars).

    Used where the frontend itself cannot take the shapes (ExportedProgram, Relax IRModule);
    ``words``: a symbolic dim's name -> the dim in the model's words (a .pt2's ``Dim 'batch'``)."""
    if not input_shapes:
        return mod
    tvm = _load_tvm()
    from tvm import relax  # noqa: PLC0415

    binding: dict = {}
    main = _main_of(mod, path)
    for p, label in zip(main.params, labels, strict=False):
        dims, shape = input_shapes.get(label), getattr(p.ty, "shape", None)
        if dims is None or shape is None:
            continue
        for i, (d, v) in enumerate(zip(shape, dims, strict=False)):
            if isinstance(_dim(d), int):
                if int(d) != int(v):
                    raise ShapeError(f"{path}: input {label!r} dim {i} is fixed at {int(d)} in the model; "
                                     f"input_shapes asks for {int(v)} (only symbolic dims can be pinned)")  # fmt: skip
            elif isinstance(d, tvm.ir.expr.Var):
                if binding.get(d, int(v)) != int(v):
                    what = (words or {}).get(str(d)) or f"the symbolic dim {d}"
                    raise ShapeError(f"{path}: input_shapes gives {what} both {binding[d]} and {int(v)}")
                binding[d] = int(v)
    if not binding:
        return mod
    gv = next(g for g, f in mod.functions.items() if f.same_as(main))
    out = relax.transform.BindSymbolicVars(binding, gv.name_hint)(mod)
    if marks is not None:  # the pass made new vars: the marks follow them, binding by binding
        new = out[gv.name_hint]
        old_b = [b.var for blk in main.body.blocks for b in blk.bindings]
        new_b = [b.var for blk in new.body.blocks for b in blk.bindings]
        if len(old_b) != len(new_b):
            raise ModelError(f"{path}: pinning the input shapes changed the program; cannot follow its nodes")
        trans = dict(zip(list(main.params) + old_b, list(new.params) + new_b, strict=True))
        marks.owner = {trans.get(k, k): v for k, v in marks.owner.items()}
        marks.results = [(i, trans.get(v, v)) for i, v in marks.results]
    return out


def _main_of(mod, path: str):
    """The entry function of a frontend's module (a frontend may have renamed it)."""
    from tvm import relax  # noqa: PLC0415

    funcs = [(gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, relax.Function)]
    for name, f in funcs:
        if name == "main":
            return f
    if len(funcs) == 1:
        return funcs[0][1]
    raise ModelError(f"{path}: the imported module has no entry function")


