// The Code tab: the generated project's file tree, the open file (syntax-highlighted, drawn only
// where it is in view), the lines that run each op (from the manifest's calls), the lines the last
// edit changed (Python's difflib), and "build and run".  Everything shown comes from the `code`
// and `build` traits; clicks become requests (`send`) or selections (`onSelectOp`).

import { h, esc, bytes, num } from "./format.js";
import { languageOf, commentStates, highlightLine } from "./hl.js";
import { renderBuild } from "./build.js";

const LH = 17; // px per line
const VIEW_H = 440; // px of the code area
const OVERSCAN = 40; // lines drawn above and below the view

// Rows of the open file: its lines, with the removed lines of the last edit in between.
export function buildRows(nLines, removed) {
  const rows = []; // [kind, a, b]: [0, line] | [1, removedText] | [2, moreCount]
  const lineRow = new Int32Array(nLines + 2).fill(-1);
  const byAfter = new Map();
  for (const [after, lines, more] of removed || []) byAfter.set(after, [lines, more]);
  const addRemoved = (after) => {
    const r = byAfter.get(after);
    if (!r) return;
    for (const t of r[0]) rows.push([1, t]);
    if (r[1] > 0) rows.push([2, r[1]]);
  };
  addRemoved(0);
  for (let n = 1; n <= nLines; n++) {
    lineRow[n] = rows.length;
    rows.push([0, n]);
    addRemoved(n);
  }
  return { rows, lineRow };
}

// line -> op ids whose call is on that line of file `fileIdx` (calls: per op [file, line, ...])
export function callLines(calls, fileIdx) {
  const m = new Map();
  (calls || []).forEach((flat, op) => {
    for (let k = 0; k < flat.length; k += 2) {
      if (flat[k] !== fileIdx) continue;
      const line = flat[k + 1];
      const a = m.get(line);
      if (a) {
        if (!a.includes(op)) a.push(op);
      } else m.set(line, [op]);
    }
  });
  return m;
}

export class CodeView {
  constructor(host, { send, onSelectOp, opName }) {
    this.host = host;
    this.send = send;
    this.onSelectOp = onSelectOp;
    this.opName = opName;
    this.code = {};
    this.build = { state: "idle" };
    this.sel = []; // selected op ids
    this.selLines = new Set();
    this.following = true; // the open file follows the selected node
    this.pendingScroll = null;
    this._build();
  }

  _build() {
    this.pathEl = h("span", { class: "nk-code-path", testid: "code-path" });
    this.infoEl = h("span", { class: "nk-muted", testid: "code-info" });
    this.prevBtn = h("button", { class: "nk-btn", title: "previous change", testid: "code-prev-change", onclick: () => this._jumpChange(-1) }, "▲");
    this.nextBtn = h("button", { class: "nk-btn", title: "next change", testid: "code-next-change", onclick: () => this._jumpChange(1) }, "▼");
    this.targetBox = h("input", { type: "checkbox", testid: "build-target" });
    this.targetLabel = h("span", {}, "also the profile's target");
    this.buildBtn = h(
      "button",
      { class: "nk-btn nk-primary", testid: "build-run", onclick: () => this.send({ type: "build", target: this.targetBox.checked }) },
      "build and run",
    );
    const bar = h(
      "div",
      { class: "nk-row nk-code-bar" },
      this.pathEl,
      this.infoEl,
      this.prevBtn,
      this.nextBtn,
      h("span", { class: "nk-spacer" }),
      this.buildBtn,
      h("label", { class: "nk-check", testid: "build-target-label" }, this.targetBox, this.targetLabel),
    );
    this.whereEl = h("div", { class: "nk-code-where", testid: "code-where" });
    this.treeEl = h("div", { class: "nk-tree", testid: "code-tree" });
    this.win = h("div", { class: "nk-code-win" });
    this.spacer = h("div", { class: "nk-code-spacer" }, this.win);
    this.scroller = h("div", { class: "nk-code", testid: "code-view", style: `height:${VIEW_H}px` }, this.spacer);
    this.scroller.addEventListener("scroll", () => this._draw());
    this.scroller.addEventListener("click", (ev) => this._click(ev));
    this.emptyEl = h("div", { class: "nk-muted nk-code-empty", testid: "code-empty" }, "Open this tab to see the generated C project.");
    this.buildEl = h("div", { class: "nk-build", testid: "build-result", "data-state": "idle" });
    this.host.append(bar, this.whereEl, h("div", { class: "nk-code-main" }, this.treeEl, h("div", { class: "nk-code-col" }, this.emptyEl, this.scroller)), this.buildEl);
    this._renderBuild();
  }

