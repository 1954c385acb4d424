// The graph view.  Layout comes from layout.js (columns of dagre runs, cached); drawing is
// virtual: every node, box, edge and label is an item with a box in graph coordinates, and only
// the items in view have SVG elements (created when they come into view, hidden when they leave).
// So an edit costs DOM work in proportion to what is on screen, whatever the size of the model:
//   figures changed   -> paint(): colours and texts of the elements that exist
//   structure changed -> new layout (from cache where possible), items rebuilt, elements re-created

import { Columns, COL_ITEMS, planLayout, sizeCluster, layoutStats, NODE_W, NODE_H, CLUSTER_HEAD } from "./layout.js";
import { esc, shorten, us, tint, nOps } from "./format.js";
import { fitView, neededHeight, clampOffset, thumb, PAD } from "./viewport.js";

const SVGNS = "http://www.w3.org/2000/svg";
const SYNC_BUDGET_MS = 120; // lay out this long before the first paint, then continue in the background
const MARGIN_PX = 150; // items this close to the view are drawn too (smooth panning)

export class GraphView {
  constructor(host, { onSelect, onLayout, tooltip }) {
    this.host = host;
    this.onSelect = onSelect;
    this.onLayout = onLayout || (() => {});
    this.tooltipFor = tooltip;
    this.svg = document.createElementNS(SVGNS, "svg");
    this.svg.setAttribute("class", "nk-svg");
    this.svg.setAttribute("data-testid", "graph-svg");
    this.vp = document.createElementNS(SVGNS, "g");
    this.vp.setAttribute("class", "nk-vp");
    this.layers = {};
    for (const name of ["clusters", "edges", "labels", "nodes"]) {
      const g = document.createElementNS(SVGNS, "g");
      g.setAttribute("class", "nk-layer-" + name);
      this.vp.append(g);
      this.layers[name] = g;
    }
    this.svg.append(this.vp);
    this.tip = document.createElement("div");
    this.tip.className = "nk-tip";
    this.tip.setAttribute("data-testid", "graph-tooltip");
    this.vbar = document.createElement("div");
    this.vbar.className = "nk-vscroll";
    this.vbar.setAttribute("data-testid", "graph-vscroll");
    this.thumb = document.createElement("div");
    this.thumb.className = "nk-vthumb";
    this.vbar.append(this.thumb);
    host.append(this.svg, this.vbar, this.tip);
    this.view = { s: 1, tx: 10, ty: 10 };
    this.viewSet = false;
    this.userMoved = false;
    // the svg's size from a ResizeObserver: nothing on the update path reads layout
    this.size = { width: 0, height: 0 };
    this._ro = new ResizeObserver((entries) => {
      const r = entries[entries.length - 1].contentRect;
      this.size = { width: r.width, height: r.height };
      if (r.width && !this.viewSet && this.cols) this.initialView();
      else {
        this._scrollbar();
        this._cull();
      }
    });
    this._ro.observe(this.svg);
    this.structure = null;
    this.toggled = new Set(); // first op of partitions whose expansion differs from the default
    this.defaultExpanded = true;
    this.selected = null; // {type: "op", op} | {type: "part", pid}
    this.job = 0;
    this.paints = 0;
    this._reset();
    this._bind();
  }

  _reset() {
    this.items = []; // {kind, id, box: [x0, y0, x1, y1], el, shown, ...}
    this.nodeEls = new Map(); // id -> {g, rect, t1, t2, st} for node-like elements that exist
    this.edgeEls = new Map(); // edge index -> path element
    this.labelItems = new Map(); // edge index -> label item
    this.pos = new Map(); // visible id -> [x, y, w, h]
    this.cost = new Map(); // edge index -> boundary cost (us)
    for (const g of Object.values(this.layers)) g.textContent = "";
  }

  // ---------------------------------------------------------------------------------------------
  // data

  setExpandDefault(expanded) {
    this.defaultExpanded = expanded;
    this.toggled.clear();
  }

  isExpanded(pid) {
    const first = this.P.members[pid][0];
    return this.defaultExpanded !== this.toggled.has(first);
  }

  toggleExpand(pid) {
    const first = this.P.members[pid][0];
    if (this.toggled.has(first)) this.toggled.delete(first);
    else this.toggled.add(first);
    this.update(this.G, this.P, this.V, true);
  }

  expandAll(on) {
    this.setExpandDefault(on);
    this.update(this.G, this.P, this.V, true);
  }

