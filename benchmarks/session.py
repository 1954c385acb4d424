"""A long editing session (issue 14): random edits on one Study -- support toggles, pins, unpins,
processor and layer bit-widths, the placement policy, data sets, resets -- and after each checked
edit the Study's figures against the same config evaluated from scratch (every cache set aside).

    python benchmarks/session.py [--edits 10000] [--check-every 50] [--model PATH] [--soc NAME]
                                 [--error-every 1000] [--widget] [--seed 14]

Prints one JSON document: edits by kind, documented errors (NpukitError) by kind, other exceptions
(goal 0), mismatches against from-scratch (goal 0), the process's resident memory after the
warm-up and at the end (goal: growth under 50 MB), and per-edit times.  ``tests/test_session.py``
runs a short, seeded version with a check after every edit.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SAMPLES, emit, summary  # noqa: E402

import npukit  # noqa: E402
from npukit import pipeline  # noqa: E402
from npukit.errors import NpukitError  # noqa: E402
from npukit.soc import BITS  # noqa: E402

KINDS = ("support", "support", "pin", "pin", "unpin", "bits", "layer_bits", "placement", "data", "reset")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def snapshot(s) -> dict:
    """What a user sees of a Study, as plain comparable data."""
    return {
        "config": s.config.to_json(),
        "placement": s.placement.to_dict("list"),
        "costs": s.costs.to_dict("list"),
        "boundaries": s.boundaries.to_dict("list"),
        "timeline": s.timeline.to_dict("list"),
        "totals": json.loads(json.dumps(dict(s.totals), default=str)),
    }


def fresh_snapshot(s, error: bool) -> dict:
    """The same config and data from scratch: a new Study with every cache set aside."""
    with pipeline.from_scratch():
        f = npukit.Study(s.model, s.soc, s.config)
        if s.data is not None:
            f._data = s.data  # the same arrays; their digest keys every data-dependent result
        snap = snapshot(f)
        if error:
            snap["error"] = f.error.to_dict("list")
    return snap


def data_sets(s) -> list:
    """(x, y) pairs: the model's own data and a smaller slice of it."""
    d = s.data
    n_in = len(s.graph.inputs)
    out = []
    for n in (len(d.samples), max(1, len(d.samples) // 3)):
        rows = d.samples[:n]
        x = [np.stack([r[j] for r in rows]) for j in range(n_in)]
        y = None if d.labels is None else np.asarray(d.labels)[:n]
        out.append((x[0] if n_in == 1 else x, y))
    return out


class Session:
    def __init__(self, model, soc: str, seed: int, widget: bool = False):
        self.s = npukit.Study(model, soc)
        self.rng = random.Random(seed)
        self.widget = None
        if widget:
            from npukit.ui import StudyWidget

            self.widget = StudyWidget(self.s)
            self.widget.comm.send = lambda *a, **k: None  # no front end: the messages go nowhere
        g = self.s.graph
        self.names = sorted({op.name for op in g.ops if op.name})
        self.kinds = sorted({op.kind for op in g.ops})
        self.accels = list(self.s.soc.accelerators)
        self.procs = list(self.s.soc.names)
        self.data = data_sets(self.s)
        self.counts: dict[str, int] = {}
        self.documented: dict[str, int] = {}
        self.other: list[str] = []

    def node(self):
        r = self.rng
        return r.randrange(len(self.s.graph.ops)) if r.random() < 0.3 else r.choice(self.names)

    def edit(self) -> str:
        r, s = self.rng, self.s
        kind = r.choice(KINDS)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        try:
            if kind == "support":
                s.set_support(r.choice(self.accels), r.choice(self.kinds), r.random() < 0.5)
            elif kind == "pin":
                s.pin(self.node(), r.choice(self.procs))
            elif kind == "unpin":
                pins = [k for k, _ in s.config.pins]
                s.unpin(r.choice(pins) if pins and r.random() < 0.8 else self.node())
            elif kind == "bits":
                s.set_bits(r.choice((None, *BITS)), processor=r.choice(self.procs))
            elif kind == "layer_bits":
                s.set_bits(r.choice((None, *BITS)), layer=self.node())
            elif kind == "placement":
                s.set_placement(r.choice(("cost", "first-fit")))
            elif kind == "data":
                x, y = r.choice(self.data)
                s.set_data(x, y)
            else:
                s.reset()
            s.totals  # noqa: B018 - evaluate the edit as a notebook cell would
        except NpukitError:
            self.documented[kind] = self.documented.get(kind, 0) + 1
        except Exception as e:  # noqa: BLE001 - counted: the goal is none
            self.other.append(f"{kind}: {type(e).__name__}: {e}")
        return kind


def run(model=None, soc: str = "arm-dsp-dla", edits: int = 200, check_every: int = 1, error_every: int = 0,
        widget: bool = False, seed: int = 14, warmup: int | None = None) -> dict:
    """``edits`` random edits; every ``check_every``-th (0: none) compared with from scratch, every
    ``error_every``-th (0: none) also measuring the error; memory growth from edit ``warmup``."""
    model = model or SAMPLES / "digits_cnn.onnx"
    ses = Session(model, soc, seed, widget)
    warmup = max(1, edits // 10) if warmup is None else warmup
    times, mismatches = [], []
    rss0 = None
    for k in range(1, edits + 1):
        t = time.perf_counter()
        kind = ses.edit()
        times.append(time.perf_counter() - t)
        err = bool(error_every) and k % error_every == 0
        if err:  # the user measures the error now and then
            my_error = ses.s.error.to_dict("list")
        if k == warmup:
            rss0 = rss_mb()
        if check_every and k % check_every == 0:
            mine = snapshot(ses.s)
            if err:
                mine["error"] = my_error
            if ses.widget is not None:
                shown = ses.widget.values.get("totals")
                if shown != json.loads(json.dumps(ses.widget._study.totals, default=str)):
                    mismatches.append(f"edit {k} ({kind}): the widget shows other totals")
            theirs = fresh_snapshot(ses.s, err)
            for part in mine:
                if mine[part] != theirs[part]:
                    mismatches.append(f"edit {k} ({kind}, config {mine['config']}): {part} differs from scratch")
    return {
        "model": Path(str(model)).name,
        "soc": soc,
        "edits": edits,
        "by_kind": dict(sorted(ses.counts.items())),
        "documented_errors": dict(sorted(ses.documented.items())),
        "other_exceptions": ses.other[:20],
        "n_other_exceptions": len(ses.other),
        "checked": edits // check_every if check_every else 0,
        "mismatches": mismatches[:20],
        "n_mismatches": len(mismatches),
        "rss_after_warmup_mb": round(rss0 or 0.0, 1),
        "rss_end_mb": round(rss_mb(), 1),
        "rss_growth_mb": round(rss_mb() - (rss0 or 0.0), 1),
        "edit_ms": summary(times),
        "widget": widget,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(SAMPLES / "digits_cnn.onnx"))
    ap.add_argument("--soc", default="arm-dsp-dla")
    ap.add_argument("--edits", type=int, default=10_000)
    ap.add_argument("--check-every", type=int, default=50)
    ap.add_argument("--error-every", type=int, default=1000)
    ap.add_argument("--widget", action="store_true")
    ap.add_argument("--seed", type=int, default=14)
    a = ap.parse_args(argv)
    emit(run(a.model, a.soc, a.edits, a.check_every, a.error_every, a.widget, a.seed))


if __name__ == "__main__":
    main()
