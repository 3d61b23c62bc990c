// Overview: the key numbers with their previous values and change, the
// trend with the comparison period beside it, coverage.
import { h, add } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";
import { trendChart, widthOf } from "../chart.js";
import { noData, periodNotes } from "../states.js";

export const controls = { period: "report", compare: true, filters: st.EVENT_FIELDS };

export async function render(ctx) {
  const p = ctx.project;
  document.title = `Overview · ${p.attributes.name} · mf`;
  const doc = await ctx.get("/overview", st.pick(ctx.params, ["period", "from", "to", "compare", "filters"]));
  const a = doc.data.attributes;
  const cards = a.numbers.map((n) => {
    const ch = f.change(n.value, n.previous);
    const shown = n.format === "currency" ? f.money(n.value, n.currency) : f.value(n.value, n.format);
    const prev = n.format === "currency" ? f.money(n.previous, n.currency) : f.value(n.previous, n.format);
    return h("li", { class: "kpi", "data-key": n.key },
      h("span", { class: "kpi-label" }, f.label(n.key)),
      h("span", { class: "kpi-value" }, shown),
      h("span", { class: "kpi-prev" }, "previous ", h("span", { class: "kpi-prev-value" }, prev)),
      ch === null ? null : h("span", { class: "kpi-change " + (ch > 0 ? "up" : ch < 0 ? "down" : ""), "aria-label": "change " + f.percent(ch) },
        (ch > 0 ? "▲ " : ch < 0 ? "▼ " : "") + f.percent(Math.abs(ch))),
      n.others?.length ? h("span", { class: "kpi-others" }, "also ", f.moneyList(n.others)) : null);
  });
  const empty = a.trend.series.every((s) => s.points.every((pt) => !pt.v)) && a.numbers.every((n) => !n.value);
  add(ctx.el, 
    h("h1", {}, "Overview"),
    periodNotes(doc.meta, p),
    a.consentless ? h("p", { class: "note", "data-state": "consentless" },
      "This project collects without consent only: it counts visits and pageviews, and knows no people.") : null,
    h("ul", { class: "kpis", id: "numbers" }, cards),
    h("p", { class: "coverage", "data-key": "coverage" }, "Consent coverage: ", h("strong", {}, f.percent(a.coverage)),
      h("span", { class: "help" }, " of pageviews were collected with consent")),
    empty ? noData(p) : null,
    h("section", { "aria-labelledby": "trend-h" }, h("h2", { id: "trend-h" }, "Trend"),
      trendChart(a.trend, { zone: p.attributes.timezone, width: widthOf(ctx.el) - 26, title: "Trend of " + a.trend.series.map((s) => f.label(s.key)).join(" and ") })),
    h("p", { class: "links" }, "Find where they came from in ",
      h("a", { href: ctx.link("acquisition", st.pick(ctx.params, ["period", "from", "to", "filters"])) }, "Acquisition"), "."));
}
