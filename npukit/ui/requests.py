"""The widget's requests in words: what an edit request does to the Study and the status line that
answers it, what a pending request is busy with, the exports it offers; a request lacking a field
names it.  (No widget state: ``StudyWidget`` holds that.)"""

from __future__ import annotations

import math

from ..errors import ConfigError, NpukitError
from ..pipeline import shown

TWO_PHASE = ("support", "pin", "unpin", "bits", "layer_bits", "reset")  # edits that may move ops

EXPORTS = {
    "model_explorer": ("to_model_explorer", "Model Explorer JSON"),
    "annotated_onnx": ("annotated_onnx", "annotated ONNX"),
}


class Message(dict):
    """A request from the front end: a field it lacks is a ConfigError naming it, in the status line
    ("pin: the request has no 'node'"), not an unexpected KeyError."""

    def __missing__(self, key):
        raise ConfigError(f"{self.get('type', 'request')}: the request has no {key!r}")


def step_name(m: dict, policy: str) -> str:
    """What a request is busy with, in the words of its interim status line (``policy``: the
    Study's placement policy)."""
    kind = m.get("type")
    if kind == "placement":
        policy = m.get("placement")
    if kind in ("support", "pin", "unpin", "reset", "placement") or (kind in ("bits", "layer_bits") and policy == "cost"):
        return f"placing ops ({policy} policy)"
    if kind in ("bits", "layer_bits"):
        return "updating the figures"
    if kind == "measure_error":
        return "measuring error"
    if kind == "export":
        return f"writing the {EXPORTS.get(str(m.get('what')), ('', 'export'))[1]}"
    if kind == "code":
        return "generating the code"
    return "updating the view"


def apply_edit(s, m: dict) -> tuple[str, str] | None:
    """An edit request (support, pin, unpin, bits, layer_bits, reset, placement) made on the Study
    ``s``: (level, status text); None for any other request."""
    kind = m.get("type")
    if kind == "support":
        on = bool(m["enabled"])
        s.set_support(m["processor"], m["op"], on)
        return "ok", f"{m['processor']}: {m['op']} {'on' if on else 'off'} \u2192"
    if kind == "pin":
        node = node_ref(m["node"])
        s.pin(node, m["processor"])
        return "ok", f"pinned {label(s, node)} to {m['processor']} \u2192"
    if kind == "unpin":
        node = m["node"]
        s.unpin(node)
        return "ok", f"unpinned {label(s, node)} \u2192"
    if kind == "bits":
        bits = m.get("bits") or None
        s.set_bits(bits, processor=m["processor"])
        return "ok", f"{m['processor']}: {bits or 'default bits'} \u2192"
    if kind == "layer_bits":
        bits = m.get("bits") or None
        node = node_ref(m["node"])
        s.set_bits(bits, layer=node)
        return "ok", f"{label(s, node)}: {bits or 'processor default bits'} \u2192"
    if kind == "reset":
        s.reset()
        return "ok", f"every edit dropped (placement policy {s.config.placement} kept) \u2192"
    if kind == "placement":
        old = s.config.placement
        s.set_placement(str(m.get("placement")))
        return "ok", f"placement policy {s.config.placement} (was {old}) \u2192"
    return None


def node_ref(node):
    """An op id from the front end (int) or a node name, as the Study takes it."""
    if isinstance(node, bool):
        raise NpukitError(f"bad node reference {node!r}")
    return int(node) if isinstance(node, (int, float)) else str(node)


def label(s, node) -> str:
    """A node reference in the model's words: an op id (int, or ``"#12"`` as the config keeps one
    op of a node that became several) by its op's name."""
    if isinstance(node, int) and 0 <= node < len(s.graph.ops):
        return repr(s.graph.ops[node].name)
    return repr(shown(s.graph, node))


def export(s, what: str, path: str) -> tuple[str, str]:
    if what not in EXPORTS:
        raise NpukitError(f"unknown export {what!r}; one of {', '.join(EXPORTS)}")
    meth, name = EXPORTS[what]
    fn = getattr(s, meth, None)
    if not callable(fn):
        return "info", f"{name}: not available yet (this npukit has no Study.{meth})"
    if not path:
        raise NpukitError(f"{name}: give a path to write to")
    out = fn(path)
    return "ok", f"{name}: wrote {out if out is not None else path}"


def change(before: dict | None, after: dict | None) -> str:
    """'latency a -> b us, energy c -> d uJ, n partitions' from two totals dicts, each figure
    written as the widget's header writes it (``us`` and ``uj`` of widgets/src/format.js)."""
    if not before or not after:
        return ""
    return (f"latency {us(before['latency_us'])} \u2192 {us(after['latency_us'])}, "
            f"energy {uj(before['energy_uj'])} \u2192 {uj(after['energy_uj'])}, {after['partitions']} "
            f"partition{'s' * (after['partitions'] != 1)}")  # fmt: skip


def _exp(x: float) -> str:
    """JavaScript's ``x.toExponential(2)``: '1.23e+7'."""
    m, e = f"{x:.2e}".split("e")
    return f"{m}e{int(e):+d}"


def us(x: float) -> str:
    """A latency as the widget writes it: one decimal from 1,000 us, two from 10, three below."""
    if x is None or not math.isfinite(x):
        return "\u2013"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.1f} us"
    if a >= 10:
        return f"{x:.2f} us"
    if a >= 0.01 or a == 0:
        return f"{x:.3f} us"
    return f"{_exp(x)} us"


def uj(x: float) -> str:
    """An energy as the widget writes it: up to four decimals, trailing zeros dropped."""
    if x is None or not math.isfinite(x):
        return "\u2013"
    a = abs(x)
    if a != 0 and (a >= 1e7 or a < 1e-3):
        return f"{_exp(x)} uJ"
    s = f"{x:,.4f}".rstrip("0").rstrip(".")
    return f"{'0' if s in ('', '-', '-0') else s} uJ"
