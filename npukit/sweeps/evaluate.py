"""Evaluating sweep configurations in a worker (local process, Dask worker or this process).

A ``Job`` is what every worker needs (the model as its import recipe, the profile as its document,
the grid's axes, what to measure); it pickles small.  An ``Evaluator`` keeps the shared work of one
job in one process: the import, one partition per distinct support / pin / placement set (and per
profile that can move ops), the checks of each, the changed profiles, and the compiled simulation
(through the pipeline's caches).  A configuration that differs from the last one only in bit-widths
or profile costs runs the estimate step alone (``pipeline.estimate``) on the partition it shares.
Rows are plain dicts of scalars (no DataFrame per row).
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from .. import pipeline as pl
from .grid import Axis, PointKeys, canon, moves_ops
from .points import axis_type, column_value, config_of, soc_changes

ERROR_COLUMNS = ("snr_db", "max_abs_error", "top1_agreement", "accuracy", "accuracy_fp32", "error")
# the generated code's memory (memory=True) and its fit in the configuration's own budgets: the weights
# against the profile's flash_bytes, the arena against its sram_bytes (None: the profile has no budget)
MEMORY_COLUMNS = (("arena_bytes", "int"), ("lower_bound_bytes", "int"), ("weight_bytes", "int"),
                  ("flash_over", "bool"), ("sram_over", "bool"))  # fmt: skip


@dataclass(frozen=True)
class Job:
    model: Any  # pipeline.Model (pickles as its graph and import recipe)
    soc: Any  # SocProfile (pickles as its document)
    axes: tuple[Axis, ...]
    error: bool = False
    memory: bool = False
    data: Any = None  # quant.Data, or None: the model's own data
    schema: Any = None  # the result's pyarrow schema (set by ``sweep``): a chunk comes back as one Arrow table

    @property
    def key(self) -> str:
        data = self.data.key if self.data is not None else ""
        return canon([self.model.key, self.soc.digest, [a.key for a in self.axes], self.error, self.memory, data])


def _lru(d: OrderedDict, key, value, size: int):
    d[key] = value
    d.move_to_end(key)
    while len(d) > size:
        d.popitem(last=False)
    return value


class Evaluator:
    """One job's shared work in one process (see the module docstring)."""

    def __init__(self, job: Job):
        self.job = job
        self.model = pl.load(job.model)
        self.soc = job.soc
        self.axes = job.axes
        self._socs: OrderedDict = OrderedDict()  # canon(changes) -> SocProfile | Exception
        self._parts: OrderedDict = OrderedDict()  # partition key -> (profile it was made on, Partitioned) | Exception
        self._checks: OrderedDict = OrderedDict()  # (check, partition key[, layer bits]) -> False | Exception
        self._data = job.data
        # the axes rows are made for: a job of another grid with the same keys shares this
        # evaluator (its caches), with its own values, so its own column types and PointKeys
        self._view = (job.axes, PointKeys(job.axes), tuple(axis_type(a) for a in job.axes))
        self.lock = threading.Lock()  # a Dask worker may run several tasks in threads

    @property
    def data(self):
        if self._data is None:
            self._data = pl.default_data(self.model)
        return self._data

    def run(self, items, axes: tuple[Axis, ...]) -> list[dict]:
        """Rows of ``items`` = [(index, value positions), ...] (``Grid.positions`` of ``axes``: a
        grid with the same keys as the job's, whose values may differ)."""
        with self.lock:
            if self._view[0] is not axes:
                self._view = (axes, PointKeys(axes), tuple(axis_type(a) for a in axes))
            keys = self._view[1]
            return [self.row(i, keys.config_id(pos), keys.values(pos)) for i, pos in items]

    # -- shared work ----------------------------------------------------------------------------
    def profile(self, changes: dict):
        if not changes:
            return self.soc
        key = canon(changes)
        hit = self._socs.get(key)
        if hit is None:
            try:
                hit = self.soc.with_changes(changes)
            except Exception as e:  # noqa: BLE001 - recorded in every row that needs this profile
                hit = e
            _lru(self._socs, key, hit, 256)
        if isinstance(hit, Exception):
            raise hit
        return hit

    def partition(self, key, soc, cfg):
        hit = self._parts.get(key)
        if hit is None:
            try:
                hit = (soc, pl.partition(self.model, soc, cfg))
            except Exception as e:  # noqa: BLE001
                hit = e
            _lru(self._parts, key, hit, 64)
        else:
            self._parts.move_to_end(key)
        if isinstance(hit, Exception):
            raise hit
        return hit

    def once(self, key, fn) -> None:
        """Run check ``fn`` once per ``key``; its error (or none) is remembered and raised again."""
        hit = self._checks.get(key)
        if hit is None:
            try:
                fn()
                hit = False
            except Exception as e:  # noqa: BLE001
                hit = e
            _lru(self._checks, key, hit, 4096)
        if hit is not False:
            raise hit

    # The Study's own checks, in its order (``pipeline.check`` before the partition, ``check_placed``
    # after it), each run once per what it depends on: names, support edits and pins once per
    # partition key; bit-widths once per assignment.  The profile of a partition key differs only in
    # what no check reads, except which bit-widths each processor runs (checked per profile).

    def check_before(self, key, soc, cfg) -> None:
        self.once(("names", key), lambda: pl.check(self.model, soc, replace(cfg, bits=(), layer_bits=())))
        for p, b in cfg.bits:
            pl.check_bits(soc, p, b)

    def check_after(self, key, rep, cfg, plan) -> None:
        ff = getattr(cfg, "placement", "first-fit") == "first-fit"
        if ff:  # bit-widths are not part of the key
            self.once(("pins", key), lambda: pl.check_placed(self.model, rep, replace(cfg, layer_bits=()), plan))
        else:
            self.once(("placed", key), lambda: pl.check_placed(self.model, rep, cfg, plan))
        if cfg.layer_bits:
            self.once(("layers", key, cfg.layer_bits), lambda: self._check_layers(rep, cfg, plan))

    def _check_layers(self, rep, cfg, plan) -> None:
        """``check_placed``'s first check: each layer's bit-width runs where its layer landed."""
        g = self.model.graph
        for node, b in cfg.layer_bits:
            for i in pl.resolve(g, node):
                p = rep.processor(plan.processor[i])
                if b not in p.macs_per_cycle:
                    raise pl.width_error(self.model, rep, cfg, node, p, b, i)

    # -- one configuration ----------------------------------------------------------------------
    def result(self, values: tuple):
        """(the pipeline Result, its Config) of one point."""
        changes = soc_changes(self.axes, values)
        soc = self.profile(changes)
        cfg = config_of(self.axes, values, soc)
        moving = {k: v for k, v in changes.items() if moves_ops(k, v, self.soc)}
        if getattr(cfg, "placement", "first-fit") != "first-fit":
            moving = changes  # a cost-aware placement reads the costs: any profile change can move ops
        key = (canon(moving), cfg.partition_key, getattr(cfg, "placement", None))
        self.check_before(key, soc, cfg)
        rep, part = self.partition(key, soc, cfg)
        self.check_after(key, rep, cfg, part.plan)
        return pl.estimate(self.model, soc, cfg, part), cfg

    def row(self, index: int, cid: str, values: tuple) -> dict:
        row: dict[str, Any] = {"index": index, "config_id": cid}
        axes, _, kinds = self._view
        for a, kind, v in zip(axes, kinds, values):
            row[a.key] = column_value(a, kind, v)
        try:
            res, cfg = self.result(values)
            row["config"] = canon(cfg.to_dict())
            flatten(res.totals, row)
            if self.job.error:
                errors(pl.error(res, self.data), row)
            if self.job.memory:
                proj = pl.code(res, self.data)
                over = lambda used, budget: None if budget is None else used > budget  # noqa: E731
                row.update(arena_bytes=proj.arena_bytes, lower_bound_bytes=proj.lower_bound,
                           weight_bytes=proj.weight_bytes, flash_over=over(proj.weight_bytes, res.soc.flash_bytes),
                           sram_over=over(proj.arena_bytes, res.soc.sram_bytes))  # fmt: skip
            row["failure"] = None
        except Exception as e:  # noqa: BLE001 - a failing configuration records its error; the sweep goes on
            msg = str(e).strip().split("\n")[0]
            row["failure"] = f"{type(e).__name__}: {msg}"
        return row


