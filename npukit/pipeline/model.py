"""The imported model (``Model``, ``load``), its cost tables and cost model, and the user's edits
resolved against it: node names, per-op pins and bit-widths, verdicts, config checks."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..config import Config
from ..cost import CostModel, Tables
from ..errors import ConfigError, ModelError, at_field, closest
from ..graph import OpGraph
from ..rules import Verdict, capabilities
from ..rules import verdicts as _verdicts
from ..soc import BITS, SocProfile
from .caches import CAPS, COSTS, IMPORTS, TABLES, VERDICTS
from .source import file_key, input_shapes_of, model_label


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
    once per (file, content of its bytes, input shapes) and content of the files it read beside it
    (an ONNX model's external data: a changed or deleted one is read again, as a fresh process would)."""
    if isinstance(model, Model):
        return model
    from ..tvm.importers import import_model  # noqa: PLC0415 - keeps `import npukit` free of tvm

    input_shapes = input_shapes_of(input_shapes, model_label(model))
    key = None
    if isinstance(model, (str, os.PathLike)):
        fk = file_key(Path(model))
        key = None if fk is None else (*fk, _shape_key(input_shapes))
        if key is not None and (hit := IMPORTS.get(key)) is not None:
            m, beside = hit
            if all(file_key(f) == k for f, k in beside):
                return m
    imp = import_model(model, input_shapes)
    m = Model(imp.graph, imp.mod, _graph_digest(imp.graph), _recipe(model, input_shapes))
    if key is not None:
        beside = tuple((f, file_key(f)) for f in imp.files)
        if all(k is not None for _, k in beside):
            IMPORTS.put(key, (m, beside))
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



def cost_model(model: Model, soc: SocProfile) -> CostModel:
    key = (model.key, soc.digest)
    cm = COSTS.get(key)
    if cm is None:
        t = tables(model)
        cm = COSTS.put(key, CostModel(t, soc, t.kernel_memo))
    return cm



def resolve(g: OpGraph, node) -> tuple[int, ...]:
    """op ids of a node reference (model node name, op name, op id), or a ConfigError naming the
    closest valid names."""
    ids = g.resolve(node)
    if not ids:
        alias = g.aliases.get(str(node), ())
        gone = str(node) if str(node) in g.elided else alias[0] if len(alias) == 1 and alias[0] in g.elided else None
        if gone is not None:  # a model node the import folded into another op (a GELU's erf...)
            what = f"node {node!r}" if gone == str(node) else f"node {node!r} ({gone!r})"
            raise ConfigError(f"{what} has no op of its own ({g.elided[gone]}), so it cannot be "
                              "pinned or given a bit-width on its own")  # fmt: skip
        text = str(int(node)) if isinstance(node, int) and not isinstance(node, bool) else str(node)
        digits = text.removeprefix("#")
        if digits.isdigit() and digits.isascii():  # an op id (as graph.resolve reads one) past the last op
            raise ConfigError(f"unknown op id #{int(digits)}; the model's ops are #0 .. #{len(g.ops) - 1}")
        names = set(g.names()) | {op.source for op in g.ops} | {a for a in g.aliases if g.resolve(a)}
        part = _part_of(g, str(node), names)
        raise ConfigError(f"unknown node {node!r}; {part or closest(str(node), names)}")
    return ids


