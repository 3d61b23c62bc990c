// Sign-in, the project list and the overview, read from the DOM and
// compared with the API's answers to the same questions.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { env, launch, open, clean, ready, goto, signIn, api, num, same, text, shot } from "./lib.mjs";

let browser;
before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test("sign in, the project list, sign out", async () => {
  const { context, page } = await open(browser);
  await goto(page, "/");
  assert.equal(new URL(page.url()).pathname, "/signin", "signed out: the sign-in page");
  await shot(page, "signin");
  await page.fill("#key", "not a key");
  await page.click("button[type=submit]");
  assert.match(await text(page, "#signin-error"), /mf_pat_/);
  await page.fill("#key", "mf_pat_nobody00_" + "x".repeat(40));
  await page.click("button[type=submit]");
  await page.waitForFunction(() => /refused/.test(document.getElementById("signin-error").textContent));
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, "a refused key is not kept");

  await signIn(page);
  assert.equal(new URL(page.url()).pathname, "/projects");
  const doc = await api("/projects");
  const rows = await page.locator("#projects tbody tr").evaluateAll((trs) => trs.map((tr) => ({
    id: tr.dataset.id, name: tr.querySelector("th a").textContent,
    plan: tr.querySelector("[data-col=plan]").textContent, retention: tr.querySelector("[data-col=retentionDays]").textContent,
  })));
  assert.deepEqual(rows.map((r) => r.id), doc.data.map((p) => p.id));
  doc.data.forEach((p, i) => {
    assert.equal(rows[i].name, p.attributes.name);
    assert.equal(rows[i].plan, p.attributes.plan);
    same(num(rows[i].retention), p.attributes.retentionDays, "number", "retention of " + p.attributes.name);
  });
  // The key is in this tab's sessionStorage and nowhere else.
  const stored = await page.evaluate(() => ({ s: { ...sessionStorage }, l: localStorage.length, c: document.cookie }));
  assert.deepEqual(stored, { s: { "mf.apiKey": env.key }, l: 0, c: "" });
  assert.equal((await context.cookies()).length, 0);
  await shot(page, "projects");

  await page.click("text=Sign out");
  await page.waitForURL((u) => u.pathname === "/signin");
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  clean(page);
  await context.close();
});

test("a key refused later (revoked, expired) signs out with the API's reason", async () => {
  const { context, page } = await open(browser);
  await page.goto(env.url + "/signin");
  await page.fill("#key", env.expiredKey);
  await page.click("button[type=submit]");
  await page.waitForFunction(() => /refused/.test(document.getElementById("signin-error").textContent));
  assert.match(await text(page, "#signin-error"), /expired/);

  await signIn(page);
  // The key stops working while the tab is open: the next answer is 401.
  await page.evaluate((k) => sessionStorage.setItem("mf.apiKey", k), env.revokedKey);
  await page.click(`a[href^="/p/${env.shop}/overview"]`);
  await page.waitForURL((u) => u.pathname === "/signin");
  await ready(page);
  assert.match(await text(page, "#signin-error"), /Signed out: .*revoked/);
  assert.equal(new URL(page.url()).searchParams.get("next"), `/p/${env.shop}/overview`);
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  // Signing in again goes back where the person was.
  await page.fill("#key", env.key);
  await page.click("button[type=submit]");
  await page.waitForURL((u) => u.pathname === `/p/${env.shop}/overview`);
  await ready(page);
  clean(page);
  await context.close();
});