  // New data: re-lay out when the structure changed, else recolour in place.
  update(G, P, V, force = false) {
    this.G = G;
    this.P = P;
    this.V = V;
    let sig = P.structure + "|" + (this.defaultExpanded ? "E" : "C");
    for (const t of this.toggled) sig += "," + t;
    if (force || sig !== this.structure) {
      this.structure = sig;
      this._relayout();
    } else {
      this.paint();
    }
  }

  _relayout() {
    const G = this.G;
    const P = this.P;
    const token = ++this.job;
    const t0 = performance.now();
    const plan = planLayout(G, P, (pid) => this.isExpanded(pid));
    this.plan = plan;
    this.cols = new Columns(plan.blocks, plan.blockEdges, COL_ITEMS);
    this._reset();
    this.host.dataset.layout = "running";
    // edges are placed with the column of their later end
    this.edgesByCol = Array.from({ length: this.cols.nCols }, () => []);
    plan.edges.forEach((e, i) => {
      const c = Math.max(this.cols.col[e.ba], this.cols.col[e.bb]);
      this.edgesByCol[c].push(i);
    });
    const epoch = () => String(performance.timeOrigin + performance.now());
    let first = true;
    const step = () => {
      if (token !== this.job) return;
      const start = performance.now();
      while (!this.cols.done) {
        const c = this.cols.next;
        const lo = c * COL_ITEMS;
        const hi = Math.min(plan.blocks.length, lo + COL_ITEMS);
        for (let i = lo; i < hi; i++) if (plan.blocks[i].type === "cluster") sizeCluster(plan.blocks[i], G);
        this.cols.layoutNext();
        this._placeColumn(c);
        if (performance.now() - start > (first ? SYNC_BUDGET_MS : 40) && !this.cols.done) break;
      }
      if (!this.viewSet) this.initialView(); // also culls
      else {
        this._scrollbar();
        this._cull();
      }
      this.paint();
      if (first && !this.host.dataset.firstPaint) requestAnimationFrame(() => (this.host.dataset.firstPaint = epoch()));
      first = false;
      if (this.cols.done) {
        const info = { ms: performance.now() - t0, nodes: this.pos.size, cols: this.cols.nCols, stats: { ...layoutStats } };
        requestAnimationFrame(() => {
          if (token !== this.job) return;
          this.host.dataset.layoutDone = epoch();
          this.host.dataset.layout = "done";
          this.onLayout(info);
        });
      } else {
        setTimeout(step, 0);
      }
    };
    step();
  }

  // positions of one laid-out column -> items (no DOM yet)
  _placeColumn(c) {
    const plan = this.plan;
    const cols = this.cols;
    const col = cols.cols[c];
    const items = this.items;
    for (let i = col.lo; i < col.hi; i++) {
      const b = plan.blocks[i];
      const x = cols.x[i];
      const y = cols.y[i];
      this.pos.set(b.id, [x, y, b.w, b.h]);
      if (b.type === "cluster") {
        items.push({ kind: "cluster", id: b.id, pid: b.pid, box: [x, y, x + b.w, y + b.h], w: b.w, h: b.h, el: null, shown: false });
        const inner = b.inner;
        for (const op of b.ops) {
          const j = inner.index.get(op);
          const ox = x + b.dx + inner.x[j];
          const oy = y + b.dy + inner.y[j];
          this.pos.set("o" + op, [ox, oy, NODE_W, NODE_H]);
          items.push({ kind: "op", id: "o" + op, op, box: [ox, oy, ox + NODE_W, oy + NODE_H], el: null, shown: false });
        }
      } else {
        items.push({ kind: b.type, id: b.id, pid: b.pid, idx: b.idx, box: [x, y, x + b.w, y + b.h], w: b.w, h: b.h, el: null, shown: false });
      }
    }
    for (const ei of this.edgesByCol[c]) {
      const e = plan.edges[ei];
      const d = this._edgePath(e);
      const a = this.pos.get(e.a);
      const b = this.pos.get(e.b);
      if (!d || !a || !b) continue;
      const box = [Math.min(a[0], b[0]) - 40, Math.min(a[1], b[1]) - 40, Math.max(a[0] + a[2], b[0] + b[2]) + 40, Math.max(a[1] + a[3], b[1] + b[3]) + 40];
      items.push({ kind: "edge", ei, d, box, el: null, shown: false });
    }
  }

