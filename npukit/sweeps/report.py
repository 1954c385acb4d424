"""Sweep figures and the sweep's HTML report: one self-contained file (plotly's basic bundle inline,
no network at view time) with the Pareto views and the table."""

from __future__ import annotations

import html
from pathlib import Path

from .pareto import objectives_of, pareto_mask

FIXED = ("index", "config_id", "config", "failure", "pareto")
POINT, FRONT = "#9aa3ad", "#E45756"


def _keys(df) -> list[str]:
    """The grid's columns: those between config_id and config."""
    cols = list(df.columns)
    if "config_id" in cols and "config" in cols:
        return cols[cols.index("config_id") + 1: cols.index("config")]
    return []


def _hover(df, x: str, y: str) -> list[str]:
    keys = _keys(df)
    out = []
    for r in df.itertuples(index=False):
        rd = dict(zip(df.columns, r))
        lines = [f"<b>#{rd['index']}</b>"] + [f"{html.escape(k)} = {html.escape(str(rd[k]))}" for k in keys]
        lines += [f"{x} = {rd[x]:.6g}", f"{y} = {rd[y]:.6g}"]
        out.append("<br>".join(lines))
    return out


def pareto_figure(df, x: str = "latency_us", y: str = "energy_uj", objectives=None, title: str | None = None):
    """A plotly scatter of ``y`` against ``x``: every configuration in grey, the Pareto set (of
    ``objectives``, default latency, energy and error where present) marked; hover shows the
    configuration."""
    import plotly.graph_objects as go  # noqa: PLC0415

    ok = df[df["failure"].isna()] if "failure" in df.columns else df
    ok = ok[ok[x].notna() & ok[y].notna()]
    mask = pareto_mask(df, objectives).loc[ok.index] if len(ok) else ok.index == ok.index
    fig = go.Figure()
    for sub, name, color, size in ((ok[~mask], "configurations", POINT, 7), (ok[mask], "Pareto set", FRONT, 11)):
        fig.add_trace(go.Scatter(
            x=sub[x], y=sub[y], mode="markers", name=f"{name} ({len(sub)})",
            marker=dict(color=color, size=size, line=dict(width=1, color="#333" if name == "Pareto set" else color)),
            hovertext=_hover(sub, x, y), hoverinfo="text",
        ))  # fmt: skip
    objs = ", ".join(("max " if mx else "") + c for c, mx in objectives_of(df, objectives))
    fig.update_layout(title=title or f"{y} vs {x} (Pareto set of {objs})", xaxis_title=x, yaxis_title=y,
                      height=480, margin=dict(l=60, r=20, t=90, b=50), hovermode="closest",
                      title_y=0.97, legend=dict(orientation="h", y=1.01, yanchor="bottom", x=0))  # fmt: skip
    return fig


def views(df, objectives=None) -> list:
    """The report's figures: latency vs energy, and latency vs accuracy (or vs error) when measured."""
    figs = [pareto_figure(df, "latency_us", "energy_uj", objectives)]
    for col in ("accuracy", "error"):
        if col in df.columns and df[col].notna().any():
            figs.append(pareto_figure(df, "latency_us", col, objectives))
            break
    return figs


def _plotly_js() -> str:
    return (Path(__file__).resolve().parent.parent / "ui" / "static" / "plotly-basic.min.js").read_text(encoding="utf-8")


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _table(df, max_rows: int) -> str:
    cols = [c for c in df.columns if c not in ("config_id", "config")]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = []
    for r in df.head(max_rows).itertuples(index=False):
        rd = dict(zip(df.columns, r))
        cls = " class='p'" if rd.get("pareto") else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_fmt(rd[c]))}</td>" for c in cols) + "</tr>")
    more = f"<p>{len(df) - max_rows:,} more rows in the Parquet file.</p>" if len(df) > max_rows else ""
    return f"<table class='t'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def sweep_report_html(df, title: str = "npukit sweep", objectives=None, max_rows: int = 2000) -> str:
    """The report page (see the module docstring)."""
    import plotly.io as pio  # noqa: PLC0415

    df = df.copy()
    df["pareto"] = pareto_mask(df, objectives)
    n_fail = int(df["failure"].notna().sum()) if "failure" in df.columns else 0
    objs = ", ".join(("max " if mx else "min ") + c for c, mx in objectives_of(df, objectives))
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>", f"<title>{e(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:24px;max-width:1500px}table.t{border-collapse:collapse;"
        "font-size:12px}table.t td,table.t th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right;"
        "white-space:nowrap}table.t th{position:sticky;top:0;background:#fff}tr.p{background:#fde8e8}"
        ".fig{min-height:480px}</style>",
        f"<script>{_plotly_js()}</script>", "</head><body>", f"<h1>{e(title)}</h1>",
        f"<p>{len(df):,} configurations, {n_fail:,} failed, <b>{int(df['pareto'].sum()):,} in the Pareto set</b> "
        f"({e(objs)}).</p>",
    ]  # fmt: skip
    scripts = []
    for k, fig in enumerate(views(df, objectives)):
        parts.append(f"<div class='fig' id='view{k}'></div>")
        scripts.append(f"(function(f){{Plotly.newPlot('view{k}', f.data, f.layout, {{responsive: true}});}})"
                       f"({pio.to_json(fig, validate=False)});")  # fmt: skip
    front = df[df["pareto"]]
    parts += ["<h2>Pareto set</h2>", _table(front, max_rows), "<h2>all configurations</h2>", _table(df, max_rows)]
    parts += [f"<script>{''.join(scripts)}</script>", "</body></html>"]
    return "\n".join(parts)


def write_sweep_report(df, path, title: str = "npukit sweep", objectives=None) -> Path:
    """Write the sweep report to ``path`` (atomically); returns the path."""
    from ..io import atomic_write_text  # noqa: PLC0415

    p = Path(path)
    atomic_write_text(p, sweep_report_html(df, title, objectives))
    return p


__all__ = ["pareto_figure", "views", "sweep_report_html", "write_sweep_report"]
