"""The Relax operator names npukit knows (no tvm): short names ("conv2d") <-> full ("relax.nn.conv2d").

``relax_ops.txt`` lists TVM's user-facing Relax operators (internal ones such as ``relax.vm.*``
left out); a test checks it against the installed TVM's operator registry.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from ..errors import ConfigError, closest


@lru_cache(maxsize=1)
def full_names() -> tuple[str, ...]:
    text = resources.files("npukit").joinpath("relax_ops.txt").read_text(encoding="utf-8")
    return tuple(ln.strip() for ln in text.splitlines() if ln.strip())


@lru_cache(maxsize=1)
def _by_short() -> dict[str, str]:
    return {n.rsplit(".", 1)[1]: n for n in full_names()}


def short_names() -> tuple[str, ...]:
    return tuple(sorted(_by_short()))


def canonical(op: str, where: str = "") -> str:
    """The short name of an op given short ("softmax") or full ("relax.nn.softmax"); else ConfigError
    (its message starts with ``where``, the file and field that gave the name, when there is one)."""
    s = str(op).strip()
    by_short = _by_short()
    if s in by_short:
        return s
    if s in set(full_names()):
        return s.rsplit(".", 1)[1]
    raise ConfigError(f"{where + ': ' if where else ''}unknown op {op!r}; {closest(s, by_short)}")


def full(short: str) -> str:
    return _by_short().get(short, f"relax.{short}")