  _viewRect() {
    const { s, tx, ty } = this.view;
    const W = this.size.width || 1200;
    const H = this.size.height || 800;
    const m = MARGIN_PX / s;
    return [-tx / s - m, -ty / s - m, (W - tx) / s + m, (H - ty) / s + m];
  }

  // Create the elements of items that came into view, hide those that left.
  _cull() {
    if (!this.plan) return;
    const [vx0, vy0, vx1, vy1] = this._viewRect();
    const make = { clusters: [], edges: [], labels: [], nodes: [] };
    const html = { clusters: "", edges: "", labels: "", nodes: "" };
    const visit = (it) => {
      const b = it.box;
      const vis = b[2] >= vx0 && b[0] <= vx1 && b[3] >= vy0 && b[1] <= vy1;
      if (vis === it.shown) return;
      it.shown = vis;
      if (it.el) {
        if (vis) it.el.removeAttribute("display");
        else it.el.setAttribute("display", "none");
      } else if (vis) {
        const layer = this._markup(it, html);
        make[layer].push(it);
      }
    };
    for (const it of this.items) visit(it);
    for (const it of this.labelItems.values()) visit(it);
    let created = 0;
    for (const layer of Object.keys(make)) {
      if (!make[layer].length) continue;
      const g = this.layers[layer];
      const n0 = g.childElementCount;
      g.insertAdjacentHTML("beforeend", html[layer]);
      const kids = g.children;
      make[layer].forEach((it, k) => this._adopt(it, kids[n0 + k]));
      created += make[layer].length;
    }
    if (created) this.paint(false, true);
    this.host.dataset.elements = String(this.layers.nodes.childElementCount);
  }

  _markup(it, html) {
    const G = this.G;
    const [x, y] = it.box;
    switch (it.kind) {
      case "cluster":
        html.clusters +=
          `<g class="nk-cluster" data-pid="${it.pid}" data-testid="graph-cluster" transform="translate(${x},${y})">` +
          `<rect class="nk-cbox" width="${it.w}" height="${it.h}" rx="6"></rect>` +
          `<rect class="nk-chead" width="${it.w}" height="${CLUSTER_HEAD - 4}" rx="6"></rect>` +
          `<text class="nk-ctitle" x="8" y="14"></text>` +
          `<g class="nk-toggle" data-pid="${it.pid}" transform="translate(${it.w - 20},3)"><rect width="15" height="14" rx="3"></rect><text x="7.5" y="11">−</text></g></g>`;
        return "clusters";
      case "op":
        html.nodes += nodeMarkup(it.id, x, y, NODE_W, NODE_H, "op", it.op, G.name[it.op]);
        return "nodes";
      case "part":
        html.nodes += nodeMarkup(it.id, x, y, it.w, it.h, "part", it.pid, "");
        return "nodes";
      case "in":
      case "out": {
        const t = it.kind === "in" ? G.inputs[it.idx] : G.outputs[it.idx];
        html.nodes +=
          `<g class="nk-node nk-term" data-vid="${it.id}" data-testid="graph-${it.kind === "in" ? "input" : "output"}" transform="translate(${x},${y})">` +
          `<rect width="${it.w}" height="${it.h}" rx="${it.h / 2}"></rect><text x="${it.w / 2}" y="${it.h / 2 + 4}" text-anchor="middle">${esc(shorten(t.name, 18))}</text></g>`;
        return "nodes";
      }
      case "edge":
        html.edges += `<path class="nk-edge${this.cost.has(it.ei) ? " nk-bedge" : ""}" data-e="${it.ei}" d="${it.d}"></path>`;
        return "edges";
      case "label":
        html.labels += `<g class="nk-elabel" data-e="${it.ei}" data-testid="edge-cost" transform="translate(${it.mx.toFixed(1)},${(it.my - 8).toFixed(1)})"><rect height="15" rx="3"></rect><text y="11"></text></g>`;
        return "labels";
    }
    return "nodes";
  }

  _adopt(it, el) {
    it.el = el;
    if (it.kind === "edge") this.edgeEls.set(it.ei, el);
    else if (it.kind === "label") {
      it.rect = el.children[0];
      it.text = el.children[1];
      it.t = null;
    } else if (it.kind === "cluster") this.nodeEls.set(it.id, { g: el, rect: el.children[0], head: el.children[1], t1: el.children[2], st: {} });
    else this.nodeEls.set(it.id, { g: el, rect: el.children[0], t1: el.children[1], t2: el.children[2], st: {} });
  }

