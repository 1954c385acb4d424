"""How a program's outputs are held against the simulation (``npukit.codegen.build``).

The verdict on each output is its relative RMS difference from the simulation over the samples run,
``||program - simulation|| / ||simulation||``, held against a tolerance: ``REL_RMS_FLOOR``, or
``NOISE_FACTOR`` times the simulation's own distance from the float model (the same norm over the
same samples) when that is larger, and at most ``REL_RMS_CAP``.  The program applies the same quantization grids as the
simulation, but a value on a rounding boundary may round the other way in integer arithmetic, and
such a step travels through the layers after it like quantization noise; so a program can be as far
from the simulation as the quantization moves the simulation from the float model, and not much
further.  An output that is not written, or holds another tensor, is off by about its own size
(a relative RMS of 1 when it is all zeros): the cap keeps the check able to fail at every width (at
int2 the simulation is so far from the float model that twice its distance reached 1.0-3.7 on the
digits models and the detector, and a program writing zeros passed).  On the bundled samples under
riscv-accel at int2 / int4 / int8 (42 builds of 54 outputs, both policies) the largest difference
was 0.24, a detector's boxes after NMS selected another row; most were bit-exact.  ``outputs_agree`` is False, and ``mismatches`` says
which, when any output of any run is beyond its tolerance or has another shape.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

REL_RMS_FLOOR = 0.02  # the least tolerance of an output's relative RMS difference from the simulation
NOISE_FACTOR = 2.0  # ... or this many times the simulation's own relative RMS distance from the float model
REL_RMS_CAP = 0.5  # ... but never more: an output of zeros (1) or of another tensor (about 1 or more) always fails


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
        tol = min(max(REL_RMS_FLOOR, NOISE_FACTOR * noise.get(name, 0.0)), REL_RMS_CAP)
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
