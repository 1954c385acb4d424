"""Widget speed in a real JupyterLab + chromium; prints JSON.

    python benchmarks/ui.py [--clicks 30] [--ops 10000] [--skip-10k] [--out FILE] [--placement cost|first-fit]

(a) click -> repaint on the 1,161-op sample (transformer_encoder.onnx, collapsed by partition):
    selecting partition nodes (front end only), changing a processor's bit-width (a cost-only edit:
    recolour in place) and toggling op support (a structure edit: new partitions, re-layout).
    Measured in the page from the input event's timestamp to the frame after the widget applied
    the answer (a MutationObserver on the widget's data-rev / data-paint, then requestAnimationFrame
    and one task), so it includes the round trip through the kernel and the Study's own edit.  The
    first two support toggles build new partitions in TVM and new layouts: they are reported apart
    ("cold"); later toggles between the same two configs hit the Study's and the layout's caches.
    Under the cost policy an edit whose placement is not cached is answered twice (issue 15): at
    once with first-fit estimates, the request still "working", then with its cost placement from a
    thread.  The figures above are the first answer; ``*_last_answer`` is click -> the request
    answered (``data-busy`` back to "0") and painted.
(b) first render of a generated ~10,000-op chain (conv/relu/conv/relu/add/softmax blocks, a tanh
    every third block: thousands of partitions over arm, dsp and dla), collapsed by partition: from
    the `study.show()` call in the kernel (Python clock) to the first painted frame and to the
    complete layout (browser clock, same machine).  Building the Study itself (TVM import and
    partition, ~1 min) happens in an earlier cell and is not part of the figure.
Goals: p95 <= 150 ms (issue 15: <= 100 ms for every edit kind, its first included), first render <= 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))

from lab import (  # noqa: E402
    jupyter_lab,
    launch_chromium,
    open_notebook,
    run_all_cells,
)

ROOT = '[data-testid="npukit-root"]'

MEASURE_JS = """
() => {
  const root = document.querySelector('[data-testid="npukit-root"]');
  const graph = root.querySelector('[data-testid="graph"]');
  const b = window.__npkBench = { start: null, waitFor: null, results: [], settleStart: null, settled: [] };
  const onInput = (e) => {
    if (b.start === null) b.start = e.timeStamp;
    if (b.settleStart === null) b.settleStart = e.timeStamp;
  };
  root.addEventListener('click', onInput, true);
  root.addEventListener('change', onInput, true);
  const done = () => {
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => { b.results.push(performance.now() - b.start); b.start = null; };
      ch.port2.postMessage(0);
    });
  };
  // the last answer: the request is answered (data-busy back to "0"), painted
  const settled = () => {
    const t0 = b.settleStart;
    b.settleStart = null;
    requestAnimationFrame(() => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => { b.settled.push(performance.now() - t0); };
      ch.port2.postMessage(0);
    });
  };
  new MutationObserver((muts) => {
    for (const m of muts) {
      if (m.attributeName === 'data-busy' && b.settleStart !== null && root.dataset.busy === '0') settled();
    }
    if (b.start === null || b.waitFor === null) return;
    for (const m of muts) {
      if (m.attributeName === b.waitFor) { b.waitFor = null; done(); return; }
    }
  }).observe(root, { attributes: true, subtree: true, attributeFilter: ['data-rev', 'data-paint', 'data-busy'] });
}
"""


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    k = max(0, min(len(xs) - 1, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


def summary(xs):
    return {"n": len(xs), "p50_ms": round(statistics.median(xs), 1), "p95_ms": round(pct(xs, 95), 1),
            "max_ms": round(max(xs), 1), "mean_ms": round(statistics.fmean(xs), 1)}  # fmt: skip


def measure(page, action, attr, timeout_ms=120_000, settle: list | None = None):
    """Run one user action and return its click -> repaint time in ms (measured in the page): the
    first answer.  ``settle``: a request to the kernel; the click -> last answer time (the request
    answered: under the cost policy an edit is first shown with first-fit estimates while its
    placement is computed) is appended to it, after waiting for it."""
    n, k = page.evaluate("() => [window.__npkBench.results.length, window.__npkBench.settled.length]")
    page.evaluate(f"() => {{ const b = window.__npkBench; b.start = null; b.settleStart = null; b.waitFor = '{attr}'; }}")
    action()
    page.wait_for_function(f"() => window.__npkBench.results.length > {n}", timeout=timeout_ms)
    if settle is not None:
        page.wait_for_function(f"() => window.__npkBench.settled.length > {k}", timeout=timeout_ms)
        settle.append(page.evaluate("() => window.__npkBench.settled[window.__npkBench.settled.length - 1]"))
    return page.evaluate("() => window.__npkBench.results[window.__npkBench.results.length - 1]")


def phases(page) -> dict:
    """Where the time of the measured requests went, from the widget's own timestamps:
    round trip (send -> the answer arrives: kernel, Study, transport) and apply (decode + DOM),
    medians and the first two requests (the cold ones) apart."""
    tr = page.evaluate("() => { const t = window.__npukitTrace || []; window.__npukitTrace = []; return t; }")
    rt, ap, cur = [], [], {}
    for name, t in tr:
        cur[name] = t
        if name == "applied" and "send" in cur and "recv" in cur:
            rt.append(cur["recv"] - cur["send"])
            ap.append(cur["applied"] - cur["recv"])
            cur = {}
    if not rt:
        return {}
    return {"round_trip_p50_ms": round(statistics.median(rt), 1), "apply_p50_ms": round(statistics.median(ap), 1),
            "first_two": [{"round_trip_ms": round(r, 1), "apply_ms": round(a, 1)} for r, a in zip(rt[:2], ap[:2])]}  # fmt: skip


def write_notebook(path: Path, cells: list[str]) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nbformat.write(nb, str(path))


def chain_model(n_ops: int, path: Path, channels: int = 8, size: int = 8) -> int:
    """A ladder of conv3x3/relu/conv1x1/relu/add(residual)/softmax blocks with a tanh every third
    block: on arm-dsp-dla the convs, relus and adds go to the DLA, softmax to the DSP, tanh to the
    host, so the graph falls into thousands of partitions across the three processors."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x, k, n = "x", 0, 0
    while n < n_ops:
        b = f"b{k}"
        w1 = numpy_helper.from_array(
            (rng.standard_normal((channels, channels, 3, 3)) * 0.1).astype(np.float32), f"{b}.w1"
        )
        w2 = numpy_helper.from_array(
            (rng.standard_normal((channels, channels, 1, 1)) * 0.1).astype(np.float32), f"{b}.w2"
        )
        inits += [w1, w2]
        nodes += [
            helper.make_node("Conv", [x, w1.name], [f"{b}/c1"], name=f"{b}/conv1", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"{b}/c1"], [f"{b}/r1"], name=f"{b}/relu1"),
            helper.make_node("Conv", [f"{b}/r1", w2.name], [f"{b}/c2"], name=f"{b}/conv2"),
            helper.make_node("Relu", [f"{b}/c2"], [f"{b}/r2"], name=f"{b}/relu2"),
            helper.make_node("Add", [f"{b}/r2", x], [f"{b}/add"], name=f"{b}/add"),
            helper.make_node("Softmax", [f"{b}/add"], [f"{b}/sm"], name=f"{b}/softmax", axis=-1),
        ]
        n += 6
        out = f"{b}/sm"
        if k % 3 == 2 and n < n_ops:
            nodes.append(helper.make_node("Tanh", [out], [f"{b}/tanh"], name=f"{b}/tanh"))
            out = f"{b}/tanh"
            n += 1
        x, k = out, k + 1
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return n