  _edgePath(e) {
    const plan = this.plan;
    const cols = this.cols;
    const pa = this.pos.get(e.a);
    const pb = this.pos.get(e.b);
    if (!pa || !pb) return "";
    let pts = null;
    if (e.ba === e.bb) {
      const blk = plan.blocks[e.ba];
      if (blk.type === "cluster") {
        const ia = blk.inner.index.get(+e.a.slice(1));
        const ib = blk.inner.index.get(+e.b.slice(1));
        const p = blk.inner.pts.get(ia + ">" + ib);
        if (p) {
          const x0 = cols.x[e.ba] + blk.dx;
          const y0 = cols.y[e.ba] + blk.dy;
          pts = p.map(([x, y]) => [x + x0, y + y0]);
        }
      }
    } else if (plan.blocks[e.ba].type !== "cluster" && plan.blocks[e.bb].type !== "cluster") {
      const lo = Math.min(e.ba, e.bb);
      const hi = Math.max(e.ba, e.bb);
      const p = cols.pts.get(lo + ">" + hi);
      if (p) pts = e.ba < e.bb ? p : p.slice().reverse();
    }
    if (pts && pts.length >= 2) {
      const k = Math.floor(pts.length / 2);
      e.mid = pts.length % 2 ? pts[k] : [(pts[k - 1][0] + pts[k][0]) / 2, (pts[k - 1][1] + pts[k][1]) / 2];
      const f = (p) => `${p[0].toFixed(1)},${p[1].toFixed(1)}`;
      let d = "M" + f(pts[0]);
      if (pts.length === 2) d += "L" + f(pts[1]);
      else {
        for (let i = 1; i < pts.length - 1; i++) {
          const end = i === pts.length - 2 ? pts[i + 1] : [(pts[i][0] + pts[i + 1][0]) / 2, (pts[i][1] + pts[i + 1][1]) / 2];
          d += "Q" + f(pts[i]) + " " + f(end);
        }
      }
      return d;
    }
    // a bezier from the bottom of a to the top of b (across columns or boxes)
    const x1 = pa[0] + pa[2] / 2;
    const y1 = pa[1] + pa[3];
    const x2 = pb[0] + pb[2] / 2;
    const y2 = pb[1];
    const dy = Math.max(30, Math.abs(y2 - y1) / 2);
    e.mid = [(x1 + x2) / 2, (y1 + y2) / 2];
    return `M${x1.toFixed(1)},${y1.toFixed(1)}C${x1.toFixed(1)},${(y1 + dy).toFixed(1)} ${x2.toFixed(1)},${(y2 - dy).toFixed(1)} ${x2.toFixed(1)},${y2.toFixed(1)}`;
  }

  // ---------------------------------------------------------------------------------------------
  // paint: colours, texts, boundary labels and selection of the elements that exist (no layout)

