"""Issues 13 and 14 in a real JupyterLab and chromium: the placement-policy control, the support
checkboxes that rules (not the user) keep off, one number format per table column, the error
panel's sample counts, a readable "fit" that scrolls a tall graph, and the "working:" line of a
long edit.  Expected values come from real Studies in this process."""

from __future__ import annotations

import json
import re

import pytest

from .lab import REPO, edit, widget_page

pytestmark = pytest.mark.browser

ROOT = '[data-testid="npukit-root"]'
TIMEOUT = 120_000


def notebook(lab, name: str, cells: list[str]) -> str:
    """Write a notebook of code cells into the lab's root; its path for widget_page."""
    nb = {
        "cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
                  for c in cells],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }  # fmt: skip
    (lab.root / "notebooks" / name).write_text(json.dumps(nb))
    return f"notebooks/{name}"


def status(page) -> tuple[str, str]:
    el = page.locator(f'{ROOT} [data-testid="status"]')
    return el.get_attribute("data-level"), el.inner_text()


def column(page, table: str, row: str, key: str) -> list[str]:
    """The texts of one column's drawn cells."""
    return page.eval_on_selector_all(
        f'{ROOT} [data-testid="{table}"] [data-testid="{row}"]',
        f"""rows => {{
            const ths = [...document.querySelectorAll('{ROOT} [data-testid="{table}"] th')];
            const k = ths.findIndex(th => th.dataset.key === '{key}');
            return rows.map(r => r.children[k].textContent);
        }}""",
    )


def decimals(s: str) -> int:
    return len(s.split(".")[1]) if "." in s else 0


@pytest.fixture(scope="module")
def digits_page(lab, browser, artifacts):
    path = notebook(lab, "polish_digits.ipynb", [
        "import npukit\nstudy = npukit.Study('../sample_models/digits_cnn.onnx', 'arm-dsp-dla')\nstudy.show()",
    ])  # fmt: skip
    with widget_page(browser, lab, path, TIMEOUT, scroll=True) as pg:
        yield pg


def test_placement_policy_control(digits_page, artifacts):
    import npukit

    page = digits_page
    s = npukit.Study(REPO / "sample_models" / "digits_cnn.onnx", "arm-dsp-dla", placement="first-fit")
    sel = f'{ROOT} [data-testid="placement-policy"]'
    assert page.input_value(sel) == "cost"
    assert page.eval_on_selector_all(f"{sel} option", "os => os.map(o => o.value)") == ["cost", "first-fit"]
    edit(page, lambda: page.select_option(sel, "first-fit"))
    level, text = status(page)
    assert level == "ok" and text.startswith("placement policy first-fit (was cost) \u2192 latency "), text
    assert f"\u2192 {s.totals['latency_us']:,.2f} us" in text
    assert page.input_value(sel) == "first-fit"
    parts = page.locator(f'{ROOT} [data-testid="total-partitions"]').inner_text()
    assert parts == f"partitions {s.totals['partitions']}"
    page.screenshot(path=str(artifacts / "widget_placement_policy.png"))
    edit(page, lambda: page.select_option(sel, "cost"))
    assert status(page)[1].startswith("placement policy cost (was first-fit)")
    assert page.page_errors == []


def test_one_number_format_per_column(digits_page, artifacts):
    page = digits_page
    page.click(f'{ROOT} [data-testid="tab-costs"]')
    page.wait_for_selector(f'{ROOT} [data-testid="cost-row"]')
    for key in ("latency_us", "energy_uj", "cycles"):
        cells = column(page, "cost-table", "cost-row", key)
        assert len(cells) == 14
        spec = page.get_attribute(f'{ROOT} [data-testid="cost-table"] th[data-key="{key}"]', "data-format")
        assert spec and spec.startswith("fixed:"), (key, spec)
        assert {decimals(c) for c in cells} == {int(spec.split(":")[1])}, (key, cells)
        assert not any("e" in c for c in cells)
    for key in ("macs", "bytes"):
        cells = column(page, "cost-table", "cost-row", key)
        assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", c) for c in cells), (key, cells)
    page.click(f'{ROOT} [data-testid="tab-boundaries"]')
    page.wait_for_selector(f'{ROOT} [data-testid="boundary-row"]')
    for key in ("transfer_us", "cost_us", "energy_uj"):
        cells = column(page, "boundary-table", "boundary-row", key)
        assert len({decimals(c) for c in cells}) == 1, (key, cells)
    page.screenshot(path=str(artifacts / "widget_boundaries_formats.png"))


