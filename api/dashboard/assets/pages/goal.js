// A goal report: its numbers beside the previous period's, and three trends.
import { h, add } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";
import { trendChart, widthOf } from "../chart.js";
import { dl } from "../widgets.js";
import { periodNotes } from "../states.js";

export const controls = { period: "report", compare: true };

export async function render(ctx) {
  const p = ctx.project;
  const doc = await ctx.get("/goals/" + encodeURIComponent(ctx.r.item), st.pick(ctx.params, ["period", "from", "to", "compare"]));
  const a = doc.data.attributes;
  document.title = `${a.name} · Goals · ${p.attributes.name} · mf`;
  const prev = a.previous;
  const zone = p.attributes.timezone;
  const w = widthOf(ctx.el) - 26;
  add(ctx.el,
    h("p", {}, h("a", { href: ctx.link("goals", st.pick(ctx.params, ["period", "from", "to"])) }, "← Goals")),
    h("h1", {}, a.name, a.archived ? h("span", { class: "badge" }, "archived") : null),
    periodNotes(doc.meta, p),
    h("ul", { class: "kpis", id: "numbers" },
      [["conversions", a.conversions, prev?.conversions, "number"], ["people", a.people, prev?.people, "number"], ["rate", a.rate, prev?.rate, "percent"]]
        .map(([k, v, pv, fm]) => h("li", { class: "kpi", "data-key": k },
          h("span", { class: "kpi-label" }, k === "rate" && a.perVisit ? "Rate (per visit)" : f.label(k)),
          h("span", { class: "kpi-value" }, f.value(v, fm)),
          prev ? h("span", { class: "kpi-prev" }, "previous ", h("span", { class: "kpi-prev-value" }, f.value(pv, fm))) : null))),
    h("div", { class: "card", id: "goal-meta" }, dl([["Role", f.label(a.role), "role"], ["Revenue", f.moneyList(a.revenue), "revenue"],
      ["People active", f.number(a.active), "active"], ["Visits", f.number(a.visits), "visits"], ["Consent coverage", f.percent(a.coverage), "coverage"]])),
    ["conversions", "people", "rate"].map((k) => h("section", { class: "goal-trend", "data-trend": k },
      h("h2", {}, f.label(k)), trendChart(a.trend[k], { zone, width: w, title: "Trend of " + k }))));
}
