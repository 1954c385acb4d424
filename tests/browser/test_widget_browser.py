"""The quickstart notebook in a real JupyterLab, driven by chromium: the widget renders, edits made
in the widget reach the Study and come back as new colours and totals, bad edits show their
message and leave the widget working.  Expected values come from a real Study in this process.
"""

from __future__ import annotations

import re

import pytest

from npukit.ui.requests import uj
from npukit.ui.requests import us as fmt_us  # (widgets/src/format.js us(), mirrored)

from .lab import REPO, edit, widget_page

pytestmark = pytest.mark.browser

NOTEBOOK = "notebooks/01_quickstart.ipynb"
ROOT = '[data-testid="npukit-root"]'
TIMEOUT = 60_000


@pytest.fixture(scope="module")
def expected():
    """The same edits on a Study of our own: processors per op and totals for each state."""
    import npukit
    from npukit.report import processor_colors

    s = npukit.Study(REPO / "sample_models" / "digits_cnn.onnx", "arm-dsp-dla")

    def snap():
        pl = s.placement
        return {"proc": dict(zip(pl["name"], pl["processor"])), "reason": dict(zip(pl["name"], pl["reason"])),
                "totals": s.totals, "costs": s.costs}  # fmt: skip

    out = {"colors": processor_colors(s.soc), "default": snap()}
    s.set_support("dla", "conv2d", False)
    out["conv_off"] = snap()
    s.set_support("dla", "conv2d", True)
    s.pin("/softmax/Softmax", "dsp")  # the cost policy keeps it on the host; the DSP takes it when pinned
    out["softmax_dsp"] = snap()
    s.unpin("/softmax/Softmax")
    s.set_bits("fp16", processor="dla")
    out["dla_fp16"] = snap()
    out["dla_fp16"]["error"] = s.error_dict() if hasattr(type(s), "error_dict") else None
    return out


@pytest.fixture(scope="module")
def page(lab, browser, artifacts):
    with widget_page(browser, lab, NOTEBOOK, TIMEOUT) as pg:
        yield pg


def fills(page) -> dict[str, str]:
    return page.eval_on_selector_all(
        f'{ROOT} [data-testid="graph-node"]',
        "els => Object.fromEntries(els.map(g => [g.dataset.name, g.querySelector('rect').getAttribute('fill')]))",
    )


def status(page) -> tuple[str, str]:
    el = page.locator(f'{ROOT} [data-testid="status"]')
    return el.get_attribute("data-level"), el.inner_text()


def test_support_toggle_recolours_nodes_and_updates_totals(page, expected, artifacts):
    colors = expected["colors"]
    # the notebook's last cells disabled conv2d on the DLA after the widget was shown: it followed
    page.wait_for_function(f"() => +document.querySelector('{ROOT}').dataset.rev >= 1")
    page.locator(ROOT).scroll_into_view_if_needed()
    # the graph draws only what is in view: show all of it
    page.click(f'{ROOT} [data-testid="graph-fit"]')
    off = expected["conv_off"]
    assert len(fills(page)) == 14
    assert fills(page) == {n: colors[p] for n, p in off["proc"].items()}
    assert fills(page)["/conv1/Conv"] == colors["arm"]
    latency = page.locator(f'{ROOT} [data-testid="total-latency"]')
    assert latency.inner_text() == f"latency {fmt_us(off['totals']['latency_us'])}"
    assert not page.is_checked(f'{ROOT} [data-testid="support-dla-conv2d"]')
    page.screenshot(path=str(artifacts / "widget_conv2d_off.png"))

    edit(page, lambda: page.click(f'{ROOT} [data-testid="support-dla-conv2d"]'))

    on = expected["default"]
    after = fills(page)
    assert after["/conv1/Conv"] == colors["dla"]
    assert after == {n: colors[p] for n, p in on["proc"].items()}
    text = latency.inner_text()
    assert text == f"latency {fmt_us(on['totals']['latency_us'])}"
    assert text != f"latency {fmt_us(off['totals']['latency_us'])}"
    parts = page.locator(f'{ROOT} [data-testid="total-partitions"]').inner_text()
    assert parts == f"partitions {on['totals']['partitions']}"
    assert page.is_checked(f'{ROOT} [data-testid="support-dla-conv2d"]')
    level, msg = status(page)
    assert level == "ok" and msg.startswith("dla: conv2d on"), msg
    page.screenshot(path=str(artifacts / "widget_conv2d_on.png"))


