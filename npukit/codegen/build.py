"""Build an exported project and run it on the study's data: its outputs against npukit's own
simulation of the same config, and its memory against the profile (``study.build()``,
``npukit build DIR``).

Each output's verdict, and its tolerance, are ``npukit.codegen.compare``'s.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..errors import NpukitError
from .compare import _rel_rms, compare, float_noise, host_difference, libm_calls, output_names, verdict
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


def exit_status(returncode: int) -> str:
    """How a process ended, in words: ``exit 3``, or ``killed by signal 11 (SIGSEGV)`` for the
    negative return code :mod:`subprocess` gives a process a signal ended."""
    if returncode >= 0:
        return f"exit {returncode}"
    try:
        name = f" ({signal.Signals(-returncode).name})"
    except ValueError:
        name = ""
    return f"killed by signal {-returncode}{name}"


def failure_message(cmd, r: subprocess.CompletedProcess) -> str:
    """One failed run of a program: its command, how it ended, and the end of what it wrote to
    stderr -- or that it wrote nothing there (then stdout's end, if it wrote any)."""
    err, out = (r.stderr or "").strip(), (r.stdout or "").strip()
    if err:
        said = err[-800:]
    elif out:
        said = f"nothing on stderr; stdout: {out[-800:]}"
    else:
        said = "no output (stderr and stdout empty)"
    return f"{' '.join(map(str, cmd))}: {exit_status(r.returncode)}: {said}"


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
        raise BuildFailed(failure_message(cmd, r))
    got, k = [], 0
    while (out / f"{k}.npy").exists():
        got.append(np.load(out / f"{k}.npy"))
        k += 1
    return got


def study_of_export(directory):
    """The Study an export was generated from (its manifest names the model, profile and config)."""
    from .. import pipeline as pl  # noqa: PLC0415
    from ..study import Study  # noqa: PLC0415

    d = Path(directory)
    man = d / "manifest.json"
    if not os.path.lexists(d):
        raise NpukitError(f"{d}: no such directory; give a directory written by npukit's export")
    if not d.is_dir():
        raise NpukitError(f"{d}: is a file, not a directory written by npukit's export")
    if not man.is_file():
        raise NpukitError(f"{d}: no manifest.json; not a directory written by npukit's export")
    try:
        m = json.loads(man.read_text(encoding="utf-8"))
        model, profile, config = m["model_path"], m["profile_path"], m["config"]
    except (json.JSONDecodeError, KeyError, UnicodeDecodeError) as e:
        raise NpukitError(f"{man}: not an npukit manifest ({e})") from None
    if not model:
        raise NpukitError(f"{man}: the export was made from an in-memory model; build it from Python with study.build()")
    if m.get("profile_file") and (d / m["profile_file"]).is_file():
        profile = d / m["profile_file"]  # the profile as it was studied (an edited one too)
    shapes = {k: tuple(v) for k, v in (m.get("input_shapes") or {}).items()}  # the --input-shape it was made with
    if m.get("model_key") and pl.load(model, shapes or None).key != m["model_key"]:  # (before its config's names)
        raise NpukitError(f"{man}: the model {model} changed since the export (it no longer imports as the graph "
                          "the code was generated from); export again")  # fmt: skip
    s = Study(model, profile, config, input_shapes=shapes or None)
    _restore_data(s, m.get("data"), man)
    return s, d


def _restore_data(s, rec, man: Path) -> None:
    """The data the export was made with (its manifest's ``data``): read again from its .npz, and
    checked to be the same (its digest).  Data given as arrays cannot be read again: where the code
    was calibrated on it, the comparison would be against another calibration, so it is refused."""
    if not rec:
        return  # an export from before the manifest recorded it
    path, key, calibrated = rec.get("path"), rec.get("key"), rec.get("calibrated", True)
    if path and Path(path).is_file():
        s.set_data(path)
    elif path and calibrated:
        raise NpukitError(f"{man}: the code was calibrated on the data in {path}, which no longer exists; "
                          "export again, or build it from Python with study.build()")  # fmt: skip
    if s.data.key != key and calibrated:
        what = f"the data in {path} changed since" if path else "data passed to set_data() as arrays at"
        raise NpukitError(f"{man}: the code was calibrated on {what} the export; npukit build cannot compare it "
                          "with the same calibration: export again, or build it from Python with study.build()")  # fmt: skip


def build_and_compare(study, directory=None, *, samples: int = 16, target: bool = False, regenerate: bool = True) -> dict:
    """Export (unless ``regenerate`` is False: build the directory as it is), build (host compiler;
    the profile's target too with ``target``), run on the first ``samples`` of the study's data,
    and compare with the simulation of the same config."""
    from .. import pipeline  # noqa: PLC0415
    from .memfit import section_sizes  # noqa: PLC0415

    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise NpukitError(f"samples={samples!r}: run at least 1 input")
    tmp = None
    if directory is None:
        tmp = tempfile.mkdtemp(prefix="npukit-build-")
        directory = Path(tmp) / "export"
    directory = Path(directory)
    work = None
    try:
        proj = study.export(directory) if regenerate or not (directory / "Makefile").exists() else study.project
        make(directory)
        g = study.graph
        data = study.data
        n = min(samples, len(data.samples))
        idx = list(range(n))
        ref = pipeline.simulate(study.result, data, idx)
        shapes = [g.tensors[t].shape for t in g.inputs]
        names = output_names(g)
        noise = float_noise(ref, pipeline.simulate_float(study.result, data, idx), names)
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
        # a build in a directory of its own is removed after it: no path that would not exist
        report: dict = {"directory": str(directory) if tmp is None else None, "samples": n, "data": data.source, "runs": {},
                        "memory": dict(proj.manifest["memory"])}  # fmt: skip
        outputs_by_run = {}
        mismatches: list[str] = []
        for name, argv in runs.items():
            if argv is None:
                report["runs"][name] = {"skipped": why}
                continue
            rows, outs = [], []
            for i in idx:
                got = run_program(directory, argv, list(data.samples[i]), shapes, work)
                outs.append(got)
                rows.append(compare(got, ref[i], names))
            outputs_by_run[name] = outs
            worst, sums = {}, {}
            for per in rows:
                for r in per:
                    w = worst.setdefault(r["output"], {"max_abs": 0.0, "max_rel": 0.0, "argmax_agreement": 0})
                    w["max_abs"] = max(w["max_abs"], r.get("max_abs", float("inf")))
                    w["max_rel"] = max(w["max_rel"], r.get("max_rel", float("inf")))
                    w["argmax_agreement"] += int(r.get("argmax_equal", False))
                    e = sums.setdefault(r["output"], [0.0, 0.0])
                    e[0] += r.get("err_sq", 0.0)
                    e[1] += r.get("ref_sq", 0.0)
                    if "shape_mismatch" in r:
                        w["shape_mismatches"] = w.get("shape_mismatches", 0) + 1
            for out_name, w in worst.items():
                w["argmax_agreement"] /= max(n, 1)
                w["rel_rms"] = _rel_rms(*sums[out_name])
            mismatches += [f"{name}: {m}" for m in verdict(worst, noise)]
            within = all(w["within_tolerance"] for w in worst.values())
            report["runs"][name] = {"outputs": worst, "within_tolerance": within}
        report["outputs_agree"] = not mismatches
        report["mismatches"] = mismatches
        if "host" in outputs_by_run and len(outputs_by_run) > 1:
            libm = libm_calls(directory)
            for name, outs in outputs_by_run.items():
                if name != "host":
                    same = all(all(np.array_equal(a, b) for a, b in zip(x, y)) for x, y in zip(outs, outputs_by_run["host"]))
                    report["runs"][name]["bit_exact_with_host"] = same
                    if not same:
                        d = host_difference(outs, outputs_by_run["host"], libm)
                        report["runs"][name]["host_difference"] = d
                        if not d["explained"]:
                            report["mismatches"].append(f"{name}: differs from the host build ({d['text']})")
                            report["outputs_agree"] = False
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
        return json.loads(json.dumps(report))
    finally:
        if work is not None:  # (the runs' inputs and outputs, whether the build ended well or not)
            shutil.rmtree(work, ignore_errors=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
