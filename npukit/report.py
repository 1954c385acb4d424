"""Figures and the standalone HTML report (plotly is bundled in the page: no CDN at view time)."""

from __future__ import annotations

import html
from pathlib import Path

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC")
LINK_COLOR = "#7f7f7f"


def processor_colors(soc) -> dict[str, str]:
    """One stable colour per processor (profile order), grey for links."""
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(soc.names)}


def timeline_figure(study):
    """A plotly Gantt chart: one lane per processor (its ops in its colour, named in the legend) and one
    per route of the links (``dla -> arm``), conversions hatched on the processor that runs them."""
    import plotly.graph_objects as go  # noqa: PLC0415

    tl = study.timeline
    colors = processor_colors(study.soc)
    routes = sorted({ln for ln in tl["lane"] if ln not in study.soc.names})
    lanes = list(study.soc.names) + routes
    fig = go.Figure()

    def bars(sub, name, color, pattern=""):
        fig.add_trace(go.Bar(
            y=sub["lane"], x=sub["end_us"] - sub["start_us"], base=sub["start_us"], orientation="h", name=name,
            marker_color=color, marker_pattern_shape=pattern,
            hovertext=[f"{html.escape(str(it))}<br>{a:.2f}-{b:.2f} us" for it, a, b in zip(sub["item"], sub["start_us"], sub["end_us"])],
            hoverinfo="text",
        ))  # fmt: skip

    for p in study.soc.names:
        sub = tl[(tl["kind"] == "op") & (tl["lane"] == p)]
        if not sub.empty:
            bars(sub, f"{p} ops", colors[p])
    sub = tl[tl["kind"] == "transfer"]
    if not sub.empty:
        bars(sub, "transfers", LINK_COLOR)
    sub = tl[tl["kind"].isin(["layout", "quantize"])]
    if not sub.empty:
        bars(sub, "layout / (de)quantize", [colors.get(ln, LINK_COLOR) for ln in sub["lane"]], "/")
    fig.update_layout(barmode="overlay", height=180 + 34 * len(lanes), margin=dict(l=10, r=10, t=80, b=30),
                      xaxis_title="time (us)", yaxis=dict(categoryorder="array", categoryarray=lanes[::-1]),
                      legend=dict(orientation="h", y=1.01, yanchor="bottom", x=0),
                      title=f"timeline: {study.totals['latency_us']:.1f} us")  # fmt: skip
    return fig


def _plotly_js() -> str:
    """plotly's basic bundle (bar / scatter), shipped with the widget: the report needs no network."""
    return (Path(__file__).parent / "ui" / "static" / "plotly-basic.min.js").read_text(encoding="utf-8")


_CSS = ("body{font-family:system-ui,sans-serif;margin:24px;max-width:1400px}table.t{border-collapse:collapse;"
        "font-size:12px;table-layout:auto}table.t td,table.t th{padding:2px 8px;border-bottom:1px solid #ddd;"
        "text-align:left;vertical-align:top}"
        "table.t td span.name{display:inline-block;max-width:28em;overflow:hidden;text-overflow:ellipsis;"
        "white-space:nowrap}h2{margin-top:28px}table.cfg td{padding:1px 10px 1px 0}")  # fmt: skip
REPORT_BUDGET = 2_000_000  # bytes: the report stays one small, self-contained file
_INT_COLS = frozenset({"bytes", "dram_bytes", "macs", "vector_ops", "ops", "op_id", "partition", "kernel", "samples"})
_NAME_COLS = frozenset({"name", "first", "last", "function", "tensor", "consumers", "reason", "patterns", "source"})


def _numeric(df, col) -> bool:
    """A column of numbers (right-aligned, tabular figures): every non-null value an int or a float."""
    vals = [v for v in df[col].tolist() if v is not None and v == v]
    return bool(vals) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)


def _cell(col: str, v) -> str:
    """One cell; numeric columns are aligned by the table's own style rule (no class per cell: a
    1,000-op model's tables are tens of thousands of cells)."""
    e = html.escape
    if isinstance(v, float) and col in _INT_COLS:
        return f"<td>{v:,.0f}</td>"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"<td>{v:,}</td>"
    if isinstance(v, float):
        return f"<td>{v:,.3f}</td>"
    text = str(v)
    if col in _NAME_COLS and len(text) > 40:  # shortened, the whole name on hover
        return f"<td><span class='name' title='{e(text, quote=True)}'>{e(text)}</span></td>"
    return f"<td>{e(text)}</td>"


