"""Does it fit?  A generated project's memory against the profile's budgets (no tvm).

* :func:`estimate` -- from the manifest, before any build: the constant workspace (weights) against
  ``flash_bytes``, the arena against ``sram_bytes``.  A lower bound of what the program needs.
* :func:`measure` -- build the export for the profile's target and read the toolchain's ``size``
  (``memfit.section_sizes``): code + constants + the load image of .data against flash, .data +
  .bss (the arena) + heap + stack against SRAM; the weights' and arena's own sections where the
  target's linker script keeps them apart (Cortex-M7 firmware).  These are ``size``'s figures:
  ``flash_used`` = Berkeley ``text + data``, ``sram_used`` = ``data + bss``.

A budget the profile leaves out is ``None`` and never over; an exceeded one is flagged
(``*_over``, ``over_budget``), spelled out in ``text`` ("OVER by N bytes") and, from
``Study.fit``, raised as a :class:`MemoryBudgetWarning`.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

from ..errors import NpukitError
from .memfit import ARENA_SECTION, WEIGHTS_SECTION, section_sizes
from .targets import available, get_target


class MemoryBudgetWarning(UserWarning):
    """A generated program needs more flash or SRAM than its profile has."""


def _over(used: int, budget: int | None) -> bool | None:
    return None if budget is None else used > budget


def estimate(manifest: dict, soc) -> dict:
    """The manifest's memory figures against the profile's budgets: ``weight_bytes`` vs
    ``flash_bytes``, ``arena_bytes`` vs ``sram_bytes`` (what the model itself needs, before code,
    libraries, stack and heap)."""
    m = manifest["memory"]
    out = {"source": "manifest", "target": manifest.get("target", soc.target), "flash_bytes": soc.flash_bytes,
           "sram_bytes": soc.sram_bytes, "weight_bytes": m["weight_bytes"], "arena_bytes": m["arena_bytes"],
           "lower_bound_bytes": m["lower_bound_bytes"], "flash_over": _over(m["weight_bytes"], soc.flash_bytes),
           "sram_over": _over(m["arena_bytes"], soc.sram_bytes)}  # fmt: skip
    out["over_budget"] = bool(out["flash_over"] or out["sram_over"])
    return out


def report(sizes: dict, soc, target: str) -> dict:
    """The fit of measured section sizes (``memfit.section_sizes``) against the profile's budgets."""
    flash_used = sizes["text"] + sizes["rodata"] + sizes["data"]
    sram_used = sizes["data"] + sizes["bss"] + sizes["heap"] + sizes["stack"]
    sec = sizes.get("sections", {})
    out = {"source": "size", "target": target, "flash_bytes": soc.flash_bytes, "sram_bytes": soc.sram_bytes,
           "flash_used": flash_used, "sram_used": sram_used, "flash_over": _over(flash_used, soc.flash_bytes),
           "sram_over": _over(sram_used, soc.sram_bytes), "sizes": {k: sizes[k] for k in ("text", "rodata", "data", "bss", "heap", "stack")},
           "sections": dict(sec), "weights_section_bytes": sec.get(WEIGHTS_SECTION),
           "arena_section_bytes": sec.get(ARENA_SECTION)}  # fmt: skip
    out["over_budget"] = bool(out["flash_over"] or out["sram_over"])
    out["text"] = fit_lines(out)
    return out


def fit_lines(r: dict) -> str:
    """Two lines for people: used / budget per memory, OVER where a budget is exceeded."""
    lines = []
    for mem, label in (
        ("flash", "flash (code + constants + .data image)"),
        ("sram", "SRAM (.data + .bss + heap + stack)"),
    ):
        used, total = r[f"{mem}_used"], r[f"{mem}_bytes"]
        if total is None:
            lines.append(f"{label}: {used:,} bytes (the profile sets no {mem}_bytes)")
            continue
        flag = f"  OVER by {used - total:,} bytes" if used > total else ""
        lines.append(f"{label}: {used:,} / {total:,} bytes ({100.0 * used / total:.1f}%){flag}")
    return "\n".join(lines)


def measure(directory: str | Path, soc, target: str | None = None) -> dict:
    """Build the export in ``directory`` for ``target`` (default: its profile's) and fit it: the
    report of :func:`report` plus ``program`` (the built file) and ``build_s``.  Raises NpukitError
    naming the missing tools when the target's toolchain is not installed."""
    from .build import make  # noqa: PLC0415

    d = Path(directory)
    tgt = get_target(target or soc.target)
    ok, why = available(tgt)
    if not ok:
        raise NpukitError(f"{why}; cannot measure the memory fit")
    t0 = time.perf_counter()
    make(d, "target")
    build_s = time.perf_counter() - t0
    program = d / tgt.program_name("model")
    out = report(section_sizes(program, tgt.size_tool), soc, tgt.name)
    out["program"] = program.name
    out["build_s"] = build_s
    return out


def warn_if_over(r: dict, what: str) -> None:
    """A MemoryBudgetWarning naming what is over budget, if anything is."""
    if not r.get("over_budget"):
        return
    parts = []
    for mem in ("flash", "sram"):
        if r.get(f"{mem}_over"):
            used = r.get(f"{mem}_used", r.get("weight_bytes" if mem == "flash" else "arena_bytes"))
            parts.append(f"{mem}: needs {used:,} bytes, the profile has {r[f'{mem}_bytes']:,} ({mem}_bytes)")
    warnings.warn(f"{what} does not fit: " + "; ".join(parts), MemoryBudgetWarning, stacklevel=3)


def fit_study(study, directory=None, target: str | None = None) -> dict:
    """``Study.fit``: export (into a temporary directory unless ``directory``), build for the target,
    hold the toolchain's sizes against the profile's budgets, record them with the study's result,
    and warn when over budget."""
    import tempfile  # noqa: PLC0415

    from .. import pipeline  # noqa: PLC0415

    tmp = None
    if directory is None:
        tmp = tempfile.TemporaryDirectory(prefix="npukit-fit-")
        directory = Path(tmp.name) / "export"
    try:
        proj = study.export(directory)
        r = measure(directory, study.soc, target)
    finally:
        if tmp is not None:
            tmp.cleanup()
    r["estimate"] = estimate(proj.manifest, study.soc)
    if target is None or target == study.soc.target:
        pipeline.record_fit(study.result, study.data, r)
    warn_if_over(r, f"{Path(str(study.graph.path)).name} on {study.soc.name} ({r['target']} build)")
    return r
