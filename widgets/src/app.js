// The app: header with totals, status line, graph + side controls, tabs (costs, boundaries,
// timeline, error, generated code, export).  It displays the traits of npukit.ui.StudyWidget and sends edit
// requests back; it computes nothing about the Study itself.

import { decodeGraph, decodePlacement, decodeValues } from "./data.js";
import { GraphView } from "./graph.js";
import { VirtualTable } from "./table.js";
import { Timeline } from "./timeline.js";
import { CodeView } from "./code.js";
import { Controls } from "./controls.js";
import { ErrorPanel } from "./errorpanel.js";
import { h, esc, us, uj, num, bytes, shorten, nOps, widthsOf, layerWidthLabel } from "./format.js";

const TABS = [
  ["costs", "Costs"],
  ["boundaries", "Boundaries"],
  ["timeline", "Timeline"],
  ["error", "Error"],
  ["code", "Code"],
  ["export", "Export"],
];

export class App {
  constructor(model, el) {
    this.model = model;
    this.el = el;
    this.seq = 0;
    this.acked = 0;
    // this view's name in its requests: one widget shown twice has two views, each numbering its
    // requests from 1; the status says per view the last request answered (status.acks)
    this.view = Math.random().toString(36).slice(2, 10) + Date.now().toString(36);
    this.dirty = new Set();
    this.selected = null;
    this.tab = "costs";
    this.tabDirty = new Set(TABS.map((t) => t[0]));
    this.G = decodeGraph(model.get("graph"));
    this.P = decodePlacement(model.get("placement"), this.G);
    this.V = decodeValues(model.get("values"), this.G);
    this.C = model.get("controls");
    this.E = model.get("errors");
    this.S = model.get("status");
    this.codePending = 0; // seq of the code request in flight
    this.opts = model.get("options") || {};
    this._build();
    this.graph.setExpandDefault(this.G.n <= (this.opts.expand_max_ops ?? 160));
    this.graph.update(this.G, this.P, this.V);
    this.controls.build(this.G, this.C.placements);
    this._renderInfo();
    this._renderTab();
    this._renderStatus();
    this.root.dataset.rev = String(this.S.rev || 0);
    this.handlers = [];
    this.codeView.setCode(model.get("code"));
    this.codeView.setBuild(model.get("build"));
    this.codeView.setCurrentKey(this.S.code_key);
    for (const k of ["graph", "placement", "values", "controls", "errors", "status", "code", "build"]) {
      const fn = () => this._mark(k);
      model.on("change:" + k, fn);
      this.handlers.push(["change:" + k, fn]);
    }
    // a long request says what it is doing while the traits are held ("measuring error: 120/450
    // samples"); the request's own status replaces it
    const onMsg = (msg) => this._progress(msg);
    model.on("msg:custom", onMsg);
    this.handlers.push(["msg:custom", onMsg]);
  }

  destroy() {
    for (const [ev, fn] of this.handlers) this.model.off(ev, fn);
    this.graph.destroy();
    this.timeline?.destroy();
  }

  // -------------------------------------------------------------------------------------------
  // updates from Python: all traits of one message are applied together, in one pass

  _mark(k) {
    this.dirty.add(k);
    if (this._queued) return;
    trace("recv");
    this._queued = true;
    queueMicrotask(() => {
      this._queued = false;
      this._flush();
    });
  }

