// Decoding the widget's traits (see npukit/ui/viewmodel.py) into typed arrays and lookups.

function typed(x, Type) {
  if (x == null) return new Type(0);
  if (x instanceof DataView) {
    // copy: a view into a larger message buffer may not be aligned for Type
    return new Type(x.buffer.slice(x.byteOffset, x.byteOffset + x.byteLength));
  }
  if (ArrayBuffer.isView(x)) return new Type(x.buffer.slice(x.byteOffset, x.byteOffset + x.byteLength));
  if (x instanceof ArrayBuffer) return new Type(x.slice(0));
  return Type.from(x);
}

export function decodeGraph(g) {
  const edges = typed(g.edges, Int32Array);
  const n = g.n_ops;
  const preds = Array.from({ length: n }, () => []);
  const succs = Array.from({ length: n }, () => []);
  for (let k = 0; k < edges.length; k += 2) {
    succs[edges[k]].push(edges[k + 1]);
    preds[edges[k + 1]].push(edges[k]);
  }
  const procIndex = {};
  g.processors.forEach((p, i) => (procIndex[p.name] = i));
  return { ...g, n, edges, preds, succs, procIndex, colors: g.processors.map((p) => p.color) };
}

export function decodePlacement(p, G) {
  const proc = typed(p.proc, Uint8Array);
  const part = typed(p.partition, Int32Array);
  const verdicts = {};
  for (const [k, v] of Object.entries(p.verdicts || {})) verdicts[k] = typed(v, Int32Array);
  const members = p.partitions.map(() => []);
  for (let i = 0; i < part.length; i++) members[part[i]].push(i);
  // structure: which op is in which partition (processors may change without it)
  let sig = "";
  for (const m of members) sig += m[0] + ":" + m.length + ",";
  return {
    key: p.key,
    proc,
    part,
    pattern: typed(p.pattern, Int32Array),
    reason: typed(p.reason, Int32Array),
    pinned: typed(p.pinned, Uint8Array),
    verdicts,
    strings: p.strings,
    partitions: p.partitions,
    limits: p.limits || [],
    members,
    structure: sig + "|" + hashInts(part),
  };
}

function hashInts(a) {
  let h1 = 0x811c9dc5 | 0;
  for (let i = 0; i < a.length; i++) h1 = Math.imul(h1 ^ a[i], 16777619);
  return (h1 >>> 0).toString(36) + ":" + a.length;
}

const SEP = "\x1f";

function strs(x, n) {
  if (Array.isArray(x)) return x;
  if (typeof x !== "string") return [];
  return n === 0 ? [] : x.split(SEP);
}

function decodeBoundaries(b, procNames) {
  if (!b || Array.isArray(b)) return b || [];
  const n = b.n;
  const tensor = strs(b.tensor, n);
  const conversion = strs(b.conversion, n);
  const src = typed(b.src, Uint8Array);
  const dst = typed(b.dst, Uint8Array);
  const producer = typed(b.producer, Int32Array);
  const input = typed(b.input, Int32Array);
  const output = typed(b.output, Int32Array);
  const cons = typed(b.consumers, Int32Array);
  const at = typed(b.consumers_at, Int32Array);
  const col = (k) => typed(b[k], Float64Array);
  const [bytes, tr, lay, qu, cost, en] = ["bytes", "transfer_us", "layout_us", "quantize_us", "cost_us", "energy_uj"].map(col);
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = {
      tensor: tensor[i],
      src: procNames[src[i]],
      dst: procNames[dst[i]],
      producer: producer[i],
      input: input[i],
      output: output[i],
      consumers: Array.from(cons.subarray(at[i], at[i + 1])),
      bytes: bytes[i],
      transfer_us: tr[i],
      layout_us: lay[i],
      quantize_us: qu[i],
      cost_us: cost[i],
      energy_uj: en[i],
      conversion: conversion[i],
    };
  }
  return out;
}

export function decodeValues(v, G) {
  const tl = v.timeline || {};
  const lane = typed(tl.lane, Uint8Array);
  return {
    bitsNames: v.bits_names,
    bits: typed(v.bits, Uint8Array),
    lat: typed(v.latency_us, Float64Array),
    energy: typed(v.energy_uj, Float64Array),
    macs: typed(v.macs, Float64Array),
    bytes: typed(v.bytes, Float64Array),
    cycles: typed(v.cycles, Float64Array),
    compute: typed(v.compute_cycles, Float64Array),
    memory: typed(v.memory_cycles, Float64Array),
    boundaries: decodeBoundaries(v.boundaries, G.processors.map((p) => p.name)),
    totals: v.totals || {},
    timeline: {
      lanes: tl.lanes || [],
      kinds: tl.kinds || [],
      lane,
      kind: typed(tl.kind, Uint8Array),
      start: typed(tl.start_us, Float64Array),
      end: typed(tl.end_us, Float64Array),
      op: typed(tl.op_id, Int32Array),
      item: strs(tl.item, lane.length),
    },
  };
}
