"""What the commands print: names for a terminal table, tables, JSON without inf or nan."""

from __future__ import annotations

import math


def fmt_int(n) -> str:
    return f"{int(n):,}"


def show(s: str, n: int = 60, keep_end: bool = True) -> str:
    """A name for a terminal table: control characters escaped, long names shortened (model names
    keep their distinctive end, sentences their start)."""
    r = s.encode("unicode_escape").decode("ascii") if any(ord(c) < 32 or c == "\x7f" for c in s) else s
    if len(r) <= n:
        return r
    return "…" + r[-(n - 1):] if keep_end else r[: n - 1] + "…"


def table(header, rows, right=()) -> None:
    """Columns as wide as their widest cell; the columns named in ``right`` (numbers) right-aligned."""
    cols = list(zip(*([header] + [[str(c) for c in r] for r in rows]))) if rows else [[h] for h in header]
    widths = [max(len(str(c)) for c in col) for col in cols]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)).rstrip())
    for r in rows:
        print("  ".join(str(c).rjust(w) if h in right else str(c).ljust(w) for h, c, w in zip(header, r, widths)).rstrip())


def records(df) -> list[dict]:
    out = []
    for rec in df.to_dict(orient="records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()})
    return out


def finite(o):
    """JSON has no inf / nan: non-finite numbers (an SNR of identical outputs is inf) become null."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [finite(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):
        return finite(o.item())
    return o


def jsonable(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)
