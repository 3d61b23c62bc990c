// Acquisition, goals, funnels, people and profiles, raw events: every
// number read from the DOM and compared with the API's answer to the same
// question; clicking a value filters, paging follows the API's cursors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { env, launch, open, clean, ready, goto, signIn, api, num, same, text, shot } from "./lib.mjs";

let browser, context, page;
before(async () => {
  browser = await launch();
  ({ context, page } = await open(browser));
  await signIn(page, env.pagesKey);
});
after(async () => {
  clean(page);
  await browser?.close();
});

const P = () => `/projects/${env.shop}`;

/** rows reads a list table: per row its data-id and the text of each data-col cell. */
function rows(id) {
  return page.locator(`#${id} tbody tr`).evaluateAll((trs) => trs.map((tr) => ({
    id: tr.dataset.id ?? tr.dataset.step,
    ...Object.fromEntries([...tr.querySelectorAll("[data-col]")].map((c) => [c.dataset.col, (c.querySelector(".n") || c).textContent.trim()])),
  })));
}

/** dd reads a definition list's values by data-key inside a container. */
function dd(sel) {
  return page.locator(`${sel} dd[data-key]`).evaluateAll((ds) => Object.fromEntries(ds.map((d) => [d.dataset.key, d.textContent.trim()])));
}

function search() {
  return new URL(page.url()).searchParams;
}

async function checkChannels(query) {
  const doc = await api(P() + "/acquisition/channels", query);
  const got = await rows("channels");
  assert.deepEqual(got.map((r) => r.id), [...doc.data.map((c) => c.id), "total"]);
  doc.data.forEach((c, i) => {
    for (const k of ["visits", "people", "newPeople", "buyers", "customers"]) same(num(got[i][k]), c.attributes[k], "number", `${c.id} ${k}`);
    same(num(got[i].conversion), c.attributes.conversion, "percent", `${c.id} conversion`);
  });
  const tot = got.at(-1);
  same(num(tot.visits), doc.meta.visits, "number", "all visits");
  for (const k of ["people", "newPeople", "buyers", "customers"]) same(num(tot[k]), doc.meta.people[k], "number", "all " + k);
  same(num(await text(page, "[data-key=coverage] strong")), doc.meta.coverage, "percent", "coverage");
  return doc;
}

test("acquisition: channels by touch, clicking a channel filters, search and ads with provider states", async () => {
  await goto(page, `/p/${env.shop}/acquisition?period=30d`);
  const first = await checkChannels("period=30d");
  // Search and ads summaries.
  const s = (await api(P() + "/acquisition/search", "period=30d")).data.attributes;
  const shown = await dd("#search");
  for (const k of ["clicks", "impressions"]) same(num(shown[k].split("previous")[0]), s[k]?.value ?? null, "number", "search " + k);
  same(num(shown.ctr.split("previous")[0]), s.ctr?.value ?? null, "percent", "search ctr");
  assert.equal(await page.locator(`#search [data-source="${s.provider.source}"]`).getAttribute("data-state"), s.provider.state);
  const a = (await api(P() + "/acquisition/ads", "period=30d")).data.attributes;
  const ads = await dd("#ads");
  same(num(ads.clicks), a.clicks, "number", "ads clicks");
  same(num(ads.impressions), a.impressions, "number", "ads impressions");
  same(num(ads.buyers), a.buyers, "number", "ads buyers");
  for (const pr of a.providers) assert.equal(await page.locator(`#ads [data-source="${pr.source}"]`).getAttribute("data-state"), pr.state, pr.source);
  await shot(page, "acquisition");

  await page.click('nav[aria-label=Touch] a[data-value=last]');
  await page.waitForURL(() => search().get("touch") === "last");
  await ready(page);
  await checkChannels("period=30d&touch=last");

  // Click the busiest channel: a chip, a filtered URL, filtered numbers.
  const top = first.data.filter((c) => c.id !== "none").sort((x, y) => y.attributes.visits - x.attributes.visits)[0].id;
  await page.click(`#channels tr[data-id=${top}] button.value`);
  await page.waitForURL(() => search().get("filters[0][value]") === top);
  await ready(page);
  assert.equal(search().get("filters[0][field]"), "channel");
  const filtered = await checkChannels(`period=30d&touch=last&filters[0][field]=channel&filters[0][op]=is&filters[0][value]=${top}`);
  assert.equal(filtered.meta.visits, first.data.find((c) => c.id === top).attributes.visits, "only that channel's visits");
  assert.equal(await page.locator(".chip").count(), 1);
});

