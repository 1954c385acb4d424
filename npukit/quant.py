"""Bit-width policy and numeric-error figures (numpy only, no tvm).

The scheme (docs/quantization.md says the same):

* weights of conv / matmul ops: per output channel, symmetric:
  scale_c = max|w_c| / (2^(b-1) - 1), w_q = clip(round(w / scale_c), -(2^(b-1) - 1), 2^(b-1) - 1) * scale_c
  (int2 is ternary: {-1, 0, 1} * scale); biases and other constants stay in fp32 (int32 in hardware);
* activations: per tensor, affine, range [min, max] over the calibration inputs (widened to
  contain 0): scale = (max - min) / (2^b - 1), zero = round(-min / scale); rounded where a
  deployment stores them: at the outputs of kernels (a fused composite, or a host op with the
  epilogue its compiler fuses into it), not between the ops inside one kernel (accumulators and
  epilogues stay wide), and not after a dequantize of an integer tensor into an integer width at
  least as wide (exact);
* fp16: round to IEEE half and back at the same places; fp32: untouched.

Error figures compare every op output and every model output with the fp32 run on the same inputs:
SNR dB = 10 log10(sum(ref^2) / sum((q - ref)^2)) (inf when identical), max abs error, top-1
agreement of class outputs, and accuracy when labels are given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DataError
from .graph import OpGraph, Tensor, dtype_bits

INT_BITS = {"int2": 2, "int4": 4, "int8": 8, "int16": 16}
DEFAULT_RANDOM_SAMPLES = 16
CALIB_SAMPLES = 32
PER_OP_SAMPLES = 64


# ---------------------------------------------------------------------------------------------
# weights and activations


def weight_axis(g: OpGraph, tid: str) -> int:
    """The output-channel axis of a weight tensor, from its first consumer's layout."""
    for c in g.consumers(tid):
        op = g.ops[c]
        if op.kind.startswith("conv"):
            kl = str(op.attrs.get("kernel_layout", "OIHW"))
            letters = [ch for ch in kl if ch.isalpha()]
            if "O" in letters and len(letters) == len(g.tensors[tid].shape):
                return letters.index("O")
            return 0
        if op.kind == "matmul":
            return len(g.tensors[tid].shape) - 1
    return 0


def quantize_weight(w: np.ndarray, bits: str, axis: int) -> np.ndarray:
    """``w`` rounded the way a ``bits`` kernel would store it (see module docstring)."""
    w = np.asarray(w, dtype=np.float32)
    if bits == "fp32":
        return w
    if bits == "fp16":
        return w.astype(np.float16).astype(np.float32)
    n = INT_BITS[bits]
    qmax = 2 ** (n - 1) - 1
    red = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=red, keepdims=True) if red else np.abs(w)
    scale = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
    return (np.clip(np.round(w / scale), -qmax, qmax) * scale).astype(np.float32)


def act_params(lo: float, hi: float, bits: str) -> np.ndarray:
    """The 6 fake-quantize parameters (scale, zero, qmin, qmax, a, b) of one op output."""
    if bits == "fp32":
        return np.array([1, 0, 0, 0, 0, 0], np.float32)
    if bits == "fp16":
        return np.array([1, 0, 0, 0, 0, 1], np.float32)
    n = INT_BITS[bits]
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    levels = 2**n - 1
    scale = (hi - lo) / levels if hi > lo else 1.0
    zero = round(-lo / scale)
    return np.array([scale, zero, 0, levels, 1, 0], np.float32)


def rounded_ops(g: OpGraph, kernels: Sequence[Sequence[int]], bits: Sequence[str]) -> frozenset[int]:
    """The ops whose outputs a deployment stores at the op's bit-width (see the module docstring)."""
    out: set[int] = set()
    for k in kernels:
        ks = set(k)
        for i in k:
            op = g.ops[i]
            leaves = any(t in g.outputs or any(c not in ks for c in g.consumers(t)) for t in op.outputs)
            if not leaves:
                continue
            if op.kind == "dequantize" and op.inputs:
                src_bits = dtype_bits(g.tensors[op.inputs[0]].dtype)
                b = bits[i]
                if b == "fp32" or (b in INT_BITS and INT_BITS[b] >= src_bits):
                    continue
            out.add(i)
    return frozenset(out)