  _flush() {
    const d = this.dirty;
    this.dirty = new Set();
    const m = this.model;
    try {
      if (d.has("graph")) this.G = decodeGraph(m.get("graph"));
      if (d.has("graph") || d.has("placement")) this.P = decodePlacement(m.get("placement"), this.G);
      if (d.has("values") || d.has("graph")) this.V = decodeValues(m.get("values"), this.G);
      if (d.has("controls")) this.C = m.get("controls");
      if (d.has("errors")) this.E = m.get("errors");
      if (d.has("status")) this.S = m.get("status");
      if (this.selected && this.selected.type === "part" && this.selected.pid >= this.P.partitions.length) this.selected = null;
      if (d.has("graph") || d.has("placement") || d.has("values")) {
        this.graph.selected = this.selected;
        this.graph.update(this.G, this.P, this.V);
        for (const t of ["costs", "boundaries", "timeline"]) this.tabDirty.add(t);
      }
      if (d.has("graph")) this.controls.build(this.G, this.C.placements);
      if (d.has("errors")) this.tabDirty.add("error");
      if (d.has("code")) this.codeView.setCode(m.get("code"));
      if (d.has("build")) this.codeView.setBuild(m.get("build"));
      if (d.has("status")) this.codeView.setCurrentKey(this.S.code_key);
      this._renderInfo();
    } catch (e) {
      this._showStatus("error", `widget: ${e && e.message ? e.message : e}`);
      console.error(e); // eslint-disable-line no-console
    }
    if (d.has("status") && this.S) {
      const mine = this.S.acks ? this.S.acks[this.view] : undefined;
      if (mine != null) this.acked = Math.max(this.acked, mine);
      this.root.dataset.rev = String(this.S.rev);
    }
    this._renderStatus();
    this._wantCode();
    trace("applied");
    // tables and the timeline redraw after the graph's frame is on screen
    requestAnimationFrame(() => setTimeout(() => this._renderTab(), 0));
  }

  send(msg) {
    const seq = ++this.seq;
    trace("send");
    this.model.send({ ...msg, seq, view: this.view });
    this._renderStatus();
    return seq;
  }

  // -------------------------------------------------------------------------------------------
  // skeleton

  _build() {
    const G = this.G;
    this.totalsEl = h("div", { class: "nk-totals", testid: "totals" });
    this.legendEl = h("div", { class: "nk-legend", testid: "legend" });
    this.statusEl = h("div", { class: "nk-status", testid: "status", role: "status" });
    const head = h(
      "div",
      { class: "nk-head" },
      h("div", { class: "nk-title" }, h("b", {}, G.model), ` on ${G.soc} · ${G.n.toLocaleString("en-US")} ops`),
      this.legendEl,
    );
    this.graphHost = h("div", { class: "nk-graph", testid: "graph" });
    const tool = (label, title, fn, testid) => h("button", { class: "nk-btn", title, onclick: fn, testid }, label);
    const toolbar = h(
      "div",
      { class: "nk-toolbar" },
      tool("fit", "fit the graph to the view: the whole graph if it stays readable, else its width (scroll for the rest)", () => this.graph.fit(), "graph-fit"),
      tool("+", "zoom in", () => this.graph.zoom(1.25), "graph-zoom-in"),
      tool("−", "zoom out", () => this.graph.zoom(0.8), "graph-zoom-out"),
      tool("expand all", "show every op", () => this._expandAll(true), "expand-all"),
      tool("collapse all", "one node per partition", () => this._expandAll(false), "collapse-all"),
      h("span", { class: "nk-hint" }, "click: select · double-click a partition: expand · wheel: scroll · ctrl+wheel: zoom · drag: pan"),
    );
    this.graph = new GraphView(this.graphHost, {
      onSelect: (sel) => this.select(sel),
      tooltip: (key) => this._tooltip(key),
      onLayout: (info) => {
        this.graphHost.dataset.layoutMs = String(Math.round(info.ms));
        this.graphHost.dataset.nodes = String(info.nodes);
        this.graphHost.dataset.dagreRuns = String(info.stats.runs);
        this.graphHost.dataset.dagreHits = String(info.stats.hits);
      },
    });
    this.selEl = h("div", { class: "nk-selection", testid: "selection" });
    this.bitsEl = h("div", { class: "nk-bits" });
    this.supportEl = h("div", { class: "nk-support", testid: "support" });
    this.controls = new Controls(this.bitsEl, this.supportEl, (msg) => this.send(msg));
    const side = h(
      "div",
      { class: "nk-side" },
      h("section", {}, h("h4", {}, "Selected"), this.selEl),
      h("section", {}, h("h4", {}, "Placement and bit-widths"), this.bitsEl),
      h("section", {}, h("h4", {}, "Op support (checked: the accelerator runs it)"), this.supportEl),
      h("section", {}, h("button", { class: "nk-btn", testid: "reset", onclick: () => this.send({ type: "reset" }) }, "reset all edits")),
    );
    const main = h("div", { class: "nk-main" }, h("div", { class: "nk-graphcol" }, toolbar, this.graphHost), side);
    this.tabBar = h(
      "div",
      { class: "nk-tabbar", role: "tablist" },
      TABS.map(([k, label]) => h("button", { class: "nk-tab", "data-tab": k, testid: "tab-" + k, onclick: () => this.showTab(k) }, label)),
    );
    this.panels = {};
    for (const [k] of TABS) this.panels[k] = h("div", { class: "nk-panel", testid: "panel-" + k, "data-tab": k });
    this.root = h(
      "div",
      { class: "nk-root", testid: "npukit-root" },
      head,
      this.totalsEl,
      this.statusEl,
      main,
      this.tabBar,
      h("div", { class: "nk-panels" }, Object.values(this.panels)),
    );
    this.el.append(this.root);
    this._buildTabs();
    this.showTab(this.tab, false);
  }

