// node --test test/   (npm test): one number format per table column.
import { test } from "node:test";
import assert from "node:assert/strict";
import { columnFormat, nOps, us } from "../src/format.js";

const decimals = (s) => (s.includes(".") ? s.split(".")[1].length : 0);

test("a column of latencies: the same decimals in every cell, from its small values", () => {
  const vals = [1.2, 0.013, 49.6, 0.5, 3.25, 0];
  const f = columnFormat(vals);
  assert.equal(f.spec, "fixed:3");
  assert.deepEqual(vals.map(f), ["1.200", "0.013", "49.600", "0.500", "3.250", "0.000"]);
  assert.equal(new Set(vals.map((v) => decimals(f(v)))).size, 1);
});

test("integers keep no decimals and get thousands separators", () => {
  const f = columnFormat([0, 12, 1234567, 96]);
  assert.equal(f.spec, "int");
  assert.deepEqual([0, 12, 1234567, 96].map(f), ["0", "12", "1,234,567", "96"]);
});

test("large values with fractions: thousands separators and the column's decimals", () => {
  const f = columnFormat([1520.25, 12.5, 3.75, 180.125]);
  assert.equal(f.spec, "fixed:1");
  assert.deepEqual([1520.25, 3.75].map(f), ["1,520.3", "3.8"]);
});

test("a range too wide for fixed decimals: exponent form with 3 significant digits everywhere", () => {
  const vals = [1.5e-9, 2.25e-7, 0.5, 12];
  const f = columnFormat(vals);
  assert.equal(f.spec, "exp:2");
  assert.deepEqual(vals.map(f), ["1.50e-9", "2.25e-7", "5.00e-1", "1.20e+1"]);
});

test("missing values show a dash and do not choose the format", () => {
  const f = columnFormat([null, NaN, 0.25, Infinity]);
  assert.equal(f.spec, "fixed:2");
  assert.deepEqual([null, NaN, 0.25].map(f), ["–", "–", "0.25"]);
  assert.equal(columnFormat([]).spec, "int");
});

test("a cap keeps a count column in fixed form however small its fractions", () => {
  const f = columnFormat([0.25, 1520.5, 3], { cap: 1 });
  assert.equal(f.spec, "fixed:1");
  assert.deepEqual([0.25, 1520.5, 3].map(f), ["0.3", "1,520.5", "3.0"]);
});

test("latencies of a thousand us and more keep one decimal; op counts read as words", () => {
  assert.deepEqual([1142, 1132.94, 999.5].map(us), ["1,142.0 us", "1,132.9 us", "999.50 us"]);
  assert.deepEqual([1, 2, 1161].map(nOps), ["1 op", "2 ops", "1,161 ops"]);
});

test("the layer-width menu offers every width some processor runs, narrowest first", async () => {
  const { widthsOf, layerWidthLabel } = await import("../src/format.js");
  const procs = [
    { name: "arm", bits: ["fp32", "int8", "int16", "fp16"] },
    { name: "dla", bits: ["int8", "fp16", "int4"] },
  ];
  assert.deepEqual(widthsOf(procs), ["int4", "int8", "int16", "fp16", "fp32"]);
  assert.equal(layerWidthLabel("int8", procs[1]), "int8");
  assert.equal(layerWidthLabel("fp32", procs[1]), "fp32 (dla does not run it: the layer moves)");
});