def _rows(df, tid: str) -> tuple[str, list[str]]:
    """A table's head (with the style rule aligning its numeric columns; ``tid`` its id in the page)
    and its rows, as HTML."""
    cols = [str(c) for c in df.columns]
    num = [k + 1 for k, c in enumerate(df.columns) if _numeric(df, c)]
    style = ""
    if num:
        sel = ",".join(f"#{tid} td:nth-child({k})" for k in num)
        style = f"<style>{sel}{{text-align:right;font-variant-numeric:tabular-nums}}</style>"
    head = style + f"<table class='t' id='{tid}'><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"
    rows = ["<tr>" + "".join(_cell(c, v) for c, v in zip(cols, r)) + "</tr>" for r in df.itertuples(index=False, name=None)]
    return head, rows


def _table(df, tid: str) -> str:
    head, rows = _rows(df, tid)
    return _join(head, rows, len(rows))


def _join(head: str, rows: list[str], keep: int) -> str:
    more = (f"<p>the first {keep:,} of {len(rows):,} rows (the file is kept under {REPORT_BUDGET / 1e6:.0f} MB; "
            "the study's tables and <code>npukit study --json</code> have every row)</p>") if keep < len(rows) else ""  # fmt: skip
    return f"{head}{''.join(rows[:keep])}</table>{more}"


def _budgeted(tables, used: int, first_id: int) -> list[str]:
    """The tables, each cut to the same share of its rows when the page would exceed
    ``REPORT_BUDGET`` bytes (``used``: the rest of the page)."""
    rendered = [_rows(df, f"t{first_id + k}") for k, df in enumerate(tables)]
    total = sum(len(h.encode()) + sum(len(r.encode()) for r in rows) for h, rows in rendered)
    room = REPORT_BUDGET - used - sum(len(h.encode()) + 400 for h, _ in rendered)
    if used + total <= REPORT_BUDGET or total == 0:
        return [_join(h, rows, len(rows)) for h, rows in rendered]
    out = []
    share = max(room, 0) / total
    for h, rows in rendered:
        size, keep, cap = 0, 0, share * sum(len(r.encode()) for r in rows)
        while keep < len(rows) and size + len(rows[keep].encode()) <= cap:
            size += len(rows[keep].encode())
            keep += 1
        out.append(_join(h, rows, keep))
    return out


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _config_table(study) -> str:
    e = html.escape
    cfg = study.config
    rows = [("placement policy", cfg.placement)]
    rows += [(f"support {p}: {o}", "off") for p, o in sorted(cfg.disabled)]
    rows += [(f"support {p}: {o}", "on") for p, o in sorted(cfg.enabled)]
    rows += [(f"pin {n}", p) for n, p in cfg.pins]
    rows += [(f"bits {p}", b) for p, b in cfg.bits]
    rows += [(f"bits of layer {n}", b) for n, b in cfg.layer_bits]
    body = "".join(f"<tr><td>{e(k)}</td><td><b>{e(v)}</b></td></tr>" for k, v in rows)
    return f"<table class='cfg'>{body}</table>" + ("" if len(rows) > 1 else "<p>(the profile's defaults)</p>")


def _bytes(n) -> str:
    return "no budget" if n is None else f"{n:,} B"


