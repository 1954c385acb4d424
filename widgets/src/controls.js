// The side controls: placement policy and bit-width per processor, op support per accelerator.
// Built once per graph; `render(C)` sets their state from the `controls` trait.  Each change is a
// request (`send`); what the rules say about the ops of a kind comes from Python (C.rules).

import { h } from "./format.js";

const POLICY_TITLE = {
  cost: "cost: npukit's cost model chooses among the processors the rules allow, and whether an offload pays for its call and transfers",
  "first-fit": "first-fit: the first processor in the profile's order that accepts an op takes it (BYOC's own behaviour)",
};

export class Controls {
  constructor(bitsEl, supportEl, send) {
    this.bitsEl = bitsEl;
    this.supportEl = supportEl;
    this.send = send;
  }

  build(G, placements) {
    this.bitsEl.textContent = "";
    this.policy = h(
      "select",
      { testid: "placement-policy", onchange: (ev) => this.send({ type: "placement", placement: ev.target.value }) },
      (placements || ["cost", "first-fit"]).map((p) => h("option", { value: p, title: POLICY_TITLE[p] || p }, p)),
    );
    this.bitsEl.append(h("label", { class: "nk-row", title: "where ops go among the processors whose rules accept them" }, h("span", { class: "nk-pname" }, "placement"), this.policy));
    this.bitSelects = {};
    for (const p of G.processors) {
      const sel = h(
        "select",
        { testid: "bits-" + p.name, onchange: (ev) => this.send({ type: "bits", processor: p.name, bits: ev.target.value || null }) },
        h("option", { value: "" }, `default (${p.default_bits})`),
        p.bits.map((b) => h("option", { value: b }, b)),
      );
      this.bitSelects[p.name] = sel;
      this.bitsEl.append(h("label", { class: "nk-row" }, h("span", { class: "nk-chip", style: `background:${p.color}` }), h("span", { class: "nk-pname" }, p.name), sel));
    }
    this.supportEl.textContent = "";
    this.checks = {};
    this.notes = {};
    for (const a of G.accelerators) {
      const p = G.processors[G.procIndex[a]];
      const box = h("div", { class: "nk-sgrid" });
      for (const k of G.kinds) {
        const cb = h("input", {
          type: "checkbox",
          testid: `support-${a}-${k}`,
          "data-proc": a,
          "data-op": k,
          onchange: (ev) => this.send({ type: "support", processor: a, op: k, enabled: ev.target.checked }),
        });
        const mark = h("span", { class: "nk-rulemark", "aria-hidden": "true" }, "⚠");
        this.checks[a + ":" + k] = cb;
        box.append(h("label", { class: "nk-check", title: `${a}: ${k}` }, cb, h("span", {}, k), mark));
      }
      this.notes[a] = h("div", { class: "nk-rulenotes", testid: "support-notes-" + a });
      this.supportEl.append(h("div", { class: "nk-sproc" }, h("div", {}, h("span", { class: "nk-chip", style: `background:${p.color}` }), h("b", {}, a)), box, this.notes[a]));
    }
  }

  render(C) {
    if (this.policy && C.placement && this.policy.value !== C.placement) this.policy.value = C.placement;
    for (const [p, sel] of Object.entries(this.bitSelects || {})) {
      const v = C.bits[p] || "";
      if (sel.value !== v) sel.value = v;
    }
    const rules = C.rules || {};
    const notes = {};
    for (const [key, cb] of Object.entries(this.checks || {})) {
      const [a, k] = key.split(":");
      const on = !!(C.support[a] && C.support[a][k]);
      if (cb.checked !== on) cb.checked = on;
      const edited = C.edited.includes(key);
      const label = cb.parentElement;
      label.classList.toggle("nk-edited", edited);
      // a rule of the profile, not the user, keeps some (or all) ops of this kind off `a`
      const r = rules[a] && rules[a][k];
      const ruled = !!(r && on);
      label.classList.toggle("nk-ruled", ruled);
      label.classList.toggle("nk-blocked", ruled && r.ok === 0);
      label.dataset.accepted = r ? `${r.ok}/${r.n}` : "";
      let title = `${a}: ${k}${edited ? " (edited; profile: " + (C.profile[a][k] ? "supported" : "not supported") + ")" : ""}`;
      if (r) title += "\n" + r.text;
      label.title = title;
      if (ruled) (notes[a] = notes[a] || []).push([k, r]);
    }
    for (const [a, el] of Object.entries(this.notes || {})) {
      el.textContent = "";
      for (const [k, r] of notes[a] || []) {
        el.append(h("div", { class: "nk-rulenote" + (r.ok === 0 ? " nk-blocked" : ""), testid: `support-note-${a}-${k}` }, r.text));
      }
    }
  }
}
