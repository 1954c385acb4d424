// Layout of the op graph with dagre, built to scale:
//
// * Two levels.  Level 1 holds one block per partition (a collapsed partition is one node, an
//   expanded one is a box sized by its own inner layout), plus the model's inputs and outputs.
//   Expanded partitions are laid out on their own (only their inner edges), so no compound layout
//   is needed (dagre's compound mode is ~10x slower).
// * Columns.  A level (and a big partition's inside) is cut, in execution order, into columns of
//   at most COL_ITEMS items; each column is one dagre run and columns sit side by side.  Layout
//   time is linear in the number of columns and a column can be drawn as soon as it is laid out,
//   so a 10,000-op model paints its first columns at once and completes in the background.
// * Caching.  Every dagre run is cached by what it depends on (item sizes and edges), so toggling
//   back to a structure seen before, or expanding one partition, re-runs only what changed.

import dagre from "@dagrejs/dagre";

export const NODE_W = 158;
export const NODE_H = 36;
export const TERM_W = 124;
export const TERM_H = 24;
const PAD = 10;
const HEAD = 24;
const COL_GAP = 70;
export const COL_ITEMS = 90; // level-1 blocks per column
const CHUNK_OPS = 90; // ops per column inside an expanded partition

class LRU {
  constructor(n) {
    this.n = n;
    this.m = new Map();
  }
  get(k) {
    const v = this.m.get(k);
    if (v !== undefined) {
      this.m.delete(k);
      this.m.set(k, v);
    }
    return v;
  }
  set(k, v) {
    this.m.set(k, v);
    if (this.m.size > this.n) this.m.delete(this.m.keys().next().value);
  }
}

const dagreCache = new LRU(800);
export const layoutStats = { runs: 0, hits: 0, ms: 0 };

// One dagre run over items [{w, h}] and edges [[i, j]] (local indices).  Top-left positions.
function runDagre(items, edges) {
  let key = "";
  for (const it of items) key += it.w + "x" + it.h + ",";
  key += "|";
  for (const [a, b] of edges) key += a + ">" + b + ",";
  const hit = dagreCache.get(key);
  if (hit) {
    layoutStats.hits++;
    return hit;
  }
  const t0 = performance.now();
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 16, ranksep: 24, edgesep: 8, ranker: "longest-path", marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (let i = 0; i < items.length; i++) g.setNode(String(i), { width: items[i].w, height: items[i].h });
  for (const [a, b] of edges) if (a !== b) g.setEdge(String(a), String(b));
  // crossing minimisation costs half the time; small columns keep it, long ones use the DFS order
  dagre.layout(g, { disableOptimalOrderHeuristic: items.length > 60 });
  const n = items.length;
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const d = g.node(String(i));
    x[i] = d.x - items[i].w / 2;
    y[i] = d.y - items[i].h / 2;
  }
  const pts = new Map();
  for (const [a, b] of edges) {
    if (a === b) continue;
    const e = g.edge(String(a), String(b));
    if (e && e.points) pts.set(a + ">" + b, e.points.map((p) => [p.x, p.y]));
  }
  const gr = g.graph();
  const res = { x, y, w: Math.max(gr.width || 0, 1), h: Math.max(gr.height || 0, 1), pts };
  dagreCache.set(key, res);
  layoutStats.runs++;
  layoutStats.ms += performance.now() - t0;
  return res;
}

// Items in order, cut into columns laid out one by one (layoutNext), placed left to right.
export class Columns {
  constructor(items, edges, perCol) {
    this.items = items;
    this.n = items.length;
    this.perCol = perCol;
    this.nCols = Math.max(1, Math.ceil(this.n / perCol));
    this.col = new Int32Array(this.n);
    for (let i = 0; i < this.n; i++) this.col[i] = Math.floor(i / perCol);
    this.local = Array.from({ length: this.nCols }, () => []);
    this.cross = [];
    for (const e of edges) {
      const [a, b] = e;
      if (this.col[a] === this.col[b]) this.local[this.col[a]].push(e);
      else this.cross.push(e);
    }
    this.x = new Float64Array(this.n);
    this.y = new Float64Array(this.n);
    this.pts = new Map(); // "a>b" (global item indices) -> points, for edges inside a column
    this.next = 0;
    this.w = 0;
    this.h = 0;
    this.cols = [];
  }
  get done() {
    return this.next >= this.nCols;
  }
  layoutNext() {
    const c = this.next++;
    const lo = c * this.perCol;
    const hi = Math.min(this.n, lo + this.perCol);
    const items = this.items.slice(lo, hi);
    const edges = this.local[c].map(([a, b]) => [a - lo, b - lo]);
    const r = runDagre(items, edges);
    const x0 = this.w ? this.w + COL_GAP : 0;
    for (let i = lo; i < hi; i++) {
      this.x[i] = x0 + r.x[i - lo];
      this.y[i] = r.y[i - lo];
    }
    for (const [k, p] of r.pts) {
      const [a, b] = k.split(">").map(Number);
      this.pts.set(a + lo + ">" + (b + lo), p.map(([px, py]) => [px + x0, py]));
    }
    this.cols.push({ x: x0, w: r.w, h: r.h, lo, hi });
    this.w = x0 + r.w;
    this.h = Math.max(this.h, r.h);
    return c;
  }
  layoutAll() {
    while (!this.done) this.layoutNext();
    return this;
  }
}

