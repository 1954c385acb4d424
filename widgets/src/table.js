// A sortable table that draws only the rows in view (10,000 rows scroll as fast as 10).

import { esc, columnFormat } from "./format.js";

const ROW_H = 22;
const HEAD_H = 24;
const OVERSCAN = 10;

export class VirtualTable {
  // columns: [{key, label, get(i) -> value, fmt?(v, i) -> string, num?: bool, title?}]; a column
  // with `column: true` (numbers) gets one format for all its cells from its values (columnFormat)
  constructor(host, { testid, onRowClick, rowTestid = "table-row", height = 300 }) {
    this.host = host;
    this.onRowClick = onRowClick;
    this.rowTestid = rowTestid;
    this.el = document.createElement("div");
    this.el.className = "nk-vt";
    this.el.style.height = height + "px";
    if (testid) this.el.setAttribute("data-testid", testid);
    // one scroll container: the header sticks to its top and scrolls sideways with the rows
    this.scroller = this.el;
    this.head = document.createElement("table");
    this.head.className = "nk-vt-head";
    this.spacer = document.createElement("div");
    this.spacer.className = "nk-vt-spacer";
    this.body = document.createElement("table");
    this.body.className = "nk-vt-body";
    this.spacer.append(this.body);
    this.el.append(this.head, this.spacer);
    host.append(this.el);
    this.columns = [];
    this.n = 0;
    this.order = null;
    this.sort = null; // {key, dir}
    this.selected = -1;
    this.scroller.addEventListener("scroll", () => this._schedule());
    this.head.addEventListener("click", (ev) => {
      const th = ev.target.closest("th");
      if (!th) return;
      const key = th.dataset.key;
      const dir = this.sort && this.sort.key === key ? -this.sort.dir : this.columns.find((c) => c.key === key).num ? -1 : 1;
      this.sort = { key, dir };
      this._sortRows();
      this._drawHead();
      this._draw();
    });
    this.body.addEventListener("click", (ev) => {
      const tr = ev.target.closest("tr");
      if (tr && this.onRowClick) this.onRowClick(+tr.dataset.row);
    });
  }

  setColumns(columns) {
    this.columns = columns;
    this._drawHead();
  }

  // new data: n rows read through the columns' getters; the sort order is kept
  setData(n) {
    this.n = n;
    this.spacer.style.height = n * ROW_H + "px";
    let formats = false;
    for (const c of this.columns) {
      if (!c.column) continue;
      const vals = new Array(n);
      for (let i = 0; i < n; i++) vals[i] = c.get(i);
      c.fmt = columnFormat(vals, c.column === true ? {} : c.column);
      formats = true;
    }
    if (formats) this._drawHead();
    this._sortRows();
    this._draw();
  }

  setSelected(row) {
    if (row === this.selected) return;
    // only the two rows involved change (no redraw, no layout read)
    const prev = this.body.querySelector(`tr[data-row="${this.selected}"]`);
    if (prev) prev.classList.remove("sel");
    this.selected = row;
    const tr = this.body.querySelector(`tr[data-row="${row}"]`);
    if (tr) tr.classList.add("sel");
  }

  scrollToRow(row) {
    const pos = this.order ? this.order.indexOf(row) : row;
    if (pos < 0) return;
    const top = pos * ROW_H;
    const h = this.scroller.clientHeight - HEAD_H;
    if (top < this.scroller.scrollTop || top > this.scroller.scrollTop + h - ROW_H) this.scroller.scrollTop = Math.max(0, top - h / 2);
  }

  _sortRows() {
    if (!this.sort) {
      this.order = null;
      return;
    }
    const col = this.columns.find((c) => c.key === this.sort.key);
    if (!col) return;
    const idx = Array.from({ length: this.n }, (_, i) => i);
    const vals = idx.map((i) => col.get(i));
    const dir = this.sort.dir;
    idx.sort((a, b) => {
      const va = vals[a];
      const vb = vals[b];
      if (va === vb) return a - b;
      if (va == null) return 1;
      if (vb == null) return -1;
      return (va < vb ? -1 : 1) * dir;
    });
    this.order = idx;
  }

  _drawHead() {
    const total = this.columns.reduce((a, c) => a + (c.width || 90), 0);
    this.head.style.width = this.body.style.width = this.spacer.style.width = total + "px";
    let html = "<colgroup>" + this.columns.map((c) => `<col style="width:${c.width || 90}px">`).join("") + "</colgroup><tr>";
    for (const c of this.columns) {
      const arrow = this.sort && this.sort.key === c.key ? (this.sort.dir > 0 ? " ▲" : " ▼") : "";
      const spec = c.fmt && c.fmt.spec ? ` data-format="${c.fmt.spec}"` : "";
      html += `<th data-key="${c.key}" data-testid="sort-${c.key}"${spec} class="${c.num ? "num" : ""}" title="${esc(c.title || "sort by " + c.label)}">${esc(c.label)}${arrow}</th>`;
    }
    this.head.innerHTML = html + "</tr>";
    this.colgroup = "<colgroup>" + this.columns.map((c) => `<col style="width:${c.width || 90}px">`).join("") + "</colgroup>";
  }

  _schedule() {
    if (this._raf) return;
    this._raf = requestAnimationFrame(() => {
      this._raf = 0;
      this._draw();
    });
  }

  _draw() {
    const h = this.scroller.clientHeight || 300;
    const top = Math.max(0, this.scroller.scrollTop);
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(this.n, Math.ceil((top + h) / ROW_H) + OVERSCAN);
    let html = this.colgroup || "";
    for (let p = first; p < last; p++) {
      const i = this.order ? this.order[p] : p;
      html += `<tr data-row="${i}" data-testid="${this.rowTestid}"${i === this.selected ? ' class="sel"' : ""}>`;
      for (const c of this.columns) {
        const v = c.get(i);
        html += `<td${c.num ? ' class="num"' : ""}>${esc(c.fmt ? c.fmt(v, i) : v == null ? "" : v)}</td>`;
      }
      html += "</tr>";
    }
    this.body.style.transform = `translateY(${first * ROW_H}px)`;
    this.body.innerHTML = html;
  }
}