  _expandAll(on) {
    if (on && this.G.n > 3000 && !window.confirm(`Show all ${this.G.n.toLocaleString()} ops? Laying them out takes a while.`)) return;
    this.graph.expandAll(on);
  }

  showTab(k, render = true) {
    this.tab = k;
    for (const b of this.tabBar.children) b.classList.toggle("on", b.dataset.tab === k);
    for (const [name, p] of Object.entries(this.panels)) p.style.display = name === k ? "" : "none";
    if (render) this._renderTab();
    if (k === "code") {
      this.codeView.select(this._selOps(), false);
      this._wantCode();
    }
  }

  // The code is sent only when asked: ask when the Code tab shows and what it shows is not the
  // code of the Study's current config (first opening, or an edit since).
  _wantCode() {
    if (this.tab !== "code" || this.codePending > this.acked) return;
    const want = this.S && this.S.code_key;
    const have = this.codeView.code.key;
    if (have && have === want) return;
    if (have && this.codeAskedFor === want) return; // asked for this version already (it failed: see the status)
    this.codeAskedFor = want;
    const follow = this.codeView.followOp();
    if (follow != null) this.codeView.pendingScroll = "sel";
    this.codePending = this.send({ type: "code", path: this.codeView.code.path || null, follow });
  }

  _selOps() {
    const sel = this.selected;
    if (!sel) return [];
    if (sel.type === "op") return [sel.op];
    if (sel.type === "part") return (this.P.members[sel.pid] || []).slice();
    return [];
  }

  // "show code" of the selection: open the Code tab at the lines that run it
  showCode() {
    this.codeView.following = true;
    this.showTab("code");
    this.codeView.select(this._selOps(), true);
  }

  // -------------------------------------------------------------------------------------------
  // selection

  select(sel, center = false) {
    if (!sel || sel.type !== "op" || !this.pinChoice || this.pinChoice.op !== sel.op) this.pinChoice = null;
    this.selected = sel;
    this.graph.select(sel, center);
    this._renderSelection();
    if (this.tab === "code") this.codeView.select(this._selOps(), true);
    if (this.costTable) {
      this.costTable.setSelected(sel && sel.type === "op" ? sel.op : -1);
      if (sel && sel.type === "op" && center === false) this.costTable.scrollToRow(sel.op);
    }
  }

  _pinOf(op) {
    return (this.C.pins || []).find((p) => p.ops.includes(op));
  }

  _layerBitsOf(op) {
    return (this.C.layer_bits || []).find((p) => p.ops.includes(op));
  }