/** checkOverview compares the page's key numbers and trend with the API's overview. */
async function checkOverview(page, query) {
  const doc = await api(`/projects/${page.project}/overview`, query);
  const a = doc.data.attributes;
  const shown = await page.locator("#numbers .kpi").evaluateAll((lis) => lis.map((li) => ({
    key: li.dataset.key, value: li.querySelector(".kpi-value").textContent, previous: li.querySelector(".kpi-prev-value").textContent,
  })));
  assert.deepEqual(shown.map((s) => s.key), a.numbers.map((n) => n.key), "the key numbers in the API's order");
  a.numbers.forEach((n, i) => {
    same(num(shown[i].value), n.value, n.format, n.key);
    same(num(shown[i].previous), n.previous, n.format, n.key + " previous");
    if (n.format === "currency" && n.value !== null) assert.ok(shown[i].value.includes(new Intl.NumberFormat("en-US", { style: "currency", currency: n.currency }).formatToParts(0).find((p) => p.type === "currency").value), `${n.key} in ${n.currency}`);
  });
  same(num(await text(page, "[data-key=coverage] strong")), a.coverage, "percent", "coverage");
  // The trend, point by point, as the chart's data table holds it.
  const series = a.trend.series;
  const table = await page.locator("table.trend-data tbody tr").evaluateAll((trs) => trs.map((tr) =>
    Object.fromEntries([...tr.querySelectorAll("td")].map((td) => [td.dataset.series, td.textContent]))));
  assert.equal(table.length, series[0].points.length, "one row per bucket");
  assert.equal(Number(await page.locator("svg.chart").first().getAttribute("data-points")), series[0].points.length);
  series.forEach((s, k) => s.points.forEach((p, i) => {
    same(num(table[i][s.key]), p.v, a.trend.format, `${s.key} at ${p.t}`);
    if (a.trend.comparison.length) same(num(table[i][s.key + ":previous"]), a.trend.comparison[k].points[i].v, a.trend.format, `previous ${s.key} at ${p.t}`);
  }));
  assert.equal(await page.locator("svg.chart path.cmp").count(), a.trend.comparison.length, "the comparison drawn beside");
  return a;
}

test("the overview shows the API's numbers; period, comparison and filters change the URL and the numbers", async () => {
  const { context, page } = await open(browser);
  page.project = env.shop;
  await signIn(page);
  await goto(page, `/p/${env.shop}/overview?period=7d&compare=previous`);
  const first = await checkOverview(page, "period=7d&compare=previous");
  assert.ok(first.numbers.find((n) => n.key === "people").value > 0, "the dataset has people this week");
  await shot(page, "overview");

  // The period select: a new URL and new numbers.
  await page.selectOption("#period", "30d");
  await page.waitForURL((u) => u.searchParams.get("period") === "30d");
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get("compare"), "previous");
  const month = await checkOverview(page, "period=30d&compare=previous");
  assert.notDeepEqual(month.trend.series[0].points.length, first.trend.series[0].points.length);

  // Comparison off: no dashed lines.
  await page.uncheck("#compare");
  await page.waitForURL((u) => !u.searchParams.has("compare"));
  await ready(page);
  await checkOverview(page, "period=30d");

  // A filter from the form: a chip, the URL's filters and the filtered numbers.
  await page.click(".filters summary");
  await page.selectOption("#filter-field", "device_type");
  await page.selectOption("#filter-op", "is");
  await page.fill("#filter-value", "mobile");
  await page.click(".add-filter button[type=submit]");
  await page.waitForURL((u) => u.searchParams.get("filters[0][value]") === "mobile");
  await ready(page);
  const q = "period=30d&filters[0][field]=device_type&filters[0][op]=is&filters[0][value]=mobile";
  const filtered = await checkOverview(page, q);
  assert.notDeepEqual(filtered.numbers, month.numbers, "the filter changes the numbers");
  assert.equal(await page.locator(".chip").count(), 1);
  // The shared URL shows the same thing in a new tab, which has no key
  // (sessionStorage is the tab's): it signs in first and comes back.
  const shared = page.url();
  const other = await context.newPage();
  other.project = env.shop;
  await other.goto(shared);
  await ready(other);
  assert.equal(new URL(other.url()).pathname, "/signin");
  await other.fill("#key", env.key);
  await other.click("button[type=submit]");
  await other.waitForURL(shared);
  await ready(other);
  await checkOverview(other, q);
  await other.close();
  // Removing the chip removes the filter.
  await page.click(".chip-x");
  await page.waitForURL((u) => !u.search.includes("filters"));
  await ready(page);
  await checkOverview(page, "period=30d");
  clean(page);
  await context.close();
});