const innerCache = new LRU(400);

// The inside of an expanded partition: its ops, laid out in columns.
function innerLayout(ops, G) {
  const key = ops.length + ":" + ops[0] + ":" + ops[ops.length - 1] + ":" + ops.join(",");
  const hit = innerCache.get(key);
  if (hit) return hit;
  const index = new Map();
  ops.forEach((op, i) => index.set(op, i));
  const items = ops.map(() => ({ w: NODE_W, h: NODE_H }));
  const edges = [];
  ops.forEach((op, i) => {
    for (const s of G.succs[op]) {
      const j = index.get(s);
      if (j !== undefined) edges.push([i, j]);
    }
  });
  const cols = new Columns(items, edges, CHUNK_OPS).layoutAll();
  const res = { index, x: cols.x, y: cols.y, w: cols.w, h: cols.h, pts: cols.pts };
  innerCache.set(key, res);
  return res;
}

// What is visible for the current placement and expansion state, and the level-1 blocks.
export function planLayout(G, P, isExpanded) {
  const blocks = [];
  const blockOfPart = new Int32Array(P.partitions.length);
  const firstConsumerPart = (consumers) => {
    let m = Infinity;
    for (const c of consumers) m = Math.min(m, P.part[c]);
    return m;
  };
  // inputs go just before the first partition that reads them, outputs right after their producer
  const inputsBefore = new Map();
  G.inputs.forEach((inp, k) => {
    const pid = inp.consumers.length ? firstConsumerPart(inp.consumers) : 0;
    if (!inputsBefore.has(pid)) inputsBefore.set(pid, []);
    inputsBefore.get(pid).push(k);
  });
  const outputsAfter = new Map();
  G.outputs.forEach((out, k) => {
    const pid = out.producer >= 0 ? P.part[out.producer] : P.partitions.length - 1;
    if (!outputsAfter.has(pid)) outputsAfter.set(pid, []);
    outputsAfter.get(pid).push(k);
  });
  const expanded = new Uint8Array(P.partitions.length);
  for (let pid = 0; pid < P.partitions.length; pid++) {
    for (const k of inputsBefore.get(pid) || []) blocks.push({ type: "in", idx: k, id: "i" + k, w: TERM_W, h: TERM_H });
    const ops = P.members[pid];
    if (isExpanded(pid, ops)) {
      expanded[pid] = 1;
      blocks.push({ type: "cluster", pid, id: "c" + pid, ops, w: 0, h: 0, inner: null });
    } else {
      blocks.push({ type: "part", pid, id: "p" + pid, w: NODE_W, h: NODE_H });
    }
    blockOfPart[pid] = blocks.length - 1;
    for (const k of outputsAfter.get(pid) || []) blocks.push({ type: "out", idx: k, id: "x" + k, w: TERM_W, h: TERM_H });
  }
  if (!P.partitions.length) {
    G.inputs.forEach((_, k) => blocks.push({ type: "in", idx: k, id: "i" + k, w: TERM_W, h: TERM_H }));
    G.outputs.forEach((_, k) => blocks.push({ type: "out", idx: k, id: "x" + k, w: TERM_W, h: TERM_H }));
  }
  const blockIndex = new Map();
  blocks.forEach((b, i) => blockIndex.set(b.id, i));
  const vis = (op) => (expanded[P.part[op]] ? "o" + op : "p" + P.part[op]);
  const blockOf = (op) => blockOfPart[P.part[op]];

  // visible edges (deduplicated), each with the block pair it spans
  const edges = [];
  const edgeIndex = new Map();
  const addEdge = (a, b, ba, bb) => {
    if (a === b) return;
    const key = a + ">" + b;
    if (edgeIndex.has(key)) return edgeIndex.get(key);
    edgeIndex.set(key, edges.length);
    edges.push({ a, b, ba, bb });
    return edges.length - 1;
  };
  const E = G.edges;
  for (let k = 0; k < E.length; k += 2) {
    const u = E[k];
    const v = E[k + 1];
    addEdge(vis(u), vis(v), blockOf(u), blockOf(v));
  }
  G.inputs.forEach((inp, k) => {
    for (const c of inp.consumers) addEdge("i" + k, vis(c), blockIndex.get("i" + k), blockOf(c));
  });
  G.outputs.forEach((out, k) => {
    if (out.producer >= 0) addEdge(vis(out.producer), "x" + k, blockOf(out.producer), blockIndex.get("x" + k));
  });
  const blockEdges = [];
  const seen = new Set();
  for (const e of edges) {
    if (e.ba === e.bb) continue;
    const key = e.ba + ">" + e.bb;
    if (!seen.has(key)) {
      seen.add(key);
      blockEdges.push(e.ba < e.bb ? [e.ba, e.bb] : [e.bb, e.ba]);
    }
  }
  return { blocks, blockIndex, blockEdges, edges, edgeIndex, vis, expanded };
}

// Size an expanded partition's box from its inner layout (done column by column, lazily).
export function sizeCluster(block, G) {
  if (block.inner) return;
  const inner = innerLayout(block.ops, G);
  block.inner = inner;
  block.w = Math.max(inner.w + 2 * PAD, 220);
  block.h = inner.h + HEAD + PAD;
  block.dx = (block.w - inner.w) / 2;
  block.dy = HEAD;
}

export const CLUSTER_HEAD = HEAD;
