"""Study: the user's handle on one what-if study.  It keeps the model, the SoC profile, the Config
(every edit), the data and the subscribers, and delegates everything else:

    npukit.pipeline   the pure steps (import, verdicts, BYOC partition, estimates, numeric error),
                      each with one bounded cache keyed by exactly what it depends on
    npukit.tables     the Result as DataFrames, reasons and ``explain()`` text

A bit-width edit therefore never re-partitions, and toggling back to an earlier config costs nothing.

The Study's methods live in three modules: this one (the state, the derived figures, the numeric
error, the subscribers), ``study_edits`` (the edit methods) and ``study_outputs`` (the generated
code and the exports).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

from . import pipeline as pl
from . import tables
from .config import Config
from .errors import ConfigError, NpukitError, in_config
from .graph import OpGraph
from .plan import Plan
from .soc import SocProfile, load_soc
from .study_edits import StudyEdits
from .study_outputs import StudyOutputs


class Study(StudyEdits, StudyOutputs):
    """A what-if study of one model on one SoC.

    ``Study(model, soc, config=None, input_shapes=None, placement=None)``: ``model`` is a path (.onnx, .tflite,
    .pt2), an onnx.ModelProto, a torch.export.ExportedProgram or a Relax IRModule; ``soc`` a
    bundled profile name, a path or a SocProfile; ``config`` a Config (or a dict / TOML / JSON
    text of one, or a saved .toml / .json file's path) to start from.  ``placement`` ("cost" or
    "first-fit"), when given, is the policy whatever ``config`` says (as ``--placement`` beside
    ``--config`` on the command line).
    """

    def __init__(self, model, soc, config: Config | Mapping | str | None = None, *,
                 input_shapes: Mapping[str, tuple] | None = None, placement: str | None = None):  # fmt: skip
        self.soc: SocProfile = load_soc(soc)
        self.model = model
        self._model = pl.load(model, input_shapes)
        self.graph: OpGraph = self._model.graph
        self._listeners: list = []
        self._data = None
        self._config = Config()
        cfg = Config.coerce(config)
        if placement is not None:
            from .config import PLACEMENTS  # noqa: PLC0415

            if placement not in PLACEMENTS:
                raise ConfigError(f"unknown placement policy {placement!r}; one of {', '.join(map(repr, PLACEMENTS))}")
            cfg = cfg.with_placement(placement)
        try:
            self._apply(cfg)
        except ConfigError as e:  # a config given whole: its file (or "config"), then the field at fault
            where = Config.origin(config)
            if where is None or not (where or e.field):
                raise
            raise in_config(where, e) from None

    _coerce = staticmethod(lambda config: Config.coerce(config))

    # ------------------------------------------------------------------------------------------
    # config (the edit methods are in study_edits)

    @property
    def config(self) -> Config:
        return self._config

    def _apply(self, cfg: Config) -> None:
        """Switch to ``cfg`` atomically: on any error the Study keeps its old config."""
        with pl.gc_paused():  # (see there: the collector waits until the edit's steps are done)
            pl.check(self._model, self.soc, cfg)
            pl.check_placed(self._model, self.soc, cfg, pl.partition(self._model, self.soc, cfg).plan)
        self._config = cfg
        self._notify()

    def copy(self) -> Study:
        """A Study of the same model, profile, config and data, with no subscribers: edits on one do
        not reach the other.  Cheap (the import and the pipeline's caches are shared); the widget
        builds a copy in a background thread while the user goes on editing."""
        other = Study(self._model, self.soc, self._config)
        other._data = self._data
        other.model = self.model  # what the user gave, not the imported Model
        return other

    # ------------------------------------------------------------------------------------------
    # derived state (every figure comes from the pipeline's Result for the current config)

    @property
    def result(self) -> pl.Result:
        """The pipeline's Result for the current config: plan, verdicts, bits, per-op and boundary
        costs, schedule, totals."""
        return pl.evaluate(self._model, self.soc, self._config)

    @property
    def plan(self) -> Plan:
        return self.result.plan

    @property
    def partitioned_module(self):
        """The partitioned tvm IRModule (FuseOpsByPattern + MergeCompositeFunctions)."""
        return self.result.partitioned.mod

    @property
    def tagged_module(self):
        """The imported, constant-folded Relax module the partition starts from."""
        return self._model.module

    def byoc_steps(self) -> dict:
        """The BYOC partition step by step under the current config: ``patterns`` (the generated
        pattern table), ``tagged`` (the module it starts from), ``fused`` (after FuseOpsByPattern)
        and ``merged`` (after MergeCompositeFunctions)."""
        return pl.byoc_steps(self._model, self.soc, self._config)

    def op_bits(self) -> tuple[str, ...]:
        """The bit-width every op runs at: its setting (layer override, else processor setting, else
        its default) but where the model or its kernel holds its values otherwise -- fp16 for a
        float16 model's op under fp32, a kernel's width for a member whose values never leave the
        kernel (``costs["bits_note"]`` says why)."""
        return self.result.bits

    def reasons(self) -> tuple[str, ...]:
        """Every op's placement reason (what ``placement["reason"]`` shows), without a DataFrame."""
        return tables.reasons(self.result)

    def verdict_texts(self, processor: str) -> tuple[str, ...]:
        """One processor's verdict on every op (a ``placement`` column), without a DataFrame."""
        proc = self._proc(processor)
        vs = self.result.verdicts
        return tuple(vs[(op.op_id, proc)].text for op in self.graph.ops)

    placement = property(lambda self: tables.placement(self.result), doc="One row per op: where it runs and why.")
    partitions = property(lambda self: tables.partitions(self.result), doc="One row per partition.")
    costs = property(lambda self: tables.costs(self.result), doc=tables.costs.__doc__)
    boundaries = property(lambda self: tables.boundaries(self.result), doc=tables.boundaries.__doc__)
    timeline = property(lambda self: tables.timeline(self.result), doc="The lane schedule: ops, transfers, conversions.")

    @property
    def totals(self) -> Totals:
        """The study's totals: latency, energy, per-processor busy time and energy, transfers,
        conversions, MACs, op and partition counts (a dict; shown rounded), and ``memory``: the
        profile's build target and flash / SRAM budgets (the generated code against them is
        ``study.memory``: it needs the code).  ``energy_by_processor_uj`` counts each processor's ops
        and the boundary conversions it runs, not the links' transfer energy (that is in
        ``boundary_energy_uj`` alone), so its sum is ``energy_uj`` less the link energy."""
        t = dict(self.result.totals)
        t["memory"] = pl.budgets(self.soc)
        return Totals(t)

    @property
    def memory(self) -> dict:
        """Does it fit: the profile's target and flash / SRAM budgets; ``estimate``, the generated
        code's weights and arena against them (generating the code of this config if needed); and
        ``measured``, the toolchain's figures of the target build once ``fit()`` or
        ``build(target=True)`` measured this config (else None)."""
        self.project  # noqa: B018 - the estimate is the generated code's
        return pl.memory(self.result, self.data)

    def explain(self, node) -> str:
        """The placement reason and every figure of a node's ops with formula, values and sources."""
        return tables.explain(self.result, node)

    # ------------------------------------------------------------------------------------------
    # numeric error of the bit-widths

    def set_data(self, x, y=None) -> Study:
        """Your own inputs (and class labels): numpy arrays, a dict input name -> array, or a path to
        an .npz holding ``x`` or one array per input name, not both (and optionally ``y``, ``calib`` --
        a one-input model's; an input named so is an input).  A name no model input has is refused.  The first inputs calibrate the activation ranges (or ``calib`` when
        given); all are used for the model-output error figures, the first 64 for the per-op ones.
        A model input no op reads (``npukit inspect`` flags it) may be left out: it is fed zeros.
        Labels are scored against output 0 and refused unless it is one row of class scores ([C],
        [1, C]; not a batched [B, C] with B > 1).  ``set_data(None)``: back to the default data."""
        from . import quant  # noqa: PLC0415

        if x is None:
            if y is not None:
                raise ConfigError("set_data(None, y): labels need inputs; pass both, or None alone for the default data")
            self._data = None  # back to the model's own data (its sidecar), else seeded random inputs
            self._notify()
            return self
        if isinstance(x, (str, os.PathLike)):
            if y is not None:
                raise ConfigError("set_data(path): the labels come from the file's 'y'; do not pass y")
            data = quant.load_npz(self.graph, x)
        else:
            data = quant.make_data(self.graph, x, y)
        self._data = data
        self._notify()
        return self

    @property
    def data(self):
        """The data the error figures are measured on (``set_data``, else the model's sidecar, else
        seeded random inputs); ``data.key`` identifies it."""
        if self._data is None:
            self._data = pl.default_data(self._model)
        return self._data

    def _error_result(self):
        return pl.error(self.result, self.data)

    @property
    def error(self):
        """Per-op numeric error of the chosen bit-widths (SNR dB and max abs error against fp32),
        measured by running the model on the first 64 samples of the data (all if fewer:
        ``error_dict()["per_op_samples"]``); see ``error_dict()`` for the model outputs and accuracy,
        which are measured on every sample.  One row per op whose output the widths round: a view
        (reshape: its values unchanged), an op with several outputs (split) and an op whose output
        is the model's own integer or boolean tensor (an int8 model's quantize, clip and pool;
        indices, masks) have none."""
        return tables.error(self.result, self._error_result())

    def error_dict(self) -> dict:
        """Model-output error, on every sample of the data (``samples``; the per-op figures of
        ``study.error`` use the first 64, ``per_op_samples``): per output SNR, max abs error and top-1
        agreement -- reported for every output with exactly one dimension larger than 1 ([C],
        [1, C] ...) whatever it holds, and per row for a float [B, C] output (B, C > 1), else None;
        it means something only for class scores -- and accuracy on labels (output 0, one row of
        class scores).  ``data_source`` names this study's data.  An output whose shape depends on
        the data (the rows NMS selects) is compared on the samples where it has the float model's
        shape; ``shape_mismatches`` counts those left out.  One left out on every sample is compared
        on none: its ``snr_db`` and ``max_abs`` are NaN (null in JSON), as are such an op's in
        ``study.error``."""
        res = self._error_result()
        return {"outputs": [dict(o) for o in res.outputs], "accuracy": res.accuracy, "accuracy_fp32": res.accuracy_fp32,
                "samples": res.samples, "per_op_samples": res.per_op_samples, "data_source": res.source}  # fmt: skip

    # ------------------------------------------------------------------------------------------
    # notebook

    def subscribe(self, fn) -> None:
        """Call ``fn(study)`` after every edit (the widget uses this to follow edits made in code)."""
        if fn not in self._listeners:
            self._listeners.append(fn)

    def unsubscribe(self, fn) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _notify(self) -> None:
        """Every listener hears of the edit, whatever another one does: a listener's failure is not the
        edit's (it stands), so it is said as a warning and the next listener is called."""
        for fn in list(self._listeners):
            try:
                fn(self)
            except Exception as e:  # noqa: BLE001 - a view's failure must not hide the edit from the others
                warnings.warn(f"npukit: a listener of this study failed after the edit, which stands "
                              f"({getattr(fn, '__qualname__', fn)!s}: {type(e).__name__}: {e})", RuntimeWarning, stacklevel=3)  # fmt: skip

    def show(self):
        """The notebook widget."""
        from .ui import StudyWidget  # noqa: PLC0415

        return StudyWidget(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            return self.show()._repr_mimebundle_(include=include, exclude=exclude)
        except Exception:  # noqa: BLE001 - fall back to text outside a widget frontend
            return {"text/plain": repr(self)}

    def __repr__(self) -> str:
        t = self.result.totals
        return (f"<npukit.Study {Path(str(self.graph.path)).name} on {self.soc.name}: {len(self.graph.ops)} ops, "
                f"{len(self.plan.partitions)} partitions, {t['latency_us']:.1f} us, {t['energy_uj']:.2f} uJ>")  # fmt: skip


class Totals(dict):
    """The totals as a plain dict whose repr rounds the figures (4 significant digits)."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {_round(v)}" for k, v in self.items()) + "}"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text("\n".join(f"{k}: {_round(v)}" for k, v in self.items()))


def _round(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_round(x)}" for k, x in v.items()) + "}"
    return repr(v)


__all__ = ["Study", "NpukitError"]
