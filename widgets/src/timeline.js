// The schedule as a plotly Gantt chart: one lane per processor plus the link lane(s).
// plotly.js (basic bundle) is part of widget.js but only evaluated when the tab is first shown.

let Plotly = null;
function plotly() {
  // esbuild turns this require into a lazily evaluated module inside the one bundle
  // eslint-disable-next-line no-undef
  if (!Plotly) Plotly = require("plotly.js-basic-dist-min");
  return Plotly;
}

const KIND_LABEL = { op: "op", transfer: "transfer", layout: "layout conversion", quantize: "(de)quantize" };

export class Timeline {
  constructor(host) {
    this.host = host;
    this.div = document.createElement("div");
    this.div.className = "nk-timeline";
    this.div.setAttribute("data-testid", "timeline");
    host.append(this.div);
    this.drawn = false;
  }

  draw(G, V, onPick) {
    const P = plotly();
    const tl = V.timeline;
    const colorOf = {};
    G.processors.forEach((p) => (colorOf[p.name] = p.color));
    const traces = [];
    tl.kinds.forEach((kind, ki) => {
      const y = [];
      const x = [];
      const base = [];
      const color = [];
      const text = [];
      const ids = [];
      for (let i = 0; i < tl.kind.length; i++) {
        if (tl.kind[i] !== ki) continue;
        const lane = tl.lanes[tl.lane[i]];
        y.push(lane);
        base.push(tl.start[i]);
        x.push(tl.end[i] - tl.start[i]);
        color.push(kind === "op" ? colorOf[lane] || G.link_color : G.link_color);
        text.push(`${tl.item[i]}<br>${tl.start[i].toFixed(3)}–${tl.end[i].toFixed(3)} us`);
        ids.push(tl.op[i]);
      }
      if (!y.length) return;
      traces.push({
        type: "bar",
        orientation: "h",
        name: KIND_LABEL[kind] || kind,
        y,
        x,
        base,
        customdata: ids,
        marker: { color, line: { width: 0 }, pattern: { shape: kind === "layout" || kind === "quantize" ? "/" : "" } },
        hovertext: text,
        hoverinfo: "text",
      });
    });
    const lanes = tl.lanes.slice().reverse();
    const total = V.totals.latency_us || 0;
    const layout = {
      barmode: "overlay",
      height: 110 + 34 * tl.lanes.length,
      margin: { l: 70, r: 10, t: 28, b: 60 },
      title: { text: `timeline: ${total.toFixed(2)} us`, font: { size: 13 } },
      xaxis: { title: { text: "time (us)" } },
      yaxis: { categoryorder: "array", categoryarray: lanes, type: "category" },
      legend: { orientation: "h", y: -0.45 },
      bargap: 0.25,
    };
    P.react(this.div, traces, layout, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] });
    if (!this.bound) {
      this.bound = true;
      this.div.on("plotly_click", (ev) => {
        const pt = ev && ev.points && ev.points[0];
        if (pt && pt.customdata >= 0) onPick(pt.customdata);
      });
    }
    this.drawn = true;
  }

  destroy() {
    if (this.drawn && Plotly) Plotly.purge(this.div);
  }
}
