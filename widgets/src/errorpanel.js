// The Error tab: measured only when asked (it runs the model).  Model outputs (SNR, max |err|,
// top-1 agreement), accuracy, and the per-op table.  How many samples each figure is over comes
// from Python (E.samples, E.per_op_samples, E.per_op_note): the per-op figures may use fewer.

import { h, columnFormat } from "./format.js";
import { VirtualTable } from "./table.js";

export class ErrorPanel {
  constructor(host, { send, onSelectOp }) {
    this.E = {};
    this.auto = h("input", { type: "checkbox", testid: "auto-error", onchange: (ev) => send({ type: "auto_error", on: ev.target.checked }) });
    const head = h(
      "div",
      { class: "nk-row" },
      h("button", { class: "nk-btn", testid: "measure-error", onclick: () => send({ type: "measure_error", auto: this.auto.checked }) }, "measure error"),
      h("label", { class: "nk-check" }, this.auto, " measure after every edit (runs the model)"),
    );
    this.text = h("div", { class: "nk-errtext", testid: "error-state" });
    this.outputs = h("div", { class: "nk-errout" });
    this.note = h("div", { class: "nk-errnote", testid: "error-per-op-samples" });
    host.append(head, this.text, this.outputs, this.note);
    this.table = new VirtualTable(host, {
      testid: "error-table",
      rowTestid: "error-row",
      height: 180,
      onRowClick: (i) => {
        const id = this.E.ops && this.E.ops.op_id ? this.E.ops.op_id[i] : null;
        if (id != null) onSelectOp(id);
      },
    });
    const col = (k) => (i) => (this.E.ops && this.E.ops[k] ? this.E.ops[k][i] : null);
    this.table.setColumns([
      { key: "op_id", label: "op", num: true, width: 50, get: col("op_id") },
      { key: "name", label: "name", width: 240, get: col("name") },
      { key: "processor", label: "processor", width: 80, get: col("processor") },
      { key: "bits", label: "bits", width: 60, get: col("bits") },
      { key: "snr_db", label: "SNR dB", num: true, width: 80, get: col("snr_db"), fmt: (v) => fixed(v, 2) },
      { key: "max_abs_err", label: "max |err|", num: true, width: 90, get: col("max_abs_err"), column: true },
    ]);
  }

  render(E) {
    E = E || {};
    this.E = E;
    this.text.textContent = (E.state === "ok" ? (E.stale ? E.stale_text || "stale: the config changed since this was measured" : "") : E.text) || "";
    this.text.dataset.state = E.stale ? "stale" : E.state || "";
    this.outputs.textContent = "";
    this.note.textContent = "";
    if (E.state !== "ok") {
      this.table.setData(0);
      return;
    }
    const outs = E.outputs || [];
    const maxAbs = columnFormat(outs.map((o) => o.max_abs));
    const rows = outs.map((o) =>
      h(
        "tr",
        {},
        h("td", {}, o.name),
        h("td", { class: "num" }, fixed(o.snr_db, 2)),
        h("td", { class: "num" }, maxAbs(o.max_abs)),
        h("td", { class: "num" }, o.top1_agreement == null ? "–" : (100 * o.top1_agreement).toFixed(1) + "%"),
      ),
    );
    const th = (t, spec) => h("th", spec ? { "data-format": spec } : {}, t);
    this.outputs.append(
      h(
        "table",
        { class: "nk-small", testid: "error-outputs" },
        h("tr", {}, th("output"), th("SNR dB"), th("max |err|", maxAbs.spec), th("top-1 agreement")),
        rows,
      ),
    );
    if (E.accuracy != null)
      this.outputs.append(
        h("div", { testid: "error-accuracy" }, `accuracy ${(100 * E.accuracy).toFixed(2)}% (fp32 ${E.accuracy_fp32 == null ? "–" : (100 * E.accuracy_fp32).toFixed(2) + "%"}) on ${E.samples} samples`),
      );
    if (E.data_source) this.outputs.append(h("div", { class: "nk-muted" }, `data: ${E.data_source}`));
    this.note.textContent = E.per_op_note || "";
    this.table.setData(E.ops && E.ops.op_id ? E.ops.op_id.length : 0);
  }
}

function fixed(v, d) {
  return v == null || !isFinite(v) ? "–" : Number(v).toFixed(d);
}
