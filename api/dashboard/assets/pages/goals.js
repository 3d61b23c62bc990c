// Goals: every active goal with its conversions, people, rate and revenue.
import { h, add } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";
import { table, dl } from "../widgets.js";
import { periodNotes } from "../states.js";

export const controls = { period: "report" };

export async function render(ctx) {
  const p = ctx.project;
  document.title = `Goals · ${p.attributes.name} · mf`;
  const period = st.pick(ctx.params, ["period", "from", "to"]);
  const doc = await ctx.get("/goals", period);
  const m = doc.meta;
  const rows = doc.data.map((g) => ({
    attrs: { "data-id": g.id },
    cells: [h("a", { href: ctx.link("goals", period, g.id) }, g.attributes.name), f.label(g.attributes.role),
      f.number(g.attributes.conversions), f.number(g.attributes.people), f.percent(g.attributes.rate), f.moneyList(g.attributes.revenue)],
  }));
  const cols = [{ title: "Goal", key: "name" }, { title: "Role", key: "role" }, { title: "Conversions", key: "conversions", num: true },
    { title: "People", key: "people", num: true }, { title: m.perVisit ? "Rate (per visit)" : "Rate", key: "rate", num: true },
    { title: "Revenue", key: "revenue", num: true }];
  add(ctx.el,
    h("h1", {}, "Goals"),
    periodNotes(m, p),
    m.perVisit ? h("p", { class: "note", "data-state": "per-visit" }, "Without consented traffic, rates are conversions per visit and people are not counted.") : null,
    doc.data.length === 0
      ? h("p", { class: "state empty", "data-state": "no-goals" }, "No goals yet: give an action the role purchase, conversion or intent in the provisioning file.")
      : table("goals", cols, rows, "Goals"),
    h("div", { class: "card", id: "goals-meta" }, dl([["People active", f.number(m.active), "active"], ["Visits", f.number(m.visits), "visits"],
      ["Consent coverage", f.percent(m.coverage), "coverage"]])),
    doc.data.length >= 2 ? h("p", {}, h("a", { href: ctx.link("funnel", st.set(period, "steps[]", "")) }, "Build a funnel from these goals")) : null);
}
