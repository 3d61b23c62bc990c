// The bar above a page: period (presets or a custom range), comparison with
// the previous period, and filters as removable chips. Every change is a
// new URL.
import { h } from "./dom.js";
import * as st from "./state.js";
import { label } from "./format.js";

const PRESETS = [["1h", "Last hour"], ["24h", "Last 24 hours"], ["7d", "Last 7 days"], ["30d", "Last 30 days"],
  ["90d", "Last 90 days"], ["12m", "Last 12 months"], ["custom", "Custom range"]];
const EVENT_PRESETS = PRESETS.filter(([p]) => ["1h", "24h", "7d"].includes(p));

/**
 * controls draws the bar for spec: {period: "report" | "events", compare,
 * filters: a field table of state.js, defaultPeriod}.
 */
export function controls(r, spec, proj, apply) {
  const p = r.params;
  const items = [];
  const fresh = (params) => st.set(params, "cursor", "");
  if (spec.period) {
    const presets = spec.period === "events" ? EVENT_PRESETS : PRESETS;
    const cur = p.get("period") || spec.defaultPeriod || (spec.period === "events" ? "24h" : "30d");
    const sel = h("select", { id: "period", name: "period", onchange: () => {
      if (sel.value === "custom") return custom.hidden = false;
      let q = st.set(st.set(st.set(p, "from", ""), "to", ""), "period", sel.value);
      apply(fresh(q));
    } }, presets.map(([v, name]) => h("option", { value: v, selected: v === cur }, name)));
    const from = h("input", { type: "date", id: "from", value: p.get("from") || "", "aria-label": "From (first day)" });
    const to = h("input", { type: "date", id: "to", value: p.get("to") || "", "aria-label": "To (last day)" });
    const custom = h("span", { class: "custom", hidden: cur !== "custom" }, from, " – ", to,
      h("button", { type: "button", onclick: () => {
        if (!from.value || !to.value) return;
        apply(fresh(st.set(st.set(st.set(p, "period", "custom"), "from", from.value), "to", to.value)));
      } }, "Apply"));
    items.push(h("span", { class: "field" }, h("label", { for: "period" }, "Period"), sel, custom));
  }
  if (spec.compare) {
    const box = h("input", { type: "checkbox", id: "compare", checked: p.get("compare") === "previous",
      onchange: () => apply(st.set(p, "compare", box.checked ? "previous" : "")) });
    items.push(h("span", { class: "field" }, box, h("label", { for: "compare" }, "Compare with the previous period")));
  }
  if (spec.filters) items.push(filterBar(p, spec.filters, (list) => apply(fresh(st.withFilters(p, list)))));
  if (proj) items.push(h("span", { class: "zone", title: "Times are shown in the project's time zone" }, proj.attributes.timezone));
  return h("div", { class: "controls", role: "group", "aria-label": "Report settings" }, items);
}

function filterBar(params, fields, apply) {
  const list = st.filters(params);
  const chips = list.map((x, i) => h("li", { class: "chip", "data-filter": `${x.field}:${x.op}:${x.value}` },
    h("span", {}, `${label(x.field)} ${x.op.replace(/_/g, " ")}${x.value ? " " + x.value : ""}`),
    h("button", { type: "button", class: "chip-x", "aria-label": `Remove filter ${x.field} ${x.op} ${x.value}`,
      onclick: () => apply(list.filter((_, k) => k !== i)) }, "×")));
  const field = h("select", { id: "filter-field", "aria-label": "Field" }, Object.keys(fields).map((k) => h("option", { value: k }, k)),
    fields.channel ? h("option", { value: "properties." }, "properties.<key>") : null);
  const op = h("select", { id: "filter-op", "aria-label": "Operator" });
  const value = h("input", { id: "filter-value", "aria-label": "Value", maxlength: 1000 });
  const fillOps = () => {
    op.replaceChildren(...st.opsOf(fields, field.value).map((o) => h("option", { value: o }, o.replace(/_/g, " "))));
  };
  field.addEventListener("change", () => {
    if (field.value === "properties.") { value.placeholder = "value"; }
    fillOps();
  });
  fillOps();
  const key = h("input", { id: "filter-key", "aria-label": "Property key", placeholder: "key", size: 8 });
  const form = h("form", { class: "add-filter", onsubmit: (e) => {
    e.preventDefault();
    let f = field.value;
    if (f === "properties.") f += key.value.trim();
    apply([...list, { field: f, op: op.value, value: value.value.trim() }]);
  } }, field, fields.channel ? key : null, op, value, h("button", { type: "submit" }, "Add"));
  return h("div", { class: "filters" },
    h("ul", { class: "chips", "aria-label": "Filters" }, chips),
    h("details", {}, h("summary", {}, "Add filter"), form));
}