def flatten(totals, row: dict) -> dict:
    """Totals as flat columns: ``latency_us``, ``busy_us.dla``, ..."""
    for k, v in totals.items():
        if isinstance(v, dict) or hasattr(v, "items"):
            for p, x in v.items():
                row[f"{k}.{p}"] = x
        else:
            row[k] = v
    return row


def errors(e, row: dict) -> dict:
    """The numeric error as columns: the worst output's SNR and max abs error (of the outputs
    compared on some sample), the lowest top-1 agreement, accuracy (and fp32's), and ``error``: 1 -
    accuracy where labels exist, else the worst output's relative RMS error 10^(-SNR/20)."""
    outs = [o for o in e.outputs if not math.isnan(float(o["snr_db"]))]  # (NaN: compared on no sample)
    snr = min((float(o["snr_db"]) for o in outs), default=math.inf)
    row["snr_db"] = snr
    row["max_abs_error"] = max((float(o["max_abs"]) for o in outs), default=0.0)
    agree = [float(o["top1_agreement"]) for o in outs if o.get("top1_agreement") is not None]
    row["top1_agreement"] = min(agree) if agree else None
    row["accuracy"] = None if e.accuracy is None else float(e.accuracy)
    row["accuracy_fp32"] = None if e.accuracy_fp32 is None else float(e.accuracy_fp32)
    row["error"] = 1.0 - row["accuracy"] if row["accuracy"] is not None else 10 ** (-snr / 20)
    return row


