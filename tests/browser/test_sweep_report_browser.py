"""The sweep report opens in chromium with the network off and draws its Pareto views."""

from __future__ import annotations

from pathlib import Path

import pytest

from .lab import ARTIFACTS

ROOT = Path(__file__).resolve().parents[2]
GRID = """
[grid]
"bits.dla" = ["int8", "fp16"]
"support.dsp.softmax" = [true, false]
"soc.processors.dla.macs_per_cycle.int8" = [256, 1024]
"""


@pytest.mark.browser
def test_sweep_report_offline(browser, tmp_path, artifacts):
    import npukit
    from npukit.sweeps.report import write_sweep_report

    df = npukit.sweep(ROOT / "sample_models" / "digits_cnn.onnx", "arm-dsp-dla", GRID, workers=0, error=True,
                      progress=False)  # fmt: skip
    n_front = int(npukit.sweeps.pareto_mask(df).sum())
    path = write_sweep_report(df, tmp_path / "sweep.html", title="digits sweep")
    ctx = browser.new_context(offline=True, viewport={"width": 1400, "height": 1000})
    requests: list[str] = []
    ctx.on("request", lambda r: requests.append(r.url))
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri(), wait_until="load")
        plots = page.locator(".js-plotly-plot")
        plots.first.wait_for(state="visible", timeout=30_000)
        assert plots.count() == 2  # latency vs energy, latency vs accuracy
        # every configuration is a point: the grey ones plus the marked Pareto set
        first = plots.nth(0)
        assert first.locator(".scatterlayer .trace").count() == 2
        assert first.locator(".scatterlayer .point").count() == len(df)
        legend = first.locator(".legend").text_content()
        assert f"Pareto set ({n_front})" in legend and f"configurations ({len(df) - n_front})" in legend
        assert "accuracy" in plots.nth(1).locator(".g-ytitle").text_content()
        # hover shows the configuration
        pt = first.locator(".scatterlayer .trace").nth(1).locator(".point").first
        box = pt.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        hover = page.locator(".hoverlayer .hovertext").first
        hover.wait_for(state="visible", timeout=10_000)
        assert "bits.dla = " in hover.text_content() and "latency_us = " in hover.text_content()
        page.screenshot(path=str(ARTIFACTS / "sweep_report.png"), full_page=False)
        assert page.locator("tr.p").count() == 2 * n_front  # marked in the Pareto table and in the full table
        assert not errors, errors
        assert all(u.startswith(("file:", "data:", "about:")) for u in requests), requests
    finally:
        ctx.close()