def test_error_panel_sample_counts(digits_page, artifacts):
    page = digits_page
    page.click(f'{ROOT} [data-testid="tab-error"]')
    edit(page, lambda: page.click(f'{ROOT} [data-testid="measure-error"]'))
    acc = page.locator(f'{ROOT} [data-testid="error-accuracy"]').inner_text()
    assert acc.endswith("on 450 samples")
    note = page.locator(f'{ROOT} [data-testid="error-per-op-samples"]').inner_text()
    assert note == "per-op figures over the first 64 of the 450 samples (every op's output is kept for them)"
    cells = column(page, "error-table", "error-row", "max_abs_err")
    spec = page.get_attribute(f'{ROOT} [data-testid="error-table"] th[data-key="max_abs_err"]', "data-format")
    if spec.startswith("fixed:"):
        assert {decimals(c) for c in cells} == {int(spec.split(":")[1])}
    else:
        assert spec == "exp:2" and all(re.fullmatch(r"\d\.\d\de[+-]\d+", c) for c in cells), cells
    page.screenshot(path=str(artifacts / "widget_error_samples.png"))


def test_fit_keeps_a_small_graph_whole(digits_page):
    page = digits_page
    page.click(f'{ROOT} [data-testid="graph-fit"]')
    host = f'{ROOT} [data-testid="graph"]'
    assert page.get_attribute(host, "data-scrollable") == "0"
    assert page.locator(f'{ROOT} [data-testid="graph-node"]').count() == 14


def test_the_wheel_over_a_graph_that_fits_scrolls_the_page_not_the_graph_out_of_sight(digits_page):
    """A graph that fits its view stays whole in it: the wheel of a user scrolling the notebook over
    it moved it out of sight (an empty view with no scrollbar) and the notebook did not scroll."""
    page = digits_page
    page.click(f'{ROOT} [data-testid="graph-fit"]')
    host = page.locator(f'{ROOT} [data-testid="graph"]')
    host.scroll_into_view_if_needed()
    scroller = """h => { let e = h.parentElement; while (e && !(e.scrollHeight > e.clientHeight &&
                    /auto|scroll/.test(getComputedStyle(e).overflowY))) e = e.parentElement; return e ? e.scrollTop : -1; }"""
    box = host.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    top = host.evaluate(scroller)
    for dy in (400, 400, 400, -400, -400, -400, -400, -400, -400):
        page.mouse.wheel(0, dy)
        page.wait_for_timeout(50)
        b = host.bounding_box()
        nodes = page.eval_on_selector_all(f'{ROOT} [data-testid="graph-node"]',
                                          "els => els.map(e => e.getBoundingClientRect()).map(r => [r.top, r.bottom])")
        assert len(nodes) == 14
        assert all(b["y"] - 1 <= t0 and t1 <= b["y"] + b["height"] + 1 for t0, t1 in nodes), (dy, b, nodes)
    assert host.evaluate(scroller) != top  # the notebook scrolled on
# ------------------------------------------------------------------------------------------------
# the 1,161-op transformer