  _renderSelection() {
    const G = this.G;
    const P = this.P;
    const V = this.V;
    const sel = this.selected;
    const el = this.selEl;
    el.textContent = "";
    if (!sel) {
      el.append(h("div", { class: "nk-muted" }, "Click a node in the graph or a row in the cost table."));
      return;
    }
    if (sel.type === "part") {
      const part = P.partitions[sel.pid];
      const ops = P.members[sel.pid];
      let lat = 0;
      let en = 0;
      for (const i of ops) {
        lat += V.lat[i];
        en += V.energy[i];
      }
      el.append(
        h("div", { class: "nk-selname" }, `partition P${sel.pid}`),
        h("div", {}, `${G.processors[part.proc].name} · ${nOps(ops.length)} · ${us(lat)} · ${uj(en)}`),
        h("div", { class: "nk-muted" }, `${shorten(G.name[ops[0]], 28)} … ${shorten(G.name[ops[ops.length - 1]], 28)}`),
        h(
          "button",
          { class: "nk-btn", testid: "toggle-partition", onclick: () => this.graph.toggleExpand(sel.pid) },
          this.graph.isExpanded(sel.pid) ? "collapse" : "expand",
        ),
        h("div", { class: "nk-muted" }, "Select an op to pin it or set its bit-width."),
        h("button", { class: "nk-btn", testid: "show-code", onclick: () => this.showCode() }, "show code"),
      );
      return;
    }
    const op = sel.op;
    const proc = G.processors[P.proc[op]];
    const pin = this._pinOf(op);
    const lb = this._layerBitsOf(op);
    // the processor the user chose stays chosen while the op stays selected (every update re-renders this panel)
    const chosen = this.pinChoice && this.pinChoice.op === op ? this.pinChoice.processor : pin ? pin.processor : proc.name;
    const pinSel = h(
      "select",
      { testid: "pin-processor", onchange: (ev) => (this.pinChoice = { op, processor: ev.target.value }) },
      G.processors.map((p) => h("option", { value: p.name, selected: p.name === chosen }, p.name)),
    );
    const procBits = this.C.bits[proc.name] || proc.default_bits;
    const bitsSel = h(
      "select",
      {
        testid: "layer-bits",
        // a layer is the model node the op came from (all of its ops), as study.set_bits(layer=...) takes it
        onchange: (ev) => this.send({ type: "layer_bits", node: lb ? lb.node : G.source[op], bits: ev.target.value || null }),
      },
      h("option", { value: "" }, `processor default (${procBits})`),
      // every width some processor runs: one the op's processor does not run moves the layer (as set_bits does)
      widthsOf(G.processors).map((b) => h("option", { value: b, selected: lb && lb.bits === b }, layerWidthLabel(b, proc))),
    );
    el.append(
      ...[
      h("div", { class: "nk-selname", testid: "selected-name", title: G.name[op] }, G.name[op]),
      h("div", {}, `${G.kind[op]} on `, h("b", { style: `color:${proc.color}` }, proc.name), ` · P${P.part[op]} · ${V.bitsNames[V.bits[op]]}`),
      h("div", { class: "nk-reason" }, P.strings[P.reason[op]]),
      h(
        "div",
        { class: "nk-row" },
        "pin to ",
        pinSel,
        h("button", { class: "nk-btn", testid: "pin-button", onclick: () => this.send({ type: "pin", node: op, processor: pinSel.value }) }, "pin"),
        h(
          "button",
          { class: "nk-btn", testid: "unpin-button", disabled: !pin, onclick: () => pin && this.send({ type: "unpin", node: pin.node }) },
          "unpin",
        ),
      ),
      pin ? h("div", { class: "nk-muted" }, `pinned (${pin.label ?? pin.node}) to ${pin.processor}`) : null,
      h("div", { class: "nk-row" }, "bits for this layer ", bitsSel),
      h("div", { class: "nk-row" }, h("button", { class: "nk-btn", testid: "show-code", onclick: () => this.showCode() }, "show code")),
      ].filter(Boolean),
    );
  }

  // -------------------------------------------------------------------------------------------
  // controls: built once, their state set on every update

  _renderInfo() {
    this._renderTotals();
    this.controls.render(this.C);
    this._renderSelection();
  }

