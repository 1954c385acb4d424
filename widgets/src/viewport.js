// The graph view's geometry as pure functions (no DOM): what "fit" shows, how far a scroll may
// go, where the scrollbar's thumb sits.  `size` is the view in screen pixels, W x H the graph in
// graph units, a view is {s (zoom), tx, ty} (graph -> screen: x * s + tx).

// "fit" never goes below this zoom: node labels (11 px) stay >= 8 px on screen; a graph taller
// than the view at this zoom is fitted to the width and scrolled vertically instead of shrunk
export const MIN_READABLE_ZOOM = 0.75;
export const PAD = 10;

// The whole graph when it fits at a readable zoom (centred); else fitted to the width (never
// below MIN_READABLE_ZOOM, never above `most`), from the top, to be scrolled.
export function fitView(size, W, H, most = 1.5) {
  const sw = (size.width - 2 * PAD) / W;
  const sh = (size.height - 2 * PAD) / H;
  const whole = Math.min(sw, sh, most);
  if (whole >= MIN_READABLE_ZOOM) return { s: whole, tx: (size.width - W * whole) / 2, ty: (size.height - H * whole) / 2 };
  const s = Math.max(MIN_READABLE_ZOOM, Math.min(sw, most));
  const tx = W * s <= size.width - 2 * PAD ? (size.width - W * s) / 2 : PAD;
  return { s, tx, ty: PAD };
}

// The height (screen pixels) a view would need to show the whole graph at the zoom fitView
// would choose for its width; 0 when the current height is enough.
export function neededHeight(size, W, H, most = 1.5) {
  const s = Math.min((size.width - 2 * PAD) / W, most);
  if (Math.min(s, (size.height - 2 * PAD) / H) >= MIN_READABLE_ZOOM) return 0;
  return H * Math.max(s, MIN_READABLE_ZOOM) + 2 * PAD;
}

// A translation kept within the graph's extent (len: graph length in screen pixels, view: the
// view's length): a graph that fits stays whole in the view (it moves between PAD from one edge
// and PAD from the other); a larger one goes no further than PAD past either end.  (A fitting
// graph scrolled freely: the wheel of a user scrolling the page over it moved it out of sight,
// leaving an empty view with no scrollbar, and the page never scrolled on.)
export function clampOffset(t, len, view) {
  const lo = Math.min(PAD, view - len - PAD);
  const hi = Math.max(PAD, view - len - PAD);
  return Math.min(hi, Math.max(lo, t));
}

// The scrollbar's thumb for a graph of `len` screen pixels in a view of `view` pixels at offset
// t: null when no scrolling is needed, else {size, top, per} (per: graph pixels per thumb pixel)
export function thumb(t, len, view) {
  const total = len + 2 * PAD;
  if (!view || total <= view + 1) return null;
  const track = view - 4;
  const size = Math.max(18, (track * view) / total);
  const pos = Math.min(1, Math.max(0, (PAD - t) / (total - view)));
  return { size, top: (track - size) * pos, per: (total - view) / Math.max(1, track - size) };
}