def test_bad_pin_shows_its_message_and_the_widget_keeps_working(page, expected, artifacts):
    colors = expected["colors"]
    node = f'{ROOT} [data-testid="graph-node"][data-name="/softmax/Softmax"]'
    page.click(f'{ROOT} [data-testid="graph-fit"]')  # the whole graph in view
    page.click(node)
    assert page.locator(f'{ROOT} [data-testid="selected-name"]').inner_text() == "/softmax/Softmax"
    page.select_option(f'{ROOT} [data-testid="pin-processor"]', "dla")
    edit(page, lambda: page.click(f'{ROOT} [data-testid="pin-button"]'))
    level, msg = status(page)
    assert level == "error"
    assert "cannot pin '/softmax/Softmax' (softmax) to dla: dla: softmax is not in processors.dla.ops" in msg
    page.screenshot(path=str(artifacts / "widget_bad_pin.png"))
    home = colors[expected["default"]["proc"]["/softmax/Softmax"]]
    assert home == colors["arm"]
    assert fills(page)["/softmax/Softmax"] == home  # nothing changed

    # the widget still works: a valid pin, then unpin
    page.select_option(f'{ROOT} [data-testid="pin-processor"]', "dsp")
    edit(page, lambda: page.click(f'{ROOT} [data-testid="pin-button"]'))
    level, msg = status(page)
    assert level == "ok", msg
    assert fills(page) == {n: colors[p] for n, p in expected["softmax_dsp"]["proc"].items()}
    want = f"latency {fmt_us(expected['softmax_dsp']['totals']['latency_us'])}"
    assert page.locator(f'{ROOT} [data-testid="total-latency"]').inner_text() == want
    assert "nk-pinned" in page.get_attribute(node, "class")
    edit(page, lambda: page.click(f'{ROOT} [data-testid="unpin-button"]'))
    assert fills(page)["/softmax/Softmax"] == home
    assert page.page_errors == []


def test_the_pin_target_chosen_stays_chosen_and_layer_bits_set_the_whole_layer(page, expected):
    """The "pin to" menu went back to the op's own processor on every update, so a pin made after
    any other edit pinned the op where it was ("ok: pinned to arm"); "bits for this layer" set one
    op of the layer (its config key "#0"), where study.set_bits(layer=...) sets all of them."""
    import npukit

    colors = expected["colors"]
    page.click(f'{ROOT} [data-testid="graph-fit"]')
    page.click(f'{ROOT} [data-testid="graph-node"][data-name="/softmax/Softmax"]')
    page.select_option(f'{ROOT} [data-testid="pin-processor"]', "dsp")
    edit(page, lambda: page.select_option(f'{ROOT} [data-testid="bits-dla"]', "fp16"))  # an update meanwhile
    assert page.locator(f'{ROOT} [data-testid="pin-processor"]').input_value() == "dsp"
    edit(page, lambda: page.click(f'{ROOT} [data-testid="pin-button"]'))
    level, msg = status(page)
    assert level == "ok" and "to dsp" in msg, msg
    assert fills(page)["/softmax/Softmax"] == colors["dsp"]
    edit(page, lambda: page.click(f'{ROOT} [data-testid="unpin-button"]'))
    edit(page, lambda: page.select_option(f'{ROOT} [data-testid="bits-dla"]', ""))

    s = npukit.Study(REPO / "sample_models" / "digits_cnn.onnx", "arm-dsp-dla").set_bits("fp16", layer="/conv1/Conv")
    page.click(f'{ROOT} [data-testid="graph-node"][data-name="/conv1/Conv"]')
    edit(page, lambda: page.select_option(f'{ROOT} [data-testid="layer-bits"]', "fp16"))
    level, msg = status(page)
    assert level == "ok" and msg.startswith("'/conv1/Conv': fp16"), msg
    assert page.locator(f'{ROOT} [data-testid="total-latency"]').inner_text() == f"latency {fmt_us(s.totals['latency_us'])}"
    # the status line's figures are written as the header's; the legend's figure is each lane's busy time
    energy = uj(s.totals["energy_uj"])
    assert page.locator(f'{ROOT} [data-testid="total-energy"]').inner_text() == f"energy {energy}"
    assert f"\u2192 {fmt_us(s.totals['latency_us'])}, energy " in msg and f"\u2192 {energy}, " in msg, msg
    legend = page.locator(f'{ROOT} [data-testid="legend-dla"]').inner_text()
    assert legend.endswith(f" \u00b7 busy {fmt_us(s.totals['busy_us']['dla'])}"), legend
    edit(page, lambda: page.select_option(f'{ROOT} [data-testid="layer-bits"]', ""))
    assert page.page_errors == []


