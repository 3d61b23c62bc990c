// The dashboard's modules that need no browser, on cases as data
// (api/dashboard/testdata): routes, filters in the URL, filter operators,
// chart scales. Run by TestModules in api/dashboard.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as st from "../../assets/state.js";
import { niceStep } from "../../assets/chart.js";

const cases = (name) => JSON.parse(readFileSync(new URL(`../../testdata/${name}.json`, import.meta.url))).cases;

test("routes", () => {
  for (const c of cases("routes")) {
    const r = st.route({ pathname: c.path, search: "" });
    const got = { page: r.page };
    if ("project" in c.want) Object.assign(got, { project: r.project, item: r.item });
    assert.deepEqual(got, c.want, c.path);
  }
});

test("filters in the URL", () => {
  for (const c of cases("filters")) {
    const p = new URLSearchParams(c.query);
    const list = st.filters(p);
    assert.deepEqual(list, c.want, c.name);
    assert.equal(String(st.withFilters(p, list)), c.written, c.name + " (written)");
  }
});

test("operators per field", () => {
  for (const c of cases("ops")) {
    const fields = c.kind === "event" ? st.EVENT_FIELDS : st.PERSON_FIELDS;
    assert.deepEqual(st.opsOf(fields, c.field), c.want, `${c.kind} ${c.field}`);
  }
});

test("chart scales", () => {
  for (const c of cases("scale")) assert.equal(niceStep(c.v, c.integer), c.want, `${c.v} integer=${c.integer}`);
});
