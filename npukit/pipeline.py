"""The pure steps of a study, composed (the Study and sweeps call these; nothing here keeps state but
bounded caches keyed by exactly what each step depends on):

    load(model, input_shapes)            -> Model     (import: OpGraph + tagged Relax module)
    verdicts(model, soc, config)         -> every processor's verdict on every op under the edits
    partition(model, soc, config)        -> Partitioned (the real TVM BYOC partition, read back as a Plan)
    estimate(model, soc, config, part)   -> Result    (per-op figures, boundaries, timeline, totals)
    error(result, data)                  -> ErrorResult (the numeric error of the bit-widths)

``evaluate(model, soc, config)`` composes them.  A ``Model``, a ``SocProfile`` and a ``Config`` all
pickle, so ``evaluate`` runs the same in a worker process (the worker's caches fill on first use).
A bit-width edit never re-partitions: the partition is keyed by the support edits and pins only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config
from .cost import BoundaryCost, CostModel, OpCost, Tables, kernels
from .errors import ConfigError, ModelError, closest
from .graph import OpGraph
from .plan import Plan
from .rules import Verdict, capabilities
from .rules import verdicts as _verdicts
from .soc import BITS, SocProfile
from .timeline import Schedule, makespan, schedule


class LRU:
    """A small bounded cache (most recent last)."""

    def __init__(self, size: int):
        self.size = size
        self.d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()  # the widget builds in a thread beside the kernel

    def get(self, key):
        with self._lock:
            v = self.d.get(key)
            if v is not None:
                self.d.move_to_end(key)
            return v

    def put(self, key, value):
        with self._lock:
            self.d[key] = value
            self.d.move_to_end(key)
            while len(self.d) > self.size:
                self.d.popitem(last=False)
            return value

    def clear(self) -> None:
        with self._lock:
            self.d.clear()


# one cache per step
IMPORTS = LRU(8)  # (path, mtime, size, shapes) -> Model
TABLES = LRU(8)  # model key -> cost Tables
CAPS = LRU(16)  # (model, soc) -> capability verdicts
PREP = LRU(8)  # model key -> (chain shapes, op arities): partition work that no edit changes
PARTS = LRU(64)  # (model, soc, what the verdicts accept) -> Partitioned
CHOICES = LRU(64)  # (model, soc, config's partition key) -> the policy's Partitioned
COSTS = LRU(8)  # (model, soc) -> CostModel (it memoizes kernels and boundaries itself)
RESULTS = LRU(64)  # (model, soc, config) -> Result
SIMS = LRU(4)  # model key -> compiled Simulator
CODE = LRU(16)  # (model, soc, config, data) -> generated Project
HOSTC = LRU(32)  # (model, host kernel groups) -> TVM's C for the host's ops (npukit.tvm.hostc.HostC)
FITS = LRU(32)  # (model, soc, config, data) -> the measured memory fit of the target build (codegen.fit)
RANGES = LRU(8)  # (model, data) -> calibrated activation ranges (also kept on disk: calibration())
ERRORS = LRU(4)  # (model, data) -> ErrorModel (it memoizes per bit-width assignment itself)
SCORES = LRU(8)  # (model, soc) -> LRU of the cost placement's evaluated virtual plans
ADDITIVE = LRU(8)  # (model, soc) -> the cost placement's additive kernel and boundary figures
ADDITIVE_MAX = 200_000
HOSTONLY = LRU(16)  # (model, soc, ops pinned away from the host) -> the all-host baseline's partition
COSTED = LRU(16)  # (model, soc, plan, bit-widths) -> _Costed (op costs, boundary costs, makespan, schedule)
VERDICTS = LRU(16)  # (model, soc, support edits, pins) -> every processor's verdict on every op


ALL_CACHES = (IMPORTS, TABLES, CAPS, PREP, PARTS, CHOICES, COSTS, RESULTS, SIMS, ERRORS, CODE, HOSTC, FITS, RANGES,
              SCORES, ADDITIVE, HOSTONLY, COSTED, VERDICTS)
PARTITION_CACHES = (VERDICTS, PARTS, CHOICES)  # what a support toggle or a pin computes anew


def clear_caches() -> None:
    for c in ALL_CACHES:
        c.clear()


def clear_partition_caches() -> None:
    """Forget every verdict set and partition, so the next edit partitions for real (benchmarks)."""
    for c in PARTITION_CACHES:
        c.clear()


@contextlib.contextmanager
def from_scratch(keep=(IMPORTS, SIMS)):
    """Inside the block every step is computed anew (each cache but ``keep`` is set aside, then
    restored): what a Study built from scratch sees, for checking an incremental result against.
    The imported model and the compiled simulation are kept by default -- the same file gives the
    same ones, and re-importing is checked on its own."""
    saved = [(c, c.d) for c in ALL_CACHES if c not in keep]
    for c, _ in saved:
        c.d = OrderedDict()
    try:
        yield
    finally:
        for c, d in saved:
            c.d = d


# ---------------------------------------------------------------------------------------------
# the model


class Model:
    """An imported model: the OpGraph, the tagged Relax module it was read from, and a content key.

    It pickles as its graph, its key and a recipe to import it again (the file's path, or the bytes
    of an in-memory ONNX model / ExportedProgram): TVM's JSON serializer crashes in apache-tvm 0.27
    (``tvm.ir.save_json`` segfaults even on a one-op module), so a worker process re-imports the
    model once -- its own import cache keeps it -- and checks that it gets the same key."""

    __slots__ = ("graph", "_module", "key", "recipe")

    def __init__(self, graph: OpGraph, module, key: str, recipe=None):
        self.graph = graph
        self._module = module
        self.key = key
        self.recipe = recipe  # ("path" | "object" | "onnx" bytes | "pt2" bytes, source, shapes)

    @property
    def module(self):
        if self._module is None:
            again = _reimport(self.recipe)
            if again.key != self.key:
                raise ModelError(f"{self.graph.path}: the model changed since it was loaded (re-imported in this "
                                 "process, it is not the same graph); load it again")  # fmt: skip
            self._module = again.module
        return self._module

    def __reduce__(self):
        recipe = _portable(self.recipe)
        if recipe is None:
            raise ModelError(f"{self.graph.path}: a study of an in-memory Relax IRModule cannot be sent to another "
                             "process (TVM 0.27 cannot serialize modules); save the model to a file, or run it locally")  # fmt: skip
        return (_model, (self.graph, self.key, recipe))

    def __repr__(self) -> str:
        return f"<npukit Model {Path(str(self.graph.path)).name}: {len(self.graph.ops)} ops, key {self.key}>"


def _model(graph, key, recipe) -> Model:
    return Model(graph, None, key, recipe)


def _reimport(recipe) -> Model:
    kind, src, shapes = recipe
    shapes = dict(shapes) or None
    if kind in ("path", "object"):
        return load(src, shapes)
    import io  # noqa: PLC0415

    if kind == "onnx":
        import onnx  # noqa: PLC0415

        return load(onnx.load_from_string(src), shapes)
    import torch  # noqa: PLC0415

    return load(torch.export.load(io.BytesIO(src)), shapes)


def _recipe(model, shapes):
    """How a worker process imports ``model`` again (see ``Model``); in-memory models are turned into
    bytes only when the Model is pickled."""
    sk = _shape_key(shapes)
    if isinstance(model, (str, os.PathLike)):
        return ("path", str(Path(model).resolve()), sk)
    return ("object", model, sk)


def _portable(recipe):
    """The recipe with an in-memory model as bytes (ONNX / ExportedProgram), or None."""
    if recipe is None or recipe[0] != "object":
        return recipe
    _, model, sk = recipe
    tname = type(model).__module__ + "." + type(model).__name__
    if tname.startswith("onnx") and hasattr(model, "SerializeToString"):
        return ("onnx", model.SerializeToString(), sk)
    if hasattr(model, "graph_signature") and hasattr(model, "graph_module"):
        import io  # noqa: PLC0415

        import torch  # noqa: PLC0415

        buf = io.BytesIO()
        torch.export.save(model, buf)
        return ("pt2", buf.getvalue(), sk)
    return None


def _graph_digest(g: OpGraph) -> str:
    h = hashlib.sha256()
    for op in g.ops:
        h.update(repr((op.op, sorted(op.attrs.items()), op.inputs, op.outputs, op.name, op.source)).encode())
    for tid in sorted(g.tensors):
        t = g.tensors[tid]
        h.update(repr((tid, t.shape, t.dtype, t.kind, t.name)).encode())
    for tid in sorted(g.consts):
        a = np.ascontiguousarray(g.consts[tid])
        h.update(f"{tid}{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    h.update(repr((g.inputs, g.outputs, g.output_names, g.source_format)).encode())
    return h.hexdigest()[:24]


def load(model, input_shapes: Mapping[str, tuple] | None = None) -> Model:
    """Import a model (a path, an onnx.ModelProto, an ExportedProgram, a Relax IRModule, or a Model),
    once per (file, mtime, size, input shapes)."""
    if isinstance(model, Model):
        return model
    from .tvm.importers import import_model  # noqa: PLC0415 - keeps `import npukit` free of tvm

    key = None
    if isinstance(model, (str, os.PathLike)):
        p = Path(model)
        try:
            st = p.stat()
            key = (str(p.resolve()), st.st_mtime_ns, st.st_size, _shape_key(input_shapes))
        except OSError:
            key = None
        if key is not None and (hit := IMPORTS.get(key)) is not None:
            return hit
    imp = import_model(model, input_shapes)
    m = Model(imp.graph, imp.mod, _graph_digest(imp.graph), _recipe(model, input_shapes))
    if key is not None:
        IMPORTS.put(key, m)
    return m


def _shape_key(shapes) -> tuple:
    if not shapes:
        return ()
    return tuple(sorted((k, tuple(v)) for k, v in shapes.items()))


def tables(model: Model) -> Tables:
    t = TABLES.get(model.key)
    if t is None or t.g is not model.graph:
        t = TABLES.put(model.key, Tables(model.graph))
    return t


# ---------------------------------------------------------------------------------------------
# names and edits


def resolve(g: OpGraph, node) -> tuple[int, ...]:
    """op ids of a node reference (model node name, op name, op id), or a ConfigError naming the
    closest valid names."""
    ids = g.resolve(node)
    if not ids:
        names = set(g.names()) | {op.source for op in g.ops}
        raise ConfigError(f"unknown node {node!r}; {closest(str(node), names)}")
    return ids


def by_specificity(g: OpGraph, entries) -> list:
    """Per-node edits (pins, layer bit-widths) in the order they apply: a reference to more ops first,
    so an edit of one op inside a model node beats the node's own (an edit of a whole node removes
    the finer ones it covers when it is made: ``Study.pin``, ``Study.set_bits``)."""
    return sorted(entries, key=lambda e: -len(g.resolve(e[0])))


def per_op(g: OpGraph, entries) -> dict[int, str]:
    """Per-node edits (``(node, value)`` pairs) spread to each op the node covers, the most specific
    edit last (``by_specificity``)."""
    out: dict[int, str] = {}
    for node, value in by_specificity(g, entries):
        for i in resolve(g, node):
            out[i] = value
    return out


def layer_bits_of(g: OpGraph, cfg: Config) -> dict[int, str]:
    return per_op(g, cfg.layer_bits)


def pins_of(g: OpGraph, cfg: Config) -> dict[int, str]:
    return per_op(g, cfg.pins)


def capabilities_of(model: Model, soc: SocProfile) -> Mapping[tuple[int, str], Verdict]:
    key = (model.key, soc.digest)
    caps = CAPS.get(key)
    if caps is None:
        caps = CAPS.put(key, capabilities(model.graph, soc))
    return caps


def verdicts(model: Model, soc: SocProfile, cfg: Config) -> dict[tuple[int, str], Verdict]:
    """Every processor's verdict on every op under the config's support edits and pins (cached: a
    bit-width edit reuses them; callers must not modify the dict)."""
    key = (model.key, soc.digest, cfg.disabled, cfg.enabled, cfg.pins)
    hit = VERDICTS.get(key)
    if hit is None:
        caps = capabilities_of(model, soc)
        hit = VERDICTS.put(key, _verdicts(model.graph, soc, cfg.disabled, cfg.enabled, pins_of(model.graph, cfg), caps))
    return hit


def check(model: Model, soc: SocProfile, cfg: Config) -> None:
    """Validate every name in ``cfg`` and every pin against the profile's rules (ConfigError)."""
    from .opset import canonical  # noqa: PLC0415

    g = model.graph

    def proc(name):
        soc.processor(name)  # raises the closest-names error

    for p, op in (*cfg.disabled, *cfg.enabled):
        proc(p)
        canonical(op, "op")
    for p, b in cfg.bits:
        proc(p)
        check_bits(soc, p, b)
    for node, b in cfg.layer_bits:
        resolve(g, node)
        if b not in BITS:
            raise ConfigError(f"layer {node!r}: unknown bit-width {b!r}; one of {', '.join(BITS)}")
    pins = pins_of(g, cfg)
    for _node, p in cfg.pins:
        proc(p)
    vs = verdicts(model, soc, cfg)
    for i, p in sorted(pins.items()):
        v = vs[(i, p)]
        if not v.ok:
            raise ConfigError(f"cannot pin {_pinned_as(g, cfg, i)} to {p}: {p}: {v.text}")