# ---------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class Data:
    """Inputs (one list of arrays per sample, model dtype), optional labels, provenance."""

    samples: tuple[tuple[np.ndarray, ...], ...]
    labels: np.ndarray | None
    calib: tuple[tuple[np.ndarray, ...], ...]
    source: str


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


def _fit(g: OpGraph, t: Tensor, arr: np.ndarray, name: str) -> np.ndarray:
    """Rows of ``arr`` as model inputs of tensor ``t``: [N, *shape] or [N, *shape[1:]] when batch 1."""
    arr = np.asarray(arr)
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
    if t.dtype.startswith("float"):
        if not np.issubdtype(rows.dtype, np.floating) and not np.issubdtype(rows.dtype, np.integer):
            raise DataError(f"{name}: dtype {rows.dtype} cannot feed float input {t.name!r}")
        return rows.astype(t.dtype)
    if "int" in t.dtype:
        if np.issubdtype(rows.dtype, np.floating):
            qp = _input_quant(g, t.tid)
            if qp is None:
                raise DataError(f"{name}: float data for integer input {t.name!r} ({t.dtype}) and no input "
                                "quantization in the model to convert it; pass data of that dtype")  # fmt: skip
            s, z = qp
            info = np.iinfo(t.dtype)
            return np.clip(np.round(rows / s) + z, info.min, info.max).astype(t.dtype)
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
    if isinstance(x, Mapping):
        missing = [t.name for t in ins if t.name not in x]
        if missing:
            raise DataError(f"x: no array for input(s) {missing}; the model's inputs are {[t.name for t in ins]}")
        arrays = [x[t.name] for t in ins]
    elif isinstance(x, (list, tuple)) and len(ins) > 1:
        if len(x) != len(ins):
            raise DataError(f"x: {len(x)} arrays for {len(ins)} model inputs {[t.name for t in ins]}")
        arrays = list(x)
    else:
        if len(ins) != 1:
            raise DataError(f"x: the model has {len(ins)} inputs {[t.name for t in ins]}; pass a dict name -> array")
        arrays = [x]
    rows = [_fit(g, t, a, f"x[{t.name!r}]" if len(ins) > 1 else "x") for t, a in zip(ins, arrays)]
    n = len(rows[0])
    if n == 0:
        raise DataError("x: no samples")
    if any(len(r) != n for r in rows):
        raise DataError(f"x: inputs have different sample counts {[len(r) for r in rows]}")
    labels = None
    if y is not None:
        labels = np.asarray(y)
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
        classes = out.shape[-1] if out.shape else 1
        if labels.min() < 0 or labels.max() >= classes:
            raise DataError(f"y: labels span {int(labels.min())}..{int(labels.max())} but output "
                            f"{out.name or out.tid!r} has {classes} classes (shape {list(out.shape)})")  # fmt: skip
    samples = tuple(tuple(r[i] for r in rows) for i in range(n))
    if calib is not None:
        crow = [_fit(g, ins[0], calib, "calib")] if len(ins) == 1 else [_fit(g, t, c, f"calib[{t.name!r}]") for t, c in zip(ins, calib)]
        cal = tuple(tuple(r[i] for r in crow) for i in range(len(crow[0])))
    else:
        cal = samples[: min(CALIB_SAMPLES, n)]
    return Data(samples, labels, cal, source)