  paint(labels = true, quiet = false) {
    const G = this.G;
    const P = this.P;
    const V = this.V;
    if (!this.plan) return;
    if (labels || !this.partLat || this.partLat.length !== P.partitions.length) {
      const partLat = new Float64Array(P.partitions.length);
      for (let i = 0; i < G.n; i++) partLat[P.part[i]] += V.lat[i] || 0;
      this.partLat = partLat;
    }
    if (labels) this._labels();
    const colors = G.colors;
    const names = G.processors.map((p) => p.name);
    const partLat = this.partLat;
    const sel = this.selected;
    const selPid = sel ? (sel.type === "op" ? P.part[sel.op] : sel.pid) : -1;
    for (const [id, el] of this.nodeEls) {
      const st = el.st;
      let fill;
      let t1 = null;
      let t2 = null;
      let cls = "nk-node";
      const kind = id[0];
      if (kind === "o") {
        const op = +id.slice(1);
        const p = P.proc[op];
        fill = colors[p];
        t2 = `${G.kind[op]} · ${V.bitsNames[V.bits[op]] || ""} · ${us(V.lat[op])}`;
        if (P.pinned[op]) cls += " nk-pinned";
        if (sel && sel.type === "op" && sel.op === op) cls += " nk-sel";
        if (st.p !== p) el.g.setAttribute("data-processor", (st.p = p, names[p]));
      } else if (kind === "p") {
        const pid = +id.slice(1);
        const part = P.partitions[pid];
        fill = colors[part.proc];
        t1 = `P${pid} · ${names[part.proc]}`;
        t2 = `${nOps(part.n)} · ${us(partLat[pid])}`;
        cls += " nk-partnode";
        if (pid === selPid) cls += sel.type === "part" ? " nk-sel" : " nk-sel-in";
        if (st.p !== part.proc) el.g.setAttribute("data-processor", (st.p = part.proc, names[part.proc]));
      } else if (kind === "c") {
        const pid = +id.slice(1);
        const part = P.partitions[pid];
        const c = colors[part.proc];
        if (st.c !== c) {
          el.rect.setAttribute("stroke", c);
          el.rect.setAttribute("fill", tint(c, 0.1));
          el.head.setAttribute("fill", tint(c, 0.3));
          st.c = c;
        }
        const t = `P${pid} ${names[part.proc]} · ${nOps(part.n)} · ${us(partLat[pid])}`;
        if (st.t1 !== t) el.t1.textContent = st.t1 = t;
        continue;
      } else {
        continue; // inputs and outputs keep their look
      }
      if (st.fill !== fill) el.rect.setAttribute("fill", (st.fill = fill));
      if (t1 !== null && st.t1 !== t1) el.t1.textContent = st.t1 = t1;
      if (t2 !== null && st.t2 !== t2) el.t2.textContent = st.t2 = t2;
      if (st.cls !== cls) el.g.setAttribute("class", (st.cls = cls));
    }
    for (const it of this.labelItems.values()) {
      if (!it.el) continue;
      const t = us(this.cost.get(it.ei));
      if (it.t === t) continue;
      it.t = t;
      const w = t.length * 6 + 8;
      it.text.textContent = t;
      it.rect.setAttribute("width", String(w));
      it.rect.setAttribute("x", String(-w / 2));
    }
    if (!quiet) this.host.dataset.paint = String(++this.paints);
  }

  // boundary costs (transfer + conversions, summed) on the visible edges that carry them
  _labels() {
    const plan = this.plan;
    const V = this.V;
    const cost = new Map();
    const addCost = (a, b, c) => {
      const k = plan.edgeIndex.get(a + ">" + b);
      if (k !== undefined) cost.set(k, (cost.get(k) || 0) + c);
    };
    for (const bd of V.boundaries) {
      const src = bd.producer >= 0 ? plan.vis(bd.producer) : bd.input >= 0 ? "i" + bd.input : null;
      if (src === null) continue;
      const done = new Set();
      for (const c of bd.consumers) {
        const dst = plan.vis(c);
        if (done.has(dst)) continue;
        done.add(dst);
        addCost(src, dst, bd.cost_us);
      }
      if (bd.output >= 0) addCost(src, "x" + bd.output, bd.cost_us);
    }
    const old = this.cost;
    this.cost = cost;
    // boundary edges changed?  toggle the class where the element exists; labels come and go
    for (const k of old.keys()) if (!cost.has(k)) this.edgeEls.get(k)?.classList.remove("nk-bedge");
    for (const k of cost.keys()) if (!old.has(k)) this.edgeEls.get(k)?.classList.add("nk-bedge");
    let changed = false;
    for (const [k, it] of this.labelItems) {
      if (!cost.has(k)) {
        it.el?.remove();
        this.labelItems.delete(k);
      }
    }
    for (const k of cost.keys()) {
      if (this.labelItems.has(k)) continue;
      const e = plan.edges[k];
      if (!e.mid) continue;
      this.labelItems.set(k, { kind: "label", ei: k, mx: e.mid[0], my: e.mid[1], box: [e.mid[0] - 40, e.mid[1] - 10, e.mid[0] + 40, e.mid[1] + 10], el: null, shown: false });
      changed = true;
    }
    if (changed) this._cull();
  }

  select(sel, center = false) {
    this.selected = sel;
    if (center && sel) this.centerOn(sel);
    if (this.plan) this.paint(false);
  }

  centerOn(sel) {
    const id = sel.type === "op" ? this.plan.vis(sel.op) : "p" + sel.pid;
    const p = this.pos.get(id) || this.pos.get("c" + (sel.type === "op" ? this.P.part[sel.op] : sel.pid));
    if (!p) return;
    const r = this.size;
    const s = Math.max(this.view.s, 0.6);
    this.view = { s, tx: r.width / 2 - (p[0] + p[2] / 2) * s, ty: r.height / 2 - (p[1] + p[3] / 2) * s };
    this.viewSet = true;
    this._apply();
  }