def check_bits(soc: SocProfile, proc: str, b: str) -> None:
    if b not in BITS:
        raise ConfigError(f"unknown bit-width {b!r}; one of {', '.join(BITS)}")
    p = soc.processor(proc)
    if b not in p.macs_per_cycle:
        raise ConfigError(f"{proc} cannot run {b}: processors.{proc}.macs_per_cycle lists {', '.join(p.bits)}")


def check_placed(model: Model, soc: SocProfile, cfg: Config, plan: Plan) -> None:
    """After partitioning: every pin holds, and every layer bit-width runs where its layer landed."""
    g = model.graph
    lb = layer_bits_of(g, cfg)
    for node, b in by_specificity(g, cfg.layer_bits):
        for i in resolve(g, node):
            p = soc.processor(plan.processor[i])
            if lb[i] == b and b not in p.macs_per_cycle:  # (an op a finer edit overrides is checked there)
                raise ConfigError(f"layer {node!r} would run on {p.name}, which cannot run its bit-width {b} "
                                  f"(processors.{p.name}.macs_per_cycle lists {', '.join(p.bits)}); "
                                  f"change it first with set_bits(..., layer={node!r})")  # fmt: skip
    part = partition(model, soc, cfg)
    for i, p in sorted(pins_of(g, cfg).items()):
        if plan.processor[i] != p:
            why = part.verdicts[(i, p)].text
            raise ConfigError(f"cannot pin {_pinned_as(g, cfg, i, kind=False)} to {p}: the partition placed it on "
                              f"{plan.processor[i]} ({p}: {why})")  # fmt: skip


