// Small pieces the report pages share: tables, clickable values, tabs,
// definition lists, provider states, a pager.
import { h } from "./dom.js";
import * as f from "./format.js";
import * as st from "./state.js";

/** table draws a list table: cols are {title, num}; rows are arrays of cells (nodes or text). */
export function table(id, cols, rows, caption) {
  return h("div", { class: "scroll" }, h("table", { class: "list", id },
    caption ? h("caption", { class: "sr-only" }, caption) : null,
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.title)))),
    h("tbody", {}, rows.map((r) => h("tr", r.attrs || {}, r.cells.map((c, i) =>
      i === 0 ? h("th", { scope: "row", "data-col": cols[i].key }, c) : h("td", { class: cols[i].num ? "num" : null, "data-col": cols[i].key }, c)))))));
}

/** pick is a value that, clicked, adds the filter field is value. */
export function pick(ctx, field, value, shown) {
  if (value === null || value === undefined || value === "") return shown ?? f.DASH;
  return h("button", { type: "button", class: "value", "data-filter-field": field, "data-filter-value": value,
    title: `Filter: ${field} is ${value}`, onclick: () => ctx.addFilter(field, value) }, shown ?? value);
}

/** tabs are links that set one parameter of the URL. */
export function tabs(ctx, name, options, current, label) {
  return h("nav", { class: "tabs", "aria-label": label }, options.map(([v, text]) =>
    h("a", { href: st.href(location.pathname, st.set(st.set(ctx.params, name, v), "cursor", "")), "aria-current": v === current ? "true" : null, "data-value": v }, text)));
}

/** dl is a definition list of [term, value, key] triples. */
export function dl(items) {
  return h("dl", {}, items.filter(Boolean).flatMap(([t, v, key]) => [h("dt", {}, t), h("dd", { "data-key": key || null }, v)]));
}

const STATES = {
  ready: "Ready", importing: "Importing", not_connected: "Not connected", not_available: "Not available here",
  dataset_off: "Dataset switched off", refused: "Access refused",
};

/** provider shows a provider object's state. */
export function provider(p) {
  return h("div", { class: "provider", "data-source": p.source, "data-state": p.state },
    h("strong", {}, f.label(p.source)), " ",
    h("span", { class: p.state === "ready" ? "state-ready" : "state-other" }, STATES[p.state] || p.state),
    p.reconnect ? h("span", { class: "badge" }, "reconnect needed") : null,
    p.accounts?.length ? h("span", { class: "help" }, " · " + p.accounts.join(", ")) : null,
    p.lastImportedAt ? h("span", { class: "help" }, " · imported " + f.moment(p.lastImportedAt)) : null);
}

/** pager links to the next page (a cursor of the API) and back to the first. */
export function pager(ctx, nextCursor) {
  const here = ctx.params.get("cursor");
  return h("nav", { class: "pager", "aria-label": "Pages" },
    here ? h("a", { href: st.href(location.pathname, st.set(ctx.params, "cursor", "")), "data-page": "first" }, "First page") : null,
    nextCursor ? h("a", { href: st.href(location.pathname, st.set(ctx.params, "cursor", nextCursor)), rel: "next", "data-page": "next" }, "Next page") : null);
}
