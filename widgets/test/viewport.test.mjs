// node --test test/   (npm test): what the graph's "fit" shows, without a browser.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fitView, neededHeight, clampOffset, thumb, MIN_READABLE_ZOOM, PAD } from "../src/viewport.js";

const view = { width: 900, height: 520 };

test("a small graph fits whole, centred", () => {
  const v = fitView(view, 400, 300);
  assert.equal(v.s, 1.5); // capped: not blown up past 1.5
  assert.deepEqual([v.tx, v.ty], [(900 - 600) / 2, (520 - 450) / 2]);
  assert.equal(neededHeight(view, 400, 300), 0);
});

test("a tall graph is fitted to the width at a readable zoom, from the top", () => {
  // 1,161 ops in a column: far taller than the view; shrunk whole it would be 0.01x (dots)
  const v = fitView(view, 700, 60000);
  assert.equal(v.s, Math.min((900 - 2 * PAD) / 700, 1.5));
  assert.ok(v.s >= MIN_READABLE_ZOOM);
  assert.equal(v.ty, PAD);
  assert.equal(neededHeight(view, 700, 60000), 60000 * v.s + 2 * PAD);
});

test("a graph wider than the view at the readable zoom starts at the left edge", () => {
  const v = fitView(view, 5000, 4000);
  assert.deepEqual(v, { s: MIN_READABLE_ZOOM, tx: PAD, ty: PAD });
});

test("a graph that fits the width but only just too tall needs a little more height", () => {
  const h = neededHeight(view, 800, 900); // width fit 1.1, height fit 0.56 < readable
  assert.equal(h, 900 * 1.1 + 2 * PAD);
  const grown = { width: 900, height: h };
  assert.equal(fitView(grown, 800, 900).s, 1.1); // then the whole graph shows
});

test("scrolling stops at the ends; a graph that fits moves only within the view", () => {
  assert.equal(clampOffset(50, 2000, 520), PAD);
  assert.equal(clampOffset(-5000, 2000, 520), 520 - 2000 - PAD);
  assert.equal(clampOffset(-300, 2000, 520), -300);
  // 400 of 520 pixels: anywhere from PAD to 520 - 400 - PAD, never out of sight
  assert.equal(clampOffset(60, 400, 520), 60);
  assert.equal(clampOffset(123, 400, 520), 520 - 400 - PAD);
  assert.equal(clampOffset(-5000, 400, 520), PAD);
  assert.equal(clampOffset(5000, 400, 520), 520 - 400 - PAD);
  // fitView's centred offset of a graph that fits is kept as it is
  const v = fitView({ width: 900, height: 520 }, 400, 300);
  assert.equal(clampOffset(v.ty, 300 * v.s, 520), v.ty);
  assert.equal(clampOffset(v.tx, 400 * v.s, 900), v.tx);
});

test("the scrollbar thumb: none when it fits, top at the start, bottom at the end", () => {
  assert.equal(thumb(PAD, 400, 520), null);
  const top = thumb(PAD, 2000, 520);
  assert.equal(top.top, 0);
  assert.ok(top.size >= 18 && top.size < 520);
  const end = thumb(520 - 2000 - PAD, 2000, 520);
  assert.ok(Math.abs(end.top + end.size - (520 - 4)) < 1e-9);
});