def _pinned_as(g: OpGraph, cfg: Config, i: int, kind: bool = True) -> str:
    """Op ``i`` as the user's pin named it: the node reference, and the op inside it when the node
    covers several ops under other names (a model node split into ops, or a name two nodes share)."""
    op = g.ops[i]
    node = next((n for n, _p in reversed(by_specificity(g, cfg.pins)) if i in resolve(g, n)), op.name)
    if node == op.name or len(resolve(g, node)) == 1:  # (stored as "#<id>" for one op of several)
        return f"{op.name!r} ({op.kind})" if kind else repr(op.name)
    return f"{node!r} (its op {op.name!r}, {op.kind})"


def op_bits(model: Model, soc: SocProfile, cfg: Config, plan: Plan) -> tuple[str, ...]:
    """Effective bit-width of every op: layer override, else its processor's setting, else the
    processor's default."""
    pb = dict(cfg.bits)
    of = {p.name: pb.get(p.name) or p.default_bits for p in soc.processors}
    bits = tuple(map(of.__getitem__, plan.processor))
    if cfg.layer_bits:
        lb = layer_bits_of(model.graph, cfg)
        bits = tuple(lb.get(i) or b for i, b in enumerate(bits))
    return bits


# ---------------------------------------------------------------------------------------------
# the steps


