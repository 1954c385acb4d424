"""Build an exported project and run it on the study's data: its outputs against npukit's own
simulation of the same config, and its memory against the profile (``study.build()``,
``npukit build DIR``).

The verdict on each output is its relative RMS difference from the simulation over the samples run,
``||program - simulation|| / ||simulation||``, held against a tolerance: ``REL_RMS_FLOOR``, or
``NOISE_FACTOR`` times the simulation's own distance from the float model (the same norm over the
same samples) when that is larger.  The program applies the same quantization grids as the
simulation, but a value on a rounding boundary may round the other way in integer arithmetic, and
such a step travels through the layers after it like quantization noise; so a program can be as far
from the simulation as the quantization moves the simulation from the float model, and not much
further.  An output that is not written, or holds another tensor, is off by about its own size
(a relative RMS of 1 when it is all zeros).  ``outputs_agree`` is False, and ``mismatches`` says
which, when any output of any run is beyond its tolerance or has another shape.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
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


REL_RMS_FLOOR = 0.02  # the least tolerance of an output's relative RMS difference from the simulation
NOISE_FACTOR = 2.0  # ... or this many times the simulation's own relative RMS distance from the float model


def _selected(x: np.ndarray) -> int:
    """The rows of an output whose rows depend on the data (NMS's selected indices) that hold data:
    the program writes its static row count, the rows past the selected ones -1."""
    pad = np.all(x.reshape(x.shape[0], -1) == -1, axis=1) if x.ndim and x.shape[0] else np.zeros(0, bool)
    n = int(np.argmax(pad)) if pad.any() else x.shape[0] if x.ndim else 0
    return n if pad[n:].all() else x.shape[0]


def _rows(x: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` rows of ``x``, rows of -1 (none selected) after its own."""
    if x.shape[0] >= n:
        return x[:n]
    return np.concatenate([x, np.full((n - x.shape[0], *x.shape[1:]), -1, x.dtype)])


def _aligned(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``a`` (the program's) and ``b`` (the reference's) as arrays of one shape, or None.  An output
    whose rows depend on the data (NMS's) is compared on the rows either selected, a row the other
    did not select being -1 there: a row selected beyond the reference's, or one missing, counts as
    an error (it was cut off: only the rows both had were compared)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape and a.ndim == b.ndim and a.ndim and a.shape[1:] == b.shape[1:]:
        n = max(_selected(a), _selected(b))
        a, b = _rows(a, n), _rows(b, n)
    elif a.size == b.size:
        b = b.reshape(a.shape)
    return (a, b) if a.shape == b.shape else None


def _diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in float64, 0 where both are the same infinity or both NaN."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):
        d = np.abs(a - b)
    return np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, d)


def _sq(x: np.ndarray) -> float:
    x = x.astype(np.float64)
    return float(np.sum(np.square(x[np.isfinite(x)])))


def compare(got: list[np.ndarray], ref: list[np.ndarray], names: list[str]) -> list[dict]:
    """Per output: max abs error and max relative error (to the reference's largest magnitude),
    and the sums of squares of the error and of the reference (``err_sq``, ``ref_sq``: the
    relative RMS over samples); an output whose rows depend on the data (NMS) is compared on the
    rows both have."""
    rows = []
    for k, (a, b) in enumerate(zip(got, ref)):
        pair = _aligned(a, b)
        if pair is None:
            rows.append({"output": names[k], "shape_mismatch": [list(np.shape(a)), list(np.shape(b))]})
            continue
        a, b = pair
        diff = _diff(a, b)
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        rows.append({"output": names[k], "max_abs": float(diff.max()) if diff.size else 0.0,
                     "max_rel": float(diff.max() / scale) if diff.size and scale else 0.0,
                     "argmax_equal": bool(a.size and np.argmax(a) == np.argmax(b)),
                     "err_sq": float(np.sum(np.square(diff))), "ref_sq": _sq(b)})  # fmt: skip
    return rows


# the C library's transcendental functions: each C library rounds them its own way (glibc on x86-64
# and on aarch64, newlib on a Cortex-M), so fp32 host code calling them agrees across targets only
# to within an ulp or so, which later ops carry on
_LIBM = re.compile(r"\b(erff?|expf?|exp2f?|expm1f?|logf?|log2f?|log10f?|log1pf?|tanhf?|sinhf?|coshf?|sinf?|cosf?|tanf?"
                   r"|asinf?|acosf?|atanf?|atan2f?|powf?|cbrtf?|erfcf?)\(")  # fmt: skip
HOST_DIFFERENCE_REL = 1e-5  # a difference libm explains: this relative to the output's largest magnitude


def libm_calls(directory: Path) -> list[str]:
    """The C library's transcendental functions the host code calls (sorted)."""
    found: set[str] = set()
    for f in sorted((Path(directory) / "host").glob("*.c")):
        found.update(_LIBM.findall(f.read_text(encoding="utf-8", errors="replace")))
    return sorted(found)


def _ordered(a: np.ndarray) -> np.ndarray:
    """float32 values as integers ordered like the floats (ulp steps apart)."""
    i = np.ascontiguousarray(a, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def host_difference(outs, host, libm: list[str]) -> dict:
    """How a target build's outputs differ from the host build's: the largest difference in ulps
    and relative to the output's magnitude, and whether the host code's calls into the C library
    explain it (float outputs only, within ``HOST_DIFFERENCE_REL``)."""
    ulp, rel, ints = 0, 0.0, False
    for x, y in zip(outs, host):
        for a, b in zip(x, y):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape:
                return {"explained": False, "max_ulp": None, "max_rel": None, "libm": libm, "text": "output shapes differ"}
            if np.array_equal(a, b):
                continue
            if a.dtype.kind != "f" or b.dtype.kind != "f":
                ints = True
                continue
            fa, fb = a.astype(np.float32), b.astype(np.float32)
            if np.isnan(fa).any() or np.isnan(fb).any():
                if not np.array_equal(np.isnan(fa), np.isnan(fb)):
                    ints = True  # (NaNs where the other has numbers: not rounding)
                ok = ~(np.isnan(fa) | np.isnan(fb))
                fa, fb = fa[ok], fb[ok]
            if fa.size:
                ulp = max(ulp, int(np.abs(_ordered(fa) - _ordered(fb)).max()))
                scale = float(max(np.abs(fb).max(), np.finfo(np.float32).tiny))
                rel = max(rel, float(np.abs(fa.astype(np.float64) - fb).max()) / scale)
    explained = bool(libm) and not ints and rel <= HOST_DIFFERENCE_REL
    text = "integer outputs differ" if ints else f"{ulp} ulp at most, {rel:.3g} of the output's magnitude"
    why = (f"the host code calls {', '.join(libm)} from each target's C library, which round alike only to an ulp"
           if explained else "")  # fmt: skip
    return {"explained": explained, "max_ulp": ulp, "max_rel": rel, "libm": libm,
            "text": f"{text}; {why}" if why else text, "why": why}  # fmt: skip


def _rel_rms(err_sq: float, ref_sq: float) -> float:
    if not err_sq:
        return 0.0
    return math.sqrt(err_sq / ref_sq) if ref_sq else math.inf


def output_names(g) -> list[str]:
    """The names the report gives the model's outputs: the model's own output names, made unique
    with ``#k``, its index, where a model repeats one (an output listed twice)."""
    names, seen = [], set()
    for k in range(len(g.outputs)):
        name = g.output_name(k)
        names.append(f"{name}#{k}" if name in seen else name)
        seen.add(name)
    return names


def float_noise(ref: list[list[np.ndarray]], fp32: list[list[np.ndarray]], names: list[str]) -> dict[str, float]:
    """Per output: the simulation's relative RMS distance from the float model over the samples."""
    out = {}
    for k, name in enumerate(names):
        err = tot = 0.0
        for r, f in zip(ref, fp32):
            pair = _aligned(f[k], r[k])
            if pair is not None:
                err += float(np.sum(np.square(_diff(*pair))))
                tot += _sq(pair[1])
        rel = _rel_rms(err, tot)
        out[name] = rel if math.isfinite(rel) else 0.0  # a simulation of zeros: the floor alone
    return out


def verdict(outputs: dict[str, dict], noise: dict[str, float]) -> list[str]:
    """Fill each output's ``rel_rms`` / ``tolerance`` / ``within_tolerance`` (see the module
    docstring); the words for those beyond it."""
    bad = []
    for name, o in outputs.items():
        tol = max(REL_RMS_FLOOR, NOISE_FACTOR * noise.get(name, 0.0))
        o["tolerance"] = tol
        if o.get("shape_mismatches"):
            o["within_tolerance"] = False
            bad.append(f"output {name!r}: another shape than the simulation's on {o['shape_mismatches']} samples")
            continue
        o["within_tolerance"] = bool(o["rel_rms"] <= tol)
        if not o["within_tolerance"]:
            bad.append(f"output {name!r}: relative RMS difference {o['rel_rms']:.3g} from the simulation "
                       f"(max abs {o['max_abs']:.3g}), tolerance {tol:.3g}")  # fmt: skip
    return bad


def study_of_export(directory):
    """The Study an export was generated from (its manifest names the model, profile and config)."""
    from .. import pipeline as pl  # noqa: PLC0415
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
        shutil.rmtree(work, ignore_errors=True)
        return json.loads(json.dumps(report))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