def memory_html(study, generate: bool = True) -> str:
    """The "does it fit" section: the profile's budgets, the generated code's weights and arena
    against them (generating the code if ``generate``), and the toolchain's figures of the target
    build when ``study.fit()`` measured them.  Over budget is marked in red."""
    e = html.escape
    from . import pipeline as pl  # noqa: PLC0415

    mem = pl.memory(study.result, study.data)
    if mem["estimate"] is None and generate:
        try:
            mem = study.memory  # generates the code of this config
        except Exception as ex:  # noqa: BLE001 - the report still renders; the reason is shown
            return f"<h2>memory</h2><p>code generation failed: {e(str(ex))}</p>"
    over = "<b style='color:#c00'>OVER</b>"
    rows = [f"<p>build target <code>{e(mem['target'])}</code>; budgets: flash {_bytes(mem['flash_bytes'])}, "
            f"SRAM {_bytes(mem['sram_bytes'])}</p>"]  # fmt: skip
    est = mem["estimate"]
    if est is not None:
        rows.append("<table class='t'><tr><th>generated code</th><th>bytes</th><th>budget</th><th></th></tr>")
        for label, key, bud, flag in (("weights (constant workspace)", "weight_bytes", "flash_bytes", "flash_over"),
                                      ("arena (working memory)", "arena_bytes", "sram_bytes", "sram_over"),
                                      ("live-tensor lower bound", "lower_bound_bytes", None, None)):  # fmt: skip
            rows.append(f"<tr><td>{label}</td><td>{est[key]:,}</td><td>{_bytes(est[bud]) if bud else ''}</td>"
                        f"<td>{over if flag and est[flag] else ''}</td></tr>")  # fmt: skip
        rows.append("</table>")
    m = mem["measured"]
    if m is None:
        rows.append("<p>not measured on a build: <code>study.fit()</code> builds the target and reads <code>size</code></p>")
    else:
        rows.append(f"<p>measured on the {e(m['target'])} build (<code>{e(str(m.get('program', '')))}</code>, "
                    "from the toolchain's <code>size</code>):</p><ul>")  # fmt: skip
        for ln in m["text"].splitlines():
            rows.append("<li>" + e(ln).replace("OVER", over) + "</li>")
        rows.append("</ul><table class='t'><tr><th>section</th><th>bytes</th></tr>" +
                    "".join(f"<tr><td>{e(k)}</td><td>{v:,}</td></tr>" for k, v in m["sections"].items()) + "</table>")
    return "<h2>memory: does it fit?</h2>" + "\n".join(rows)


def report_html(study, include_error: bool = False, include_memory: bool = True) -> str:
    t = study.totals
    fig = timeline_figure(study)
    e = html.escape
    name = Path(str(study.graph.path)).name
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>npukit: {e(name)} on {e(study.soc.name)}</title>",
        f"<style>{_CSS}</style>",
        f"<script>{_plotly_js()}</script>",
        "</head><body>",
        f"<h1>{e(name)} on {e(study.soc.name)}</h1>",
        f"<p>{e(study.soc.description)}</p>",
        f"<p><b>latency</b> {t['latency_us']:,.2f} us &nbsp; <b>energy</b> {t['energy_uj']:,.3f} uJ &nbsp; "
        f"<b>MACs</b> {t['macs']:,} &nbsp; <b>{_plural(t['partitions'], 'partition')}</b> &nbsp; "
        f"<b>transfers</b> {t['transfer_us']:,.2f} us</p>",
        "<p>" + " &nbsp; ".join(f"<b>{e(p)}</b> {_plural(t['ops'][p], 'op')}, busy {t['busy_us'][p]:,.2f} us "
                                f"({100 * t['utilisation'][p]:.0f}%)" for p in study.soc.names) + "</p>",  # fmt: skip
        "<h2>configuration</h2>", _config_table(study),
        fig.to_html(full_html=False, include_plotlyjs=False, div_id="npukit-timeline"),  # (a fixed id: the same page every time)
    ]
    if include_memory:
        parts.append(memory_html(study))
    if include_error:
        import pandas as pd  # noqa: PLC0415

        err = study.error_dict()
        parts += ["<h2>numeric error</h2>", _table(pd.DataFrame(err["outputs"]), "e0")]
        if err.get("accuracy") is not None:
            parts.append(f"<p>accuracy {100 * err['accuracy']:.2f}% (fp32 {100 * err['accuracy_fp32']:.2f}%) on "
                         f"{_plural(err['samples'], 'sample')}</p>")  # fmt: skip
        parts.append(f"<p>per-op figures on the first {_plural(err['per_op_samples'], 'sample')}</p>")
        parts.append(_table(study.error, "e1"))
    titles = ("placement", "partitions", "boundaries", "costs")
    frames = (study.placement, study.partitions, study.boundaries, study.costs)
    used = len("\n".join(parts).encode()) + sum(len(f"<h2>{t}</h2>") + 2 for t in titles) + 40
    for t, tab in zip(titles, _budgeted(frames, used, 0)):
        parts += [f"<h2>{t}</h2>", tab]
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(study, path, include_error: bool = False, include_memory: bool = True) -> Path:
    from .io import atomic_write_text, check_file_target  # noqa: PLC0415

    check_file_target(path)  # a wrong path fails before the page is made
    return atomic_write_text(path, report_html(study, include_error, include_memory))
