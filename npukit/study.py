"""Study: the only state in npukit.  It holds the model, the SoC profile and the user's Config, and
caches every derived result by exactly what it depends on:

    capability verdicts      (graph, profile)                 once per Study
    partition (BYOC)         (graph, profile, support, pins)  LRU of partitions, so toggling back is free
    per-op / boundary costs  (op, processor, bits, context)   memo inside the CostModel
    schedule + totals        (plan, bits)                     recomputed on access after an edit

A bit-width edit therefore never re-partitions, and a support toggle re-runs FuseOpsByPattern +
MergeCompositeFunctions but re-costs only the ops whose processor or memory context changed.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import ops as _ops
from .config import Config
from .cost import BoundaryCost, CostModel, OpCost
from .errors import ConfigError, NpukitError, closest, unknown
from .graph import OpGraph
from .plan import Plan
from .rules import Verdict, capability, verdicts, winner_reason
from .soc import BITS, SocProfile, load_soc
from .timeline import Schedule, schedule

_IMPORT_CACHE: OrderedDict = OrderedDict()
_IMPORT_CACHE_SIZE = 8


def _import(model, input_shapes):
    """Import once per (file, mtime, size, shapes); in-memory models are not cached."""
    from .tvm.importers import import_model  # noqa: PLC0415 - keeps `import npukit` free of tvm

    if isinstance(model, (str, os.PathLike)):
        p = Path(model)
        try:
            st = p.stat()
            key = (str(p.resolve()), st.st_mtime_ns, st.st_size, _shape_key(input_shapes))
        except OSError:
            key = None
        if key is not None and key in _IMPORT_CACHE:
            _IMPORT_CACHE.move_to_end(key)
            return _IMPORT_CACHE[key]
        imp = import_model(model, input_shapes)
        if key is not None:
            _IMPORT_CACHE[key] = imp
            while len(_IMPORT_CACHE) > _IMPORT_CACHE_SIZE:
                _IMPORT_CACHE.popitem(last=False)
        return imp
    return import_model(model, input_shapes)


def _shape_key(shapes):
    if not shapes:
        return ()
    return tuple(sorted((k, tuple(v)) for k, v in shapes.items()))


@dataclass(frozen=True)
class Result:
    """Everything derived from one (plan, bits)."""

    plan: Plan
    verdicts: Mapping[tuple[int, str], Verdict]
    bits: tuple[str, ...]
    ops: tuple[OpCost, ...]
    bounds: tuple[BoundaryCost, ...]
    schedule: Schedule
    totals: dict


class Study:
    """A what-if study of one model on one SoC.

    ``Study(model, soc, config=None, input_shapes=None)``: ``model`` is a path (.onnx, .tflite,
    .pt2), an onnx.ModelProto, a torch.export.ExportedProgram or a Relax IRModule; ``soc`` a
    bundled profile name, a path or a SocProfile; ``config`` a Config (or a dict / TOML / JSON
    text of one) to start from.
    """

    def __init__(self, model, soc, config: Config | Mapping | str | None = None, *,
                 input_shapes: Mapping[str, tuple] | None = None):  # fmt: skip
        self.soc: SocProfile = load_soc(soc)
        self.model = model
        self._imported = _import(model, input_shapes)
        self.graph: OpGraph = self._imported.graph
        self._caps = {(op.op_id, p.name): capability(op, self.graph, p)
                      for op in self.graph.ops for p in self.soc.processors}  # fmt: skip
        self._partitioner = None
        self._partitions: OrderedDict = OrderedDict()
        self._cost = CostModel(self.graph, self.soc)
        self._results: OrderedDict = OrderedDict()  # Config -> Result, most recent last
        self._listeners: list = []
        self._data = None
        self._errors = None
        self._config = Config()
        cfg = _coerce_config(config)
        self._apply(cfg)

    # ------------------------------------------------------------------------------------------
    # names

    def _proc(self, name: str) -> str:
        if name not in self.soc.names:
            raise unknown("processor", name, self.soc.names)
        return name

    def _op_kind(self, op: str) -> str:
        return _ops.canonical(op, "op")

    def _nodes(self, node) -> tuple[int, ...]:
        ids = self.graph.resolve(node)
        if not ids:
            names = set(self.graph.names()) | {op.source for op in self.graph.ops}
            raise ConfigError(f"unknown node {node!r}; {closest(str(node), names)}")
        return ids

    def _node_key(self, node) -> str:
        """A node reference as stored in the config: names as given, an op id as ``"#<id>"`` (that
        one op; a model node name means every op the node became)."""
        if isinstance(node, (int, np.integer)) and not isinstance(node, bool):
            self._nodes(int(node))
            return f"#{int(node)}"
        self._nodes(node)
        return str(node)

    # ------------------------------------------------------------------------------------------
    # config and edits

    @property
    def config(self) -> Config:
        return self._config

    def _pins(self, cfg: Config) -> dict[int, str]:
        out: dict[int, str] = {}
        for node, proc in cfg.pins:
            for i in self._nodes(node):
                out[i] = proc
        return out

    def _check(self, cfg: Config) -> None:
        """Validate every name in ``cfg`` and every pin against the profile's rules."""
        for proc, op in (*cfg.disabled, *cfg.enabled):
            self._proc(proc)
            self._op_kind(op)
        for proc, b in cfg.bits:
            self._proc(proc)
            self._check_bits(proc, b)
        for node, b in cfg.layer_bits:
            self._nodes(node)
            if b not in BITS:
                raise ConfigError(f"layer {node!r}: unknown bit-width {b!r}; one of {', '.join(BITS)}")
        pins = self._pins(cfg)
        for _node, proc in cfg.pins:
            self._proc(proc)
        vs = verdicts(self.graph, self.soc, cfg.disabled, cfg.enabled, {}, self._caps)
        for i, proc in sorted(pins.items()):
            v = vs[(i, proc)]
            if not v.ok:
                op = self.graph.ops[i]
                raise ConfigError(f"cannot pin {op.name!r} ({op.kind}) to {proc}: {proc}: {v.text}")

    def _check_bits(self, proc: str, b: str) -> None:
        if b not in BITS:
            raise ConfigError(f"unknown bit-width {b!r}; one of {', '.join(BITS)}")
        p = self.soc.processor(proc)
        if b not in p.macs_per_cycle:
            raise ConfigError(f"{proc} cannot run {b}: processors.{proc}.macs_per_cycle lists {', '.join(p.bits)}")

    def _apply(self, cfg: Config) -> None:
        """Switch to ``cfg`` atomically: on any error the Study keeps its old config."""
        self._check(cfg)
        old = self._config
        self._config = cfg
        try:
            part = self._partition()
            pins = self._pins(cfg)
            for node, b in cfg.layer_bits:  # a layer's bit-width must still run where it now lands
                for i in self._nodes(node):
                    proc = part.plan.processor[i]
                    if b not in self.soc.processor(proc).macs_per_cycle:
                        raise ConfigError(f"layer {node!r} would run on {proc}, which cannot run its bit-width {b} "
                                          f"(processors.{proc}.macs_per_cycle lists {', '.join(self.soc.processor(proc).bits)}); "
                                          f"change it first with set_bits(..., layer={node!r})")  # fmt: skip
            for i, proc in sorted(pins.items()):
                if part.plan.processor[i] != proc:
                    op = self.graph.ops[i]
                    why = part.verdicts[(i, proc)].text
                    raise ConfigError(f"cannot pin {op.name!r} to {proc}: the partition placed it on "
                                      f"{part.plan.processor[i]} ({proc}: {why})")  # fmt: skip
        except NpukitError:
            self._config = old
            raise
        self._notify()

    def set_support(self, processor: str, op: str, enabled: bool = True) -> Study:
        """Switch op support on a processor; ``op`` is a short or full Relax name (softmax)."""
        if not isinstance(enabled, (bool, np.bool_)):
            raise ConfigError(f"set_support: enabled must be True or False, got {enabled!r}")
        proc = self._proc(processor)
        kind = self._op_kind(op)
        if self.soc.processor(proc).host:
            raise ConfigError(f"{proc} is the host: it runs every op no accelerator takes; toggle an accelerator "
                              f"({', '.join(self.soc.accelerators)})")  # fmt: skip
        profile_has = kind in self.soc.processor(proc).ops
        cfg = self._config.without_support_edit(proc, kind) if enabled == profile_has else \
            self._config.with_support(proc, kind, enabled)  # fmt: skip
        self._apply(cfg)
        return self

    def pin(self, node, processor: str) -> Study:
        """Pin a node (model name, op name or op id) to a processor."""
        self._apply(self._config.with_pin(self._node_key(node), self._proc(processor)))
        return self

    def unpin(self, node) -> Study:
        key = self._node_key(node)
        if key not in dict(self._config.pins):
            raise ConfigError(f"{node!r} is not pinned; pinned: {', '.join(n for n, _ in self._config.pins) or 'none'}")
        self._apply(self._config.with_pin(key, None))
        return self

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
            key = self._node_key(layer)
            if bits is not None:
                plan = self.plan
                for i in self._nodes(key):
                    proc = plan.processor[i]
                    if bits not in self.soc.processor(proc).macs_per_cycle:
                        raise ConfigError(f"layer {key!r} runs on {proc}, which cannot run {bits}: "
                                          f"processors.{proc}.macs_per_cycle lists {', '.join(self.soc.processor(proc).bits)}")  # fmt: skip
            cfg = cfg.with_bits(bits, layer=key)
        else:
            targets = [self._proc(processor)] if processor is not None else list(self.soc.names)
            if bits is not None:
                bad = [p for p in targets if bits not in self.soc.processor(p).macs_per_cycle]
                if bad and processor is not None:
                    self._check_bits(bad[0], bits)
                if bad:
                    raise ConfigError(f"{', '.join(bad)} cannot run {bits}; set it per processor with processor=")
            for p in targets:
                cfg = cfg.with_bits(bits, processor=p)
        self._apply(cfg)
        return self

    def reset(self) -> Study:
        self._apply(Config())
        return self

    # ------------------------------------------------------------------------------------------
    # derived state

    def _partition(self):
        key = self._config.partition_key
        hit = self._partitions.get(key)
        if hit is not None:
            self._partitions.move_to_end(key)
            return hit
        if self._partitioner is None:
            from .tvm.partition import Partitioner  # noqa: PLC0415

            self._partitioner = Partitioner(self._imported.mod, self.graph, self.soc)
        cfg = self._config
        vs = verdicts(self.graph, self.soc, cfg.disabled, cfg.enabled, self._pins(cfg), self._caps)
        part = self._partitioner.run(vs)
        self._partitions[key] = part
        while len(self._partitions) > 32:
            self._partitions.popitem(last=False)
        return part

    @property
    def plan(self) -> Plan:
        return self._partition().plan

    @property
    def partitioned_module(self):
        """The partitioned tvm IRModule (FuseOpsByPattern + MergeCompositeFunctions)."""
        return self._partition().mod

    def byoc_steps(self) -> dict:
        """The BYOC partition step by step under the current config: ``patterns`` (the generated
        pattern table), ``tagged`` (the module it starts from), ``fused`` (after FuseOpsByPattern)
        and ``merged`` (after MergeCompositeFunctions)."""
        self._partition()
        cfg = self._config
        vs = verdicts(self.graph, self.soc, cfg.disabled, cfg.enabled, self._pins(cfg), self._caps)
        return self._partitioner.steps(vs)

    @property
    def tagged_module(self):
        """The imported, constant-folded Relax module the partition starts from."""
        return self._imported.mod

    def op_bits(self) -> tuple[str, ...]:
        """Effective bit-width of every op: layer override, else processor setting, else its default."""
        plan = self.plan
        pb = dict(self._config.bits)
        lb: dict[int, str] = {}
        for node, b in self._config.layer_bits:
            for i in self._nodes(node):
                lb[i] = b
        out = []
        for op in self.graph.ops:
            p = self.soc.processor(plan.processor[op.op_id])
            b = lb.get(op.op_id)
            if b is None or b not in p.macs_per_cycle:
                b = pb.get(p.name, p.default_bits)
            out.append(b)
        return tuple(out)

    def _evaluate(self) -> Result:
        """Costs, boundaries, schedule and totals of the current config (an LRU keeps the last
        16 configs, so toggling back and forth costs nothing)."""
        key = self._config
        hit = self._results.get(key)
        if hit is not None:
            self._results.move_to_end(key)
            return hit
        part = self._partition()
        bits = self.op_bits()
        ops, bounds = self._cost.evaluate(part.plan, bits)
        sched = schedule(self.graph, part.plan, self.soc, ops, bounds)
        totals = _totals(self, part.plan, ops, bounds, sched)
        res = Result(part.plan, part.verdicts, bits, tuple(ops), tuple(bounds), sched, totals)
        self._results[key] = res
        while len(self._results) > 16:
            self._results.popitem(last=False)
        return res

    def reasons(self) -> tuple[str, ...]:
        """Every op's placement reason (what ``placement["reason"]`` shows), without a DataFrame."""
        r = self._evaluate()
        pins = self._pins(self._config)
        return tuple(winner_reason(op, r.plan.processor[op.op_id], r.plan.pattern[op.op_id], r.verdicts, self.soc,
                                   op.op_id in pins) for op in self.graph.ops)  # fmt: skip

    def verdict_texts(self, processor: str) -> tuple[str, ...]:
        """One processor's verdict on every op (a ``placement`` column), without a DataFrame."""
        proc = self._proc(processor)
        vs = self._evaluate().verdicts
        return tuple(vs[(op.op_id, proc)].text for op in self.graph.ops)

    # ------------------------------------------------------------------------------------------
    # tables

    @property
    def placement(self):
        import pandas as pd  # noqa: PLC0415

        r = self._evaluate()
        reasons = self.reasons()
        rows = []
        for op in self.graph.ops:
            i = op.op_id
            proc = r.plan.processor[i]
            row = {"op_id": i, "name": op.name, "op": op.kind, "processor": proc, "partition": r.plan.partition[i],
                   "reason": reasons[i], "pattern": r.plan.pattern[i], "source": op.source}  # fmt: skip
            for p in self.soc.names:
                row[p] = r.verdicts[(i, p)].text
            rows.append(row)
        return pd.DataFrame(rows)

    @property
    def partitions(self):
        import pandas as pd  # noqa: PLC0415

        r = self._evaluate()
        rows = []
        for part in r.plan.partitions:
            lat = sum(r.ops[i].latency_us for i in part.ops)
            rows.append({"partition": part.pid, "processor": part.processor, "ops": len(part.ops),
                         "first": self.graph.ops[part.ops[0]].name, "last": self.graph.ops[part.ops[-1]].name,
                         "function": part.function, "latency_us": lat,
                         "patterns": ", ".join(sorted({p for p, _ in part.patterns}))})  # fmt: skip
        return pd.DataFrame(rows)

    @property
    def costs(self):
        import pandas as pd  # noqa: PLC0415

        r = self._evaluate()
        cols = ["op_id", "name", "processor", "bits", "macs", "bytes", "compute_cycles", "memory_cycles", "cycles",
                "latency_us", "energy_uj", "vector_ops", "dram_bytes"]  # fmt: skip
        return pd.DataFrame(
            [(c.op_id, self.graph.ops[c.op_id].name, c.processor, c.bits, c.macs, c.bytes, c.compute_cycles,
              c.memory_cycles, c.cycles, c.latency_us, c.energy_uj, c.vector_ops, c.dram_bytes) for c in r.ops],
            columns=cols,
        )  # fmt: skip

    @property
    def boundaries(self):
        """One row per tensor crossing processors, in ``study.plan.boundaries`` order (model inputs
        first, then by producing op)."""
        import pandas as pd  # noqa: PLC0415

        r = self._evaluate()
        cols = ["tensor", "src", "dst", "bytes", "transfer_us", "layout_us", "quantize_us", "energy_uj",
                "conversion", "tensor_id", "consumers"]  # fmt: skip
        return pd.DataFrame(
            [(self._tensor_label(b.tensor), b.src, b.dst, b.bytes, b.transfer_us, b.layout_us, b.quantize_us,
              b.energy_uj, b.conversion, b.tensor, ", ".join(self.graph.ops[c].name for c in pb.consumers) or "(model output)")
             for b, pb in zip(r.bounds, r.plan.boundaries)],
            columns=cols,
        )  # fmt: skip

    def _tensor_label(self, tid: str) -> str:
        t = self.graph.tensors[tid]
        if t.name:
            return t.name
        if t.producer is not None:
            op = self.graph.ops[t.producer]
            return op.name + (f":{tid.split('.')[1]}" if "." in tid else "")
        return tid

    @property
    def timeline(self):
        import pandas as pd  # noqa: PLC0415

        r = self._evaluate()
        return pd.DataFrame(
            [(it.lane, it.item, it.start_us, it.end_us, it.kind, it.op_id) for it in r.schedule.items],
            columns=["lane", "item", "start_us", "end_us", "kind", "op_id"],
        )

    @property
    def totals(self) -> dict:
        return dict(self._evaluate().totals)

    # ------------------------------------------------------------------------------------------
    # numeric error of the bit-widths

    def set_data(self, x, y=None) -> Study:
        """Your own inputs (and class labels): numpy arrays, a dict input name -> array, or a path to
        an .npz holding ``x`` (and optionally ``y``, ``calib``).  The first inputs calibrate the
        activation ranges (or ``calib`` when given); all are used for the error figures."""
        from . import quant  # noqa: PLC0415

        if isinstance(x, (str, os.PathLike)):
            if y is not None:
                raise ConfigError("set_data(path): the labels come from the file's 'y'; do not pass y")
            data = quant.load_npz(self.graph, x)
        else:
            data = quant.make_data(self.graph, x, y)
        self._data = data
        self._errors = None
        self._notify()
        return self

    def _error_model(self):
        from . import quant  # noqa: PLC0415

        if getattr(self, "_errors", None) is not None:
            return self._errors
        if self._data is None:
            side = quant.sidecar(self.graph.path) if self.graph.path and not self.graph.path.startswith("<") else None
            self._data = quant.load_npz(self.graph, side) if side else quant.random_data(self.graph)
        sim = getattr(self._imported, "sim", None)
        if sim is None:
            from .tvm.simulate import Simulator, default_cache_dir  # noqa: PLC0415

            sim = Simulator(self._imported.mod, self.graph, default_cache_dir())
            self._imported.sim = sim
        self._errors = quant.ErrorModel(self.graph, sim, self._data)
        return self._errors

    def _error_result(self):
        from . import quant  # noqa: PLC0415
        from .cost import kernels  # noqa: PLC0415

        bits = self.op_bits()
        rounded = quant.rounded_ops(self.graph, kernels(self.plan, self.graph), bits)
        return self._error_model().evaluate(bits, rounded)

    @property
    def error(self):
        """Per-op numeric error of the chosen bit-widths (SNR dB and max abs error against fp32),
        measured by running the model; see ``error_dict()`` for the model outputs and accuracy."""
        import pandas as pd  # noqa: PLC0415

        res = self._error_result()
        bits = self.op_bits()
        plan = self.plan
        return pd.DataFrame(
            [(i, self.graph.ops[i].name, plan.processor[i], bits[i], snr, mx, res.per_op_samples) for i, snr, mx in res.per_op],
            columns=["op_id", "name", "processor", "bits", "snr_db", "max_abs_err", "samples"],
        )

    def error_dict(self) -> dict:
        """Model-output error: per output SNR, max abs error, top-1 agreement; accuracy on labels."""
        res = self._error_result()
        return {"outputs": [dict(o) for o in res.outputs], "accuracy": res.accuracy, "accuracy_fp32": res.accuracy_fp32,
                "samples": res.samples, "per_op_samples": res.per_op_samples, "data_source": res.source}  # fmt: skip

    # ------------------------------------------------------------------------------------------
    # explain

    def explain(self, node) -> str:
        """The placement reason and every figure of a node's ops with formula, values and sources."""
        if not self.graph.resolve(node) and str(node) in self.graph.elided:
            return f"{_esc(str(node))}: a model node without an op of its own: {self.graph.elided[str(node)]}"
        ids = self._nodes(node)
        r = self._evaluate()
        pins = self._pins(self._config)
        lines = []
        for i in ids:
            op = self.graph.ops[i]
            proc = r.plan.processor[i]
            c = r.ops[i]
            lines.append(f"{_esc(op.name)}  (op_id {i}, {op.op}, from {self.graph.source_format} node {op.source!r} {op.source_op})")
            ins = ", ".join(f"{self._tensor_label(t)} {list(self.graph.tensors[t].shape)} {self.graph.tensors[t].dtype}" for t in op.inputs)
            outs = ", ".join(f"{list(self.graph.tensors[t].shape)} {self.graph.tensors[t].dtype}" for t in op.outputs)
            lines.append(f"  inputs: {ins}")
            lines.append(f"  output: {outs}")
            if op.attrs:
                lines.append("  attrs: " + ", ".join(f"{k}={v}" for k, v in op.attrs.items()))
            lines.append(f"  placed on {proc}, partition {r.plan.partition[i]}"
                         + (f", composite {r.plan.pattern[i]}" if r.plan.pattern[i] else ""))  # fmt: skip
            lines.append(f"  reason: {winner_reason(op, proc, r.plan.pattern[i], r.verdicts, self.soc, i in pins)}")
            for p in self.soc.names:
                lines.append(f"    {p}: {r.verdicts[(i, p)].text}")
            lines.append(f"  figures on {proc} at {c.bits} (profile {self.soc.name}, processors.{proc}.*):")
            for t in c.trace:
                src = ""
                if t.fields:
                    src += " [profile: " + ", ".join(t.fields) + "]"
                if t.attrs:
                    src += " [op: " + ", ".join(t.attrs) + "]"
                lines.append(f"    {t.figure}: {t.formula}{src}")
            for b, pb in zip(r.bounds, r.plan.boundaries):
                if i in pb.consumers or (self.graph.tensors[b.tensor].producer == i):
                    lines.append(f"  boundary {_esc(self._tensor_label(b.tensor))} {b.src}->{b.dst}:")
                    for t in b.trace:
                        lines.append(f"    {t.figure}: {t.formula}")
        return "\n".join(lines)

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
        import tempfile  # noqa: PLC0415

        from .export import serve_netron  # noqa: PLC0415

        if path is None:
            path = Path(tempfile.mkdtemp(prefix="npukit-netron-")) / (Path(self.graph.path).stem + ".npukit.onnx")
        self.annotated_onnx(path)
        host, port = serve_netron(path, port)
        try:
            from IPython.display import IFrame  # noqa: PLC0415

            return IFrame(f"http://{host}:{port}", width="100%", height=height)
        except ImportError:
            return f"http://{host}:{port}"

    def report(self, path, include_error: bool = False) -> Path:
        """A standalone HTML report (tables + timeline)."""
        from .report import write_report  # noqa: PLC0415

        return write_report(self, path, include_error)

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
        for fn in list(self._listeners):
            fn(self)

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
        t = self._evaluate().totals
        return (f"<npukit.Study {Path(str(self.graph.path)).name} on {self.soc.name}: {len(self.graph.ops)} ops, "
                f"{len(self.plan.partitions)} partitions, {t['latency_us']:.1f} us, {t['energy_uj']:.2f} uJ>")  # fmt: skip