def test_the_layer_width_menu_offers_widths_only_another_processor_runs(page, expected):
    """The menu listed the op's own processor's widths only (dla: int8, fp16), so a layer could not
    be set to a width that moves it; set_bits can.  Now every width some processor runs, narrowest
    first, the ones dla does not run saying the layer moves."""
    import npukit

    s = npukit.Study(REPO / "sample_models" / "digits_cnn.onnx", "arm-dsp-dla").set_bits("int16", layer="/conv1/Conv")
    page.click(f'{ROOT} [data-testid="graph-fit"]')
    page.click(f'{ROOT} [data-testid="graph-node"][data-name="/conv1/Conv"]')
    menu = page.locator(f'{ROOT} [data-testid="layer-bits"] option')
    assert [menu.nth(k).inner_text() for k in range(menu.count())][1:] == [
        "int8", "int16 (dla does not run it: the layer moves)", "fp16", "fp32 (dla does not run it: the layer moves)"]
    edit(page, lambda: page.select_option(f'{ROOT} [data-testid="layer-bits"]', "int16"))
    level, msg = status(page)
    assert level == "ok" and msg.startswith("'/conv1/Conv': int16"), msg
    assert fills(page)["/conv1/Conv"] == expected["colors"]["arm"]
    assert page.locator(f'{ROOT} [data-testid="total-latency"]').inner_text() == f"latency {fmt_us(s.totals['latency_us'])}"
    edit(page, lambda: page.select_option(f'{ROOT} [data-testid="layer-bits"]', ""))
    assert page.page_errors == []


def test_bits_tooltip_and_sorted_cost_table(page, expected, artifacts):
    # processor bit-width: under the cost policy the placement and its reasons are recomputed
    edit(page, lambda: page.select_option(f'{ROOT} [data-testid="bits-dla"]', "fp16"))
    fp16 = expected["dla_fp16"]
    want = f"latency {fmt_us(fp16['totals']['latency_us'])}"
    assert page.locator(f'{ROOT} [data-testid="total-latency"]').inner_text() == want
    assert page.input_value(f'{ROOT} [data-testid="bits-dla"]') == "fp16"

    # hover: the placement reason and every processor's verdict
    page.click(f'{ROOT} [data-testid="graph-fit"]')
    page.hover(f'{ROOT} [data-testid="graph-node"][data-name="/conv2/Conv"]')
    tip = page.locator(f'{ROOT} [data-testid="graph-tooltip"]')
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert fp16["reason"]["/conv2/Conv"] in text
    assert re.search(r"arm\s+runs every op \(host\)", text)
    assert "fp16" in text
    page.screenshot(path=str(artifacts / "widget_tooltip.png"))

    # the cost table sorts by latency, slowest first
    page.click(f'{ROOT} [data-testid="tab-costs"]')
    page.click(f'{ROOT} [data-testid="sort-latency_us"]')
    first = page.locator(f'{ROOT} [data-testid="cost-row"]').first
    costs = fp16["costs"]
    slowest = costs.sort_values(["latency_us", "op_id"], ascending=[False, True]).iloc[0]
    assert first.locator("td").nth(1).inner_text() == slowest["name"]

    # the timeline tab draws one lane per processor plus one per link route in use
    page.click(f'{ROOT} [data-testid="tab-timeline"]')
    page.wait_for_selector(f'{ROOT} [data-testid="timeline"] .main-svg')
    lanes = page.eval_on_selector_all(
        f'{ROOT} [data-testid="timeline"] .ytick text', "els => els.map(e => e.textContent)"
    )
    assert sorted(lanes) == sorted(["arm", "dsp", "dla", "arm -> dla", "dla -> arm"])
    page.screenshot(path=str(artifacts / "widget_timeline.png"))

    # the error panel measures only when asked (it runs the model)
    page.click(f'{ROOT} [data-testid="tab-error"]')
    err = fp16["error"]
    if err is None:
        assert page.locator(f'{ROOT} [data-testid="error-state"]').inner_text().startswith("error: not computed")
    else:
        assert "press 'measure error'" in page.locator(f'{ROOT} [data-testid="error-state"]').inner_text()
        edit(page, lambda: page.click(f'{ROOT} [data-testid="measure-error"]'))
        rows = page.locator(f'{ROOT} [data-testid="error-outputs"] tr')
        cells = rows.nth(1).locator("td").all_inner_texts()
        out = err["outputs"][0]
        assert cells[0] == out["name"] and cells[1] == f"{out['snr_db']:.2f}"
        acc = f"accuracy {100 * err['accuracy']:.2f}% (fp32 {100 * err['accuracy_fp32']:.2f}%) on {err['samples']} samples"
        assert page.locator(f'{ROOT} [data-testid="error-accuracy"]').inner_text() == acc
        assert page.locator(f'{ROOT} [data-testid="error-row"]').count() > 0
        page.screenshot(path=str(artifacts / "widget_error.png"))
    assert page.page_errors == []
