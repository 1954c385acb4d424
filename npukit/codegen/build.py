"""Build an exported project and run it on the study's data: its outputs against npukit's own
simulation of the same config, and its memory against the profile (``study.build()``,
``npukit build DIR``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..errors import NpukitError
from .targets import available, get_target


class BuildFailed(NpukitError):
    """The exported project did not compile or did not run; the message carries the tool's output."""


def _run(cmd, cwd, timeout=600) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError as e:
        raise BuildFailed(f"{cmd[0]}: not installed ({e})") from None
    except subprocess.TimeoutExpired:
        raise BuildFailed(f"{' '.join(map(str, cmd))}: timed out after {timeout} s") from None


def make(directory: Path, *targets: str, env_overrides=None) -> str:
    """Run make in an export; the compiler's messages on failure."""
    r = _run(["make", "--no-print-directory", *targets], directory)
    if r.returncode:
        tail = (r.stderr or r.stdout).strip().splitlines()[-25:]
        raise BuildFailed(f"{directory}: make {' '.join(targets) or ''} failed:\n" + "\n".join(tail))
    return r.stdout


def run_program(directory: Path, argv0, inputs: list[np.ndarray], shapes, workdir: Path) -> list[np.ndarray]:
    """Run the built runner on one sample: inputs written as .npy, outputs read back.  ``argv0`` is
    the command to which the runner's arguments are appended, or a function of those arguments
    returning the whole command (``Target.run_argv``: firmware takes them on its semihosting
    command line)."""
    ins = []
    for j, a in enumerate(inputs):
        p = workdir / f"in{j}.npy"
        np.save(p, np.ascontiguousarray(a).reshape(shapes[j]))
        ins.append(os.path.relpath(p, directory))
    out = workdir / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    args = [*ins, os.path.relpath(out, directory)]
    cmd = argv0(args) if callable(argv0) else [*argv0, *args]
    r = _run(cmd, directory, timeout=300)
    if r.returncode:
        raise BuildFailed(f"{' '.join(cmd)}: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-800:]}")
    got, k = [], 0
    while (out / f"{k}.npy").exists():
        got.append(np.load(out / f"{k}.npy"))
        k += 1
    return got


def compare(got: list[np.ndarray], ref: list[np.ndarray], names: list[str]) -> list[dict]:
    """Per output: max abs error and max relative error (to the reference's largest magnitude);
    an output whose rows depend on the data (NMS) is compared on the rows both have."""
    rows = []
    for k, (a, b) in enumerate(zip(got, ref)):
        b = np.asarray(b)
        if a.shape != b.shape and a.ndim == b.ndim and a.shape[1:] == b.shape[1:]:
            n = min(a.shape[0], b.shape[0])
            a, b = a[:n], b[:n]
        elif a.size == b.size:
            b = b.reshape(a.shape)
        if a.shape != b.shape:
            rows.append({"output": names[k], "shape_mismatch": [list(a.shape), list(b.shape)]})
            continue
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        rows.append({"output": names[k], "max_abs": float(diff.max()) if diff.size else 0.0,
                     "max_rel": float(diff.max() / scale) if diff.size and scale else 0.0,
                     "argmax_equal": bool(a.size and np.argmax(a) == np.argmax(b))})  # fmt: skip
    return rows


def study_of_export(directory):
    """The Study an export was generated from (its manifest names the model, profile and config)."""
    from ..study import Study  # noqa: PLC0415

    d = Path(directory)
    man = d / "manifest.json"
    if not man.is_file():
        raise NpukitError(f"{d}: no manifest.json; not a directory written by npukit's export")
    try:
        m = json.loads(man.read_text(encoding="utf-8"))
        model, profile, config = m["model_path"], m["profile_path"], m["config"]
    except (json.JSONDecodeError, KeyError, UnicodeDecodeError) as e:
        raise NpukitError(f"{man}: not an npukit manifest ({e})") from None
    if not model:
        raise NpukitError(f"{man}: the export was made from an in-memory model; build it from Python with study.build()")
    return Study(model, profile, config), d


def build_and_compare(study, directory=None, *, samples: int = 16, target: bool = False, regenerate: bool = True) -> dict:
    """Export (unless ``regenerate`` is False: build the directory as it is), build (host compiler;
    the profile's target too with ``target``), run on the first ``samples`` of the study's data,
    and compare with the simulation of the same config."""
    from .. import pipeline  # noqa: PLC0415
    from .memfit import section_sizes  # noqa: PLC0415

    tmp = None
    if directory is None:
        tmp = tempfile.mkdtemp(prefix="npukit-build-")
        directory = Path(tmp) / "export"
    directory = Path(directory)
    try:
        proj = study.export(directory) if regenerate or not (directory / "Makefile").exists() else study.project
        make(directory)
        g = study.graph
        data = study.data
        n = min(samples, len(data.samples))
        idx = list(range(n))
        ref = pipeline.simulate(study.result, data, idx)
        shapes = [g.tensors[t].shape for t in g.inputs]
        names = [g.output_name(k) for k in range(len(g.outputs))]
        work = directory / ".runs"
        work.mkdir(exist_ok=True)
        runs = {"host": ["./model"]}
        tgt = get_target(proj.target)
        if target and tgt.program_suffix:
            ok, why = available(tgt)
            if ok:
                make(directory, "target")
                runs[tgt.name] = lambda args, t=tgt: t.run_argv(t.program_name("model"), args)
            else:
                runs[tgt.name] = None
        report: dict = {"directory": str(directory), "samples": n, "runs": {}, "memory": dict(proj.manifest["memory"])}
        outputs_by_run = {}
        for name, argv in runs.items():
            if argv is None:
                report["runs"][name] = {"skipped": why}
                continue
            rows, agree, outs = [], [], []
            for i in idx:
                got = run_program(directory, argv, list(data.samples[i]), shapes, work)
                outs.append(got)
                rows.append(compare(got, ref[i], names))
            outputs_by_run[name] = outs
            worst = {}
            for per in rows:
                for r in per:
                    w = worst.setdefault(r["output"], {"max_abs": 0.0, "max_rel": 0.0, "argmax_agreement": 0})
                    w["max_abs"] = max(w["max_abs"], r.get("max_abs", float("inf")))
                    w["max_rel"] = max(w["max_rel"], r.get("max_rel", float("inf")))
                    w["argmax_agreement"] += int(r.get("argmax_equal", False))
            for w in worst.values():
                w["argmax_agreement"] /= max(n, 1)
            report["runs"][name] = {"outputs": worst}
            _ = agree
        if "host" in outputs_by_run and len(outputs_by_run) > 1:
            for name, outs in outputs_by_run.items():
                if name != "host":
                    same = all(all(np.array_equal(a, b) for a, b in zip(x, y)) for x, y in zip(outs, outputs_by_run["host"]))
                    report["runs"][name]["bit_exact_with_host"] = same
        try:
            report["sections"] = section_sizes(directory / "model")
        except NpukitError as e:
            report["sections"] = {"error": str(e)}
        if target and (runs.get(tgt.name) is not None or not tgt.program_suffix):
            from . import fit as fit_mod  # noqa: PLC0415

            fr = fit_mod.report(section_sizes(directory / tgt.program_name("model"), tgt.size_tool), study.soc, tgt.name)
            fr["program"] = tgt.program_name("model")
            fr["estimate"] = fit_mod.estimate(proj.manifest, study.soc)
            report["fit"] = pipeline.record_fit(study.result, data, fr)
        shutil.rmtree(work, ignore_errors=True)
        return json.loads(json.dumps(report))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
