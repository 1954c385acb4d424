"""Study: the user's handle on one what-if study.  It keeps the model, the SoC profile, the Config
(every edit), the data and the subscribers, and delegates everything else:

    npukit.pipeline   the pure steps (import, verdicts, BYOC partition, estimates, numeric error),
                      each with one bounded cache keyed by exactly what it depends on
    npukit.tables     the Result as DataFrames, reasons and ``explain()`` text

A bit-width edit therefore never re-partitions, and toggling back to an earlier config costs nothing.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from . import pipeline as pl
from . import tables
from .config import Config
from .errors import ConfigError, NpukitError, unknown
from .graph import OpGraph
from .plan import Plan
from .soc import BITS, SocProfile, load_soc


class Study:
    """A what-if study of one model on one SoC.

    ``Study(model, soc, config=None, input_shapes=None)``: ``model`` is a path (.onnx, .tflite,
    .pt2), an onnx.ModelProto, a torch.export.ExportedProgram or a Relax IRModule; ``soc`` a
    bundled profile name, a path or a SocProfile; ``config`` a Config (or a dict / TOML / JSON
    text of one, or a saved .toml / .json file's path) to start from.
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
        self._apply(cfg)

    _coerce = staticmethod(lambda config: Config.coerce(config))

    # ------------------------------------------------------------------------------------------
    # config and edits

    @property
    def config(self) -> Config:
        return self._config

    def _proc(self, name: str) -> str:
        if name not in self.soc.names:
            raise unknown("processor", name, self.soc.names)
        return name

    def _node_key(self, node) -> str:
        """A node reference as stored in the config, one spelling per set of ops: the model node's
        own name when the reference covers exactly that node's ops (an op id, ``"12"``, ``"#12"`` or
        an op name of a node that became one op, or the node name itself), else ``"#<id>"`` for one
        op of a node that became several (a model node name means every op the node became), or
        its op name where the model has a node named ``"#<id>"``."""
        ids = pl.resolve(self.graph, int(node) if isinstance(node, (int, np.integer)) and not isinstance(node, bool)
                         else node)  # fmt: skip
        src = self.graph.ops[ids[0]].source
        if self.graph.ops_of_source(src) == ids and self.graph.resolve(src) == ids:
            return src
        if len(ids) == 1:
            op = self.graph.ops[ids[0]]
            return f"#{op.op_id}" if self.graph.resolve(f"#{op.op_id}") == ids else op.name  # (a node named "#12")
        return str(node)

    def _without_covered(self, entries, key: str) -> dict:
        """The per-node edits left when ``key`` is set: those it covers whole are replaced by it."""
        mine = set(pl.resolve(self.graph, key))
        return {n: v for n, v in entries if n != key and not set(self.graph.resolve(n)) <= mine}

    def _apply(self, cfg: Config) -> None:
        """Switch to ``cfg`` atomically: on any error the Study keeps its old config."""
        with pl.gc_paused():  # (see there: the collector waits until the edit's steps are done)
            pl.check(self._model, self.soc, cfg)
            pl.check_placed(self._model, self.soc, cfg, pl.partition(self._model, self.soc, cfg).plan)
        self._config = cfg
        self._notify()

    def set_support(self, processor: str, op: str, enabled: bool = True) -> Study:
        """Switch op support on a processor; ``op`` is a short or full Relax name (softmax)."""
        from .opset import canonical  # noqa: PLC0415

        if not isinstance(enabled, (bool, np.bool_)):
            raise ConfigError(f"set_support: enabled must be True or False, got {enabled!r}")
        proc = self._proc(processor)
        kind = canonical(op, "op")
        if self.soc.processor(proc).host:
            raise ConfigError(pl.host_toggle(self.soc, proc))
        has = kind in self.soc.processor(proc).ops
        if not enabled:  # a pin there needs the support: said as this edit's conflict, not as a failed pin
            held = [i for i, p in sorted(pl.pins_of(self.graph, self._config).items())
                    if p == proc and self.graph.ops[i].kind == kind]  # fmt: skip
            if held:
                raise ConfigError(f"cannot disable {kind} on {proc}: {pl.pinned_as(self.graph, self._config, held[0])} "
                                  f"is pinned to {proc}; unpin it first")  # fmt: skip
        cfg = self._config.without_support_edit(proc, kind) if enabled == has else \
            self._config.with_support(proc, kind, bool(enabled))  # fmt: skip
        self._apply(cfg)
        return self

    def pin(self, node, processor: str) -> Study:
        """Pin a node (model name, op name or op id) to a processor.  The last edit of an op wins:
        pinning a node replaces the pins of the ops inside it; a pin of one op inside a pinned node
        beats the node's."""
        key, proc = self._node_key(node), self._proc(processor)
        pins = self._without_covered(self._config.pins, key)
        pins[key] = proc
        self._apply(dataclasses.replace(self._config, pins=tuple(sorted(pins.items()))))
        return self

    def unpin(self, node) -> Study:
        """Remove the pin of a node (and the pins of the ops inside it)."""
        key = self._node_key(node)
        pins = self._without_covered(self._config.pins, key)
        if len(pins) == len(self._config.pins):
            raise self._not_set(node, key, self._config.pins, ("pinned", "pin", "unpin that"))
        self._apply(dataclasses.replace(self._config, pins=tuple(sorted(pins.items()))))
        return self

    def _not_set(self, node, key: str, entries, words: tuple[str, str, str]) -> ConfigError:
        """The error of removing a per-node edit ``node`` does not have: held by a larger one, or none."""
        done, edit, fix = words
        mine = set(pl.resolve(self.graph, key))
        held = [pl.shown(self.graph, n) for n, _ in entries if mine & set(self.graph.resolve(n))]
        if held:  # set only as part of a larger edit
            return ConfigError(f"{node!r} is not {done} itself; it is held by the {edit} of "
                               f"{', '.join(map(repr, held))}: {fix.format(held[0])}")  # fmt: skip
        listed = ", ".join(repr(pl.shown(self.graph, n)) for n, _ in entries) or "none"
        return ConfigError(f"{node!r} is not {done}; {done}: {listed}")

    def set_bits(self, bits: str | None, processor: str | None = None, layer=None) -> Study:
        """Bit-width for a processor's ops, or for one layer (a layer override beats its processor's).

        ``bits=None`` removes the setting.  With neither processor nor layer, every processor.
        """
        if bits is not None and bits not in BITS:
            raise ConfigError(f"unknown bit-width {bits!r}; one of {', '.join(BITS)}")
        if processor is not None and layer is not None:
            raise ConfigError("set_bits takes processor= or layer=, not both")
        cfg = self._config
        if layer is not None:
            # (as in a config given whole: the cost placement may move the layer to a processor that
            # runs the width; under first-fit, or where none can, ``_apply`` refuses it)
            key = self._node_key(layer)
            lb = self._without_covered(cfg.layer_bits, key)
            if bits is not None:
                lb[key] = bits
            elif len(lb) == len(cfg.layer_bits):
                raise self._not_set(layer, key, cfg.layer_bits, ("given a bit-width", "bit-width",
                                                                 "remove that one (set_bits(None, layer={!r}))"))  # fmt: skip
            cfg = dataclasses.replace(cfg, layer_bits=tuple(sorted(lb.items())))
        else:
            targets = [self._proc(processor)] if processor is not None else list(self.soc.names)
            if bits is not None:
                bad = [p for p in targets if bits not in self.soc.processor(p).macs_per_cycle]
                if bad and processor is not None:
                    pl.check_bits(self.soc, bad[0], bits)
                if bad:
                    raise ConfigError(f"{', '.join(bad)} cannot run {bits}; set it per processor with processor=")
            for p in targets:
                cfg = cfg.with_bits(bits, processor=p)
        self._apply(cfg)
        return self

    def reset(self) -> Study:
        self._apply(Config())
        return self

    def set_placement(self, placement: str) -> Study:
        """The placement policy: "cost" (npukit's cost model chooses among the processors the rules
        allow, and whether an offload pays for itself) or "first-fit" (the profile's preference order)."""
        from .config import PLACEMENTS  # noqa: PLC0415

        if placement not in PLACEMENTS:
            raise ConfigError(f"unknown placement policy {placement!r}; one of {', '.join(map(repr, PLACEMENTS))}")
        self._apply(self._config.with_placement(placement))
        return self

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
        """Effective bit-width of every op: layer override, else processor setting, else its default."""
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
        ``study.memory``: it needs the code)."""
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
        an .npz holding ``x`` or one array per input name (and optionally ``y``, ``calib``; an input
        named so is an input).  The first inputs calibrate the activation ranges (or ``calib`` when
        given); all are used for the error figures.  ``set_data(None)``: back to the default data."""
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
        measured by running the model; see ``error_dict()`` for the model outputs and accuracy."""
        return tables.error(self.result, self._error_result())

    def error_dict(self) -> dict:
        """Model-output error: per output SNR, max abs error, top-1 agreement; accuracy on labels."""
        res = self._error_result()
        return {"outputs": [dict(o) for o in res.outputs], "accuracy": res.accuracy, "accuracy_fp32": res.accuracy_fp32,
                "samples": res.samples, "per_op_samples": res.per_op_samples, "data_source": res.source}  # fmt: skip

    # ------------------------------------------------------------------------------------------
    # generated code

    @property
    def project(self):
        """The generated C project of the current config (``npukit.codegen.project.Project``)."""
        return pl.code(self.result, self.data)

    @property
    def code(self) -> dict[str, str]:
        """The generated C project: relative path -> file text (follows every edit)."""
        return dict(self.project.files)

    def export(self, directory) -> object:
        """Write the generated project to ``directory`` atomically; ``make`` builds it.  Returns the
        Project (files, manifest, memory figures).  ``directory`` must be new, empty, or an earlier
        export (what it and its build wrote is replaced, your own files in it are kept); a
        directory holding anything else is refused (NpukitError) and left as it was."""
        from .codegen.project import build_outputs, check_io_dtypes  # noqa: PLC0415
        from .io import atomic_write_tree, check_export_target  # noqa: PLC0415

        check_export_target(directory)  # before the code is generated: a wrong directory fails fast
        check_io_dtypes(self.graph)
        proj = self.project
        atomic_write_tree(directory, proj.files, build_outputs())
        return proj

    def fit(self, directory=None, *, target: str | None = None) -> dict:
        """Does it fit?  Export, build for the profile's target (or ``target``) and hold the
        toolchain's ``size`` figures against the profile's ``flash_bytes`` / ``sram_bytes``: flash =
        code + constants + .data image, SRAM = .data + .bss (the arena) + heap + stack, with the
        weights' and arena's own sections where the linker script keeps them apart.  Warns
        (``npukit.codegen.fit.MemoryBudgetWarning``) when over budget; ``study.memory`` shows it
        afterwards.  Keeps the build in ``directory`` when given."""
        from .codegen.fit import fit_study  # noqa: PLC0415

        return fit_study(self, directory, target)

    def build(self, directory=None, *, samples: int = 16, target: bool = False) -> dict:
        """Export, compile and run the generated program on the study's data; its outputs against the
        simulation of the same config, its memory, and (``target=True``) the profile's target build
        under its emulator.  ``outputs_agree`` is False, and ``mismatches`` names them, when an output
        is beyond its tolerance of the simulation (``npukit.codegen.build``; docs/targets.md).  Without
        ``directory`` it builds in a temporary one, removed after (the report's ``directory`` is None)."""
        from .codegen.build import build_and_compare  # noqa: PLC0415

        return build_and_compare(self, directory, samples=samples, target=target)

    # ------------------------------------------------------------------------------------------
    # exports

    def to_model_explorer(self, out_dir, include_error: bool = False) -> Path:
        """Model Explorer graph JSON + node-data overlays (processor, latency, energy[, error])."""
        from .export import to_model_explorer  # noqa: PLC0415

        return to_model_explorer(self, out_dir, include_error)

    def annotated_onnx(self, path) -> Path:
        """The ONNX model with npukit's placement and figures on every node (for Netron)."""
        from .export import annotated_onnx  # noqa: PLC0415

        return annotated_onnx(self, path)

    def netron(self, path=None, port: int | None = None, height: int = 600):
        """Serve the annotated ONNX with netron on loopback and show it in the notebook."""
        from .export import netron_frame  # noqa: PLC0415

        return netron_frame(self, path, port, height)

    def report(self, path, include_error: bool = False, include_memory: bool = True) -> Path:
        """A standalone HTML report (tables + timeline; with ``include_memory`` the memory fit of the
        generated code against the profile's flash / SRAM, and of the target build after ``fit()``)."""
        from .report import write_report  # noqa: PLC0415

        return write_report(self, path, include_error, include_memory)

    def timeline_figure(self):
        """The lane timeline as a plotly figure."""
        from .report import timeline_figure  # noqa: PLC0415

        return timeline_figure(self)

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