def bench_clicks(browser, lab, clicks: int) -> dict:
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.set_default_timeout(120_000)
    open_notebook(page, lab, "bench_1k.ipynb")
    log("1k: running the notebook")
    run_all_cells(page, timeout_ms=300_000)
    log("1k: measuring")
    page.wait_for_selector(f'{ROOT} [data-testid="graph"][data-layout="done"]')
    page.locator(f'{ROOT} [data-testid="graph"]').scroll_into_view_if_needed()
    page.evaluate(MEASURE_JS)
    out: dict = {}

    # selection: partition nodes in view, front end only
    parts = page.eval_on_selector_all(
        f'{ROOT} [data-testid="graph-partition"]',
        """els => { const host = document.querySelector('[data-testid="npukit-root"] [data-testid="graph"]').getBoundingClientRect();
                     return els.filter(e => { const r = e.getBoundingClientRect();
                       return r.left > host.left + 2 && r.right < host.right - 2 && r.top > host.top + 2 && r.bottom < host.bottom - 2; })
                       .map(e => e.dataset.pid); }""",
    )
    sel = []
    for i in range(clicks):
        pid = parts[i % len(parts)]
        sel.append(
            measure(
                page,
                lambda pid=pid: page.click(f'{ROOT} [data-testid="graph-partition"][data-pid="{pid}"]'),
                "data-paint",
            )
        )
    out["select_node"] = summary(sel)
    log("1k: selection done")

    # bit-width of the host: cost-only edits, recoloured in place (the pointer rests on the control,
    # as a user's would)
    page.hover(f'{ROOT} [data-testid="bits-arm"]')
    page.evaluate("() => { window.__npukitTrace = []; }")
    bits, bits_last = [], []
    for i in range(clicks + 2):
        v = "fp16" if i % 2 == 0 else "fp32"
        bits.append(measure(page, lambda v=v: page.select_option(f'{ROOT} [data-testid="bits-arm"]', v), "data-rev",
                            settle=bits_last))  # fmt: skip
    out["bits_cold_ms"] = [round(x, 1) for x in bits[:2]]
    out["bits"] = summary(bits[2:])
    out["bits_last_answer"] = {"cold_ms": [round(x, 1) for x in bits_last[:2]], **summary(bits_last[2:])}
    out["bits_phases"] = phases(page)
    log("1k: bit-widths done")

    # op support: dsp softmax off/on, a new partition structure each time
    sup, sup_last = [], []
    box = f'{ROOT} [data-testid="support-dsp-softmax"]'
    for _ in range(clicks + 2):
        sup.append(measure(page, lambda: page.click(box), "data-rev", settle=sup_last))
    out["support_cold_ms"] = [round(x, 1) for x in sup[:2]]
    out["support_toggle"] = summary(sup[2:])
    out["support_last_answer"] = {"cold_ms": [round(x, 1) for x in sup_last[:2]], **summary(sup_last[2:])}
    out["support_phases"] = phases(page)
    out["all_warm"] = summary(sel + bits[2:] + sup[2:])
    out["nodes_drawn"] = int(page.get_attribute(f'{ROOT} [data-testid="graph"]', "data-nodes") or 0)
    out["partitions"] = page.locator(f'{ROOT} [data-testid="total-partitions"]').inner_text()
    page.close()
    return out