test("goals and a goal report with its trend", async () => {
  await goto(page, `/p/${env.shop}/goals?period=30d`);
  const doc = await api(P() + "/goals", "period=30d");
  const got = await rows("goals");
  assert.deepEqual(got.map((r) => r.id), doc.data.map((g) => g.id), "the goals in the API's order");
  doc.data.forEach((g, i) => {
    assert.equal(got[i].name, g.attributes.name);
    same(num(got[i].conversions), g.attributes.conversions, "number", g.attributes.name + " conversions");
    same(num(got[i].people), g.attributes.people, "number", g.attributes.name + " people");
    same(num(got[i].rate), g.attributes.rate, "percent", g.attributes.name + " rate");
  });
  const meta = await dd("#goals-meta");
  same(num(meta.active), doc.meta.active, "number", "active");
  same(num(meta.visits), doc.meta.visits, "number", "visits");
  await shot(page, "goals");

  const goal = doc.data.find((g) => g.attributes.conversions > 0) || doc.data[0];
  await page.click(`#goals tr[data-id="${goal.id}"] a`);
  await page.waitForURL((u) => u.pathname.endsWith("/goals/" + goal.id));
  await ready(page);
  await page.check("#compare");
  await page.waitForURL(() => search().get("compare") === "previous");
  await ready(page);
  const r = (await api(P() + "/goals/" + goal.id, "period=30d&compare=previous")).data.attributes;
  for (const [k, fm] of [["conversions", "number"], ["people", "number"], ["rate", "percent"]]) {
    same(num(await text(page, `[data-key=${k}] .kpi-value`)), r[k], fm, k);
    if (r.previous) same(num(await text(page, `[data-key=${k}] .kpi-prev-value`)), r.previous[k], fm, "previous " + k);
  }
  for (const k of ["conversions", "people", "rate"]) {
    const cells = await page.locator(`[data-trend=${k}] table.trend-data td[data-series=${k}]`).allTextContents();
    assert.equal(cells.length, r.trend[k].series[0].points.length, k + " buckets");
    r.trend[k].series[0].points.forEach((p, i) => same(num(cells[i]), p.v, r.trend[k].format, `${k} at ${p.t}`));
  }
  await shot(page, "goal");
});

async function checkFunnel(query) {
  const a = (await api(P() + "/funnel", query)).data.attributes;
  const got = await rows("funnel");
  assert.equal(got.length, a.steps.length);
  a.steps.forEach((s, i) => {
    assert.equal(got[i].name, s.name + (s.archived ? "archived" : ""));
    same(num(got[i].count), s.count, "number", s.name + " count");
    same(num(got[i].conversion), s.conversion, "percent", s.name + " conversion");
    same(num(got[i].dropoff), s.dropoff, "percent", s.name + " drop-off");
  });
  assert.equal(await page.locator("svg.chart rect.bar").count(), a.steps.length, "one bar per step");
  return a;
}

test("funnels: ad hoc steps with window and basis, and a saved funnel", async () => {
  await goto(page, `/p/${env.shop}/funnel?period=30d`);
  assert.equal(await page.locator("[data-state=no-steps]").count(), 1);
  const goals = (await api(P() + "/goals", "period=30d")).data;
  const pricing = "a1000000-0000-4000-8000-00000000ac03", purchase = "a1000000-0000-4000-8000-00000000ac01";
  assert.ok(goals.some((g) => g.id === pricing) && goals.some((g) => g.id === purchase));
  await page.selectOption("#step-0", pricing);
  await page.selectOption("#step-1", purchase);
  await page.selectOption("#window", "30");
  await page.click("#funnel-form button[type=submit]");
  await page.waitForURL(() => search().getAll("steps[]").length === 2);
  await ready(page);
  const adhoc = await checkFunnel(`steps[]=${pricing}&steps[]=${purchase}&window=30&basis=person&period=30d`);
  assert.ok(adhoc.steps[0].count > 0, "people reached the first step");
  await shot(page, "funnel");
  await page.selectOption("#basis", "visit");
  await page.click("#funnel-form button[type=submit]");
  await page.waitForURL(() => search().get("basis") === "visit");
  await ready(page);
  await checkFunnel(`steps[]=${pricing}&steps[]=${purchase}&window=30&basis=visit&period=30d`);
  await page.fill("#saved-funnel", "a1000000-0000-4000-8000-00000000f001");
  await page.click("#funnel-form button[type=submit]");
  await page.waitForURL(() => search().has("funnel"));
  await ready(page);
  const saved = await checkFunnel("funnel=a1000000-0000-4000-8000-00000000f001&period=30d");
  assert.ok(saved.name);
});

async function checkPeople(query) {
  const doc = await api(P() + "/people", query);
  const got = (await page.locator("#people").count()) ? await rows("people") : [];
  assert.deepEqual(got.map((r) => r.id), doc.data.map((x) => x.id), `people of ${query} in the API's order`);
  doc.data.forEach((x, i) => {
    assert.equal(got[i].name, x.attributes.name ?? "Anonymous visitor");
    same(num(got[i].visits), x.attributes.visits, "number", x.id + " visits");
    assert.equal(got[i].country, x.attributes.country || "–");
    assert.equal(got[i].device, x.attributes.device || "–");
  });
  return doc;
}

