// A browser environment for createClient in Node tests: a manual clock with
// timers, an in-memory localStorage that logs writes, and fetch and
// sendBeacon that record requests and answer by a routing function. The
// flag evaluator is the real one (wasm/js/evaluator.mjs and
// wasm/dist/evaluator.wasm).
import { readFileSync } from 'node:fs';
import { loadEvaluator } from '../../../wasm/js/evaluator.mjs';

const wasm = readFileSync(new URL('../../../wasm/dist/evaluator.wasm', import.meta.url));

export function fakeEnv({ href = 'https://shop.example/', route = () => ({ status: 202 }), nav = {}, prerendering = false, start = 1_800_000_000_000 } = {}) {
  let now = start, seq = 0;
  const timers = [];
  const requests = [];
  const items = new Map();
  const writes = [];
  const warnings = [];
  const win = new EventTarget();
  const doc = new EventTarget();
  Object.assign(doc, { title: 'Shop', referrer: '', visibilityState: 'visible', prerendering });
  const location = { href, get hostname() { return new URL(this.href).hostname; }, get protocol() { return new URL(this.href).protocol; } };
  const history = {
    pushState(_s, _t, url) { location.href = new URL(url, location.href).href; },
    replaceState(_s, _t, url) { location.href = new URL(url, location.href).href; },
  };
  const storage = {
    getItem: (k) => (items.has(k) ? items.get(k) : null),
    setItem: (k, v) => { writes.push(['set', k]); items.set(k, String(v)); },
    removeItem: (k) => { writes.push(['remove', k]); items.delete(k); },
  };
  let evaluatorLoads = 0;
  const env = {
    window: win, document: doc, navigator: { language: 'de-DE', ...nav }, location, history,
    storage: () => storage,
    now: () => now, random: () => 0.5, uuid: () => `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`,
    setTimeout: (f, ms) => { const t = { at: now + ms, f }; timers.push(t); return t; },
    clearTimeout: (t) => { const i = timers.indexOf(t); if (i >= 0) timers.splice(i, 1); },
    fetch: async (url, init = {}) => {
      const req = { url, method: init.method || 'GET', body: init.body, init, at: now };
      requests.push(req);
      const a = await route(req);
      if (a.error) throw new TypeError('network error');
      const headers = new Map(Object.entries(a.headers || {}));
      const text = typeof a.body === 'string' ? a.body : JSON.stringify(a.body ?? {});
      return { status: a.status, ok: a.status >= 200 && a.status < 300, headers: { get: (k) => headers.get(k) ?? null }, text: async () => text };
    },
    beacon: (url, body) => { requests.push({ url, method: 'BEACON', body, at: now }); return true; },
    warn: (m) => warnings.push(m),
    origin: 'https://mf.example',
    loadEvaluator: () => { evaluatorLoads++; return loadEvaluator(wasm); },
  };
  return {
    env, requests, items, writes, warnings, location, doc, win,
    get evaluatorLoads() { return evaluatorLoads; },
    get now() { return now; },
    // advance moves the clock, running due timers in order and letting
    // the promises they start settle.
    async advance(ms) {
      const end = now + ms;
      for (;;) {
        await settle();
        timers.sort((a, b) => a.at - b.at);
        const t = timers[0];
        if (!t || t.at > end) break;
        timers.shift();
        now = t.at;
        t.f();
      }
      now = end;
      await settle();
    },
    batches: () => requests.filter((r) => r.url.includes('/v1/batch/')).map((r) => ({ ...JSON.parse(r.body), method: r.method, at: r.at, raw: r.body })),
  };
}

export async function settle() {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}
