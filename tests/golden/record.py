"""Record (or check) golden figures: every sample model on every bundled profile where it imports.

For each (model, profile) the recorder builds a Study and records, under the default config and a
few edits (a support toggle, a pin, a bit-width per processor and per layer), everything a user
sees: placement (processor, partition, reason, every processor's verdict), per-op costs,
boundaries, the timeline, the totals and the numeric error.  The files live in
``tests/golden/<model>__<soc>.json.gz``; ``tests/test_golden.py`` compares a fresh run with them.

    python tests/golden/record.py            # rewrite the golden files (after a deliberate change)
    python tests/golden/record.py --check    # compare, print the differences, exit 1 on any

The edits are chosen from the model and the profile, not hard-coded, so the same recipe works on
every pair: disable the kind of the first offloaded op on its processor; pin the first offloaded
op to the host; set the first accelerator (with an offloaded op) to its narrowest other width;
set the first offloaded op's layer to the widest width its processor runs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SAMPLES = ROOT / "sample_models"
MODELS = (
    "digits_cnn.onnx", "digits_cnn.pt2", "digits_cnn_float.tflite", "digits_cnn_int8.tflite",
    "tiny_detector.onnx", "mobilenet_v1_025_int8.tflite", "transformer_encoder.onnx",
)  # fmt: skip
# the numeric error needs the compiled simulation; the transformer's takes minutes to build on 2 cores
ERROR_MODELS = frozenset(MODELS) - {"transformer_encoder.onnx"}
# the policy every recorded run starts from: the profile's preference order (the behaviour the
# pipeline redesign had to keep); the cost policy is checked by tests/test_placement.py
BASE = {"placement": "first-fit"}
# the transformer's tables are large: record its default config and one edit
FEW_EDITS = frozenset({"transformer_encoder.onnx"})


def _num(x):
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        return _num(x.item())
    if isinstance(x, dict):
        return {str(k): _num(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [_num(v) for v in x]
    return x


def _frame(df, cols=None) -> dict:
    cols = list(cols or df.columns)
    return {"columns": cols, "rows": [[_num(v) for v in row] for row in df[cols].itertuples(index=False, name=None)]}


def snapshot(study, error: bool) -> dict:
    import pandas as pd  # noqa: F401

    out = {
        "config": study.config.to_dict(),
        "placement": _frame(study.placement, ["op_id", "name", "op", "processor", "partition", "reason", "pattern",
                                              *study.soc.names]),
        "costs": _frame(study.costs, ["op_id", "processor", "bits", "macs", "bytes", "compute_cycles",
                                      "memory_cycles", "cycles", "latency_us", "energy_uj", "vector_ops",
                                      "dram_bytes"]),
        "boundaries": _frame(study.boundaries, ["tensor", "src", "dst", "bytes", "transfer_us", "layout_us",
                                                "quantize_us", "energy_uj", "conversion"]),
        "timeline": _frame(study.timeline, ["lane", "item", "start_us", "end_us", "kind", "op_id"]),
        "totals": _num({k: v for k, v in study.totals.items() if k != "memory"}),  # the estimate's figures; memory is codegen's
    }
    if error:
        try:
            err = study.error
            d = study.error_dict()
        except Exception as e:  # noqa: BLE001 - a crash is a recorded behaviour too (and a bug to fix)
            out["error_exception"] = f"{type(e).__name__}: {e}"
        else:
            out["error"] = _frame(err, ["op_id", "bits", "snr_db", "max_abs_err"])
            out["error_outputs"] = _num({k: d[k] for k in ("outputs", "accuracy", "accuracy_fp32", "samples")})
    return out


def edits(study) -> list[tuple[str, tuple]]:
    """(label, (method, args, kwargs)) edits chosen from the study's own default plan."""
    plan = study.plan
    soc = study.soc
    off = [i for i, p in enumerate(plan.processor) if p != soc.host]
    out = []
    if off:
        i = off[0]
        op = study.graph.ops[i]
        proc = plan.processor[i]
        out.append((f"disable {proc}:{op.kind}", ("set_support", (proc, op.kind, False), {})))
        out.append((f"pin #{i} -> {soc.host}", ("pin", (i, soc.host), {})))
        bits = soc.processor(proc).bits
        other = [b for b in bits if b != soc.processor(proc).default_bits]
        if other:
            out.append((f"bits {proc}={other[0]}", ("set_bits", (other[0],), {"processor": proc})))
        out.append((f"layer #{i} = {bits[-1]}", ("set_bits", (bits[-1],), {"layer": i})))
    return out


def record_pair(model: str, soc: str) -> dict | None:
    import npukit

    try:
        study = npukit.Study(SAMPLES / model, soc, BASE)
    except npukit.NpukitError as e:
        return {"model": model, "soc": soc, "error": str(e)}
    error = model in ERROR_MODELS
    doc = {"model": model, "soc": soc, "runs": {"default": snapshot(study, error)}}
    todo = edits(study)
    if model in FEW_EDITS:
        todo = todo[:1]
    for label, (meth, args, kw) in todo:
        s = npukit.Study(SAMPLES / model, soc, BASE)
        try:
            getattr(s, meth)(*args, **kw)
        except npukit.NpukitError as e:
            doc["runs"][label] = {"refused": str(e)}
            continue
        doc["runs"][label] = snapshot(s, error)
    return doc


def path_of(model: str, soc: str) -> Path:
    return HERE / f"{model.replace('.', '_')}__{soc}.json.gz"


def load(model: str, soc: str) -> dict:
    with gzip.open(path_of(model, soc), "rt", encoding="utf-8") as f:
        return json.load(f)


def _close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return a == b


def diff(old, new, path: str = "", out: list | None = None, limit: int = 40) -> list[str]:
    """Human-readable differences between two recorded documents (figures equal to 1e-9 relative)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new)):
            if k not in old or k not in new:
                out.append(f"{path}.{k}: {'added' if k not in old else 'removed'}")
            else:
                diff(old[k], new[k], f"{path}.{k}", out, limit)
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            out.append(f"{path}: length {len(old)} -> {len(new)}")
        for i, (a, b) in enumerate(zip(old, new)):
            diff(a, b, f"{path}[{i}]", out, limit)
    elif not _close(old, new):
        out.append(f"{path}: {old!r} -> {new!r}")
    return out


def pairs(models=MODELS):
    from npukit.soc import bundled

    return [(m, s) for m in models for s in sorted(bundled())]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--model", action="append", help="only these sample files")
    a = ap.parse_args(argv)
    bad = 0
    for model, soc in pairs(tuple(a.model) if a.model else MODELS):
        t0 = time.perf_counter()
        doc = record_pair(model, soc)
        dt = time.perf_counter() - t0
        if a.check:
            d = diff(load(model, soc), doc)
            bad += bool(d)
            print(f"{model} on {soc}: {'OK' if not d else f'{len(d)}+ differences'} ({dt:.1f} s)")
            for line in d:
                print("   ", line)
        else:
            with gzip.GzipFile(path_of(model, soc), "wb", mtime=0) as f:
                f.write(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
            print(f"{model} on {soc}: recorded ({dt:.1f} s, {path_of(model, soc).stat().st_size:,} B)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