def _byoc(model: Model, soc: SocProfile, vs):
    """The BYOC partition under verdicts ``vs`` (cached by what they accept).

    The Plan comes from ``npukit.byocsim``, TVM's FuseOpsByPattern + MergeCompositeFunctions
    replayed on the tagged module's skeleton (milliseconds where TVM takes tenths of a second);
    ``Partitioned.mod`` runs TVM's own passes on the whole module when first asked for and checks
    that its read-back is the same Plan.  With ``NPUKIT_BYOC=tvm`` (or a module the replay does
    not model) TVM runs on every edit."""
    from .patterns import chain_shapes  # noqa: PLC0415
    from .tvm.partition import arities, skeleton  # noqa: PLC0415

    accepts, held = [], []
    for (i, p), v in vs.items():  # (the verdicts' order is the same for every config of one model)
        if v.host:
            if not v.ok and v.failed("pinned"):
                held.append(i)
        elif v.ok:
            accepts.append((i, p, v.fused_only))
    accepts, pinned = tuple(accepts), tuple(sorted(held))
    key = (model.key, soc.rules_digest, hash((accepts, pinned)), accepts, pinned)  # costs never enter it
    hit = PARTS.get(key)
    if hit is not None:  # the same acceptance partitions alike; the refusals keep their own words
        pruned = {k: v for k, v in hit.verdicts.items() if v.failed("pruned")}
        words = {**vs, **pruned}
        return hit if words == hit.verdicts else dataclasses.replace(hit, verdicts=words)
    prep = PREP.get(model.key)
    if prep is None:
        mod = model.module
        prep = PREP.put(model.key, (chain_shapes(model.graph), arities(mod), skeleton(mod)))
    shapes, ar, sk = prep
    if sk is None or os.environ.get("NPUKIT_BYOC") == "tvm":
        from .tvm.partition import partition as byoc  # noqa: PLC0415

        return PARTS.put(key, byoc(model.module, model.graph, soc, vs, shapes=shapes, ar=ar))
    return PARTS.put(key, _replayed(model, soc, vs, sk, shapes, ar))


def _replayed(model: Model, soc: SocProfile, vs, sk, shapes, ar):
    from .byocsim import partition as replay  # noqa: PLC0415
    from .tvm.partition import LazyModule, Partitioned  # noqa: PLC0415

    plan, obeyed = replay(sk, model.graph, soc, vs, shapes, ar)
    return Partitioned(LazyModule(lambda: _tvm_module(model, soc, obeyed, plan, shapes, ar)), plan, obeyed)


def _tvm_module(model: Model, soc: SocProfile, obeyed, plan: Plan, shapes, ar):
    """TVM's own passes on the whole tagged module under the verdicts the replayed Plan obeyed; its
    read-back must be that Plan."""
    from .tvm.partition import run_once  # noqa: PLC0415

    res = run_once(model.module, model.graph, soc, obeyed, shapes, ar)
    if res.plan != plan:
        diff = next((i for i in range(len(plan.processor))
                     if (plan.processor[i], plan.partition[i], plan.pattern[i])
                     != (res.plan.processor[i], res.plan.partition[i], res.plan.pattern[i])), None)  # fmt: skip
        raise AssertionError(f"{model.graph.path}: npukit's replay of TVM's BYOC passes disagrees with TVM "
                             f"(first at op {diff}); please report this with the model and the edits")  # fmt: skip
    return res.mod


def bits_policy(soc: SocProfile, cfg: Config, g: OpGraph):
    """``bits_of(op, processor)``: the bit-width an op runs at on a processor (layer override, else the
    processor's setting, else its default), and ``runs(op, processor)``: can it run there at all.
    For the placement search, which reads them for every op: ``bits_of.table`` holds every answer
    (processor -> per op) and ``runs.layered`` the only ops ``runs`` can refuse."""
    pb = dict(cfg.bits)
    lb = layer_bits_of(g, cfg)
    procs = {p.name: p for p in soc.processors}

    table = {}  # processor -> every op's bit-width there
    for p, pr in procs.items():
        col = table[p] = [pb.get(p) or pr.default_bits] * len(g.ops)
        for i, b in lb.items():
            if b in pr.macs_per_cycle:  # (a layer that cannot run here is refused later)
                col[i] = b

    def bits_of(i, p):
        return table[p][i] if i is not None else pb.get(p) or procs[p].default_bits

    def runs(i, p):
        return i not in lb or lb[i] in procs[p].macs_per_cycle

    bits_of.table = table
    runs.layered = lb  # the ops runs() can refuse
    return bits_of, runs