def _part_of(g: OpGraph, text: str, names) -> str:
    """The few names ``text`` is the end or a part of (a name a table shortened to "…<its end>", as
    the CLI's does), each with its op ids, which reach the node whatever its length; "" if none or
    more than five."""
    part = text.removeprefix("…").removeprefix("...")
    if len(part) < 4:
        return ""
    hits = sorted((n for n in names if part in n and n != text), key=lambda n: (not n.endswith(part), len(n), n))
    if not hits or len(hits) > 5:
        return ""

    def ref(n: str) -> str:
        ids = g.resolve(n)
        short = n if len(n) <= 60 else "…" + n[-59:]
        return f"{short!r} ({'op #' + str(ids[0]) if len(ids) == 1 else 'ops ' + ', '.join('#' + str(i) for i in ids)})"

    return (f"it is part of {'this name' if len(hits) == 1 else 'these names'}: {'; '.join(map(ref, hits))}; "
            "give the whole name or an op id (\"#<op id>\")")


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
    """Validate every name in ``cfg`` and every pin against the profile's rules (ConfigError, marked
    with the config field at fault: ``errors.in_config`` names it after a config file's name)."""
    from ..opset import canonical  # noqa: PLC0415

    g = model.graph

    said: dict[tuple[str, str], tuple[str, str]] = {}
    for which, entries in (("disabled", cfg.disabled), ("enabled", cfg.enabled)):
        for p, op in sorted(entries):
            with _field(which):
                soc.processor(p)  # raises the closest-names error
                kind = canonical(op)
            if soc.processor(p).host:
                raise ConfigError(f"{which}: {p}:{op}: {host_toggle(soc, p)}")
            other = said.get((p, kind))
            if other is not None and other[0] != which:
                raise ConfigError(f"support of {kind} on {p} is both disabled and enabled ({other[0]}: {other[1]}; "
                                  f"{which}: {p}:{op}); keep one")  # fmt: skip
            said[(p, kind)] = (which, f"{p}:{op}")
    _one_each(g, cfg.pins, "pins")
    _one_each(g, cfg.layer_bits, "layer_bits")
    for p, b in cfg.bits:
        with _field("bits", p):
            soc.processor(p)
            check_bits(soc, p, b)
    for node, b in cfg.layer_bits:
        with _field("layer_bits", node):
            resolve(g, node)
            if b not in BITS:
                raise ConfigError(f"layer {node!r}: unknown bit-width {b!r}; one of {', '.join(BITS)}")
    for node, p in cfg.pins:
        with _field("pins", node):
            resolve(g, node)
            soc.processor(p)
    pins = pins_of(g, cfg)
    vs = verdicts(model, soc, cfg)
    for i, p in sorted(pins.items()):
        v = vs[(i, p)]
        if not v.ok:
            raise at_field(ConfigError(f"cannot pin {pinned_as(g, cfg, i)} to {p}: {p}: {v.text}"), "pins", pin_of(g, cfg, i))


@contextlib.contextmanager
def _field(table: str, key=None):
    """A ConfigError inside is marked as config field ``table.key``'s."""
    try:
        yield
    except ConfigError as e:
        raise at_field(e, table, key) from None


def pin_of(g: OpGraph, cfg: Config, i: int) -> str:
    """The node reference of ``cfg``'s pin that holds op ``i`` (the most specific one)."""
    return next(n for n, _p in reversed(by_specificity(g, cfg.pins)) if i in resolve(g, n))


def host_toggle(soc: SocProfile, proc: str) -> str:
    return (f"{proc} is the host: it runs every op no accelerator takes; toggle an accelerator "
            f"({', '.join(soc.accelerators)})")  # fmt: skip


def _one_each(g: OpGraph, entries, what: str) -> None:
    """Two per-node edits of one table that name the same ops (``"12"`` and ``"#12"``, an op id and
    its op's name) with different values contradict each other: refused, naming both."""
    seen: dict[frozenset, tuple[str, str]] = {}
    for node, value in entries:
        with _field(what, node):
            ids = frozenset(resolve(g, node))
        prev = seen.get(ids)
        if prev is not None and prev[1] != value:
            ops = ", ".join(f"{g.ops[i].name!r}" for i in sorted(ids)[:3]) + (" ..." if len(ids) > 3 else "")
            raise ConfigError(f"{what}: {prev[0]!r} = {prev[1]!r} and {node!r} = {value!r} name the same op(s) "
                              f"({ops}); keep one")  # fmt: skip
        seen[ids] = (str(node), value)


def shown(g: OpGraph, node) -> str:
    """A node reference as stored in a config, as the user knows it: ``"#12"`` (one op of a model node
    that became several) goes by its op's name."""
    k = str(node)
    if k.startswith("#") and k[1:].isdigit():
        ids = g.resolve(k)
        if len(ids) == 1 and g.ops[ids[0]].name != k:
            return g.ops[ids[0]].name
    return k


def check_bits(soc: SocProfile, proc: str, b: str) -> None:
    if b not in BITS:
        raise ConfigError(f"unknown bit-width {b!r}; one of {', '.join(BITS)}")
    p = soc.processor(proc)
    if b not in p.macs_per_cycle:
        raise ConfigError(f"{proc} cannot run {b}: processors.{proc}.macs_per_cycle lists {', '.join(p.bits)}")




def pinned_as(g: OpGraph, cfg: Config, i: int, kind: bool = True) -> str:
    """Op ``i`` as the user's pin named it: the node reference, and the op inside it when the node
    covers several ops under other names (a model node split into ops, or a name two nodes share)."""
    op = g.ops[i]
    node = pin_of(g, cfg, i) if i in pins_of(g, cfg) else op.name
    if node == op.name or len(resolve(g, node)) == 1:  # (stored as "#<id>" for one op of several)
        return f"{op.name!r} ({op.kind})" if kind else repr(op.name)
    return f"{node!r} (its op {op.name!r}, {op.kind})"
