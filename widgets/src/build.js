// "build and run" in the Code tab: the `build` trait (npukit/ui/codeview.py build_view) as a
// status line, a table of runs (outputs against the simulation), the memory plan, the section
// sizes, the fit against the board's flash / SRAM, or the compiler's messages.

import { h } from "./format.js";

export function renderBuild(el, build, stale) {
  const b = build || { state: "idle" };
  el.dataset.state = b.state;
  el.textContent = "";
  if (b.state === "idle") {
    el.append(h("div", { class: "nk-muted" }, "build and run: compiles the generated project, runs it on the study's data and compares its outputs with npukit's simulation."));
    return;
  }
  if (b.state === "running") {
    el.append(h("div", { class: "nk-building", testid: "build-running" }, b.text || "building…"));
    return;
  }
  const head = `build and run${b.samples != null ? ` on ${b.samples} inputs` : ""} in ${b.seconds} s` + (stale ? " — for an earlier config" : "");
  el.append(h("div", { class: "nk-build-head" + (stale ? " nk-stale" : ""), testid: "build-head" }, head));
  if (b.state === "failed" || b.state === "error") {
    el.append(h("div", { class: "nk-build-bad" }, b.state === "failed" ? "the build or the run failed:" : "error:"), h("pre", { class: "nk-build-msg", testid: "build-messages" }, b.messages || ""));
    return;
  }
  const rows = [];
  for (const r of b.runs || []) {
    rows.push(
      h(
        "tr",
        { class: "nk-run nk-run-" + r.kind, testid: "build-run-row", "data-run": r.name, "data-kind": r.kind },
        h("td", {}, h("b", {}, r.name)),
        h("td", { colspan: "4" }, r.verdict + (r.host ? " · " + r.host : "")),
      ),
    );
    for (const o of r.outputs || []) {
      rows.push(
        h(
          "tr",
          { testid: "build-output-row" },
          h("td", { class: "nk-muted" }, o.output),
          h("td", { class: "num" }, fmt(o.max_abs, 6)),
          h("td", { class: "num" }, o.max_rel == null ? "–" : (100 * o.max_rel).toFixed(3) + "%"),
          h("td", { class: "num" }, o.argmax_agreement == null ? "–" : (100 * o.argmax_agreement).toFixed(1) + "%"),
          h("td", {}, ""),
        ),
      );
    }
  }
  el.append(
    h(
      "table",
      { class: "nk-small", testid: "build-runs" },
      h("tr", {}, h("th", {}, "run / output"), h("th", {}, "max |err|"), h("th", {}, "max err / max |value|"), h("th", {}, "top-1 agreement"), h("th", {}, "")),
      rows,
    ),
  );
  const row = (testid) => ([k, label, v]) =>
    h("tr", { testid, "data-key": k }, h("td", {}, label), h("td", { class: "num" }, v == null ? "–" : `${v.toLocaleString("en-US")} B`));
  const mem = (b.memory || []).map(row("build-memory-row"));
  const secs = (b.sections || []).map(row("build-section-row"));
  el.append(
    h(
      "div",
      { class: "nk-build-mem" },
      h("table", { class: "nk-small", testid: "build-memory" }, h("tr", {}, h("th", {}, "memory plan"), h("th", {}, "")), mem),
      secs.length ? h("table", { class: "nk-small", testid: "build-sections" }, h("tr", {}, h("th", {}, "sections (size)"), h("th", {}, "")), secs) : null,
      b.sections_error ? h("div", { class: "nk-muted" }, b.sections_error) : null,
    ),
  );
  if ((b.fit || []).length) {
    el.append(
      h(
        "table",
        { class: "nk-small", testid: "build-fit" },
        h("tr", {}, h("th", {}, "does it fit?"), h("th", {}, "used"), h("th", {}, "budget"), h("th", {}, "")),
        b.fit.map((f) =>
          h(
            "tr",
            { class: f.over ? "nk-over" : "", testid: "build-fit-row", "data-memory": f.memory, "data-over": f.over ? "1" : "0" },
            h("td", {}, (f.run ? f.run + ": " : "") + f.memory),
            h("td", { class: "num" }, `${f.used.toLocaleString("en-US")} B`),
            h("td", { class: "num" }, `${f.budget.toLocaleString("en-US")} B`),
            h("td", {}, f.text),
          ),
        ),
      ),
    );
  }
  const extra = b.extra && Object.keys(b.extra).length ? b.extra : null;
  // one "name: value" line each, as the CLI prints them (not JSON)
  const line = ([k, v]) => `${k}: ${v !== null && typeof v === "object" ? JSON.stringify(v) : v}`;
  if (extra) el.append(h("pre", { class: "nk-build-extra", testid: "build-extra" }, Object.entries(extra).map(line).join("\n")));
}

function fmt(v, d) {
  return v == null || !isFinite(v) ? "–" : Number(v) === 0 ? "0" : Number(v).toPrecision(d > 3 ? 3 : d);
}
