// People: the list with views, sorts, filters and paging.
import { h, add } from "../dom.js";
import * as f from "../format.js";
import * as st from "../state.js";
import { table, pick, tabs, pager } from "../widgets.js";
import { periodNotes } from "../states.js";

export const controls = { period: "report", filters: st.PERSON_FIELDS };

const VIEWS = [["everyone", "Everyone"], ["customers", "Customers"], ["known", "Known"], ["high-intent", "High intent"]];
const SORTS = [["last_seen", "Last seen"], ["first_seen", "First seen"], ["value", "Value"], ["visits", "Visits"]];
const AVAILABILITY = {
  consentless_only: "This project collects without consent only: it knows no people.",
  no_sources: "This project has no source yet.",
};

export async function render(ctx) {
  const p = ctx.project;
  document.title = `People · ${p.attributes.name} · mf`;
  const params = ctx.params;
  const doc = await ctx.get("/people", st.pick(params, ["period", "from", "to", "view", "sort", "window", "new", "segment", "filters", "cursor"]));
  const zone = p.attributes.timezone;
  const profile = st.pick(params, ["period", "from", "to"]);
  const rows = doc.data.map((x) => {
    const a = x.attributes;
    return { attrs: { "data-id": x.id }, cells: [
      h("a", { href: ctx.link("people", profile, x.id) }, a.name ?? "Anonymous visitor"),
      pick(ctx, "stage", a.stage, f.label(a.stage)),
      f.number(a.visits), f.moneyList(a.value),
      a.firstTouch ? pick(ctx, "first_channel", a.firstTouch.channel, f.label(a.firstTouch.channel)) : pick(ctx, "first_channel", "none", f.label("none")),
      a.firstTouch?.source || f.DASH,
      pick(ctx, "country", a.country), pick(ctx, "device", a.device),
      a.lastPath || f.DASH, f.moment(a.lastSeen, zone)] };
  });
  const cols = [["Person", "name"], ["Stage", "stage"], ["Visits", "visits", true], ["Value", "value", true], ["First channel", "channel"],
    ["First source", "source"], ["Country", "country"], ["Device", "device"], ["Last page", "lastPath"], ["Last seen", "lastSeen"]]
    .map(([title, key, num]) => ({ title, key, num }));
  const sort = h("select", { id: "sort", onchange: () => ctx.go(st.set(st.set(params, "sort", sort.value), "cursor", "")) },
    SORTS.map(([v, t]) => h("option", { value: v, selected: (params.get("sort") || "last_seen") === v }, t)));
  const all = h("input", { type: "checkbox", id: "window-all", checked: params.get("window") === "all",
    onchange: () => ctx.go(st.set(st.set(params, "window", all.checked ? "all" : ""), "cursor", "")) });
  const fresh = h("input", { type: "checkbox", id: "new-only", checked: params.get("new") === "1",
    onchange: () => ctx.go(st.set(st.set(params, "new", fresh.checked ? "1" : ""), "cursor", "")) });
  const m = doc.meta;
  add(ctx.el,
    h("h1", {}, "People"),
    periodNotes(m, p),
    tabs(ctx, "view", VIEWS, params.get("view") || "everyone", "View"),
    h("div", { class: "form-row" }, h("label", { for: "sort" }, "Sort by"), sort,
      h("span", {}, all, h("label", { for: "window-all" }, " Everyone in the history kept")),
      h("span", {}, fresh, h("label", { for: "new-only" }, " First seen in the period only"))),
    AVAILABILITY[m.availability] ? h("p", { class: "note", "data-state": m.availability }, AVAILABILITY[m.availability]) : null,
    doc.data.length === 0 && !AVAILABILITY[m.availability] ? h("p", { class: "state empty", "data-state": "nobody" }, "Nobody matches in this period.") : null,
    doc.data.length ? table("people", cols, rows, "People") : null,
    pager(ctx, m.nextCursor));
}