def partition_cached(model: Model, soc: SocProfile, cfg: Config) -> bool:
    """Is the partition of ``cfg`` at hand (``partition`` would answer from its cache)?"""
    return CHOICES.get((model.key, soc.digest, cfg.partition_key)) is not None


def partition(model: Model, soc: SocProfile, cfg: Config):
    """The BYOC partition of a config (TVM's FuseOpsByPattern + MergeCompositeFunctions, read back
    as a Plan).  "first-fit": under the verdicts of the user's support edits and pins.  "cost": the
    cost model chooses among the accepting processors first (``npukit.placement``), and its choice
    becomes verdicts the same passes obey; of the cost plan, the first-fit plan and the all-host plan
    the one with the lowest estimated latency is kept, so the policy is never worse than either."""
    key = (model.key, soc.digest, cfg.partition_key)
    hit = CHOICES.get(key)
    if hit is not None:
        return hit
    with gc_paused():
        return _partition(model, soc, cfg, key)


def _partition(model: Model, soc: SocProfile, cfg: Config, key):
    vs = verdicts(model, soc, cfg)
    ff = _byoc(model, soc, vs)
    _settle(model)
    if cfg.placement == "first-fit":
        return CHOICES.put(key, ff)
    from .placement import constrain, decide  # noqa: PLC0415

    g = model.graph
    bits_of, runs = bits_policy(soc, cfg, g)
    choice = decide(g, soc, tables(model), vs, bits_of, ff.plan.processor, runs, cost_model(model, soc),
                    _scores(model, soc), _additive(model, soc))
    cost = _byoc(model, soc, constrain(vs, soc, choice))
    away = _pinned_away(vs, soc)
    host = _host_only(model, soc, vs, away)
    inf = float("inf")
    layered = layer_bits_of(g, cfg)  # a plan that puts a layer where its bit-width cannot run is out
    lats = [_latency(model, soc, cfg, p) if all(runs(i, p.plan.processor[i]) for i in layered) else inf
            for p in (cost, ff, host)]  # fmt: skip
    k = min(range(3), key=lambda n: (lats[n], n))
    if k == 2:  # kept: with the refusals in this config's words
        host = _byoc(model, soc, _host_verdicts(vs, soc, away))
    held = " but the pinned ones" if away else ""
    names = ("the cost model's choice", "the profile's first-fit placement", f"every op on the host{held}")
    summary = (f"estimated {lats[0]:,.1f} us with the cost model's choice, {lats[1]:,.1f} us first-fit, "
               f"{lats[2]:,.1f} us all on {soc.host}{held}: kept {names[k]}")  # fmt: skip
    notes = {i: (choice.why[i] if k == 0 else summary) for i in range(len(g.ops))}
    return CHOICES.put(key, dataclasses.replace((cost, ff, host)[k], notes=notes))


_SETTLED: set = set()


GC_FULL = 100  # generation-1 collections between full ones once a model is loaded (CPython's default: 10)


def _settle(model: Model) -> None:
    """Once per model, after its first partition: collect garbage, then move every object alive
    (the libraries imported -- tvm, onnx, pandas --, the imported model, its module, tables and
    first verdicts: most of a session's long-lived objects) out of the collector's view
    (``gc.freeze``), so the full collections that edits trigger no longer walk them.  On the 1,161-op
    transformer this took a support toggle's p95 from ~130 ms to ~24 ms; at MobileNet size a full
    collection of the libraries alone took ~50 ms, one toggle in twenty.  Objects frozen are still
    freed when no longer referenced; only reference cycles among them would stay.

    It also raises the oldest generation's threshold to ``GC_FULL`` (never lowers it).  An edit under
    the cost policy allocates ~100,000 container objects at transformer size; at CPython's 10, 7 of
    12 pin / unpin edits paid a full collection of the caches that had grown since (15-35 ms each;
    27 ms of collection per edit on average), at 100 none of them (7 ms per edit).  The young
    generations keep CPython's thresholds (a larger first one made each collection of the middle
    generation ten times larger, visible in MobileNet-size edits).  Cyclic garbage that reaches the
    oldest generation waits longer for its collection.  ``NPUKIT_GC_FREEZE=0`` turns both off."""
    if model.key in _SETTLED or os.environ.get("NPUKIT_GC_FREEZE") == "0":
        return
    _SETTLED.add(model.key)
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young and old < GC_FULL:
        gc.set_threshold(young, middle, GC_FULL)


def _scores(model: Model, soc: SocProfile) -> LRU:
    """The cost placement's evaluated virtual plans of one model on one profile (latency, energy),
    kept across edits."""
    key = (model.key, soc.digest)
    memo = SCORES.get(key)
    if memo is None:
        memo = SCORES.put(key, LRU(20_000))
    return memo


