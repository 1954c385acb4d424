"""Numeric-error figures of bit-width choices, measured by running the compiled simulation (numpy
only here; the simulation itself is ``npukit.tvm.simulate``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..graph import OpGraph
from ..opset import KINDS, weight_axis
from ..progress import Progress
from .data import Data
from .scheme import act_params, model_ranges, quantize_weight

PER_OP_SAMPLES = 64

# ---------------------------------------------------------------------------------------------
# metrics


def _error(ref, q) -> tuple[np.ndarray, np.ndarray]:
    """(the reference, q - ref) as float64.  Where a value is not finite (an fp16 overflow, an op of
    the float model itself dividing by zero), equal values (the same infinity, NaN against NaN) differ
    by 0 and any other difference counts as infinite, with no numpy warning."""
    r = np.asarray(ref, dtype=np.float64)
    x = np.asarray(q, dtype=np.float64)
    if np.isfinite(r).all() and np.isfinite(x).all():
        return r, x - r
    with np.errstate(invalid="ignore"):
        d = np.array(x - r)
    d[(x == r) | (np.isnan(x) & np.isnan(r))] = 0.0
    d[np.isnan(d)] = np.inf
    return r, d


def snr_db(ref: np.ndarray, q: np.ndarray) -> float:
    """Signal (the finite reference values) over noise, in dB: inf when nothing differs, -inf when a
    difference is infinite or the signal is 0."""
    r, d = _error(ref, q)
    noise = float(np.sum(d**2))
    sig = float(np.sum(np.where(np.isfinite(r), r, 0.0) ** 2))
    if noise == 0:
        return math.inf
    if sig == 0 or math.isinf(noise):
        return -math.inf
    return 10 * math.log10(sig / noise)


def max_abs(ref, q) -> float:
    return float(np.max(np.abs(_error(ref, q)[1]))) if np.size(ref) else 0.0


def is_class_output(shape: Sequence[int]) -> bool:
    """[1, C] or [C] scores with C > 1: top-1 agreement makes sense."""
    s = [d for d in shape if d != 1]
    return len(s) == 1 and s[0] > 1


def is_batch_of_class_outputs(shape: Sequence[int]) -> bool:
    """[B, C] with B > 1 and C > 1: a classifier run on a batch, if they are float scores (top-1
    agreement per row)."""
    return len(shape) == 2 and shape[0] > 1 and shape[1] > 1


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
        edges = getattr(lay, "edges", ())
        fp32 = [sim.tensors([act_params(0, 0, "fp32")])[0]] * (len(lay.fq_ops) + len(edges))
        w32 = sim.tensors(self._w_arrays)
        self._fp32_q = fp32
        # calibration: activation ranges over the calibration inputs
        lo = np.full(len(lay.fq_ops), np.inf)
        hi = np.full(len(lay.fq_ops), -np.inf)
        with Progress(len(data.calib), "npukit: calibrating ranges", unit="sample") as bar:
            for n, s in enumerate(data.calib):
                outs = sim.run(sim.tensors(list(s)), w32, fp32, True)[lay.n_outputs:]
                for k, o in enumerate(outs):
                    o = o[np.isfinite(o)]  # (an inf or NaN: the range of the op's finite values)
                    if o.size:
                        lo[k] = min(lo[k], float(o.min()))
                        hi[k] = max(hi[k], float(o.max()))
                bar(n)
        # an op whose outputs reach +-inf on the calibration data is given the range of its finite
        # values: at an integer width its infinities saturate to the grid's ends, as the generated
        # code's quantize saturates them (the range was 0 where an inf was seen: a grid of one value)
        self._lo, self._hi = np.where(np.isfinite(lo), lo, 0), np.where(np.isfinite(hi), hi, 0)
        # where the model quantizes a tensor itself, its own grid, not the calibration's (calibrated on
        # inputs unlike the data measured, the range clipped what the model's grid holds)
        self.own = model_ranges(g)
        for k, t in enumerate(lay.fq_out):
            if t in self.own:
                self._lo[k], self._hi[k] = self.own[t]
        self.ranges = self._tensor_ranges(lay)
        for k, t in enumerate(lay.fq_out):  # (a selection's values: the grid of their input, as the code's)
            self._lo[k], self._hi[k] = self.ranges[t]
        self.k = min(PER_OP_SAMPLES, len(self._inputs))
        self._w32 = w32
        self._ref_runs = None  # the fp32 reference over every sample: run on first need (code generation needs only ranges)
        self._results: dict[tuple[str, ...], ErrorResult] = {}

    @property
    def _ref(self) -> tuple[list, list]:
        if self._ref_runs is None:
            runs = self._run(self._w32, self._fp32_q, "npukit: fp32 reference")
            self._check_finite(runs[0])
            self._ref_runs = runs
        return self._ref_runs

    def _check_finite(self, outs: list) -> None:
        """Refuse a reference whose model outputs hold inf or NaN (a division by zero, a log of 0 in
        the float model itself): no error can be measured against it.  The message names the first
        such output and the first op whose fp32 output is not finite on that sample."""
        n = self.sim.layout.n_outputs
        for s, sample in enumerate(outs):
            for j in range(n):
                if np.isfinite(sample[j]).all():
                    continue
                g = self.g
                full = self.sim.run(self._inputs[s], self._w32, self._fp32_q, True)[n:]
                bad = [i for i, o in zip(self.sim.layout.fq_ops, full) if not np.isfinite(o).all()]
                first = ""
                if bad:
                    op = g.ops[min(bad)]
                    its = "" if op.name == op.source else f", its op {op.name!r} ({op.kind})"
                    first = f", first at node {op.source!r} ({op.source_op}{its})"
                raise ModelError(f"{g.path or 'the model'}: the float model itself gives inf or NaN at output "
                                 f"{g.output_name(j)!r} on sample {s} of {len(outs)}{first}; the numeric error is "
                                 "measured against the fp32 outputs, so they must be finite")  # fmt: skip

    def _tensor_ranges(self, lay) -> dict[str, tuple[float, float]]:
        """Calibrated [min, max] of every float tensor an op reads or writes: op outputs from the
        simulation, model inputs from the calibration data, a relabel's output from its input; the
        model's own grid where it quantizes the tensor itself (``scheme.model_ranges``)."""
        g = self.g
        out = {t: (float(a), float(b)) for t, a, b in zip(lay.fq_out, self._lo, self._hi)}
        for j, tid in enumerate(g.inputs):
            col = [np.asarray(s[j], dtype=np.float64) for s in self.data.calib]
            if col and "float" in g.tensors[tid].dtype:
                out[tid] = (float(min(c.min() for c in col)), float(max(c.max() for c in col)))
        out.update(self.own)  # (a model input read by a quantize: its grid, whatever the data)
        for op in g.ops:  # relabels (reshape, ...) and selections (top-k values) keep their input's range
            # (a multi-output selection's values: rounded on the grid of the values they select from)
            select = KINDS[op.kind].role == "sort" and len(op.outputs) > 1
            for t in op.outputs:
                if (t not in out or select) and op.inputs and op.inputs[0] in out and "float" in g.tensors[t].dtype:
                    out[t] = out[op.inputs[0]]
        return out

    def _run(self, weights, qparams, desc: str = "npukit: measuring error") -> tuple[list, list]:
        """(model outputs per sample, all outputs of the first k samples)."""
        outs, full = [], []
        with Progress(len(self._inputs), desc, unit="sample") as bar:
            for i, x in enumerate(self._inputs):
                r = self.sim.run(x, weights, qparams, i < self.k)
                outs.append(r[: self.sim.layout.n_outputs])
                if i < self.k:
                    full.append(r[self.sim.layout.n_outputs:])
                bar(i)
        return outs, full

    def simulate(self, op_bits: Sequence[str], rounded: frozenset[int] | None, edge_bits, samples: Sequence[int]) -> list:
        """The simulated model outputs of the given samples under these bit-widths (what an exported
        program is held against)."""
        weights, qparams = self._params(op_bits, rounded, edge_bits)
        return [self.sim.run(self._inputs[i], weights, qparams, False)[: self.sim.layout.n_outputs] for i in samples]

    def _params(self, op_bits, rounded, edge_bits):
        lay = self.sim.layout
        edges = getattr(lay, "edges", ())
        eb = tuple((edge_bits or {}).get(e, "fp32") for e in edges)
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
        for e, b in zip(edges, eb):
            t = self._q_cache.get((e, b))
            if t is None:
                lo, hi = self.ranges.get(e[1], (0.0, 0.0))
                t = self._q_cache[(e, b)] = self.sim.tensors([act_params(lo, hi, b)])[0]
            qparams.append(t)
        return weights, qparams

    def evaluate(self, op_bits: Sequence[str], rounded: frozenset[int] | None = None,
                 edge_bits: Mapping[tuple[int, str], str] | None = None) -> ErrorResult:  # fmt: skip
        """Error of ``op_bits``; only the outputs of ops in ``rounded`` are rounded (all if None);
        ``edge_bits``: (consumer op, tensor) -> the bit-width that input is converted to on its way
        to the consumer's processor (a boundary quantize; absent: read as it is)."""
        lay = self.sim.layout
        edges = getattr(lay, "edges", ())
        eb = tuple((edge_bits or {}).get(e, "fp32") for e in edges)
        kept = tuple(i in rounded for i in lay.fq_ops) if rounded is not None else ()
        key = tuple(op_bits[i] for i in lay.fq_ops) + tuple(op_bits[o] for o in self._w_owner) + kept + eb
        hit = self._results.get(key)
        if hit is not None:
            return hit
        ref_outs, ref_full = self._ref  # (first: a reference that is not finite is refused before any run)
        weights, qparams = self._params(op_bits, rounded, edge_bits)
        outs, full = self._run(weights, qparams)
        per_op = []
        for k, i in enumerate(lay.fq_ops):
            same = [(a[k], b[k]) for a, b in zip(ref_full, full) if a[k].shape == b[k].shape]
            r = np.concatenate([a.ravel() for a, _ in same]) if same else np.zeros(0)
            q = np.concatenate([b.ravel() for _, b in same]) if same else np.zeros(0)
            # (an output whose shape differed on every sample compared nothing: NaN, not "no error")
            per_op.append((i, snr_db(r, q), max_abs(r, q)) if same else (i, math.nan, math.nan))
        res_outs = []
        acc = acc32 = None
        for j, tid in enumerate(self.g.outputs[: lay.n_outputs]):
            t = self.g.tensors[tid]
            pairs = [(a[j], b[j]) for a, b in zip(ref_outs, outs)]
            same = [(a, b) for a, b in pairs if a.shape == b.shape]
            if len(same) == len(pairs) and len({a.shape for a, _ in pairs}) == 1:
                r = np.stack([a for a, _ in pairs])
                q = np.stack([b for _, b in pairs])
            else:  # a data-dependent output shape (e.g. the boxes NMS keeps): compare where the shapes agree
                r = np.concatenate([a.ravel() for a, _ in same]) if same else np.zeros(0)
                q = np.concatenate([b.ravel() for _, b in same]) if same else np.zeros(0)
            name = self.g.output_name(j)
            d = {"name": name, "snr_db": snr_db(r, q) if same else math.nan, "max_abs": max_abs(r, q) if same else math.nan,
                 "top1_agreement": None}  # fmt: skip
            if len(same) != len(pairs):
                d["shape_mismatches"] = len(pairs) - len(same)
            batched = is_batch_of_class_outputs(t.shape) and "float" in t.dtype  # (not indices, not boxes of ints)
            if (is_class_output(t.shape) or batched) and r.ndim > 1:
                ra = r.reshape(-1, t.shape[-1] if batched else r[0].size).argmax(1)  # (a row per sample and batch item)
                qa = q.reshape(-1, t.shape[-1] if batched else q[0].size).argmax(1)
                d["top1_agreement"] = float(np.mean(ra == qa))
                if j == 0 and self.data.labels is not None and not batched:
                    acc = float(np.mean(qa == self.data.labels))
                    acc32 = float(np.mean(ra == self.data.labels))
            res_outs.append(d)
        res = ErrorResult(tuple(per_op), tuple(res_outs), acc, acc32, len(self._inputs), self.k, self.data.source)
        if len(self._results) > 32:
            self._results.pop(next(iter(self._results)))
        self._results[key] = res
        return res