  _renderTotals() {
    const t = this.V.totals;
    const G = this.G;
    this.totalsEl.innerHTML =
      `<span data-testid="total-latency"><b>latency</b> ${esc(us(t.latency_us))}</span>` +
      `<span data-testid="total-energy"><b>energy</b> ${esc(uj(t.energy_uj))}</span>` +
      `<span><b>MACs</b> ${esc(num(t.macs))}</span>` +
      `<span data-testid="total-partitions"><b>partitions</b> ${t.partitions}</span>` +
      `<span><b>boundaries</b> ${t.boundaries}</span>` +
      `<span><b>transfers</b> ${esc(us(t.transfer_us))}</span>` +
      // a plan an accelerator's runtime would refuse (more partitions than its max_partitions)
      this.P.limits.map((text) => `<span class="nk-limit" data-testid="partition-limit">⚠ ${esc(text)}</span>`).join("");
    this.legendEl.innerHTML = G.processors
      .map((p) => {
        const busy = t.busy_us ? t.busy_us[p.name] : 0;
        const n = t.ops ? t.ops[p.name] : 0;
        return `<span class="nk-leg" data-testid="legend-${esc(p.name)}" title="${esc(p.kind)}${p.host ? " (host)" : ""}; busy: its ops' kernels and the boundary conversions (layout, quantize) it runs, so more than its partitions' kernels"><span class="nk-chip" style="background:${p.color}"></span>${esc(p.name)} <small>${nOps(n)} · busy ${esc(us(busy))}</small></span>`;
      })
      .join("");
  }

  _showStatus(level, text) {
    this.localStatus = { level, text };
    this._renderStatus();
  }

  _progress(msg) {
    if (!msg || msg.type !== "progress") return;
    if (msg.view != null && msg.view !== this.view) return; // another view's request
    if (msg.seq != null && msg.seq <= this.acked) return; // that request is answered already
    this.working = msg.text || null;
    this.workingSeq = msg.seq;
    this._renderStatus();
  }

  _renderStatus() {
    const busy = this.seq > this.acked;
    if (this.working && (!busy || (this.workingSeq != null && this.workingSeq <= this.acked))) this.working = null;
    let level = "info";
    let text = "";
    if (this.localStatus) {
      ({ level, text } = this.localStatus);
      this.localStatus = null;
    } else if (this.S && this.S.text) {
      level = this.S.level;
      text = this.S.text + (this.S.ms ? `  (${this.S.ms} ms)` : "");
    }
    if (busy) text = this.working ? "working: " + this.working : "working…" + (text ? "  · last: " + text : "");
    this.statusEl.className = "nk-status nk-" + level + (busy ? " nk-working" : "");
    this.statusEl.dataset.level = level;
    // "1" from a request until its answer: a first answer that is not the last (an edit under the cost
    // policy shows first-fit estimates while its placement is computed) keeps it "1"
    this.root.dataset.busy = busy ? "1" : "0";
    this.statusEl.textContent = text || "ready";
  }

  // -------------------------------------------------------------------------------------------
  // tooltips