@pytest.fixture(scope="module")
def tall_page(lab, browser, artifacts):
    path = notebook(lab, "polish_transformer.ipynb", [
        "import npukit\nimport npukit.progress\n"
        "npukit.progress.DELAY_S = 0.05  # an edit here takes ~0.2-0.5 s: count it as long, to see the working line\n"
        "study = npukit.Study('../sample_models/transformer_encoder.onnx', 'arm-dsp-dla')\nstudy.show()",
    ])  # fmt: skip
    with widget_page(browser, lab, path, TIMEOUT, scroll=True, run_timeout_ms=300_000,
                     ready='[data-testid="graph"][data-layout="done"]') as pg:  # fmt: skip
        yield pg


def test_rule_blocked_checkboxes_look_different(tall_page, artifacts):
    page = tall_page
    label = page.locator(f'{ROOT} [data-testid="support-dla-matmul"]').locator("xpath=..")
    assert page.is_checked(f'{ROOT} [data-testid="support-dla-matmul"]')  # the user has not turned it off
    cls = label.get_attribute("class")
    assert "nk-ruled" in cls and "nk-blocked" in cls
    assert label.get_attribute("data-accepted") == "0/320"
    text = "matmul: 0 of 320 ops accepted: rank-3 tensor, supports ranks 2 (and 1 other reason)"
    assert text in label.get_attribute("title")
    assert page.locator(f'{ROOT} [data-testid="support-note-dla-matmul"]').inner_text() == text
    # partly blocked: marked, not struck through
    reshape = page.locator(f'{ROOT} [data-testid="support-dla-reshape"]').locator("xpath=..")
    assert "nk-ruled" in reshape.get_attribute("class") and "nk-blocked" not in reshape.get_attribute("class")
    assert reshape.get_attribute("data-accepted") == "40/160"
    # the mark is drawn only where a rule blocks: not on the DLA's conv2d
    conv = page.locator(f'{ROOT} [data-testid="support-dla-conv2d"]').locator("xpath=..")
    if conv.count():
        assert conv.locator(".nk-rulemark").is_hidden()
    assert label.locator(".nk-rulemark").is_visible()
    page.locator(f'{ROOT} [data-testid="support"]').screenshot(path=str(artifacts / "widget_rule_blocked.png"))


def test_fit_scrolls_a_tall_graph_at_a_readable_zoom(tall_page, artifacts):
    page = tall_page
    page.click(f'{ROOT} [data-testid="expand-all"]')
    page.wait_for_selector(f'{ROOT} [data-testid="graph"][data-layout="done"]', timeout=TIMEOUT)
    page.click(f'{ROOT} [data-testid="graph-fit"]')
    host = f'{ROOT} [data-testid="graph"]'
    zoom = float(page.get_attribute(host, "data-zoom"))
    assert zoom >= 0.75  # node labels at 11 px stay >= 8 px on screen
    assert page.get_attribute(host, "data-scrollable") == "1"
    assert page.locator(f'{ROOT} [data-testid="graph-vscroll"]').is_visible()
    size = page.eval_on_selector(
        f"{ROOT} .nk-node .nk-t1", "t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a"
    )
    assert size >= 8, size
    first = page.eval_on_selector_all(
        f'{ROOT} [data-testid="graph-node"]:not([display])', "els => els.map(e => e.dataset.nodeId)"
    )
    page.screenshot(path=str(artifacts / "widget_fit_tall_top.png"))
    # the wheel scrolls down (the page does not move), keeping the zoom
    box = page.locator(host).bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    y0 = page.evaluate("() => document.querySelector('.jp-WindowedPanel-outer, .jp-Notebook')?.scrollTop ?? 0")
    for _ in range(5):
        page.mouse.wheel(0, 400)
    page.wait_for_timeout(300)
    assert float(page.get_attribute(host, "data-zoom")) == zoom
    y1 = page.evaluate("() => document.querySelector('.jp-WindowedPanel-outer, .jp-Notebook')?.scrollTop ?? 0")
    assert y1 == y0
    later = page.eval_on_selector_all(
        f'{ROOT} [data-testid="graph-node"]:not([display])', "els => els.map(e => e.dataset.nodeId)"
    )
    assert later and set(later) != set(first)
    assert max(map(int, later)) > max(map(int, first))
    page.screenshot(path=str(artifacts / "widget_fit_tall_scrolled.png"))
    # ctrl + wheel still zooms
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    page.wait_for_timeout(200)
    assert float(page.get_attribute(host, "data-zoom")) > zoom
    assert page.page_errors == []