def bench_first_render(browser, lab, n_ops: int) -> dict:
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    page.set_default_timeout(600_000)
    open_notebook(page, lab, "bench_10k.ipynb")
    log(f"10k: building the Study of {n_ops} ops and showing it")
    run_all_cells(page, timeout_ms=900_000)
    graph = page.wait_for_selector(f'{ROOT} [data-testid="graph"][data-layout="done"]', timeout=120_000)
    text = page.locator(".jp-OutputArea-output pre:has-text('NPUKIT_T0')").inner_text()
    _, t0, build_ms, n, parts = text.split()
    first = float(graph.get_attribute("data-first-paint"))
    done = float(graph.get_attribute("data-layout-done"))
    out = {
        "ops": int(n), "partitions": int(parts),
        "first_paint_ms": round(first - float(t0) * 1e3, 1),
        "complete_ms": round(done - float(t0) * 1e3, 1),
        "python_view_build_ms": round(float(build_ms), 1),
        "js_layout_ms": int(graph.get_attribute("data-layout-ms") or 0),
        "nodes_drawn": int(graph.get_attribute("data-nodes") or 0),
    }  # fmt: skip
    page.screenshot(path=str(REPO / "test-artifacts" / "bench_10k.png"))
    page.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clicks", type=int, default=30)
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--skip-10k", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--placement", choices=("cost", "first-fit"), default="cost")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    (REPO / "test-artifacts").mkdir(exist_ok=True)
    result: dict = {"placement": args.placement, "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                "load_avg_1min_at_start": round(os.getloadavg()[0], 2)}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="npukit-bench-") as d:
        root = Path(d)
        (root / "transformer_encoder.onnx").write_bytes(
            (REPO / "sample_models" / "transformer_encoder.onnx").read_bytes()
        )
        n_ops = 0 if args.skip_10k else chain_model(args.ops, root / "chain.onnx")
        write_notebook(root / "bench_1k.ipynb", [
            f"import npukit, time\nst = npukit.Study('transformer_encoder.onnx', 'arm-dsp-dla', placement={args.placement!r})\nst.totals; st.placement;",
            "t0 = time.time(); w = st.show(); print('NPUKIT_T0', repr(t0), w.build_ms, len(st.graph.ops), st.totals['partitions']); w",
        ])  # fmt: skip
        write_notebook(root / "bench_10k.ipynb", [
            f"import npukit, time\nst = npukit.Study('chain.onnx', 'arm-dsp-dla', placement={args.placement!r})\nst.totals; st.placement;",
            "t0 = time.time(); w = st.show(); print('NPUKIT_T0', repr(t0), w.build_ms, len(st.graph.ops), st.totals['partitions']); w",
        ])  # fmt: skip
        t = time.monotonic()
        with jupyter_lab(root) as lab, sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                result["click_repaint_1k"] = bench_clicks(browser, lab, args.clicks)
                if not args.skip_10k:
                    r = bench_first_render(browser, lab, n_ops)
                    result["first_render_10k"] = r
            finally:
                browser.close()
        result["wall_s"] = round(time.monotonic() - t, 1)
        result["machine"]["load_avg_1min_at_end"] = round(os.getloadavg()[0], 2)
    c = result["click_repaint_1k"]
    result["goals"] = {
        "click_repaint_p95_le_150ms": max(
            c["select_node"]["p95_ms"], c["bits"]["p95_ms"], c["support_toggle"]["p95_ms"]
        )
        <= 150,
        # issue 15: every edit kind, the first of a kind included (the first answer)
        "first_answer_p95_le_100ms_incl_cold": max(
            c["select_node"]["p95_ms"], c["bits"]["p95_ms"], c["support_toggle"]["p95_ms"],
            *c["bits_cold_ms"], *c["support_cold_ms"]) <= 100,
    }
    if "first_render_10k" in result:
        result["goals"]["first_render_10k_le_3s"] = result["first_render_10k"]["first_paint_ms"] <= 3000
        result["goals"]["complete_layout_10k_le_3s"] = result["first_render_10k"]["complete_ms"] <= 3000
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