test("people: views, sorts, filters by clicking a value, and a profile", async () => {
  await goto(page, `/p/${env.shop}/people?period=7d`);
  const all = await checkPeople("period=7d");
  assert.ok(all.meta.nextCursor, "more than a page of people");
  await shot(page, "people");
  // Paging: the next page is the API's next page, then back to the first.
  await page.click("a[data-page=next]");
  await page.waitForURL(() => search().has("cursor"));
  await ready(page);
  const second = await checkPeople("period=7d&cursor=" + encodeURIComponent(all.meta.nextCursor));
  assert.ok(second.data.length > 0);
  assert.equal(await page.locator("a[data-page=next]").count(), second.meta.nextCursor ? 1 : 0);
  await page.click("a[data-page=first]");
  await page.waitForURL(() => !search().has("cursor"));
  await ready(page);
  await checkPeople("period=7d");
  await page.selectOption("#sort", "visits");
  await page.waitForURL(() => search().get("sort") === "visits");
  await ready(page);
  await checkPeople("period=7d&sort=visits");
  await page.click('nav[aria-label=View] a[data-value=known]');
  await page.waitForURL(() => search().get("view") === "known");
  await ready(page);
  const known = await checkPeople("period=7d&sort=visits&view=known");
  const device = known.data.find((x) => x.attributes.device)?.attributes.device;
  assert.ok(device, "someone known with a device");
  await page.click(`#people td[data-col=device] button[data-filter-value=${device}]`);
  await page.waitForURL(() => search().get("filters[0][value]") === device);
  await ready(page);
  const narrowed = await checkPeople(`period=7d&sort=visits&view=known&filters[0][field]=device&filters[0][op]=is&filters[0][value]=${device}`);

  // A profile, opened from the list.
  const who = narrowed.data[0];
  assert.ok(who, "someone known on a " + device);
  await page.click(`#people tr[data-id="${who.id}"] a`);
  await page.waitForURL((u) => u.pathname.endsWith("/people/" + who.id));
  await ready(page);
  const pr = (await api(P() + "/people/" + who.id)).data.attributes;
  const counts = await dd("#counts");
  for (const k of ["visits", "activeDays", "events", "pageviews", "orders"]) same(num(counts[k]), pr[k], "number", "profile " + k);
  const idn = await dd("#identity");
  assert.equal(idn.email, pr.email ?? "–");
  assert.equal(idn.userId, pr.userId ?? "–");
  const traits = await dd("#traits");
  for (const t of pr.traits) assert.equal(traits["trait:" + t.key], typeof t.value === "string" ? t.value : JSON.stringify(t.value));
  assert.equal(Object.keys(traits).length, pr.traits.length);
  if (pr.firstTouch) assert.equal((await dd("#touch")).landing, pr.firstTouch.landing || "–");
  await shot(page, "person");

  // A consentless project knows nobody.
  await goto(page, `/p/${env.calm}/people?period=7d`);
  assert.equal(await page.locator("[data-state=consentless_only]").count(), 1);
});

async function checkEvents(query) {
  const doc = await api(P() + "/events", query);
  const got = await rows("events");
  assert.deepEqual(got.map((r) => r.id), doc.data.map((e) => e.id), `events of ${query}, newest first`);
  doc.data.forEach((e, i) => {
    assert.equal(got[i].name, e.attributes.name);
    assert.equal(got[i].path, e.attributes.path || "–");
    if (e.attributes.revenue) same(num(got[i].revenue), e.attributes.revenue.amount, "currency", e.id + " revenue");
  });
  return doc;
}

test("raw events: newest first, paging by cursor, filters by clicking, refreshing while open", async () => {
  await goto(page, `/p/${env.shop}/events?period=7d`);
  const first = await checkEvents("period=7d");
  assert.ok(first.meta.nextCursor, "the week holds more than one page");
  await shot(page, "events");
  await page.click("a[data-page=next]");
  await page.waitForURL(() => search().has("cursor"));
  await ready(page);
  await checkEvents("period=7d&cursor=" + encodeURIComponent(first.meta.nextCursor));
  await page.click("a[data-page=first]");
  await page.waitForURL(() => !search().has("cursor"));
  await ready(page);

  const name = first.data.find((e) => e.attributes.kind === "custom")?.attributes.name || first.data[0].attributes.name;
  await page.click(`#events td[data-col=name] button[data-filter-value="${name}"] >> nth=0`);
  await page.waitForURL(() => search().get("filters[0][value]") === name);
  await ready(page);
  const filtered = await checkEvents(`period=7d&filters[0][field]=event_name&filters[0][op]=is&filters[0][value]=${encodeURIComponent(name)}`);
  assert.ok(filtered.data.every((e) => e.attributes.name === name));

  // An event sent now shows up on the open page of the last hour.
  await goto(page, `/p/${env.shop}/events?period=1h`);
  const id = crypto.randomUUID();
  const res = await fetch(env.ingest + "/v1/batch/" + env.websiteKey, {
    method: "POST",
    headers: { "Content-Type": "text/plain;charset=UTF-8", Origin: env.websiteOrigin },
    body: JSON.stringify({ v: 1, batch: crypto.randomUUID(), mode: "full", events: [{ id, name: "dashboard_live", anonymousId: "live-1", time: Date.now(), page: { url: env.websiteOrigin + "/live" } }] }),
  });
  assert.equal(res.status, 202, await res.text());
  await page.waitForSelector(`#events tr[data-id="${id}"]`, { timeout: 40000 });
  await checkEvents("period=1h");
});
