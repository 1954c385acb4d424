"""The Code tab's data, as plain JSON (no widget, no tvm): the generated project's file tree, one
file's text, the lines that run each op (the manifest's ``calls`` -- the ``[op N]`` marker lines --
and the statement under each marker), the lines the last edit
changed (difflib against the previous version of the project), and a build report as a view.

The widget sends this only when the front end asks for it (the Code tab is open, a file or a node
was chosen): a project can be megabytes of C, and generating it can take seconds on a large model.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

MAX_TEXT = 1_000_000  # characters of one file sent to the front end; a longer one is cut at a line end
MAX_REMOVED = 40  # removed lines shown per place a deletion happened
MAX_REMOVED_TOTAL = 400  # and in all
MAX_DIFF_LINES = 8_000  # above this many differing lines (after the common ends) mark the block whole
DEFAULT_FILE = "src/model.c"  # the AOT entry point: what the tab opens first


def code_key(study) -> str:
    """What the generated code depends on besides the model and profile: the config and the data
    it is calibrated on (its arrays, and the source and path the manifest names).  The front end
    compares it with the key of the code it shows."""
    data = getattr(study, "_data", None)  # not loaded yet: the model's default data, loaded with the code
    text = study.config.to_json() + "\n" + (f"{data.key}\n{data.source}\n{data.path}" if data is not None else "default")
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def line_diff(old: str | None, new: str) -> dict[str, Any]:
    """The lines of ``new`` that are not in ``old`` (1-based line numbers) and where lines of ``old``
    were removed: ``removed`` is a list of ``[after, lines, more]`` -- the removed lines go after
    line ``after`` of ``new`` (0: before the first), ``more`` counts those not listed."""
    a = old.splitlines() if old else []
    b = new.splitlines()
    if old is None:
        return {"changed": [], "removed": [], "added_file": False}
    # the common ends first: an edit changes a few places, and SequenceMatcher is quadratic at worst
    lo = 0
    n = min(len(a), len(b))
    while lo < n and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < n - lo and a[len(a) - 1 - hi] == b[len(b) - 1 - hi]:
        hi += 1
    a_mid, b_mid = a[lo : len(a) - hi], b[lo : len(b) - hi]
    if len(a_mid) + len(b_mid) > MAX_DIFF_LINES:
        ops = [("replace", 0, len(a_mid), 0, len(b_mid))]
    else:
        ops = difflib.SequenceMatcher(None, a_mid, b_mid, autojunk=False).get_opcodes()
    changed: list[int] = []
    removed: list[list] = []
    budget = MAX_REMOVED_TOTAL
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        changed.extend(range(lo + j1 + 1, lo + j2 + 1))
        if i2 > i1:
            keep = max(0, min(i2 - i1, MAX_REMOVED, budget))
            budget -= keep
            removed.append([lo + j1, a_mid[i1 : i1 + keep], (i2 - i1) - keep])
    return {"changed": changed, "removed": removed, "added_file": False}


def statement_after(lines: list[str], n: int) -> range:
    """The lines of the statement that a marker comment on line ``n`` (1-based, a line that is only
    a ``/* ... */`` comment, like the manifest's ``[op N]`` lines) stands above: the kernel call or
    its parameters, with any plain comment between.  Empty when the marker is not a comment line of
    its own."""
    text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
    if not (text.startswith("/*") and text.endswith("*/")):
        return range(0)
    for k in range(n + 1, min(len(lines), n + 12) + 1):
        s = lines[k - 1].strip()
        if s.startswith("/*") and s.endswith("*/") and "[op" not in s:
            continue  # a plain comment between the marker and its statement
        if not s or s.startswith(("/*", "//", "#", "}")):
            return range(0)
        if s.endswith((";", "{")):
            return range(n + 1, k + 1)
    return range(0)


def _lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _cut(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_TEXT:
        return text, False
    end = text.rfind("\n", 0, MAX_TEXT)
    return text[: end + 1 if end > 0 else MAX_TEXT], True


class CodeState:
    """What one widget has shown of the generated code: the project files as of the last view and
    the version before that (the one the changed lines are marked against)."""

    def __init__(self) -> None:
        self.current: Mapping[str, str] | None = None
        self.previous: Mapping[str, str] | None = None
        self.path: str | None = None
        self._places: tuple | None = None  # (files, calls, where) of the last project

    def view(self, study, path: str | None = None, follow: int | None = None) -> dict[str, Any]:
        """The Code tab's data for the Study's current code: ``path`` is the file asked for;
        ``follow`` an op id whose call the tab should show (its file wins over ``path``)."""
        proj = study.project
        files = proj.files
        if self.current is None:
            self.current = files
        elif files is not self.current and dict(files) != dict(self.current):
            self.previous, self.current = self.current, files
        prev = self.previous
        paths = sorted(files)
        n_ops = len(study.graph.ops)
        if self._places is None or self._places[0] is not files:  # once per generated project
            ops = [o for o in proj.manifest.get("ops", []) if 0 <= o["op_id"] < n_ops]
            self._places = (files, *op_places(files, paths, ops, n_ops))
        _, calls, where = self._places
        chosen = None
        if isinstance(follow, int) and 0 <= follow < n_ops and calls[follow]:
            chosen = paths[calls[follow][0]]
        if chosen is None:
            for cand in (path, self.path, DEFAULT_FILE):
                if cand in files:
                    chosen = cand
                    break
        if chosen is None:
            chosen = paths[0]
        self.path = chosen
        text = files[chosen]
        shown, truncated = _cut(text)
        if prev is None:
            diff = line_diff(None, text)
        elif chosen not in prev:
            diff = {"changed": list(range(1, _lines(text) + 1)), "removed": [], "added_file": True}
        else:
            diff = line_diff(prev[chosen], text)
        return {
            "key": code_key(study),
            "paths": paths,
            "tree": file_tree(files, prev),
            "path": chosen,
            "text": shown,
            "lines": _lines(text),
            "bytes": len(text.encode()),
            "truncated": truncated,
            "diff": prev is not None,
            "changed": diff["changed"],
            "removed": diff["removed"],
            "added_file": diff["added_file"],
            "calls": calls,
            "where": where,
            "target": target_info(proj),
        }


def op_places(files: Mapping[str, str], paths: list[str], ops: list[dict], n_ops: int) -> tuple[list, list]:
    """Per op: ``calls``, the lines that run it as a flat ``[file index, line, ...]`` (the manifest's
    marker lines and the statement under each), and ``where``, ``[file index, line, function]`` of
    the function that holds it (the wrapper or the host function; index -1 when not in the project)."""
    index = {p: i for i, p in enumerate(paths)}
    split: dict[str, list[str]] = {}

    def lines_of(f: str) -> list[str]:
        if f not in split:
            split[f] = files[f].splitlines()
        return split[f]

    calls: list[list[int]] = [[] for _ in range(n_ops)]
    where: list[list] = [[-1, 0, ""] for _ in range(n_ops)]
    defs: dict[str, dict[str, int]] = {}
    for o in sorted(ops, key=lambda o: o["op_id"]):
        flat = calls[o["op_id"]]
        seen: set[tuple[int, int]] = set()
        for f, line in o.get("calls", []):
            if f not in index:
                continue
            for n in (int(line), *statement_after(lines_of(f), int(line))):
                if (index[f], n) not in seen:
                    seen.add((index[f], n))
                    flat.extend((index[f], n))
        f, fn = str(o.get("file", "")), str(o.get("function", ""))
        if f in index and fn:
            if f not in defs:
                defs[f] = definitions(lines_of(f))
            where[o["op_id"]] = [index[f], defs[f].get(fn, 0), fn]
        else:
            where[o["op_id"]] = [-1, 0, fn]
    return calls, where


_DEF = re.compile(r"^[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(")


def definitions(lines: list[str]) -> dict[str, int]:
    """C function name -> the line (1-based) that defines it: the first line at column 0 that opens
    a function's parameters and is not a declaration ending in ';'."""
    out: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        m = _DEF.match(line)
        if m and not line.rstrip().endswith(";") and m.group(1) not in out:
            out[m.group(1)] = n
    return out


def file_tree(files: Mapping[str, str], prev: Mapping[str, str] | None) -> list[dict]:
    """The project's files (sorted) with what the last edit did to each: added, changed, removed."""
    tree = []
    for p in sorted(files):
        change = "" if prev is None else "added" if p not in prev else "" if prev[p] == files[p] else "changed"
        tree.append({"path": p, "bytes": len(files[p].encode()), "lines": _lines(files[p]), "change": change})
    for p in sorted(set(prev or ()) - set(files)):
        tree.append({"path": p, "bytes": 0, "lines": 0, "change": "removed"})
    tree.sort(key=lambda e: e["path"])
    return tree


def target_info(proj) -> dict[str, Any]:
    """The profile's build target and whether its toolchain is installed here."""
    from ..codegen.targets import available, get_target  # noqa: PLC0415

    name = proj.manifest.get("target") or getattr(proj, "target", "host")
    try:
        tgt = get_target(name)
    except Exception as e:  # noqa: BLE001 - an unknown target shows as unavailable
        return {"name": str(name), "description": "", "separate": False, "available": False, "why": str(e)}
    separate = bool(tgt.program_suffix)
    ok, why = available(tgt) if separate else (True, "")
    return {
        "name": tgt.name,
        "description": tgt.description,
        "separate": separate,
        "available": bool(ok),
        "why": why or "",
    }


# ---------------------------------------------------------------------------------------------
# build and run


MEMORY_LABELS = {
    "arena_bytes": "arena (working memory)",
    "lower_bound_bytes": "lower bound (live tensors at the peak)",
    "weight_bytes": "weights (constant memory)",
}


def _verdict(outputs: Mapping[str, Mapping]) -> tuple[str, str]:
    """(kind, words) for one run's outputs against the simulation."""
    if not outputs:
        return "differs", "no outputs"
    worst = max((o.get("max_abs", math.inf) for o in outputs.values()), default=math.inf)
    if worst == 0.0:
        return "exact", "bit-exact with the simulation"
    agree = min(o.get("argmax_agreement", 0.0) for o in outputs.values())
    rel = max(o.get("max_rel", math.inf) for o in outputs.values())
    within = [o["within_tolerance"] for o in outputs.values() if "within_tolerance" in o]  # study.build()'s verdict
    if agree == 1.0 and rel <= 0.01 and all(within):
        return "close", f"matches the simulation (same top-1, max error {rel:.2%} of the largest value)"
    if within and len(within) == len(outputs) and all(within):
        return "close", (f"within its tolerance of the simulation (top-1 agreement {agree:.0%}, max error {rel:.2%} "
                         "of the largest value)")  # fmt: skip
    return (
        "differs",
        f"differs from the simulation (top-1 agreement {agree:.0%}, max error {rel:.2%} of the largest value)",
    )


def _n(x):
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, (int, float)):
        return x if math.isfinite(x) else None
    return x


