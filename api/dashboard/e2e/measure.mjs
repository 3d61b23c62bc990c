// Measures how long the overview takes to draw in headless Chromium, from
// the start of navigation to the page's ready mark (HTML, modules, the
// API's answers, the chart): node measure.mjs URL KEY PROJECT [N].
// Prints one JSON line: {"cold": ms, "warm": [ms, …]} (cold: the first
// load, assets not cached yet; warm: later loads).
import { chromium } from "playwright-core";

const [url, key, project, n = "10"] = process.argv.slice(2);
if (!url || !key || !project) {
  console.error("usage: node measure.mjs URL KEY PROJECT [N]");
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.MF_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
try {
  const context = await browser.newContext({ locale: "en-US", viewport: { width: 1280, height: 900 } });
  await context.addInitScript((k) => sessionStorage.setItem("mf.apiKey", k), key);
  const page = await context.newPage();
  const times = [];
  for (let i = 0; i <= Number(n); i++) {
    await page.goto(`${url}/p/${project}/overview?period=30d&compare=previous`);
    const ms = await page.waitForFunction(() => {
      const m = document.getElementById("main");
      if (m?.dataset.ready !== location.pathname + location.search) return false;
      return document.querySelector("[data-status]") ? -1 : performance.now();
    }, null, { timeout: 60000 }).then((h) => h.jsonValue());
    if (ms < 0) throw new Error("the overview answered an error: " + (await page.textContent("main")));
    times.push(Math.round(ms));
  }
  console.log(JSON.stringify({ cold: times[0], warm: times.slice(1) }));
} finally {
  await browser.close();
}