def _esc(name: str) -> str:
    """A model name for a line of text: control characters (newlines ...) escaped, else unchanged."""
    return name.encode("unicode_escape").decode("ascii") if any(ord(c) < 32 or c == "\x7f" for c in name) else name


def _coerce_config(config) -> Config:
    if config is None:
        return Config()
    if isinstance(config, Config):
        return config
    if isinstance(config, Mapping):
        return Config.from_dict(config)
    if isinstance(config, str):
        s = config.strip()
        return Config.from_json(s) if s.startswith("{") else Config.from_toml(s)
    raise ConfigError(f"config must be a npukit.Config, a dict, or TOML/JSON text, got {type(config).__name__}")


def _totals(study: Study, plan: Plan, ops, bounds, sched: Schedule) -> dict[str, Any]:
    soc = study.soc
    busy = {p: 0.0 for p in soc.names}
    energy_by = {p: 0.0 for p in soc.names}
    for c in ops:
        busy[c.processor] += c.latency_us
        energy_by[c.processor] += c.energy_uj
    conv_busy = {p: 0.0 for p in soc.names}
    for it in sched.items:
        if it.kind in ("layout", "quantize"):
            conv_busy[it.lane] += it.end_us - it.start_us
    lat = sched.makespan_us
    ops_e = sum(c.energy_uj for c in ops)
    b_e = sum(b.energy_uj for b in bounds)
    lanes_sum = sum(sched.busy_us.values())
    return {
        "latency_us": lat,
        "energy_uj": ops_e + b_e,
        "ops_energy_uj": ops_e,
        "boundary_energy_uj": b_e,
        "busy_us": {p: busy[p] + conv_busy[p] for p in soc.names},
        "utilisation": {p: ((busy[p] + conv_busy[p]) / lat if lat else 0.0) for p in soc.names},
        "energy_by_processor_uj": energy_by,
        "transfer_us": sum(b.transfer_us for b in bounds),
        "layout_us": sum(b.layout_us for b in bounds),
        "quantize_us": sum(b.quantize_us for b in bounds),
        "lanes_sum_us": lanes_sum,
        "macs": sum(c.macs for c in ops),
        "ops": {p: sum(1 for c in ops if c.processor == p) for p in soc.names},
        "partitions": len(plan.partitions),
        "boundaries": len(bounds),
    }