  // ---------------------------------------------------------------------------------------------
  // view: zoom and pan

  // A graph that does not fit the view at a readable zoom: the view grows, up to most of the
  // window's height (never shrinks: the user may have made it taller), then it scrolls.
  _growFor(most) {
    const r = this.size;
    if (!r.width || !r.height) return;
    const want = neededHeight(r, this.cols.w || 1, this.cols.h || 1, most);
    const h = Math.min(want, Math.max(r.height, Math.round(0.85 * window.innerHeight)));
    if (h <= r.height + 1) return;
    const extra = this.host.offsetHeight - this.host.clientHeight; // borders
    this.host.style.height = Math.ceil(h + extra) + "px";
    this.size = { width: r.width, height: h };
  }

  initialView() {
    const r = this.size;
    this.view = r.width ? fitView(r, this.cols.w || 1, this.cols.h || 1, 1.1) : { s: 1, tx: PAD, ty: PAD };
    if (r.width) this.viewSet = true;
    this._apply();
  }

  fit() {
    if (!this.cols) return;
    this._growFor(1.5);
    this.view = fitView(this.size, this.cols.w || 1, this.cols.h || 1);
    this.userMoved = this.viewSet = true;
    this._apply();
  }

  // scroll the view by (dx, dy) screen pixels, within the graph's extent (plus a margin)
  scrollBy(dx, dy) {
    const before = this.view.ty + ":" + this.view.tx;
    this.view.ty = this._clampY(this.view.ty - dy);
    this.view.tx = this._clampX(this.view.tx - dx);
    this.userMoved = this.viewSet = true;
    this._apply();
    return before !== this.view.ty + ":" + this.view.tx;
  }

  _clampY(ty) {
    return clampOffset(ty, (this.cols ? this.cols.h : 0) * this.view.s, this.size.height);
  }

  _clampX(tx) {
    return clampOffset(tx, (this.cols ? this.cols.w : 0) * this.view.s, this.size.width);
  }

  // the scrollbar: shown when the graph is taller than the view
  _scrollbar() {
    const t = thumb(this.view.ty, (this.cols ? this.cols.h : 0) * this.view.s, this.size.height);
    this.vbar.classList.toggle("on", !!t);
    this.host.dataset.scrollable = t ? "1" : "0";
    this.thumbPer = t ? t.per : 0;
    if (!t) return;
    this.thumb.style.height = t.size + "px";
    this.thumb.style.top = t.top + "px";
  }

  zoom(f, cx, cy) {
    const r = this.size;
    if (cx === undefined) {
      cx = r.width / 2;
      cy = r.height / 2;
    }
    const s = Math.min(4, Math.max(0.01, this.view.s * f));
    const k = s / this.view.s;
    this.view = { s, tx: cx - (cx - this.view.tx) * k, ty: cy - (cy - this.view.ty) * k };
    this.userMoved = this.viewSet = true;
    this._apply();
  }

  _apply() {
    const { s, tx, ty } = this.view;
    this.vp.setAttribute("transform", `translate(${tx.toFixed(1)},${ty.toFixed(1)}) scale(${s.toFixed(4)})`);
    this.svg.classList.toggle("nk-far", s < 0.35);
    this.host.dataset.zoom = s.toFixed(3);
    this._scrollbar();
    this._cull();
  }