  // ------------------------------------------------------------------------------------------
  // data from Python

  setCode(code) {
    const old = this.code;
    this.code = code || {};
    const c = this.code;
    if (!c.path) return;
    this.emptyEl.style.display = "none";
    const sameText = old && old.path === c.path && old.text === c.text;
    if (!sameText) {
      const text = c.text || "";
      this.lines = text.split("\n");
      if (this.lines.length > 1 && this.lines[this.lines.length - 1] === "") this.lines.pop();
      this.lang = languageOf(c.path);
      this.states = this.lang ? commentStates(this.lines) : null;
      this.html = new Map();
    }
    const { rows, lineRow } = buildRows(this.lines.length, c.removed);
    this.rows = rows;
    this.lineRow = lineRow;
    this.changed = new Set(c.changed || []);
    this.fileIdx = (c.paths || []).indexOf(c.path);
    this.calls = callLines(c.calls, this.fileIdx);
    this.spacer.style.height = rows.length * LH + "px";
    this.host.dataset.path = c.path;
    this.host.dataset.key = c.key || "";
    this.host.dataset.changed = String(this.changed.size);
    this._renderTree();
    this._renderHead();
    this._renderTarget();
    this._computeSel();
    if (!sameText) this.scroller.scrollTop = 0;
    this.win.textContent = "";
    this.drawn = null;
    if (typeof this.pendingScroll === "number") this._scrollToLine(this.pendingScroll);
    else if (this.pendingScroll === "sel" && this.selLines.size) this._scrollToLine(Math.min(...this.selLines));
    else if (!sameText && this.changed.size) this._scrollToLine(Math.min(...this.changed));
    this.pendingScroll = null;
    this._draw(true);
  }

  setBuild(build) {
    this.build = build || { state: "idle" };
    this._renderBuild();
  }

  // the key of the code the Study has now (status.code_key): is what we show out of date?
  setCurrentKey(key) {
    this.currentKey = key;
    this._renderBuild();
  }

  // ------------------------------------------------------------------------------------------
  // selection: the graph's node <-> the lines that run it

  // ops: the op ids of the selection (one op, or a partition's members); reveal: ask for their file
  select(ops, reveal) {
    this.sel = ops || [];
    if (reveal) this.following = true;
    const c = this.code;
    if (!c.path) return;
    this._computeSel();
    this._renderTree();
    if (!this.sel.length || !this.following) {
      this._draw(true);
      return;
    }
    const file = this._fileOf(this.sel);
    if (file != null && file !== this.fileIdx) {
      this.pendingScroll = "sel";
      this.send({ type: "code", path: c.paths[file], follow: this.sel[0] });
      return;
    }
    if (this.selLines.size && !this._inView(this.selLines)) this._scrollToLine(Math.min(...this.selLines));
    this._draw(true);
  }

  _inView(lines) {
    const top = this.scroller.scrollTop;
    for (const n of lines) {
      const y = this.lineRow[n] * LH;
      if (y >= top && y + LH <= top + VIEW_H) return true;
    }
    return false;
  }

  // the op to follow when the code is fetched again after an edit (null: keep the open file)
  followOp() {
    return this.following && this.sel.length ? this.sel[0] : null;
  }

  _fileOf(ops) {
    const calls = this.code.calls || [];
    for (const op of ops) {
      const flat = calls[op];
      if (flat && flat.length) return flat[0];
    }
    return null;
  }

  _computeSel() {
    this.selLines = new Set();
    const calls = this.code.calls || [];
    for (const op of this.sel) {
      const flat = calls[op] || [];
      for (let k = 0; k < flat.length; k += 2) if (flat[k] === this.fileIdx) this.selLines.add(flat[k + 1]);
    }
    this.host.dataset.selLines = [...this.selLines].sort((a, b) => a - b).join(",");
    this._renderWhere();
  }