def test_a_long_edit_shows_working_lines(tall_page, artifacts):
    """An edit of the 1,161-op transformer re-runs the cost placement (longer than the notebook's
    0.05 s progress delay): the widget answers at once with estimates on the placement on screen
    and the status line says it is placing ops while the placement runs in a thread, then the
    edit's own status replaces it (issue 15)."""
    page = tall_page
    page.evaluate(f"""() => {{
        const el = document.querySelector('{ROOT} [data-testid="status"]');
        window.__statusTexts = [];
        new MutationObserver(() => window.__statusTexts.push(el.textContent)).observe(el, {{childList: true, characterData: true, subtree: true}});
    }}""")
    edit(page, lambda: page.click(f'{ROOT} [data-testid="support-dsp-softmax"]'), timeout_ms=300_000)
    texts = page.evaluate("() => window.__statusTexts")
    working = [t for t in texts if t.startswith("working")]
    assert any(t.startswith("working\u2026  \u00b7 last: placing ops by cost (estimates on the current placement "
                            "meanwhile)\u2026") for t in working), texts  # fmt: skip
    level, text = status(page)
    assert level == "ok" and text.startswith("dsp: softmax off \u2192 latency"), text
    assert texts[-1] == text
    page.screenshot(path=str(artifacts / "widget_after_long_edit.png"))


def test_a_plan_the_runtime_would_refuse_is_flagged_in_the_header(lab, browser, artifacts):
    """Under first-fit, pinning op 26 of the MobileNet to the host gives the VSI NPU two partitions,
    and its runtime takes one: the header says so (it showed the plan's figures without a word),
    and the flag goes when the cost policy holds the plan to one partition."""
    import npukit

    s = npukit.Study(REPO / "sample_models" / "mobilenet_v1_025_int8.tflite", "vsi-npu", placement="first-fit")
    s.pin("#26", "a53")
    want = list(s.partition_limits)
    path = notebook(lab, "polish_limits.ipynb", [
        "import npukit\nstudy = npukit.Study('../sample_models/mobilenet_v1_025_int8.tflite', 'vsi-npu', "
        "placement='first-fit')\nstudy.show()",
    ])  # fmt: skip
    with widget_page(browser, lab, path, TIMEOUT, scroll=True, ready='[data-testid="graph"]') as page:
        flag = page.locator(f'{ROOT} [data-testid="partition-limit"]')
        assert flag.count() == 0
        table = page.locator(f'{ROOT} [data-testid="cost-table"]')
        table.evaluate("t => { t.scrollTop = 26 * 22; }")  # (rows are drawn as they scroll into view)
        page.locator(f'{ROOT} [data-testid="cost-table"] tr[data-row="26"]').click()
        page.select_option(f'{ROOT} [data-testid="pin-processor"]', "a53")
        edit(page, lambda: page.click(f'{ROOT} [data-testid="pin-button"]'))
        assert status(page)[0] == "ok"
        assert [t.removeprefix("\u26a0 ") for t in flag.all_inner_texts()] == want
        # the pin's line names the TFLite node (one 300-character word): it wraps in the panel
        sel = page.locator(f'{ROOT} [data-testid="selection"]')
        assert sel.evaluate("el => el.scrollWidth <= el.clientWidth"), "the selection panel overflows"
        page.screenshot(path=str(artifacts / "widget_partition_limit.png"))
        edit(page, lambda: page.select_option(f'{ROOT} [data-testid="placement-policy"]', "cost"))
        assert flag.count() == 0
        assert not page.page_errors