# ---------------------------------------------------------------------------------------------
# workers: one Evaluator per job per process


_GUARD = threading.Lock()


def evaluator(job: Job) -> Evaluator:
    """The job's evaluator, kept in ``pipeline.EVALUATORS`` (so ``pipeline.clear_caches()`` forgets
    the partitions and checks it holds, as it does the pipeline's own)."""
    with _GUARD:
        ev = pl.EVALUATORS.get(job.key)
        if ev is None:
            ev = pl.EVALUATORS.put(job.key, Evaluator(job))
        return ev


def run_chunk(job: Job, items):
    """The rows of one chunk (in this process) as an Arrow table of ``job.schema``: columns travel
    between processes as a few buffers, not as thousands of dicts."""
    from .store import table  # noqa: PLC0415

    return table(evaluator(job).run(items, job.axes), job.schema)


def run_remote(job: Job, items: bytes):
    """A Dask task: the rows of one chunk (its items pickled: Dask then sends one buffer instead of
    walking every item for futures); the worker's own progress bars stay off."""
    import pickle  # noqa: PLC0415

    os.environ["NPUKIT_PROGRESS"] = "0"
    return run_chunk(job, pickle.loads(items))


_LOCAL: dict = {}


def init_local(job_bytes: bytes) -> None:
    """ProcessPoolExecutor initializer: load the job (and so the model) once per worker."""
    import pickle  # noqa: PLC0415

    os.environ["NPUKIT_PROGRESS"] = "0"  # the sweep's bar is the one to show, not each worker's
    _LOCAL["job"] = job = pickle.loads(job_bytes)
    evaluator(job).model.module  # noqa: B018 - import now, not in the first chunk


def run_local(items):
    return run_chunk(_LOCAL["job"], items)


