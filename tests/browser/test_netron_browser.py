"""The annotated ONNX opens in netron (served on loopback) with the npukit fields on its nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

import npukit
from npukit.export import serve_netron

from .lab import ARTIFACTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.browser
def test_netron_shows_npukit_fields(browser, tmp_path, artifacts):
    study = npukit.Study(ROOT / "sample_models" / "digits_cnn.onnx", "arm-dsp-dla")
    path = study.annotated_onnx(tmp_path / "digits.npukit.onnx")
    host, port = serve_netron(path)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"http://{host}:{port}/", wait_until="load")
        page.get_by_text("Accept").click(timeout=60_000)  # netron's first-run notice
        # netron draws one SVG group per node, labelled with its op type (netron disables eval,
        # so everything below uses locators, not page.evaluate)
        node = page.locator("g.node", has_text="Softmax").first
        node.wait_for(state="visible", timeout=60_000)
        assert page.locator("g.node").count() == 12  # every ONNX node of the digits model is drawn
        node.click()
        sidebar = page.locator("#sidebar")
        for key in ("npukit.processor", "npukit.reason", "npukit.latency_us", "npukit.bits"):
            # netron shows a metadata key as a read-only <input> titled with the key
            sidebar.locator(f'input[title="{key}"]').wait_for(state="visible", timeout=30_000)
        text = sidebar.inner_text()
        page.screenshot(path=str(ARTIFACTS / "netron_softmax.png"))
        # the cost policy keeps softmax on the host (moving it costs more than it saves)
        row = study.placement.set_index("name").loc["/softmax/Softmax"]
        assert row["processor"] == "arm" and row["reason"].startswith("arm: kept on arm by cost")
        assert "npukit: on arm" in text and "arm: kept on arm by cost" in text and "dla: softmax is not in processors.dla.ops" in text
        assert "fp32" in text  # the host's default bit-width
    finally:
        page.close()
        import netron

        netron.stop((host, port))