  _bind() {
    const svg = this.svg;
    let drag = null;
    svg.addEventListener(
      "wheel",
      (ev) => {
        if (ev.ctrlKey || ev.metaKey) {
          // ctrl / cmd + wheel, and a trackpad's pinch: zoom at the pointer
          ev.preventDefault();
          const r = svg.getBoundingClientRect();
          this.zoom(Math.exp(-ev.deltaY * (ev.deltaMode ? 0.05 : 0.0015)), ev.clientX - r.left, ev.clientY - r.top);
          return;
        }
        // the wheel scrolls the graph; at its top or bottom end the page scrolls on
        const k = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? this.size.height : 1;
        const dx = ev.shiftKey && !ev.deltaX ? ev.deltaY : ev.deltaX;
        const dy = ev.shiftKey && !ev.deltaX ? 0 : ev.deltaY;
        if (this.scrollBy(dx * k, dy * k)) ev.preventDefault();
      },
      { passive: false },
    );
    let bar = null;
    this.thumb.addEventListener("pointerdown", (ev) => {
      ev.stopPropagation();
      ev.preventDefault();
      bar = { y: ev.clientY, ty: this.view.ty };
    });
    window.addEventListener("pointermove", (this._bm = (ev) => {
      if (!bar) return;
      this.view.ty = this._clampY(bar.ty - (ev.clientY - bar.y) * (this.thumbPer || 1));
      this.userMoved = this.viewSet = true;
      this._apply();
    }));
    window.addEventListener("pointerup", (this._bu = () => (bar = null)));
    svg.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      drag = { x: ev.clientX, y: ev.clientY, tx: this.view.tx, ty: this.view.ty, moved: false };
    });
    window.addEventListener("pointermove", (this._pm = (ev) => {
      if (!drag) return;
      const dx = ev.clientX - drag.x;
      const dy = ev.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      drag.moved = true;
      this.userMoved = this.viewSet = true;
      this.view.tx = drag.tx + dx;
      this.view.ty = drag.ty + dy;
      if (!this._panQueued) {
        this._panQueued = true;
        requestAnimationFrame(() => {
          this._panQueued = false;
          this._apply();
        });
      }
      this.tip.style.display = "none";
    }));
    window.addEventListener("pointerup", (this._pu = () => {
      if (drag && drag.moved) this._suppressClick = true;
      drag = null;
    }));
    svg.addEventListener("click", (ev) => {
      if (this._suppressClick) {
        this._suppressClick = false;
        return;
      }
      const tog = ev.target.closest(".nk-toggle");
      if (tog) {
        this.toggleExpand(+tog.dataset.pid);
        return;
      }
      const g = ev.target.closest(".nk-node");
      if (g) {
        const id = g.dataset.vid;
        if (id[0] === "o") this.onSelect({ type: "op", op: +id.slice(1) });
        else if (id[0] === "p") this.onSelect({ type: "part", pid: +id.slice(1) });
        return;
      }
      const c = ev.target.closest(".nk-cluster");
      if (c) this.onSelect({ type: "part", pid: +c.dataset.pid });
    });
    svg.addEventListener("dblclick", (ev) => {
      const g = ev.target.closest(".nk-node");
      if (g && g.dataset.vid[0] === "p") {
        this.toggleExpand(+g.dataset.vid.slice(1));
        ev.preventDefault();
      }
    });
    svg.addEventListener("mousemove", (ev) => {
      const g = ev.target.closest(".nk-node, .nk-cluster");
      if (!g || drag) {
        this.tip.style.display = "none";
        this._tipFor = null;
        return;
      }
      const key = g.dataset.vid || "c" + g.dataset.pid;
      if (this._tipFor !== key) {
        this._tipFor = key;
        this.tip.innerHTML = this.tooltipFor(key) || "";
      }
      const hr = this.host.getBoundingClientRect();
      let x = ev.clientX - hr.left + 14;
      let y = ev.clientY - hr.top + 14;
      this.tip.style.display = "block";
      const tw = this.tip.offsetWidth;
      const th = this.tip.offsetHeight;
      if (x + tw > hr.width) x = Math.max(0, ev.clientX - hr.left - tw - 14);
      if (y + th > hr.height) y = Math.max(0, hr.height - th - 4);
      this.tip.style.left = x + "px";
      this.tip.style.top = y + "px";
    });
    svg.addEventListener("mouseleave", () => {
      this.tip.style.display = "none";
      this._tipFor = null;
    });
  }

  destroy() {
    this.job++;
    this._ro.disconnect();
    window.removeEventListener("pointermove", this._pm);
    window.removeEventListener("pointerup", this._pu);
    window.removeEventListener("pointermove", this._bm);
    window.removeEventListener("pointerup", this._bu);
  }
}

function nodeMarkup(id, x, y, w, hgt, type, ref, label) {
  const attrs =
    type === "op"
      ? `data-testid="graph-node" data-node-id="${ref}" data-name="${esc(label)}"`
      : `data-testid="graph-partition" data-pid="${ref}"`;
  return (
    `<g class="nk-node" data-vid="${id}" ${attrs} transform="translate(${x.toFixed(1)},${y.toFixed(1)})">` +
    `<rect width="${w}" height="${hgt}" rx="5"></rect>` +
    `<text class="nk-t1" x="7" y="15">${type === "op" ? esc(shorten(label, 22)) : ""}</text>` +
    `<text class="nk-t2" x="7" y="30"></text></g>`
  );
}