def load_npz(g: OpGraph, path: str | Path) -> Data:
    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: no such data file")
    try:
        z = np.load(p, allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        raise DataError(f"{p}: not a readable .npz file ({e})") from None
    if not hasattr(z, "files"):
        raise DataError(f"{p}: a single array (.npy); give an .npz holding 'x' (and optionally 'y', 'calib')")
    keys = set(z.files)
    names = [g.tensors[t].name for t in g.inputs]
    if "x" in keys:
        x = _npz_get(z, "x", p)
    elif all(n in keys for n in names):
        x = {n: _npz_get(z, n, p) for n in names}
    else:
        raise DataError(f"{p}: no array 'x' (or one per input {names}); it holds {sorted(keys)}")
    y = _npz_get(z, "y", p) if "y" in keys else None
    calib = _npz_get(z, "calib", p) if "calib" in keys else None
    try:
        d = make_data(g, x, y, calib)
    except DataError as e:
        raise DataError(f"{p}: {e}") from None
    n = len(d.samples)
    return Data(d.samples, d.labels, d.calib, f"{p.name} ({n} samples{', labelled' if d.labels is not None else ''})")


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
        if t.dtype == "bool":
            rows.append(rng.integers(0, 2, size=(n, *t.shape)).astype(bool))
        elif "int" in t.dtype:
            info = np.iinfo(t.dtype)
            if _input_quant(g, tid) is not None:
                lo, hi = info.min, info.max + 1
            else:
                lo, hi = 0, index_limit(g, tid) or 2
            rows.append(rng.integers(lo, hi, size=(n, *t.shape), dtype=np.int64).astype(t.dtype))
        else:
            rows.append(rng.random((n, *t.shape), dtype=np.float64).astype(t.dtype))
    samples = tuple(tuple(r[i] for r in rows) for i in range(n))
    return Data(samples, None, samples[: min(CALIB_SAMPLES, n)],
                f"seeded random inputs ({n} samples, seed {seed}): no data shipped with the model; use study.set_data()")  # fmt: skip


def sidecar(model_path: str) -> Path | None:
    """The data sidecar of a model file: ``<stem>.npz`` beside it."""
    try:
        p = Path(model_path)
    except TypeError:
        return None
    side = p.with_suffix(".npz")
    return side if side.exists() and side != p else None


# ---------------------------------------------------------------------------------------------
# metrics


def snr_db(ref: np.ndarray, q: np.ndarray) -> float:
    ref = np.asarray(ref, dtype=np.float64)
    noise = float(np.sum((np.asarray(q, dtype=np.float64) - ref) ** 2))
    sig = float(np.sum(ref**2))
    if noise == 0:
        return math.inf
    if sig == 0:
        return -math.inf
    return 10 * math.log10(sig / noise)


def max_abs(ref, q) -> float:
    return float(np.max(np.abs(np.asarray(q, dtype=np.float64) - np.asarray(ref, dtype=np.float64)))) if np.size(ref) else 0.0


def is_class_output(shape: Sequence[int]) -> bool:
    """[1, C] or [C] scores with C > 1: top-1 agreement makes sense."""
    s = [d for d in shape if d != 1]
    return len(s) == 1 and s[0] > 1


# ---------------------------------------------------------------------------------------------
# the error model: reference run once, then one run per bit-width configuration


@dataclass(frozen=True)
class ErrorResult:
    per_op: tuple[tuple[int, float, float], ...]  # (op_id, snr_db, max_abs) for every rounded op output
    outputs: tuple[dict, ...]  # per model output: name, snr_db, max_abs, top1_agreement
    accuracy: float | None
    accuracy_fp32: float | None
    samples: int
    per_op_samples: int
    source: str


class ErrorModel:
    """Numeric error of bit-width choices, measured by running the compiled simulation.

    ``sim`` is a ``npukit.tvm.simulate.Simulator`` (anything with ``layout``, ``tensors`` and
    ``run``).  The fp32 reference and the calibration ranges are computed once per data set.
    """

    def __init__(self, g: OpGraph, sim, data: Data):
        self.g, self.sim, self.data = g, sim, data
        lay = sim.layout
        self._w_arrays = [g.consts[t] for t in lay.weight_tids]
        self._w_axis = [weight_axis(g, t) for t in lay.weight_tids]
        self._w_owner = [g.consumers(t)[0] for t in lay.weight_tids]
        self._w_cache: dict[tuple[int, str], object] = {}
        self._q_cache: dict[tuple[int, str], object] = {}
        self._inputs = [sim.tensors(list(s)) for s in data.samples]
        fp32 = [sim.tensors([act_params(0, 0, "fp32")])[0]] * len(lay.fq_ops)
        w32 = sim.tensors(self._w_arrays)
        self._fp32_q = fp32
        # calibration: activation ranges over the calibration inputs
        lo = np.full(len(lay.fq_ops), np.inf)
        hi = np.full(len(lay.fq_ops), -np.inf)
        for s in data.calib:
            outs = sim.run(sim.tensors(list(s)), w32, fp32, True)[lay.n_outputs:]
            for k, o in enumerate(outs):
                if o.size:
                    lo[k] = min(lo[k], float(o.min()))
                    hi[k] = max(hi[k], float(o.max()))
        self._lo, self._hi = np.where(np.isfinite(lo), lo, 0), np.where(np.isfinite(hi), hi, 0)
        self.k = min(PER_OP_SAMPLES, len(self._inputs))
        self._ref = self._run(w32, fp32)
        self._results: dict[tuple[str, ...], ErrorResult] = {}

    def _run(self, weights, qparams) -> tuple[list, list]:
        """(model outputs per sample, all outputs of the first k samples)."""
        outs, full = [], []
        for i, x in enumerate(self._inputs):
            r = self.sim.run(x, weights, qparams, i < self.k)
            outs.append(r[: self.sim.layout.n_outputs])
            if i < self.k:
                full.append(r[self.sim.layout.n_outputs:])
        return outs, full

    def evaluate(self, op_bits: Sequence[str], rounded: frozenset[int] | None = None) -> ErrorResult:
        """Error of ``op_bits``; only the outputs of ops in ``rounded`` are rounded (all if None)."""
        lay = self.sim.layout
        kept = tuple(i in rounded for i in lay.fq_ops) if rounded is not None else ()
        key = tuple(op_bits[i] for i in lay.fq_ops) + tuple(op_bits[o] for o in self._w_owner) + kept
        hit = self._results.get(key)
        if hit is not None:
            return hit
        weights = []
        for j, (arr, axis, owner) in enumerate(zip(self._w_arrays, self._w_axis, self._w_owner)):
            b = op_bits[owner]
            t = self._w_cache.get((j, b))
            if t is None:
                t = self._w_cache[(j, b)] = self.sim.tensors([quantize_weight(arr, b, axis).astype(arr.dtype)])[0]
            weights.append(t)
        qparams = []
        for k, i in enumerate(lay.fq_ops):
            b = op_bits[i] if rounded is None or i in rounded else "fp32"
            t = self._q_cache.get((k, b))
            if t is None:
                t = self._q_cache[(k, b)] = self.sim.tensors([act_params(self._lo[k], self._hi[k], b)])[0]
            qparams.append(t)
        outs, full = self._run(weights, qparams)
        ref_outs, ref_full = self._ref
        per_op = []
        for k, i in enumerate(lay.fq_ops):
            r = np.concatenate([f[k].ravel() for f in ref_full]) if ref_full else np.zeros(0)
            q = np.concatenate([f[k].ravel() for f in full]) if full else np.zeros(0)
            per_op.append((i, snr_db(r, q), max_abs(r, q)))
        res_outs = []
        acc = acc32 = None
        for j, tid in enumerate(self.g.outputs[: lay.n_outputs]):
            t = self.g.tensors[tid]
            r = np.stack([o[j] for o in ref_outs])
            q = np.stack([o[j] for o in outs])
            d = {"name": t.name or tid, "snr_db": snr_db(r, q), "max_abs": max_abs(r, q), "top1_agreement": None}
            if is_class_output(t.shape):
                ra = r.reshape(len(r), -1).argmax(1)
                qa = q.reshape(len(q), -1).argmax(1)
                d["top1_agreement"] = float(np.mean(ra == qa))
                if j == 0 and self.data.labels is not None:
                    acc = float(np.mean(qa == self.data.labels))
                    acc32 = float(np.mean(ra == self.data.labels))
            res_outs.append(d)
        res = ErrorResult(tuple(per_op), tuple(res_outs), acc, acc32, len(self._inputs), self.k, self.data.source)
        if len(self._results) > 32:
            self._results.pop(next(iter(self._results)))
        self._results[key] = res
        return res