def _additive(model: Model, soc: SocProfile) -> dict:
    """The cost placement's additive figures of one model on one profile (each group's kernel time
    per processor and bit-widths, each tensor's boundary cost per pair of processors and bit-widths),
    kept across edits; emptied when it grows past ADDITIVE_MAX entries."""
    key = (model.key, soc.digest)
    memo = ADDITIVE.get(key)
    if memo is None or len(memo) > ADDITIVE_MAX:
        memo = ADDITIVE.put(key, {})
    return memo


def _pinned_away(vs, soc: SocProfile) -> set[int]:
    """Ops the user pinned to an accelerator (their host verdict is a pin refusal)."""
    host = soc.host
    return {i for i in range(len(vs) // len(soc.processors)) if vs[(i, host)].failed("pinned")}


def _host_verdicts(vs, soc: SocProfile, away: set[int]):
    """The all-host baseline's verdicts: every accelerator refuses every op, except the ops the user
    pinned to one (``away``: a pin always holds)."""
    return {k: (v if v.host or not v.ok or k[0] in away else _refused_for_host(v)) for k, v in vs.items()}


def _host_only(model: Model, soc: SocProfile, vs, away: set[int]):
    """The all-host baseline's partition.  Every accelerator refuses every op but the pinned ones
    (``away``), so it depends only on the pins to accelerators: cached by those (the same plan for
    every other edit)."""
    pins = tuple((i, p, vs[(i, p)].fused_only) for i in sorted(away) for p in soc.accelerators if vs[(i, p)].ok)
    key = (model.key, soc.digest, tuple(sorted(away)), pins)
    hit = HOSTONLY.get(key)
    if hit is None:
        hit = HOSTONLY.put(key, _byoc(model, soc, _host_verdicts(vs, soc, away)))
    return hit


def _refused_for_host(v: Verdict) -> Verdict:
    from .rules import fail  # noqa: PLC0415

    return Verdict(v.processor, False, (fail("cost", "cost: the whole model on the host is faster"),))


def _latency(model: Model, soc: SocProfile, cfg: Config, part) -> float:
    return _costed(model, soc, part.plan, op_bits(model, soc, cfg, part.plan)).makespan_us


class _Costed:
    """Per-op and boundary costs of a plan at given bit-widths; its makespan and its schedule are
    worked out when first read: the cost policy compares three plans by their makespan (one pass,
    ``timeline.makespan``, equal to the schedule's) and schedules only the one it keeps."""

    __slots__ = ("ops", "bounds", "_args", "_sched", "_makespan")

    def __init__(self, t: Tables, plan: Plan, soc: SocProfile, ops, bounds):
        self.ops, self.bounds = tuple(ops), tuple(bounds)
        self._args, self._sched, self._makespan = (t, plan, soc), None, None

    @property
    def schedule(self) -> Schedule:
        if self._sched is None:
            self._sched = schedule(*self._args, self.ops, self.bounds)
        return self._sched

    @property
    def makespan_us(self) -> float:
        if self._sched is not None:
            return self._sched.makespan_us
        if self._makespan is None:
            self._makespan = makespan(*self._args, self.ops, self.bounds)
        return self._makespan


def _costed(model: Model, soc: SocProfile, plan: Plan, bits: tuple[str, ...]) -> _Costed:
    """The costs of a plan at given bit-widths (cached: the cost policy compares three plans per
    edit, often equal to each other or to an earlier edit's, and the chosen one is then estimated
    in full)."""
    key = (model.key, soc.digest, plan, bits)
    hit = COSTED.get(key)
    if hit is None:
        ops, bounds = cost_model(model, soc).evaluate(plan, bits)
        hit = COSTED.put(key, _Costed(tables(model), plan, soc, ops, bounds))
    return hit


def byoc_steps(model: Model, soc: SocProfile, cfg: Config) -> dict:
    """The partition step by step (pattern table, fused module, merged module), for teaching: under
    the verdicts the chosen partition obeyed."""
    from .tvm.partition import steps  # noqa: PLC0415

    return steps(model.module, model.graph, soc, partition(model, soc, cfg).verdicts)


@dataclass(frozen=True, eq=False)
class Result:
    """Everything derived from one (model, profile, config)."""

    model: Model
    soc: SocProfile
    config: Config
    partitioned: Any  # npukit.tvm.partition.Partitioned
    pins: Mapping[int, str]
    bits: tuple[str, ...]
    ops: tuple[OpCost, ...]
    bounds: tuple[BoundaryCost, ...]
    schedule: Schedule
    totals: Mapping[str, Any]

    @property
    def plan(self) -> Plan:
        return self.partitioned.plan

    @property
    def verdicts(self) -> Mapping[tuple[int, str], Verdict]:
        return self.partitioned.verdicts

    @property
    def graph(self) -> OpGraph:
        return self.model.graph

    @property
    def tables(self) -> Tables:
        return tables(self.model)


def cost_model(model: Model, soc: SocProfile) -> CostModel:
    key = (model.key, soc.digest)
    cm = COSTS.get(key)
    if cm is None:
        t = tables(model)
        cm = COSTS.put(key, CostModel(t, soc, t.kernel_memo))
    return cm


def evaluate(model: Model, soc: SocProfile, cfg: Config) -> Result:
    """Partition, cost, schedule and total one configuration (cached by (model, profile, config))."""
    key = (model.key, soc.digest, cfg)
    hit = RESULTS.get(key)
    if hit is not None:
        return hit
    with gc_paused():
        return RESULTS.put(key, estimate(model, soc, cfg, partition(model, soc, cfg)))


_GC_PAUSE = threading.Lock()
_GC_DEPTH = [0, False]  # steps inside gc_paused(), and whether it turned the collector off


@contextlib.contextmanager
def gc_paused():
    """The cyclic collector off while an edit's steps run (nested and threaded uses share one
    pause), back on after.  An edit allocates hundreds of thousands of short-lived containers: on
    the 10,006-op model ~380 young and ~35 middle collections per support toggle walked them (and
    the caches that grew), 20-175 ms an edit; paused, one young collection after the edit walks
    what survived, 6-28 ms.  Reference counting still frees everything acyclic at once.
    ``NPUKIT_GC_FREEZE=0`` leaves the collector alone (as it does ``_settle``)."""
    if os.environ.get("NPUKIT_GC_FREEZE") == "0":
        yield
        return
    with _GC_PAUSE:
        if _GC_DEPTH[0] == 0:
            _GC_DEPTH[1] = gc.isenabled()
            gc.disable()
        _GC_DEPTH[0] += 1
    try:
        yield
    finally:
        with _GC_PAUSE:
            _GC_DEPTH[0] -= 1
            if _GC_DEPTH[0] == 0 and _GC_DEPTH[1]:
                gc.enable()


def estimate(model: Model, soc: SocProfile, cfg: Config, part) -> Result:
    """The estimate step alone (not cached): costs, schedule and totals of ``cfg`` on an existing
    partition ``part`` (sweeps reuse one partition for every configuration that cannot move an op)."""
    plan = part.plan
    bits = op_bits(model, soc, cfg, plan)
    c = _costed(model, soc, plan, bits)
    ops, bounds, sched = c.ops, c.bounds, c.schedule
    return Result(model, soc, cfg, part, pins_of(model.graph, cfg), bits, ops, bounds, sched,
                  totals(soc, plan, ops, bounds, sched))  # fmt: skip


def totals(soc: SocProfile, plan: Plan, ops, bounds, sched: Schedule) -> dict[str, Any]:
    """The study's totals: latency (the schedule's makespan), energy, per-processor busy time,
    utilisation and energy, transfers, conversions, MACs, op and partition counts."""
    names = soc.names
    busy = dict.fromkeys(names, 0.0)
    energy_by = dict.fromkeys(names, 0.0)
    for c in ops:
        p = c.processor
        busy[p] += c.latency_us
        energy_by[p] += c.energy_uj
    conv_busy = sched.conv_us
    lat = sched.makespan_us
    ops_e = sum(c.energy_uj for c in ops)
    b_e = sum(b.energy_uj for b in bounds)
    return {
        "latency_us": lat,
        "energy_uj": ops_e + b_e,
        "ops_energy_uj": ops_e,
        "boundary_energy_uj": b_e,
        "busy_us": {p: busy[p] + conv_busy.get(p, 0.0) for p in names},
        "utilisation": {p: ((busy[p] + conv_busy.get(p, 0.0)) / lat if lat else 0.0) for p in names},
        "energy_by_processor_uj": energy_by,
        "transfer_us": sum(b.transfer_us for b in bounds),
        "layout_us": sum(b.layout_us for b in bounds),
        "quantize_us": sum(b.quantize_us for b in bounds),
        "lanes_sum_us": sum(sched.busy_us.values()),
        "macs": sum(c.macs for c in ops),
        "ops": {p: plan.processor.count(p) for p in names},  # (every op runs where its plan puts it)
        "partitions": len(plan.partitions),
        "boundaries": len(bounds),
    }


# ---------------------------------------------------------------------------------------------
# numeric error


def default_data(model: Model):
    """The model's own data sidecar (``<stem>.npz``), else seeded random inputs."""
    from . import quant  # noqa: PLC0415

    g = model.graph
    side = quant.sidecar(g.path) if g.path and not g.path.startswith("<") else None
    return quant.load_npz(g, side) if side else quant.random_data(g)


def simulator(model: Model):
    sim = SIMS.get(model.key)
    if sim is None:
        from .tvm.simulate import Simulator, default_cache_dir  # noqa: PLC0415

        sim = SIMS.put(model.key, Simulator(model.module, model.graph, default_cache_dir()))
    return sim


def error_model(model: Model, data):
    from .quant import ErrorModel  # noqa: PLC0415

    key = (model.key, data.key)
    em = ERRORS.get(key)
    if em is None:
        em = ERRORS.put(key, ErrorModel(model.graph, simulator(model), data))
    return em


def _error_args(result: Result):
    from .quant import rounded_ops  # noqa: PLC0415
    from .quant.boundary import edge_bits  # noqa: PLC0415

    g = result.model.graph
    return rounded_ops(g, kernels(result.plan, g, tables(result.model)), result.bits), edge_bits(g, result.plan, result.bits)


def simulate(result: Result, data, samples) -> list:
    """The simulated model outputs of ``samples`` (indices into ``data``) under ``result``'s
    bit-widths and boundaries."""
    rounded, eb = _error_args(result)
    return error_model(result.model, data).simulate(result.bits, rounded, eb, samples)


def simulate_float(result: Result, data, samples) -> list:
    """The model's outputs of ``samples`` in fp32 throughout (the float model ``simulate`` is
    measured against)."""
    return error_model(result.model, data).simulate(("fp32",) * len(result.bits), None, None, samples)


def error(result: Result, data=None):
    """The numeric error of ``result``'s bit-widths on ``data`` (default: the model's own data)."""
    model = result.model
    data = default_data(model) if data is None else data
    rounded, eb = _error_args(result)
    return error_model(model, data).evaluate(result.bits, rounded, eb)


# ---------------------------------------------------------------------------------------------
# generated code


def code(result: Result, data=None):
    """The generated C project of ``result`` (calibrated on ``data`` where a tensor is stored on an
    integer grid)."""
    from .codegen.project import generate  # noqa: PLC0415

    model = result.model
    data = default_data(model) if data is None else data
    key = _code_key(result, data)
    hit = CODE.get(key)
    if hit is None:
        hit = CODE.put(key, generate(result, lambda: calibration(model, data),
                                     host_c=lambda groups: host_code(model, groups), data=data))  # fmt: skip
    return hit


RANGES_FORMAT = "ranges-v1"  # bump when the calibration procedure (quant.error.ErrorModel) changes


def _ranges_file(model: Model, data) -> Path | None:
    from .tvm.simulate import default_cache_dir  # noqa: PLC0415 - npukit.tvm imports tvm lazily

    root = default_cache_dir()
    sim_key = getattr(simulator(model), "key", None)
    if root is None or sim_key is None:
        return None
    return root / "ranges" / f"{RANGES_FORMAT}-{sim_key}-{data.key}.json"


def calibration(model: Model, data) -> dict[str, tuple[float, float]]:
    """The calibrated [min, max] of the model's float tensors on ``data`` (the simulation run in
    fp32 over the calibration inputs), as the generated code's integer grids need them.  Kept in
    memory and in npukit's disk cache (``~/.cache/npukit/ranges``, keyed by the compiled simulation
    module's key -- the module's text, its constants, TVM's version -- and the data's content), so a
    later process exports without running the calibration again."""
    key = (model.key, data.key)
    hit = RANGES.get(key)
    if hit is not None:
        return hit
    em = ERRORS.get(key)
    path = _ranges_file(model, data) if em is None else None
    if path is not None and path.is_file():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            return RANGES.put(key, {t: (float(a), float(b)) for t, (a, b) in doc.items()})
        except (OSError, ValueError, TypeError):
            pass  # a damaged cache file is recomputed
    ranges = dict(error_model(model, data).ranges)
    path = path or _ranges_file(model, data)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({t: [a, b] for t, (a, b) in sorted(ranges.items())}), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache directory only costs the next process the calibration
    return RANGES.put(key, ranges)


def code_if_generated(result: Result, data=None):
    """The generated project of ``result`` if it is already in the cache, else None (no work)."""
    return CODE.get(_code_key(result, data))


def _code_key(result: Result, data) -> tuple:
    """The generated project's cache key: the config and the data (its arrays, and the source and
    path the manifest names)."""
    model = result.model
    data = default_data(model) if data is None else data
    return (model.key, result.soc.digest, result.config, data.key, data.source, data.path)


def measured_fit(result: Result, data=None) -> dict | None:
    """The memory fit measured on the target build of ``result``'s project (``Study.fit`` /
    ``Study.build(target=True)``), or None when none was measured."""
    return FITS.get(_code_key(result, data))


def record_fit(result: Result, data, fit: dict) -> dict:
    return FITS.put(_code_key(result, data), fit)


def budgets(soc: SocProfile) -> dict:
    """``totals["memory"]``: the profile's build target and its flash / SRAM budgets."""
    return {"target": soc.target, "flash_bytes": soc.flash_bytes, "sram_bytes": soc.sram_bytes}


def memory(result: Result, data=None) -> dict:
    """``Study.memory``: the budgets; ``estimate``, the generated project's weights and arena against
    them (None until the code of this config is generated); ``measured``, the toolchain's figures of
    the target build (None until measured).  Generates nothing itself."""
    from .codegen.fit import estimate  # noqa: PLC0415

    soc = result.soc
    proj = code_if_generated(result, data)
    return {**budgets(soc), "estimate": estimate(proj.manifest, soc) if proj is not None else None,
            "measured": measured_fit(result, data)}  # fmt: skip


def host_code(model: Model, groups) -> Any:
    """TVM's C for the host's kernels ``groups`` (tuples of op ids): it depends on the model and the
    groups alone, so an edit that moves no op to or from the host (a bit-width edit) reuses it."""
    key = (model.key, tuple(tuple(g) for g in groups))
    hit = HOSTC.get(key)
    if hit is None:
        from .tvm.hostc import host_kernels  # noqa: PLC0415

        hit = HOSTC.put(key, host_kernels(model.module, model.graph, list(groups), prefix="npk_host"))
    return hit
