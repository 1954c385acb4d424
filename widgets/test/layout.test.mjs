// node --test test/   (npm test): the pure layout code, without a browser.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Columns, planLayout, sizeCluster, layoutStats, COL_ITEMS } from "../src/layout.js";

// a chain of n ops in partitions of `per` ops, alternating two processors
function chain(n, per) {
  const edges = [];
  for (let i = 1; i < n; i++) edges.push(i - 1, i);
  const succs = Array.from({ length: n }, (_, i) => (i + 1 < n ? [i + 1] : []));
  const G = { n, edges: Int32Array.from(edges), succs, inputs: [{ consumers: [0], name: "x" }], outputs: [{ producer: n - 1, name: "y" }] };
  const part = Int32Array.from({ length: n }, (_, i) => Math.floor(i / per));
  const np = Math.ceil(n / per);
  const members = Array.from({ length: np }, (_, p) => Array.from({ length: Math.min(per, n - p * per) }, (_, k) => p * per + k));
  const P = { part, members, partitions: members.map((m, p) => ({ pid: p, proc: p % 2, n: m.length })) };
  return { G, P };
}

test("collapsed: one block per partition plus input and output, edges between blocks", () => {
  const { G, P } = chain(40, 4);
  const plan = planLayout(G, P, () => false);
  assert.equal(plan.blocks.length, 10 + 2);
  assert.deepEqual(plan.blocks.map((b) => b.id).slice(0, 3), ["i0", "p0", "p1"]);
  assert.equal(plan.blocks.at(-1).id, "x0");
  assert.equal(plan.vis(5), "p1");
  assert.equal(plan.blockEdges.length, 11); // a chain of 12 blocks
});

test("expanded partitions show their ops inside a sized box", () => {
  const { G, P } = chain(12, 4);
  const plan = planLayout(G, P, (pid) => pid === 1);
  assert.equal(plan.vis(5), "o5");
  assert.equal(plan.vis(1), "p0");
  const box = plan.blocks.find((b) => b.id === "c1");
  sizeCluster(box, G);
  assert.ok(box.h > 4 * 36, "four ops stacked");
  assert.ok(box.w >= 158);
});

test("columns: big levels are cut into dagre runs placed side by side, and runs are cached", () => {
  const n = COL_ITEMS * 3 + 5;
  const items = Array.from({ length: n }, () => ({ w: 100, h: 30 }));
  const edges = Array.from({ length: n - 1 }, (_, i) => [i, i + 1]);
  const cols = new Columns(items, edges, COL_ITEMS).layoutAll();
  assert.equal(cols.nCols, 4);
  for (let c = 1; c < cols.nCols; c++) assert.ok(cols.cols[c].x >= cols.cols[c - 1].x + cols.cols[c - 1].w, "columns do not overlap");
  for (let i = 1; i < COL_ITEMS; i++) assert.ok(cols.y[i] > cols.y[i - 1], "a chain runs downwards");
  const before = layoutStats.hits;
  new Columns(items, edges, COL_ITEMS).layoutAll();
  assert.equal(layoutStats.hits - before, 4, "the same structure is laid out from cache");
});