  // "op N name: in function() of file:line" for the selection, a link to the function
  _renderWhere() {
    const el = this.whereEl;
    el.textContent = "";
    const c = this.code;
    const op = this.sel[0];
    if (op == null || !c.where || !c.where[op]) return;
    const [file, line, fn] = c.where[op];
    const who = this.sel.length > 1 ? `${this.sel.length} ops; the first, op ${op} ${this.opName(op)},` : `op ${op} ${this.opName(op)}`;
    el.append(h("span", {}, `${who} runs in `));
    if (file >= 0) {
      const path = c.paths[file];
      el.append(
        h(
          "a",
          {
            href: "#",
            class: "nk-link",
            testid: "code-where-link",
            title: "open the function",
            onclick: (ev) => {
              ev.preventDefault();
              this.following = false;
              if (path === c.path) {
                if (line) this._scrollToLine(line);
                this._draw(true);
              } else {
                this.pendingScroll = line || null;
                this.send({ type: "code", path });
              }
            },
          },
          `${fn}()`,
        ),
        h("span", { class: "nk-muted" }, ` · ${path}${line ? ":" + line : ""}`),
      );
    } else el.append(h("span", {}, fn ? `${fn}()` : "(no generated function)"));
    const n = this.selLines.size;
    el.append(h("span", { class: "nk-muted" }, n ? ` · ${n} marked line${n > 1 ? "s" : ""} in this file` : " · not called from this file"));
  }

  _click(ev) {
    const row = ev.target.closest("[data-line]");
    if (!row) return;
    const ops = this.calls.get(+row.dataset.line);
    if (!ops || !ops.length) return;
    // a line that runs several ops (a fused kernel): each click selects the next of them
    const cur = this.sel.length === 1 ? ops.indexOf(this.sel[0]) : -1;
    const op = ops[(cur + 1) % ops.length];
    this.following = true;
    this.onSelectOp(op);
  }

  // ------------------------------------------------------------------------------------------
  // drawing

  _scrollToLine(line) {
    const r = this.lineRow[line];
    if (r == null || r < 0) return;
    this.scroller.scrollTop = Math.max(0, r * LH - VIEW_H / 3);
  }

  _jumpChange(dir) {
    const marks = [...this.changed].sort((a, b) => a - b);
    for (const [after] of this.code.removed || []) marks.push(after + 0.5);
    marks.sort((a, b) => a - b);
    if (!marks.length) return;
    const top = this.scroller.scrollTop / LH + VIEW_H / 3 / LH;
    const rowOf = (m) => (Number.isInteger(m) ? this.lineRow[m] : this.lineRow[Math.floor(m)] + 1);
    let pick = null;
    if (dir > 0) pick = marks.find((m) => rowOf(m) > top + 0.5);
    else pick = [...marks].reverse().find((m) => rowOf(m) < top - 0.5);
    if (pick == null) pick = dir > 0 ? marks[0] : marks[marks.length - 1];
    this.scroller.scrollTop = Math.max(0, rowOf(pick) * LH - VIEW_H / 3);
    this._draw();
  }

  _lineHtml(n) {
    let s = this.html.get(n);
    if (s === undefined) {
      const line = this.lines[n - 1] ?? "";
      s = highlightLine(line, this.states ? this.states[n - 1] === 1 : false, this.lang);
      this.html.set(n, s);
    }
    return s;
  }

  _draw(force = false) {
    if (!this.rows) return;
    const top = this.scroller.scrollTop;
    const first = Math.max(0, Math.floor(top / LH) - OVERSCAN);
    const last = Math.min(this.rows.length, Math.ceil((top + VIEW_H) / LH) + OVERSCAN);
    if (!force && this.drawn && first >= this.drawn[0] && last <= this.drawn[1]) return;
    // draw a wider window than needed so that scrolling redraws rarely
    const lo = Math.max(0, first - OVERSCAN);
    const hi = Math.min(this.rows.length, last + OVERSCAN);
    this.drawn = [lo, hi];
    let out = "";
    for (let r = lo; r < hi; r++) {
      const [kind, a] = this.rows[r];
      if (kind === 0) {
        const ops = this.calls.get(a);
        let cls = "nk-cl";
        if (this.changed.has(a)) cls += " nk-chg";
        if (ops) cls += " nk-call";
        if (this.selLines.has(a)) cls += " nk-selline";
        const title = ops ? ` title="${esc(ops.map((o) => `op ${o}: ${this.opName(o)}`).join("\n"))} (click: select)"` : "";
        const gut = ops ? "●" : this.changed.has(a) ? "+" : "";
        out += `<div class="${cls}" data-testid="code-line" data-line="${a}"${ops ? ` data-ops="${ops.join(",")}"` : ""}${title}><span class="nk-ln">${a}</span><span class="nk-gut">${gut}</span><span class="nk-src">${this._lineHtml(a) || " "}</span></div>`;
      } else if (kind === 1) {
        out += `<div class="nk-cl nk-del" data-testid="code-removed"><span class="nk-ln"></span><span class="nk-gut">−</span><span class="nk-src">${esc(a) || " "}</span></div>`;
      } else {
        out += `<div class="nk-cl nk-del" data-testid="code-removed-more"><span class="nk-ln"></span><span class="nk-gut">−</span><span class="nk-src">… ${a} more removed lines</span></div>`;
      }
    }
    this.win.style.top = lo * LH + "px";
    this.win.innerHTML = out;
  }