def build_view(report: Mapping[str, Any]) -> dict[str, Any]:
    """``study.build()``'s report as the rows the Code tab shows."""
    runs = []
    ok = True
    for name, r in report.get("runs", {}).items():
        if "skipped" in r:
            runs.append({"name": name, "kind": "skipped", "verdict": f"not run: {r['skipped']}", "outputs": []})
            continue
        kind, words = _verdict(r.get("outputs", {}))
        ok = ok and kind != "differs"
        row = {"name": name, "kind": kind, "verdict": words, "outputs": []}
        for out, o in r.get("outputs", {}).items():
            row["outputs"].append({"output": out, "max_abs": _n(o.get("max_abs")), "max_rel": _n(o.get("max_rel")),
                                   "argmax_agreement": _n(o.get("argmax_agreement"))})  # fmt: skip
        if "bit_exact_with_host" in r:
            same = bool(r["bit_exact_with_host"])
            d = r.get("host_difference") or {}
            row["host"] = ("bit-exact with the host build" if same else
                           f"within {d['max_ulp']} ulp of the host build (the C libraries' {', '.join(d['libm'])})"
                           if d.get("explained") else "DIFFERS from the host build")  # fmt: skip
            ok = ok and (same or bool(d.get("explained")))
        runs.append(row)
    mem = report.get("memory", {})
    memory = [[k, MEMORY_LABELS.get(k, k.removesuffix("_bytes").replace("_", " ")), _n(v)]
              for k, v in mem.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]  # fmt: skip
    sections = report.get("sections", {})
    secs = [[k, k, _n(v)] for k, v in sections.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    fit = fit_rows("", report.get("fit"))
    for name, r in report.get("runs", {}).items():
        fit += fit_rows(name, r.get("fit") if isinstance(r, Mapping) else None)
    skip = ("runs", "memory", "sections", "directory", "samples", "fit", "outputs_agree", "mismatches")
    extra = {k: v for k, v in report.items() if k not in skip}
    return {
        "state": "differs" if not ok else "over_budget" if any(row["over"] for row in fit) else "ok",
        "samples": report.get("samples"),
        "runs": runs,
        "memory": memory,
        "sections": secs,
        "sections_error": sections.get("error") if isinstance(sections, Mapping) else None,
        "fit": fit,
        "extra": _plain(extra),
    }


def fit_rows(run: str, fit) -> list[dict]:
    """A fit report (``codegen.memfit.fit_report``: ``flash_used`` / ``flash_bytes`` / ``flash_over``,
    the same for ``sram``) as one row per memory; an over-budget row says by how much."""
    if not isinstance(fit, Mapping):
        return []
    rows = []
    for mem in ("flash", "sram"):
        used, budget = fit.get(f"{mem}_used"), fit.get(f"{mem}_bytes")
        if not isinstance(used, int) or not isinstance(budget, int):
            continue
        over = bool(fit.get(f"{mem}_over", used > budget))
        pct = f"{100.0 * used / budget:.1f}%" if budget else "-"
        text = f"OVER by {used - budget:,} B" if over else f"{budget - used:,} B free"
        rows.append(
            {"run": run, "memory": mem, "used": used, "budget": budget, "over": over, "text": f"{pct} · {text}"}
        )
    return rows


def _plain(x):
    """JSON-safe nested data (non-finite floats become None)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    return str(x)
