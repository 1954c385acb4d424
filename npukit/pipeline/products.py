"""What a Result leads to: the numeric error of its bit-widths (simulated with TVM) and its generated
code, with the calibration and memory figures they share."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from ..cost import kernels
from ..soc import SocProfile
from .caches import CODE, ERRORS, FITS, HOSTC, RANGES, SIMS
from .model import Model, tables
from .results import Result


def default_data(model: Model):
    """The model's own data sidecar (``<stem>.npz``), else seeded random inputs."""
    from .. import quant  # noqa: PLC0415

    g = model.graph
    side = quant.sidecar(g.path)
    return quant.load_npz(g, side) if side else quant.random_data(g)


def simulator(model: Model):
    sim = SIMS.get(model.key)
    if sim is None:
        from ..tvm.simulate import Simulator, default_cache_dir  # noqa: PLC0415

        sim = SIMS.put(model.key, Simulator(model.module, model.graph, default_cache_dir()))
    return sim


def error_model(model: Model, data):
    from ..quant import ErrorModel  # noqa: PLC0415

    key = (model.key, data.key)
    em = ERRORS.get(key)
    if em is None:
        em = ERRORS.put(key, ErrorModel(model.graph, simulator(model), data))
    return em


def _error_args(result: Result):
    from ..quant import rounded_ops  # noqa: PLC0415
    from ..quant.boundary import edge_bits  # noqa: PLC0415

    g = result.model.graph
    return rounded_ops(g, kernels(result.plan, g, tables(result.model)), result.bits), edge_bits(g, result.plan, result.bits)


def calibrated_tensors(result: Result) -> frozenset[str]:
    """The tensors ``result`` stores on an integer grid calibrated on the data, not on the model's own
    grid (``quant.scheme.calibrated_tensors``; no simulation run, no code generated): the export's
    manifest (``data.calibrated``) and the study command's note on seeded random data both ask it."""
    from ..quant.scheme import calibrated_tensors as of  # noqa: PLC0415

    rounded, eb = _error_args(result)
    return of(result.model.graph, rounded, result.bits, eb)


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
    """The numeric error of ``result``'s bit-widths on ``data`` (default: the model's own data).
    The measuring is shared by every data set of the same content (another study's, another
    file's), so the source it reports is ``data``'s own, not that of whichever came first."""
    model = result.model
    data = default_data(model) if data is None else data
    rounded, eb = _error_args(result)
    res = error_model(model, data).evaluate(result.bits, rounded, eb)
    return res if res.source == data.source else dataclasses.replace(res, source=data.source)


# ---------------------------------------------------------------------------------------------
# generated code


def code(result: Result, data=None):
    """The generated C project of ``result`` (calibrated on ``data`` where a tensor is stored on an
    integer grid)."""
    from ..codegen.project import generate  # noqa: PLC0415

    model = result.model
    data = default_data(model) if data is None else data
    key = _code_key(result, data)
    hit = CODE.get(key)
    if hit is None:
        hit = CODE.put(key, generate(result, lambda: calibration(model, data),
                                     host_c=lambda groups: host_code(model, groups), data=data))  # fmt: skip
    return hit


RANGES_FORMAT = "ranges-v2"  # bump when the calibration procedure (quant.error.ErrorModel) changes (v2: the model's own grids)


def _ranges_file(model: Model, data) -> Path | None:
    from ..tvm.simulate import default_cache_dir  # noqa: PLC0415 - npukit.tvm imports tvm lazily

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
    from ..codegen.fit import estimate  # noqa: PLC0415

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
        from ..tvm.hostc import host_kernels  # noqa: PLC0415

        hit = HOSTC.put(key, host_kernels(model.module, model.graph, list(groups), prefix="npk_host"))
    return hit
