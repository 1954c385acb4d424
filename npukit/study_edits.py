"""The edit methods of ``study.Study`` (``StudyEdits``): op support per processor, pins, bit-widths
per processor or per layer, the placement policy, reset.  Each builds the next Config and hands it to
``Study._apply``, which switches to it atomically; a per-node edit is stored under one spelling per
set of ops (``_node_key``), and removing one the study does not have says what holds it.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING

import numpy as np

from . import pipeline as pl
from .config import Config
from .errors import ConfigError, unknown
from .soc import BITS

if TYPE_CHECKING:
    from .study import Study


class StudyEdits:
    """The edit methods of ``study.Study`` (see the module docstring)."""

    def _proc(self, name: str) -> str:
        if name not in self.soc.names:
            raise unknown("processor", name, self.soc.names)
        return name

    def _node_key(self, node) -> str:
        """A node reference as stored in the config, one spelling per set of ops, in the model's
        words where they name exactly those ops: the model node's own name when the reference covers
        exactly that node's ops (an op id, ``"12"``, ``"#12"`` or an op name of a node that became one
        op, or the node name itself); for one op of a node that became several, its op name
        (``"/conv1/Conv/add"``, the bias add of ``/conv1/Conv``), else -- the op that keeps the node's
        own name (the conv), which means every op of the node -- ``"#<id>"``, or ``"<id>"`` where a model node is named
        ``"#<id>"``."""
        ids = pl.resolve(self.graph, int(node) if isinstance(node, (int, np.integer)) and not isinstance(node, bool)
                         else node)  # fmt: skip
        src = self.graph.ops[ids[0]].source
        if self.graph.ops_of_source(src) == ids and self.graph.resolve(src) == ids:
            return src
        if len(ids) == 1:  # the first spelling that means this op alone (a model node may be named "#12")
            op = self.graph.ops[ids[0]]
            for key in (op.name, f"#{op.op_id}", str(op.op_id)):
                if self.graph.resolve(key) == ids:
                    return key
            raise ConfigError(f"op {op.op_id} ({op.name!r}, {op.kind}) has no name that means it alone in this model: "
                              f"{op.name!r}, '#{op.op_id}' and '{op.op_id}' each name other ops; edit its node "
                              f"{op.source!r} whole")  # fmt: skip
        return str(node)

    def _without_covered(self, entries, key: str) -> dict:
        """The per-node edits left when ``key`` is set: those it covers whole are replaced by it."""
        mine = set(pl.resolve(self.graph, key))
        return {n: v for n, v in entries if n != key and not set(self.graph.resolve(n)) <= mine}

    def set_support(self, processor: str, op: str, enabled: bool = True) -> Study:
        """Switch op support on a processor; ``op`` is a short or full Relax name (softmax).
        ``enabled=True`` may also add an op the profile does not list for the processor (a what-if:
        "if the DLA ran softmax"); it is then costed with the processor's generic figures (its
        ``vector_ops_per_cycle``, ``efficiency["*"]``, overheads), with no per-op limits, and the
        processor's other rules still apply.  Turning back to what the profile says removes the edit."""
        from .opset import canonical  # noqa: PLC0415

        if not isinstance(enabled, (bool, np.bool_)):
            raise ConfigError(f"set_support: enabled must be True or False, got {enabled!r}")
        proc = self._proc(processor)
        kind = canonical(op)
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
                if bad and len(bad) == len(targets):  # (per processor would not help: say what they run)
                    runs = "; ".join(f"{p} {', '.join(self.soc.processor(p).bits)}" for p in bad)
                    raise ConfigError(f"no processor of {self.soc.name} runs {bits} (processors.<name>.macs_per_cycle "
                                      f"lists: {runs})")  # fmt: skip
                if bad:
                    ok = [p for p in targets if p not in bad]
                    raise ConfigError(f"{', '.join(bad)} cannot run {bits}; set it per processor with processor= "
                                      f"({', '.join(ok)} {'runs' if len(ok) == 1 else 'run'} it)")  # fmt: skip
            for p in targets:
                cfg = cfg.with_bits(bits, processor=p)
        self._apply(cfg)
        if layer is not None and bits is not None:
            self._warn_idle(key, bits)
        return self

    def _warn_idle(self, key: str, bits: str) -> None:
        """Warn when a layer width just set has no effect (``_idle_note``)."""
        note = self._idle_note(key, bits)
        if note:
            warnings.warn(f"npukit: {note}", stacklevel=3)

    def _idle_note(self, key: str, bits: str) -> str:
        """Why the layer width ``bits`` of ``key`` in the config has no effect, in words: every op it
        sets runs inside a kernel its values never leave, at the kernel's width (``pipeline.widths``;
        the per-op table and ``explain`` say the same); "" when it has one.  (The widget says it in
        its status line.)"""
        model, soc, cfg, g = self._model, self.soc, self._config, self.graph
        plan = pl.partition(model, soc, cfg).plan
        ids = set(pl.resolve(g, key))
        mine = [i for i, b in pl.layer_bits_of(g, cfg).items() if b == bits and i in ids]
        ran = pl.op_bits(model, soc, cfg, plan)
        notes = pl.width_notes(model, soc, cfg, plan, ran)
        idle = "its values never leave the kernel"
        if mine and all(idle in notes.get(i, "") for i in mine):
            i, layer = mine[0], pl.shown(g, key)
            on = "" if g.ops[i].name == str(layer) else f" on its op {g.ops[i].name!r}"
            why = notes[i][notes[i].index(idle):]
            return f"layer {layer!r} at {bits} has no effect{on}: {why} ({ran[i]})"
        return ""

    def reset(self) -> Study:
        """Drop every edit: support edits, pins, processor and layer bit-widths.  The placement
        policy stays (``set_placement`` changes it): a study made with ``placement="first-fit"`` is
        still first-fit after a reset."""
        self._apply(Config().with_placement(self._config.placement))
        return self

    def set_placement(self, placement: str) -> Study:
        """The placement policy: "cost" (npukit's cost model chooses among the processors the rules
        allow, and whether an offload pays for itself) or "first-fit" (the profile's preference order)."""
        from .config import PLACEMENTS  # noqa: PLC0415

        if placement not in PLACEMENTS:
            raise ConfigError(f"unknown placement policy {placement!r}; one of {', '.join(map(repr, PLACEMENTS))}")
        self._apply(self._config.with_placement(placement))
        return self