  _renderHead() {
    const c = this.code;
    this.pathEl.textContent = c.path;
    let info = `${num(c.lines)} lines · ${bytes(c.bytes)}`;
    if (c.truncated) info += ` · showing the first ${bytes((c.text || "").length)} (export the project to see it whole)`;
    if (c.diff) {
      const nrem = (c.removed || []).reduce((s, r) => s + r[1].length + r[2], 0);
      info += c.added_file
        ? " · new with the last edit"
        : this.changed.size || nrem
          ? ` · last edit: ${this.changed.size} lines added or changed, ${nrem} removed`
          : " · unchanged by the last edit";
    }
    this.infoEl.textContent = info;
    const any = this.changed.size || (c.removed || []).length;
    this.prevBtn.disabled = !any;
    this.nextBtn.disabled = !any;
  }

  _renderTree() {
    const c = this.code;
    const tree = c.tree || [];
    const selFiles = new Set();
    const calls = c.calls || [];
    for (const op of this.sel) {
      const flat = calls[op] || [];
      for (let k = 0; k < flat.length; k += 2) selFiles.add(c.paths[flat[k]]);
    }
    this.treeEl.textContent = "";
    let dir = null;
    let active = null;
    for (const e of tree) {
      const slash = e.path.lastIndexOf("/");
      const d = slash < 0 ? "" : e.path.slice(0, slash);
      if (d !== dir) {
        dir = d;
        if (d) this.treeEl.append(h("div", { class: "nk-tdir" }, d + "/"));
      }
      const badge = { added: "+", changed: "M", removed: "−" }[e.change] || "";
      const cls = "nk-tfile" + (e.path === c.path ? " on" : "") + (e.change ? " nk-t-" + e.change : "") + (d ? " nk-tin" : "");
      const el = h(
        "div",
        {
          class: cls,
          testid: "code-file",
          "data-path": e.path,
          "data-change": e.change || "",
          title: `${e.path}: ${e.change === "removed" ? "removed by the last edit" : `${num(e.lines)} lines, ${bytes(e.bytes)}`}${e.change && e.change !== "removed" ? " (" + e.change + " by the last edit)" : ""}`,
          onclick:
            e.change === "removed"
              ? null
              : () => {
                  this.following = false;
                  this.send({ type: "code", path: e.path });
                },
        },
        h("span", { class: "nk-tname" }, slash < 0 ? e.path : e.path.slice(slash + 1)),
        selFiles.has(e.path) ? h("span", { class: "nk-tsel", title: "runs the selected node" }, "●") : null,
        badge ? h("span", { class: "nk-tbadge" }, badge) : null,
      );
      this.treeEl.append(el);
      if (e.path === c.path) active = el;
    }
    // the open file in view in the tree (without scrolling the page around it)
    if (active) {
      const top = active.offsetTop; // .nk-tree is the offset parent
      if (top < this.treeEl.scrollTop || top + active.offsetHeight > this.treeEl.scrollTop + this.treeEl.clientHeight)
        this.treeEl.scrollTop = Math.max(0, top - this.treeEl.clientHeight / 3);
    }
  }

  _renderTarget() {
    const t = this.code.target || {};
    const usable = t.separate && t.available;
    this.targetBox.disabled = !usable;
    if (!usable) this.targetBox.checked = false;
    this.targetLabel.textContent = t.separate ? `also ${t.name}` : "target: the host build";
    this.targetLabel.parentElement.title = t.separate
      ? `${t.description}${t.available ? "" : " — not available here: " + t.why}`
      : "this profile's target is the host itself";
  }

  _renderBuild() {
    this.buildBtn.disabled = this.build.state === "running";
    const stale = this.build.key && this.currentKey && this.build.key !== this.currentKey;
    renderBuild(this.buildEl, this.build, stale);
  }
}
