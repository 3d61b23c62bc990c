// Helpers of the dashboard's end-to-end tests: a Chromium page that records
// every request and CSP violation, the API asked directly, and numbers read
// back from the page's text (the browser runs with the en-US locale).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const env = {
  url: need("MF_URL"),
  key: need("MF_KEY"), // the key that signs in to the dashboard
  pagesKey: need("MF_PAGES_KEY"), // another one, for the report pages' tests (each person has 120 requests a minute)
  checkKey: need("MF_CHECK_KEY"), // another person of the same organizations, who asks the API directly
  limitedKey: need("MF_LIMITED_KEY"), // a person whose budget a test spends
  expiredKey: need("MF_EXPIRED_KEY"),
  revokedKey: need("MF_REVOKED_KEY"),
  shop: need("MF_SHOP"),
  calm: need("MF_CALM"),
  ingest: need("MF_INGEST"),
  websiteKey: need("MF_WEBSITE_KEY"), // the shop's website source, to send an event while a page is open
  websiteOrigin: need("MF_WEBSITE_ORIGIN"),
  chromium: process.env.MF_CHROMIUM || "/usr/bin/chromium",
  shots: process.env.MF_SHOTS || "",
};

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this test through go test ./cmd/mf -run TestDashboard`);
  return v;
}

export async function launch() {
  return chromium.launch({
    executablePath: env.chromium,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
}

export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };

/** open makes a fresh context (no storage) and a page that records requests and CSP violations. */
export async function open(browser, { viewport = DESKTOP, colorScheme = "light" } = {}) {
  const context = await browser.newContext({ locale: "en-US", timezoneId: "UTC", viewport, colorScheme });
  const page = await context.newPage();
  page.requests = [];
  page.violations = [];
  page.on("request", (r) => page.requests.push(r.url()));
  page.on("console", (m) => {
    if (/Content.Security.Policy|Trusted Type/i.test(m.text())) page.violations.push(m.text());
  });
  page.on("pageerror", (e) => page.violations.push("page error: " + e.message));
  await page.exposeFunction("__cspViolation", (v) => page.violations.push(v));
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__cspViolation(`${e.violatedDirective} blocked ${e.blockedURI} (${e.sourceFile}:${e.lineNumber})`));
  });
  return { context, page };
}

/** clean checks that nothing left the origin and the CSP saw no violation. */
export function clean(page) {
  const origin = new URL(env.url).origin;
  const away = page.requests.filter((u) => !u.startsWith("data:") && new URL(u).origin !== origin);
  assert.deepEqual(away, [], "requests that left the origin");
  assert.deepEqual(page.violations, [], "CSP violations or page errors");
}

/** ready waits until the page has drawn what its URL asks. */
export async function ready(page) {
  await page.waitForFunction(() => {
    const m = document.getElementById("main");
    return m && m.dataset.ready === location.pathname + location.search;
  }, null, { timeout: 30000 });
  // Every control has a name a screen reader can say, every chart a label.
  const unnamed = await page.evaluate(() => [...document.querySelectorAll("input, select, button, a[href], svg.chart")].filter((el) => {
    if (el.closest("[hidden]")) return false;
    const byLabel = el.id && document.querySelector(`label[for="${el.id}"]`);
    return !(byLabel || el.getAttribute("aria-label") || (el.tagName !== "INPUT" && el.tagName !== "SELECT" && el.textContent.trim()));
  }).map((el) => el.outerHTML.slice(0, 120)));
  assert.deepEqual(unnamed, [], "controls without an accessible name on " + page.url());
}

export async function goto(page, path) {
  await page.goto(env.url + path);
  await ready(page);
}

export async function signIn(page, key = env.key) {
  await goto(page, "/signin");
  await page.fill("#key", key);
  await page.click("button[type=submit]");
  await page.waitForURL((u) => u.pathname !== "/signin", { timeout: 20000 });
  await ready(page);
}

/** api asks the reporting API directly (as another person of the same organizations). */
export async function api(path, query = "", key = env.checkKey) {
  const q = query ? "?" + (typeof query === "string" ? query : new URLSearchParams(query)) : "";
  const res = await fetch(env.url + "/api/v1" + path + q, { headers: { Authorization: "Bearer " + key } });
  const body = await res.json();
  assert.equal(res.status, 200, `${path}${q}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** num reads a number written in en-US ("1,234.5", "12.5%", "€3.00", "–" is null). */
export function num(text) {
  const t = text.trim();
  if (t === "–" || t === "") return null;
  const n = Number(t.replace(/[^0-9.\-]/g, ""));
  assert.ok(Number.isFinite(n), `not a number: ${JSON.stringify(text)}`);
  return n;
}

/** same compares a number shown with the API's, within what the display rounds. */
export function same(shown, apiValue, format, what) {
  if (apiValue === null || apiValue === undefined) return assert.equal(shown, null, `${what}: shows ${shown}, API null`);
  if (format === "percent") return assert.ok(Math.abs(shown - apiValue * 100) <= 0.05 + 1e-9, `${what}: shows ${shown}%, API ${apiValue}`);
  if (format === "currency") return assert.ok(Math.abs(shown - apiValue) <= 0.005 + 1e-9, `${what}: shows ${shown}, API ${apiValue}`);
  return assert.ok(Math.abs(shown - apiValue) <= 0.005 + 1e-9, `${what}: shows ${shown}, API ${apiValue}`);
}

export async function text(page, selector) {
  return (await page.locator(selector).first().textContent()).trim();
}

/** shot writes screenshots of the page at desktop and phone width when MF_SHOTS names a folder. */
export async function shot(page, name) {
  if (!env.shots) return;
  mkdirSync(env.shots, { recursive: true });
  const size = page.viewportSize();
  await page.screenshot({ path: join(env.shots, name + ".png"), fullPage: true });
  // Charts are drawn for their width: the page is drawn again at each width.
  await page.setViewportSize(PHONE);
  await page.reload();
  await ready(page);
  await page.screenshot({ path: join(env.shots, name + "-phone.png"), fullPage: true });
  await page.setViewportSize(size);
  await page.reload();
  await ready(page);
}
