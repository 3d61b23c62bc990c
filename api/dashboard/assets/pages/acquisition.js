// Acquisition: channels by first or last touch as a table with bars, the
// search summaries per engine and the ads summary, with provider states.
import { h, add } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";
import { bar } from "../chart.js";
import { table, pick, tabs, dl, provider } from "../widgets.js";
import { periodNotes } from "../states.js";

export const controls = { period: "report", compare: true, filters: st.EVENT_FIELDS };

const COLS = [["visits", "Visits"], ["people", "People"], ["newPeople", "New people"], ["buyers", "Buyers"], ["customers", "Customers"]];

function metric(m, format) {
  if (!m) return h("span", {}, f.DASH);
  const v = format === "percent" ? f.percent(m.value) : f.number(m.value);
  const p = format === "percent" ? f.percent(m.previous) : f.number(m.previous);
  return h("span", {}, h("span", { class: "v" }, v), h("span", { class: "help" }, " previous ", h("span", { class: "p" }, p)));
}

export async function render(ctx) {
  const p = ctx.project;
  document.title = `Acquisition · ${p.attributes.name} · mf`;
  const touch = ctx.params.get("touch") || "first";
  const engine = ctx.params.get("engine") || "engine_a";
  const period = st.pick(ctx.params, ["period", "from", "to"]);
  const [ch, search, ads] = await Promise.all([
    ctx.get("/acquisition/channels", st.pick(ctx.params, ["period", "from", "to", "touch", "filters"])),
    ctx.get("/acquisition/search", st.pick(ctx.params, ["period", "from", "to", "compare", "engine"])),
    ctx.get("/acquisition/ads", period),
  ]);
  const max = Object.fromEntries(COLS.map(([k]) => [k, Math.max(0, ...ch.data.map((c) => c.attributes[k]))]));
  const rows = ch.data.map((c) => ({
    attrs: { "data-id": c.id },
    cells: [c.id === "none" ? f.label(c.id) : pick(ctx, "channel", c.id, f.label(c.id)),
      ...COLS.map(([k]) => h("span", {}, h("span", { class: "n" }, f.number(c.attributes[k])), k === "visits" || k === "people" ? bar(c.attributes[k], max[k]) : null)),
      h("span", { class: "n" }, f.percent(c.attributes.conversion))],
  }));
  const tot = ch.meta.people;
  rows.push({ attrs: { "data-id": "total", class: "total" }, cells: ["All channels",
    ...COLS.map(([k]) => h("span", { class: "n" }, f.number(k === "visits" ? ch.meta.visits : tot[k]))),
    h("span", { class: "n" }, f.percent(tot.conversion))] });
  const cols = [{ title: "Channel", key: "channel" }, ...COLS.map(([k, t]) => ({ title: t, key: k, num: true })), { title: "Conversion", key: "conversion", num: true }];
  const s = search.data.attributes;
  const a = ads.data.attributes;
  add(ctx.el,
    h("h1", {}, "Acquisition"),
    periodNotes(ch.meta, p),
    h("section", { "aria-labelledby": "ch-h" },
      h("h2", { id: "ch-h" }, "Channels"),
      tabs(ctx, "touch", [["first", "First touch"], ["last", "Last touch"]], touch, "Touch"),
      table("channels", cols, rows, "Channels by " + touch + " touch"),
      h("p", { class: "coverage", "data-key": "coverage" }, "Consent coverage: ", h("strong", {}, f.percent(ch.meta.coverage)),
        h("span", { class: "help" }, " · people are credited to one channel each by their " + touch + " touch; click a channel to filter"))),
    h("div", { class: "cards" },
      h("section", { class: "card", id: "search", "aria-labelledby": "s-h" },
        h("h2", { id: "s-h" }, "Search"),
        tabs(ctx, "engine", [["engine_a", f.label("engine_a")], ["engine_b", f.label("engine_b")]], engine, "Search engine"),
        provider(s.provider),
        dl([["Clicks", metric(s.clicks), "clicks"], ["Impressions", metric(s.impressions), "impressions"],
          ["Click-through", metric(s.ctr, "percent"), "ctr"], ["Position", metric(s.position), "position"],
          ["Published through", s.through ? f.day(s.through + "T12:00:00Z") : f.DASH, "through"]])),
      h("section", { class: "card", id: "ads", "aria-labelledby": "a-h" },
        h("h2", { id: "a-h" }, "Ads"),
        a.providers.map(provider),
        dl([["Spend", f.moneyList(a.spend), "spend"], ["Clicks", f.number(a.clicks), "clicks"],
          ["Impressions", f.number(a.impressions), "impressions"], ["Click-through", f.percent(a.ctr), "ctr"],
          ["Return on ad spend", a.roas ? a.roas.map((r) => `${f.number(r.value)} (${r.currency})`).join(" · ") : f.DASH, "roas"],
          ["Buyers after a paid click", f.number(a.buyers), "buyers"],
          ["Revenue tracked", a.revenueTracked === null ? f.DASH : a.revenueTracked ? "yes" : "no", "revenueTracked"]]))));
}
