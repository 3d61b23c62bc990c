// Funnels: a saved funnel or ad hoc steps (goals, in order), a window and a
// basis, drawn as bars with conversion and drop-off.
import { h, add } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";
import { funnelChart, widthOf } from "../chart.js";
import { table } from "../widgets.js";

export const controls = { period: "report" };

const AVAILABILITY = {
  consentless_only: "This project collects without consent only: funnels need people or visits with consent, so every count is 0.",
  no_sources: "This project has no source yet: nothing can be counted.",
};

export async function render(ctx) {
  const p = ctx.project;
  document.title = `Funnels · ${p.attributes.name} · mf`;
  const params = ctx.params;
  const goals = await ctx.get("/goals", st.pick(params, ["period", "from", "to"]));
  const steps = params.getAll("steps[]").filter(Boolean);
  const saved = params.get("funnel") || "";
  add(ctx.el, h("h1", {}, "Funnels"), builder(ctx, goals.data, steps, saved));
  if (!saved && steps.length < 2) {
    add(ctx.el, h("p", { class: "state empty", "data-state": "no-steps" }, goals.data.length < 2
      ? "A funnel needs two steps or more: define goals (actions with a role) first, or open a saved funnel by its id."
      : "Choose two to six steps in order, or open a saved funnel by its id."));
    return;
  }
  const q = saved ? st.pick(params, ["funnel", "period", "from", "to"]) : st.pick(params, ["steps[]", "window", "basis", "period", "from", "to"]);
  const doc = await ctx.get("/funnel", q);
  const a = doc.data.attributes;
  const rows = a.steps.map((s, i) => ({
    attrs: { "data-step": i },
    cells: [h("span", {}, s.name, s.archived ? h("span", { class: "badge" }, "archived") : null),
      f.number(s.count), f.percent(s.conversion), f.percent(s.dropoff)],
  }));
  add(ctx.el,
    h("h2", {}, a.name || "Ad hoc funnel"),
    h("p", { class: "help", id: "funnel-settings" }, `Within ${a.window} days of the first step, counted by ${a.basis}.`),
    AVAILABILITY[doc.meta.availability] ? h("p", { class: "note", "data-state": doc.meta.availability }, AVAILABILITY[doc.meta.availability]) : null,
    h("figure", { class: "trend" }, funnelChart(a.steps, "Funnel of " + a.steps.map((s) => s.name).join(", "), widthOf(ctx.el) - 26)),
    table("funnel", [{ title: "Step", key: "name" }, { title: a.basis === "visit" ? "Visits" : "People", key: "count", num: true },
      { title: "Conversion", key: "conversion", num: true }, { title: "Drop-off", key: "dropoff", num: true }], rows, "Funnel steps"));
}

function builder(ctx, goals, steps, saved) {
  const params = ctx.params;
  const opts = (cur) => [h("option", { value: "" }, "—"), ...goals.map((g) => h("option", { value: g.id, selected: g.id === cur }, g.attributes.name))];
  const n = Math.max(2, Math.min(6, steps.length + (steps.length < 6 ? 1 : 0)));
  const sels = Array.from({ length: n }, (_, i) => h("select", { id: `step-${i}`, "aria-label": `Step ${i + 1}` }, opts(steps[i] || (steps.length === 0 ? goals[i]?.id : ""))));
  const win = h("select", { id: "window", "aria-label": "Window" }, ["1", "7", "14", "30"].map((w) => h("option", { value: w, selected: (params.get("window") || "7") === w }, `${w} day${w === "1" ? "" : "s"}`)));
  const basis = h("select", { id: "basis", "aria-label": "Basis" }, [["person", "By person"], ["visit", "By visit"]].map(([v, t]) => h("option", { value: v, selected: (params.get("basis") || "person") === v }, t)));
  const savedIn = h("input", { id: "saved-funnel", "aria-label": "Saved funnel id", placeholder: "saved funnel id", value: saved, size: 38 });
  const base = st.pick(params, ["period", "from", "to"]);
  return h("form", { class: "card", id: "funnel-form", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams(base);
    if (savedIn.value.trim()) q.set("funnel", savedIn.value.trim());
    else {
      for (const s of sels) if (s.value) q.append("steps[]", s.value);
      q.set("window", win.value);
      q.set("basis", basis.value);
    }
    ctx.go(q);
  } },
  h("div", { class: "form-row" }, sels.map((s, i) => [i ? "→" : null, s])),
  h("div", { class: "form-row" }, win, basis, h("span", {}, "or"), savedIn, h("button", { type: "submit" }, "Show")));
}
