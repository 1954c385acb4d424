// Small formatting and DOM helpers (no state).

export function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

export function us(x) {
  if (x == null || !isFinite(x)) return "–";
  const a = Math.abs(x);
  if (a >= 1000) return nf(1, 1).format(x) + " us"; // (1,142.0 beside 1,132.9: one decimal always)
  if (a >= 10) return x.toFixed(2) + " us";
  if (a >= 0.01 || a === 0) return x.toFixed(3) + " us";
  return x.toExponential(2) + " us";
}

const NF = new Map();
function nf(digits, min = 0) {
  const key = digits + "/" + min;
  let f = NF.get(key);
  if (!f) NF.set(key, (f = new Intl.NumberFormat("en-US", { maximumFractionDigits: digits, minimumFractionDigits: min })));
  return f;
}

export function num(x, digits = 3) {
  if (x == null || !isFinite(x)) return "–";
  const a = Math.abs(x);
  if (a !== 0 && (a >= 1e7 || a < 1e-3)) return x.toExponential(2);
  return nf(Number.isInteger(x) ? 0 : digits).format(x);
}

export function uj(x) {
  if (x == null || !isFinite(x)) return "–";
  return num(x, 4) + " uJ";
}

export function bytes(x) {
  if (x == null || !isFinite(x)) return "–";
  if (x >= 1 << 20) return (x / (1 << 20)).toFixed(2) + " MiB";
  if (x >= 1 << 10) return (x / (1 << 10)).toFixed(1) + " KiB";
  return Math.round(x) + " B";
}

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "testid") el.setAttribute("data-testid", v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function shorten(s, n) {
  s = String(s);
  return s.length <= n ? s : "…" + s.slice(s.length - n + 1);
}

// a light tint of a #rrggbb colour, for partition boxes
export function tint(hex, a = 0.12) {
  const m = /^#?([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex || "");
  if (!m) return "#f4f4f4";
  const mix = (c) => Math.round(255 - (255 - parseInt(c, 16)) * a);
  return `rgb(${mix(m[1])},${mix(m[2])},${mix(m[3])})`;
}

// One number format for a whole table column: every cell in the same style, with the same
// number of decimals (or the same significant digits in exponent form), chosen from the
// column's values, so "1.200" and "0.013" line up instead of "1.2 us" next to "0.013 us".
//   integers              -> 12,345            (thousands separators, no decimals)
//   a usual range         -> 0.013 / 49.600    (decimals: 2 significant digits for the column's
//                                               small values, its 10th percentile of |v| > 0)
//   a huge or tiny range  -> 1.23e-7 / 4.56e+2 (3 significant digits in every cell)
// The returned function has `.spec` ("int", "fixed:3", "exp:2") for tests and the header's title.
// Options: maxDecimals (more would be needed: exponent form instead), cap (never more decimals
// than this, and never the exponent form: for counts such as cycles).
export function columnFormat(values, { maxDecimals = 6, cap = null } = {}) {
  const mags = [];
  let ints = true;
  for (const v of values) {
    if (v == null || !isFinite(v)) continue;
    if (!Number.isInteger(v)) ints = false;
    if (v !== 0) mags.push(Math.abs(v));
  }
  const dash = (f) => (v) => (v == null || !isFinite(v) ? "–" : f(v));
  const make = (spec, f) => Object.assign(dash(f), { spec });
  if (ints) return make("int", (v) => nf(0).format(v));
  mags.sort((a, b) => a - b);
  const lo = mags[Math.floor(0.1 * (mags.length - 1))];
  const hi = mags[mags.length - 1];
  let d = Math.max(0, 1 - Math.floor(Math.log10(lo)));
  if (cap != null) d = Math.min(d, cap);
  if (hi >= 1e9 || d > maxDecimals) return make("exp:2", (v) => v.toExponential(2));
  const f = new Intl.NumberFormat("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  return make("fixed:" + d, (v) => f.format(v));
}

// "1 op", "1,161 ops": a count of ops as every panel says it
export function nOps(n) {
  return `${Number(n).toLocaleString("en-US")} op${n === 1 ? "" : "s"}`;
}

// the bit-widths a profile's processors run (each one's macs_per_cycle keys), narrowest first
const BIT_ORDER = ["int2", "int4", "int8", "int16", "fp16", "fp32"];
export function widthsOf(processors) {
  const all = new Set(processors.flatMap((p) => p.bits));
  const rank = (b) => (BIT_ORDER.includes(b) ? BIT_ORDER.indexOf(b) : BIT_ORDER.length);
  return [...all].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

// a layer-width menu entry: a width the op's processor does not run moves the layer to one that does
export function layerWidthLabel(b, proc) {
  return proc.bits.includes(b) ? b : `${b} (${proc.name} does not run it: the layer moves)`;
}
