// Scenarios of the browser client's end-to-end tests (cmd/mf/browser_e2e_test.go).
// The page's path names the scenario (/s/<name>/…); its query carries mf's
// base URL (mf), the endpoint the client sends to (endpoint) and the website
// key (key). Each scenario ends by posting a report to /report.
const q = new URLSearchParams(location.search);
const scenario = location.pathname.split('/')[2];
const key = q.get('key');
const endpoint = q.get('endpoint');
const out = document.getElementById('out');

async function storage() {
  const local = {};
  for (let i = 0; i < localStorage.length; i++) local[localStorage.key(i)] = localStorage.getItem(localStorage.key(i));
  return { cookie: document.cookie, local, session: sessionStorage.length, indexedDB: (await indexedDB.databases()).length };
}

async function report(r) {
  out.textContent = scenario + '\n' + JSON.stringify(r, null, 2);
  const resources = performance.getEntriesByType('resource').map((e) => e.name);
  await fetch('/report', { method: 'POST', body: JSON.stringify({ scenario, resources, ...r }) });
}

function type(id, value) {
  const el = document.getElementById(id);
  el.value = value;
  el.dispatchEvent(new Event('change', { bubbles: true }));
}

const scenarios = {
  // Consentless collection with autocapture: no ids, nothing on the device.
  async consentless(init) {
    const mf = init({ key, endpoint, autocapture: true });
    mf.track('signup', { plan: 'pro', revenue: 12.5, currency: 'EUR' });
    mf.identify('user-42', { plan: 'pro' });
    mf.search('red shoes');
    document.getElementById('buy').click();
    type('q', 'secret query text');
    type('pw', 'hunter2');
    const flag = await mf.flag('dark-mode');
    await mf.flush();
    return { storage: await storage(), flag };
  },
  // Full mode: pending, granted (ids, identify, flags with membership,
  // exposures), then denied.
  async consent(init) {
    const mf = init({ key, endpoint, mode: 'full' });
    mf.track('before-consent');
    const pending = await storage();
    const before = await mf.flag('new-checkout');
    mf.consent('granted');
    mf.identify('user-42', { plan: 'pro' });
    mf.track('after-consent', { revenue: 5, currency: 'EUR' });
    mf.search('Red Shoes');
    const keys = JSON.parse(q.get('flags'));
    const flags = {};
    for (const k of keys) flags[k] = await mf.flag(k);
    const again = await mf.flag('new-checkout');
    await mf.flush();
    const granted = await storage();
    const stored = JSON.parse(localStorage.getItem('mf:' + key));
    mf.consent('denied');
    const denied = await storage();
    mf.track('after-denial');
    await mf.flush();
    return { pending, granted, denied, anonymousId: stored && stored.a, before, flags, again };
  },
  // SPA navigation counts a pageview.
  async spa(init) {
    const mf = init({ key, endpoint });
    history.pushState({}, '', '/s/spa/next?utm_source=test&secret=1' + location.search.replace('?', '&'));
    history.replaceState({}, '', location.href); // the same page: no pageview
    await mf.flush();
    return {};
  },
  // A track queued before the page goes away is sent on pagehide.
  async leave(init) {
    const mf = init({ key, endpoint });
    mf.track('leaving');
    await new Promise((r) => setTimeout(r, 50));
    location.href = '/s/landed/' + location.search;
    return null;
  },
  async landed() {
    return {};
  },
  // A 503 with Retry-After (from the test's proxy) is retried.
  async retry(init) {
    const mf = init({ key, endpoint, pageviews: 'manual' });
    mf.track('retried');
    await mf.flush();
    return {};
  },
  // Nothing is sent (Do Not Track, localhost).
  async silent(init) {
    const mf = init({ key, endpoint, mode: 'full', consent: 'granted' });
    mf.track('never');
    await mf.flush();
    dispatchEvent(new Event('pagehide'));
    return { storage: await storage(), dnt: navigator.doNotTrack, gpc: navigator.globalPrivacyControl };
  },
  // Flags of the evaluator corpus, provisioned by the test, read with the
  // cases' properties after consent and identify.
  async corpus(init) {
    const mf = init({ key, endpoint, mode: 'full', consent: 'granted', pageviews: 'manual' });
    mf.identify('user-42');
    const cases = await (await fetch('/corpus.json')).json();
    const results = [];
    for (const c of cases) results.push(await mf.flag(c.key, c.properties));
    const stored = JSON.parse(localStorage.getItem('mf:' + key));
    return { anonymousId: stored.a, results };
  },
  // An origin the source does not allow.
  async other(init) {
    const mf = init({ key, endpoint });
    mf.track('refused');
    await mf.flush();
    return { flag: await mf.flag('dark-mode') };
  },
};
scenarios.localhost = scenarios.silent;
scenarios.dnt = scenarios.silent;
scenarios.gpc = scenarios.silent;
scenarios.screenshot = scenarios.consentless;

// Debian's Chromium cannot turn Global Privacy Control on (its
// navigator.globalPrivacyControl is absent or false): the gpc scenario
// gives the page the property as a browser with GPC on has it.
if (scenario === 'gpc') Object.defineProperty(Navigator.prototype, 'globalPrivacyControl', { get: () => true, configurable: true });

try {
  const { init } = await import(q.get('mf') + '/v1/sdk/mf.mjs');
  const r = await scenarios[scenario](init);
  if (r) await report(r);
} catch (err) {
  await report({ error: String(err && err.stack || err) });
}