test("keyboard: skip to the content, reach the reports and change the period without a mouse; dark scheme", async () => {
  const { context, page } = await open(browser, { colorScheme: "dark" });
  page.project = env.shop;
  await signIn(page);
  await goto(page, `/p/${env.shop}/overview?period=7d`);
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.className), "skip");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement.id), "main");
  // Tab to the Goals tab of the navigation and follow it.
  await page.focus("nav[aria-label=Reports] a");
  for (let i = 0; i < 10 && (await page.evaluate(() => document.activeElement.textContent)) !== "Goals"; i++) await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => u.pathname.endsWith("/goals"));
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get("period"), "7d", "the period goes along");
  await page.focus("#period");
  await page.keyboard.press("ArrowDown"); // 30d
  await page.waitForURL((u) => u.searchParams.get("period") === "30d");
  await ready(page);
  await goto(page, `/p/${env.shop}/overview?period=30d&compare=previous`);
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.notEqual(bg, "rgb(247, 248, 250)", "the dark scheme's background");
  await shot(page, "overview-dark");
  clean(page);
  await context.close();
});

test("a consentless project's overview shows visits, as the API answers", async () => {
  const { context, page } = await open(browser);
  page.project = env.calm;
  await signIn(page);
  await goto(page, `/p/${env.calm}/overview?period=7d&compare=previous`);
  const a = await checkOverview(page, "period=7d&compare=previous");
  assert.equal(a.consentless, true);
  assert.equal(await page.locator("[data-state=consentless]").count(), 1);
  await shot(page, "overview-consentless");
  // A custom range reaching before the free plan's 30 days is clamped.
  await goto(page, `/p/${env.calm}/overview?period=custom&from=${daysAgo(40)}&to=${daysAgo(1)}`);
  await checkOverview(page, `period=custom&from=${daysAgo(40)}&to=${daysAgo(1)}`);
  assert.equal(await page.locator("[data-state=clamped]").count(), 1);
  // A range ending before the history kept is refused, with the API's reason.
  await goto(page, `/p/${env.calm}/overview?period=custom&from=${daysAgo(80)}&to=${daysAgo(70)}`);
  assert.equal(await page.locator("[data-status='400']").count(), 1);
  clean(page);
  await context.close();
});

test("a period without data shows the empty state with the snippet to install", async () => {
  const { context, page } = await open(browser);
  page.project = env.shop;
  await signIn(page);
  // The dataset has no shop event from 14 to 11 days ago.
  const q = `period=custom&from=${daysAgo(14)}&to=${daysAgo(11)}`;
  await goto(page, `/p/${env.shop}/overview?${q}`);
  const a = await checkOverview(page, q);
  assert.ok(a.numbers.every((n) => !n.value), "the API answers nothing in that period");
  assert.equal(await page.locator("[data-state=no-data]").count(), 1);
  assert.match(await text(page, "[data-state=no-data] code"), /\/v1\/sdk\/mf\.mjs/);
  await shot(page, "overview-empty");
  // A period with data has no empty state.
  await goto(page, `/p/${env.shop}/overview?period=7d`);
  assert.equal(await page.locator("[data-state=no-data]").count(), 0);
  clean(page);
  await context.close();
});

test("over the request budget: the 429 state counts down its Retry-After", async () => {
  for (let i = 0; i < 200; i++) {
    const res = await fetch(env.url + "/api/v1/projects", { headers: { Authorization: "Bearer " + env.limitedKey } });
    await res.arrayBuffer();
    if (res.status === 429) break;
  }
  const { context, page } = await open(browser);
  await page.goto(env.url + "/signin");
  await page.evaluate((k) => sessionStorage.setItem("mf.apiKey", k), env.limitedKey);
  await goto(page, `/p/${env.shop}/overview`);
  assert.equal(await page.locator("[data-status='429']").count(), 1);
  assert.match(await text(page, ".countdown"), /try again in \d+ s/);
  await shot(page, "rate-limited");
  clean(page);
  await context.close();
});

/** daysAgo is the calendar date n days before today in the projects' zone (Europe/Berlin). */
function daysAgo(n) {
  const [y, m, d] = new Intl.DateTimeFormat("en-CA", { timeZone: "Europe/Berlin" }).format(new Date()).split("-").map(Number);
  return new Date(Date.UTC(y, m - 1, d - n)).toISOString().slice(0, 10);
}