  _tooltip(key) {
    const G = this.G;
    const P = this.P;
    const V = this.V;
    const kind = key[0];
    const names = G.processors.map((p) => p.name);
    if (kind === "o") {
      const op = +key.slice(1);
      const pin = this._pinOf(op);
      let html = `<div class="nk-tt-title">${esc(G.name[op])}</div>`;
      html += `<div>${esc(G.op[op])} · <b style="color:${G.colors[P.proc[op]]}">${esc(names[P.proc[op]])}</b> · P${P.part[op]}${pin ? " · pinned" : ""}</div>`;
      html += `<div class="nk-tt-reason">${esc(P.strings[P.reason[op]])}</div>`;
      html += `<table>`;
      html += `<tr><td>latency</td><td>${esc(us(V.lat[op]))}</td></tr>`;
      html += `<tr><td>energy</td><td>${esc(uj(V.energy[op]))}</td></tr>`;
      html += `<tr><td>MACs</td><td>${esc(num(V.macs[op]))}</td></tr>`;
      html += `<tr><td>bytes</td><td>${esc(bytes(V.bytes[op]))}</td></tr>`;
      const over = V.cycles[op] - Math.max(V.compute[op], V.memory[op]); // op and call overheads: the rest of the formula
      html += `<tr><td>cycles</td><td>${esc(num(V.cycles[op], 1))} = max(compute ${esc(num(V.compute[op], 1))}, memory ${esc(num(V.memory[op], 1))})${over > 0.05 ? ` + overhead ${esc(num(over, 1))}` : ""}</td></tr>`;
      html += `<tr><td>bits</td><td>${esc(V.bitsNames[V.bits[op]])}</td></tr>`;
      html += `</table><div class="nk-tt-sub">verdicts</div><table>`;
      for (const p of names) {
        const v = P.verdicts[p] ? P.strings[P.verdicts[p][op]] : "";
        html += `<tr><td>${esc(p)}</td><td>${esc(v)}</td></tr>`;
      }
      return html + "</table>";
    }
    if (kind === "p" || kind === "c") {
      const pid = +key.slice(1);
      const part = P.partitions[pid];
      if (!part) return "";
      const ops = P.members[pid];
      let lat = 0;
      let en = 0;
      let macs = 0;
      const kinds = new Map();
      for (const i of ops) {
        lat += V.lat[i];
        en += V.energy[i];
        macs += V.macs[i];
        kinds.set(G.kind[i], (kinds.get(G.kind[i]) || 0) + 1);
      }
      let bin = 0;
      let bout = 0;
      for (const b of V.boundaries) {
        if (b.producer >= 0 && P.part[b.producer] === pid) bout += b.cost_us;
        if (b.consumers.some((c) => P.part[c] === pid)) bin += b.cost_us;
      }
      const top = [...kinds].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([k, n]) => `${k} ${n}`).join(", ");
      return (
        `<div class="nk-tt-title">partition P${pid} on <b style="color:${G.colors[part.proc]}">${esc(names[part.proc])}</b></div>` +
        `<div>${nOps(ops.length)}: ${esc(top)}</div>` +
        `<div>${esc(shorten(G.name[ops[0]], 34))} … ${esc(shorten(G.name[ops[ops.length - 1]], 34))}</div>` +
        `<table><tr><td>latency</td><td>${esc(us(lat))}</td></tr><tr><td>energy</td><td>${esc(uj(en))}</td></tr>` +
        `<tr><td>MACs</td><td>${esc(num(macs))}</td></tr><tr><td>boundaries in</td><td>${esc(us(bin))}</td></tr>` +
        `<tr><td>boundaries out</td><td>${esc(us(bout))}</td></tr></table>` +
        `<div class="nk-tt-sub">${kind === "p" ? "double-click to expand" : "click − to collapse"}</div>`
      );
    }
    if (kind === "i" || kind === "x") {
      const t = kind === "i" ? G.inputs[+key.slice(1)] : G.outputs[+key.slice(1)];
      return `<div class="nk-tt-title">${kind === "i" ? "model input" : "model output"} ${esc(t.name)}</div><div>${esc(JSON.stringify(t.shape))} ${esc(t.dtype)}</div>`;
    }
    return "";
  }

  // -------------------------------------------------------------------------------------------
  // tabs

  _buildTabs() {
    const G = this.G;
    // costs
    this.costTable = new VirtualTable(this.panels.costs, {
      testid: "cost-table",
      rowTestid: "cost-row",
      height: 280,
      onRowClick: (i) => this.select({ type: "op", op: i }, true),
    });
    const names = G.processors.map((p) => p.name);
    this.costTable.setColumns([
      { key: "op_id", label: "op", num: true, width: 50, get: (i) => i },
      { key: "name", label: "name", width: 300, get: (i) => G.name[i] },
      { key: "kind", label: "kind", width: 110, get: (i) => G.kind[i] },
      { key: "processor", label: "processor", width: 80, get: (i) => names[this.P.proc[i]] },
      { key: "partition", label: "part.", num: true, width: 50, get: (i) => this.P.part[i] },
      { key: "bits", label: "bits", width: 55, get: (i) => this.V.bitsNames[this.V.bits[i]] },
      // one format per numeric column, chosen from its values when the data change (table.js)
      { key: "macs", label: "MACs", num: true, width: 90, get: (i) => this.V.macs[i], column: true },
      { key: "bytes", label: "bytes", num: true, width: 80, get: (i) => this.V.bytes[i], column: true },
      { key: "cycles", label: "cycles", num: true, width: 80, get: (i) => this.V.cycles[i], column: { cap: 1 } },
      { key: "latency_us", label: "latency us", num: true, width: 90, get: (i) => this.V.lat[i], column: true },
      { key: "energy_uj", label: "energy uJ", num: true, width: 90, get: (i) => this.V.energy[i], column: true },
    ]);
    // boundaries
    this.boundTable = new VirtualTable(this.panels.boundaries, { testid: "boundary-table", rowTestid: "boundary-row", height: 280 });
    const B = () => this.V.boundaries;
    this.boundTable.setColumns([
      { key: "tensor", label: "tensor", width: 200, get: (i) => B()[i].tensor },
      { key: "route", label: "route", width: 90, get: (i) => `${B()[i].src} → ${B()[i].dst}` },
      { key: "bytes", label: "bytes", num: true, width: 70, get: (i) => B()[i].bytes, column: true },
      { key: "transfer_us", label: "transfer us", num: true, width: 85, get: (i) => B()[i].transfer_us, column: true },
      { key: "layout_us", label: "layout us", num: true, width: 75, get: (i) => B()[i].layout_us, column: true },
      { key: "quantize_us", label: "quant. us", num: true, width: 75, get: (i) => B()[i].quantize_us, column: true },
      { key: "cost_us", label: "total us", num: true, width: 75, get: (i) => B()[i].cost_us, column: true },
      { key: "energy_uj", label: "energy uJ", num: true, width: 80, get: (i) => B()[i].energy_uj, column: true },
      { key: "conversion", label: "conversion", width: 230, get: (i) => B()[i].conversion },
      { key: "consumers", label: "read by", width: 200, get: (i) => B()[i].consumers.map((c) => G.name[c]).join(", ") || "(model output)" },
    ]);
    // timeline
    this.timeline = new Timeline(this.panels.timeline);
    // error
    this.errPanel = new ErrorPanel(this.panels.error, {
      send: (msg) => this.send(msg),
      onSelectOp: (op) => this.select({ type: "op", op }, true),
    });
    // generated code
    this.codeView = new CodeView(this.panels.code, {
      send: (msg) => {
        if (msg.type === "code") {
          this.codePending = this.send(msg);
          return this.codePending;
        }
        return this.send(msg);
      },
      onSelectOp: (op) => this.select({ type: "op", op }, true),
      opName: (op) => this.G.name[op],
    });
    // export
    const paths = this.opts.export_paths || {};
    const row = (what, label, testid, placeholder) => {
      const input = h("input", { type: "text", class: "nk-path", testid: testid + "-path", value: paths[what] || "", placeholder });
      return h(
        "div",
        { class: "nk-row" },
        h("button", { class: "nk-btn", testid, onclick: () => this.send({ type: "export", what, path: input.value }) }, label),
        input,
      );
    };
    this.panels.export.append(
      row("model_explorer", "Model Explorer JSON", "export-me", "directory"),
      row("annotated_onnx", "annotated ONNX", "export-onnx", "file.onnx"),
      h("div", { class: "nk-muted" }, "Paths are relative to the notebook's kernel (npukit_out/ is in the repository's .gitignore); the result shows in the status line."),
    );
  }

  _renderTab() {
    const k = this.tab;
    if (!this.tabDirty.has(k)) return;
    this.tabDirty.delete(k);
    if (k === "costs") {
      this.costTable.setData(this.G.n);
      this.costTable.setSelected(this.selected && this.selected.type === "op" ? this.selected.op : -1);
    } else if (k === "boundaries") {
      this.boundTable.setData(this.V.boundaries.length);
    } else if (k === "timeline") {
      try {
        this.timeline.draw(this.G, this.V, (op) => this.select({ type: "op", op }, true));
      } catch (e) {
        this.panels.timeline.dataset.error = String(e);
      }
    } else if (k === "error") {
      this.errPanel.render(this.E);
    }
  }
}

// timestamps for benchmarks/ui.py, recorded only when a page asks for them
function trace(what) {
  if (window.__npukitTrace) window.__npukitTrace.push([what, performance.now()]);
}
