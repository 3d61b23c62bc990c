// mf browser client: page analytics and feature flags by the client rules of
// the mf ingest specification. No dependencies; the flag evaluator
// (evaluator.mjs and its WebAssembly) loads only when a flag is evaluated.
// Guide: docs/browser.md.
//
//   import { init } from 'https://mf.example/v1/sdk/mf.mjs';
//   const mf = init({ key: 'mf_abcd1234_Xy-9', mode: 'full' });

export const VERSION = '0.1.2';

const CLICK_IDS = ['gclid', 'gbraid', 'wbraid', 'fbclid', 'msclkid', 'ttclid', 'li_fat_id'];
const VISIT_MS = 30 * 60 * 1000; // a visit ends after 30 minutes without activity
const MAX_EVENTS = 1000; // per batch
const MAX_BYTES = 1048576; // per batch body
const UNLOAD_BYTES = 60000; // sendBeacon and keepalive fetch carry at most 64 KiB in flight
const FLUSH_MS = 5000; // queue interval
const FLUSH_AT = 20; // queued events that send at once
const TRIES = 4; // attempts per batch
const RETRY_BASE = 1000, RETRY_CAP = 30000;
const TEXT = 'text/plain;charset=UTF-8'; // a CORS simple request: no preflight
const PREVIEW = 'svc-preview-token';

// --- Pure rules (exported for tests) ---------------------------------------

function keepParam(part) {
  let name = part.split('=')[0];
  try { name = decodeURIComponent(name.replace(/\+/g, ' ')); } catch { /* keep it raw */ }
  return name.startsWith('utm_') || name === 'ref' || name === 'source' || CLICK_IDS.includes(name);
}

// cleanQuery keeps the parameters the specification allows, as written.
function cleanQuery(q) {
  return q.split('&').filter((p) => p && keepParam(p)).join('&');
}

// withQuery cleans the query of s (no fragment in s).
function withQuery(s) {
  const i = s.indexOf('?');
  if (i < 0) return s;
  const q = cleanQuery(s.slice(i + 1));
  return s.slice(0, i) + (q ? '?' + q : '');
}

/**
 * Cleans a URL before it is sent: (1) only utm_*, ref, source and click-id
 * parameters stay, in their original encoding; (2) the fragment goes, unless
 * the site routes by hash: then it stays with its own query cleaned; (3) a URL
 * that does not parse loses everything from its first ? or #.
 */
export function cleanUrl(url, hashRouting) {
  url = String(url);
  let ok = true;
  try { new URL(url); } catch { ok = false; }
  if (!ok) return url.split(/[?#]/)[0];
  const h = url.indexOf('#');
  const main = withQuery(h < 0 ? url : url.slice(0, h));
  return hashRouting && h >= 0 ? main + '#' + withQuery(url.slice(h + 1)) : main;
}

/** The referrer as sent: scheme, host and path only. */
export function cleanReferrer(ref) {
  return ref ? String(ref).split(/[?#]/)[0] : '';
}

/** Whether the page's address is one where nothing is sent. */
export function localAddress(hostname, protocol) {
  const h = String(hostname).toLowerCase();
  return protocol === 'file:' || h === 'localhost' || h.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(h) ||
    h === '[::1]' || h === '::1' || h.endsWith('.local');
}

/** Whether a batch answered with status (0: no answer) is sent again. */
export function retryable(status) {
  return status === 0 || status === 408 || status === 429 || status >= 500;
}

/**
 * The wait in ms before retry n (0-based) after an answer with status and
 * Retry-After header value: Retry-After on 429 and 503, else full jitter
 * between 0 and min(cap, base x 2^n).
 */
export function retryDelay(n, status, retryAfter, random, now) {
  if ((status === 429 || status === 503) && retryAfter) {
    if (/^\d+$/.test(retryAfter.trim())) return Number(retryAfter) * 1000;
    const at = Date.parse(retryAfter);
    if (!Number.isNaN(at)) return Math.max(0, at - now);
  }
  return Math.floor(random() * Math.min(RETRY_CAP, RETRY_BASE * 2 ** n));
}

function utf8Length(s) {
  return new TextEncoder().encode(s).length;
}

/**
 * Splits encoded events (JSON texts) into batches of at most maxEvents
 * events whose body, with an envelope of overhead bytes, stays within
 * maxBytes. An event too large for any batch is left out.
 */
export function packBatches(events, maxEvents, maxBytes, overhead) {
  const out = [];
  let cur = [], size = overhead;
  for (const e of events) {
    const n = utf8Length(e) + 1; // and its comma
    if (overhead + n > maxBytes) continue;
    if (cur.length === maxEvents || size + n > maxBytes) {
      out.push(cur);
      cur = [];
      size = overhead;
    }
    cur.push(e);
    size += n;
  }
  if (cur.length) out.push(cur);
  return out;
}

/** A random (version 4) UUID; crypto.randomUUID needs a secure context. */
export function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// cut shortens s to at most n code points.
function cut(s, n) {
  s = String(s ?? '');
  return s.length <= n ? s : Array.from(s).slice(0, n).join('');
}

// propsProblem says why properties would make the whole batch refused, or ''.
function propsProblem(p) {
  if (p === undefined) return '';
  if (p === null || typeof p !== 'object' || Array.isArray(p)) return 'properties must be an object';
  if (Object.keys(p).length > 64) return 'more than 64 properties';
  let leaves = 0, deep = false, longKey = false;
  const walk = (o, depth) => {
    if (depth > 5) deep = true;
    const keys = Object.keys(o);
    if (!keys.length) leaves++;
    for (const k of keys) {
      if (Array.from(k).length > 128) longKey = true;
      const v = o[k];
      if (v && typeof v === 'object' && !Array.isArray(v)) walk(v, depth + 1);
      else if (v !== undefined && typeof v !== 'function') leaves++;
    }
  };
  walk(p, 1);
  if (deep) return 'objects nested deeper than 5 levels';
  if (longKey) return 'a key longer than 128 characters';
  if (leaves > 64) return 'more than 64 values';
  if (utf8Length(JSON.stringify(p)) > 32768) return 'more than 32,768 bytes';
  return '';
}

// --- The client ------------------------------------------------------------

const OPTIONS = {
  endpoint: (v) => typeof v === 'string' && /^https?:\/\//.test(v),
  mode: (v) => v === 'consentless' || v === 'full',
  consent: (v) => v === 'pending' || v === 'granted' || v === 'denied',
  pageviews: (v) => v === 'auto' || v === 'manual',
  hashRouting: (v) => typeof v === 'boolean',
  autocapture: (v) => typeof v === 'boolean',
  flags: (v) => typeof v === 'boolean',
  refreshSeconds: (v) => typeof v === 'number' && v >= 10 && v < Infinity,
};

/**
 * Starts the client in this page. Throws only without a website key; any
 * other bad option logs one warning and takes its default.
 */
export function init(options) {
  return createClient(options, browserEnv());
}

// browserEnv is what the client uses of the page; tests pass their own.
function browserEnv() {
  const here = new URL(import.meta.url);
  // Served unversioned (/v1/sdk/mf.mjs), the files it loads are those of
  // its own version; elsewhere they sit beside it.
  const base = /\/v1\/sdk\/mf\.mjs$/.test(here.pathname) ? new URL(VERSION + '/', here) : new URL('./', here);
  const g = globalThis;
  return {
    window: g, document: g.document, navigator: g.navigator, location: g.location, history: g.history,
    storage: () => g.localStorage,
    now: () => Date.now(), random: Math.random, uuid,
    setTimeout: (f, ms) => g.setTimeout(f, ms), clearTimeout: (t) => g.clearTimeout(t),
    fetch: (u, o) => g.fetch(u, o),
    beacon: (u, body) => { try { return g.navigator.sendBeacon(u, new Blob([body], { type: TEXT })); } catch { return false; } },
    warn: (m) => g.console && g.console.warn(m),
    origin: here.origin,
    loadEvaluator: () => import(new URL('evaluator.mjs', base).href)
      .then((m) => m.loadEvaluator(new URL('evaluator.wasm', base).href)),
  };
}

/** The client over an environment env (see browserEnv); init uses the page's. */
export function createClient(options, env) {
  const o = options || {};
  if (typeof o.key !== 'string' || !o.key) throw new TypeError('mf: init needs the website key: init({ key: "mf_…" })');
  const defaults = { endpoint: env.origin, mode: 'consentless', consent: 'pending', pageviews: 'auto',
    hashRouting: false, autocapture: false, flags: true, refreshSeconds: 30 };
  const opt = { ...defaults }, bad = [];
  for (const k of Object.keys(defaults)) {
    if (o[k] === undefined) continue;
    if (OPTIONS[k](o[k])) opt[k] = o[k];
    else bad.push(k);
  }
  if (bad.length) env.warn(`mf: ignoring bad option${bad.length > 1 ? 's' : ''} ${bad.join(', ')}; using the default`);
  const endpoint = String(opt.endpoint).replace(/\/+$/, '');
  const key = encodeURIComponent(o.key);
  const { document: doc, navigator: nav, location: loc } = env;
  const storeKey = 'mf:' + o.key;
  let consent = opt.consent;
  const boot = consent !== 'pending'; // the answer was known when the page first drew
  // No data leaves under Do Not Track, Global Privacy Control or on a local address.
  const silent = (nav && (nav.doNotTrack === '1' || nav.globalPrivacyControl === true)) ||
    localAddress(loc.hostname, loc.protocol);
  let waiting = !!(doc && doc.prerendering); // prerendering: wait for activation
  const full = () => opt.mode === 'full' && consent === 'granted' && !silent;

  // --- Ids, kept in localStorage only with consent ---
  let ids = null; // {a: anonymous id, s: visit id, t: last activity, u: user id}
  const storage = () => { try { return env.storage(); } catch { return null; } };
  const save = () => { try { storage().setItem(storeKey, JSON.stringify(ids)); } catch { /* private mode */ } };
  const forget = () => { try { storage() && storage().removeItem(storeKey); } catch { /* nothing to do */ } };
  function loadIds() {
    let got = null;
    try { got = JSON.parse(storage().getItem(storeKey)); } catch { /* none */ }
    ids = got && typeof got.a === 'string' ? got : { a: env.uuid(), s: env.uuid(), t: env.now() };
    save();
  }
  function touch() { // the visit id, renewed after 30 minutes without activity
    const now = env.now();
    if (now - ids.t > VISIT_MS) ids.s = env.uuid();
    ids.t = now;
    save();
  }
  if (full()) loadIds();
  else if (consent === 'denied') forget();
  const pageId = env.uuid(); // the random unit of experiments before consent (memory only)

  // --- Queue, batches, retries ---
  const queue = []; // {e: event, f: full}
  const retrying = new Set(); // bodies waiting to be sent again
  let timer = null;
  const batchUrl = `${endpoint}/v1/batch/${key}`;

  const here = () => cut(cleanUrl(loc.href, opt.hashRouting), 2048);
  function enqueue(name, props, page, person) {
    if (silent) return;
    const e = { name, id: env.uuid(), time: env.now(), page: page || { url: here() } };
    if (props && Object.keys(props).length) e.properties = props;
    const f = full();
    if (f) {
      touch();
      e.anonymousId = ids.a;
      e.sessionId = ids.s;
      if (ids.u) e.userId = ids.u;
    } else if (person) return; // identify, search and exposures need consent
    queue.push({ e, f });
    if (waiting) return;
    if (queue.length >= FLUSH_AT) flush();
    else if (timer === null) timer = env.setTimeout(() => { timer = null; flush(); }, FLUSH_MS);
  }

  function context(f) {
    const c = { sdk: 'mf-browser/' + VERSION };
    if (!f) return c;
    try { if (nav.language) c.locale = nav.language; } catch { /* none */ }
    try { c.timezone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch { /* none */ }
    const s = env.window.screen;
    if (s) c.screen = [Math.min(32768, s.width | 0), Math.min(32768, s.height | 0)];
    return c;
  }

  // bodies takes the queue as batch bodies of at most maxBytes each.
  function bodies(maxBytes) {
    const out = [];
    for (const f of [false, true]) {
      const events = queue.filter((q) => q.f === f).map((q) => JSON.stringify(q.e));
      if (!events.length) continue;
      const env0 = { v: 1, batch: env.uuid(), mode: f ? 'full' : 'consentless', sentAt: env.now(), context: context(f) };
      const overhead = utf8Length(JSON.stringify({ ...env0, events: [] }));
      for (const group of packBatches(events, MAX_EVENTS, maxBytes, overhead)) {
        const head = JSON.stringify({ ...env0, batch: env.uuid() });
        out.push(head.slice(0, -1) + ',"events":[' + group.join(',') + ']}');
      }
    }
    queue.length = 0;
    return out;
  }

  async function post(body) {
    for (let n = 0; ; n++) {
      let status = 0, ra = null;
      try {
        const r = await env.fetch(batchUrl, { method: 'POST', body, headers: { 'Content-Type': TEXT },
          credentials: 'omit', referrerPolicy: 'no-referrer', keepalive: utf8Length(body) <= UNLOAD_BYTES });
        status = r.status;
        ra = r.headers.get('Retry-After');
      } catch { /* no answer */ }
      if (!retryable(status) || n + 1 >= TRIES) return status;
      retrying.add(body);
      await new Promise((res) => env.setTimeout(res, retryDelay(n, status, ra, env.random, env.now())));
      retrying.delete(body);
    }
  }

  function flush() {
    if (timer !== null) { env.clearTimeout(timer); timer = null; }
    if (waiting || silent) return Promise.resolve();
    return Promise.all(bodies(MAX_BYTES).map(post)).then(() => undefined);
  }

  // unload hands what is queued, and batches waiting for a retry, to the
  // browser, which sends them after the page is gone.
  function unload() {
    if (waiting || silent) return;
    const send = (b) => env.beacon(batchUrl, b) || env.fetch(batchUrl, { method: 'POST', body: b,
      headers: { 'Content-Type': TEXT }, credentials: 'omit', referrerPolicy: 'no-referrer', keepalive: true }).catch(() => {});
    for (const b of retrying) send(b);
    bodies(UNLOAD_BYTES).forEach(send);
  }

  // --- Pageviews ---
  let lastUrl = null, views = 0;
  function page() {
    const url = here();
    const p = { url };
    const title = cut(doc && doc.title, 512);
    if (title) p.title = title;
    const ref = cut(lastUrl === null ? cleanReferrer(doc && doc.referrer) : lastUrl, 2048);
    if (ref) p.referrer = ref;
    lastUrl = url;
    enqueue('$pageview', views++ === 0 && boot ? { $boot: 1 } : undefined, p);
  }
  function navigated() {
    if (cleanUrl(loc.href, opt.hashRouting) !== lastUrl) page();
  }

  // --- Flags ---
  const fl = { seq: 0, doc: null, text: '', view: '', at: -Infinity, busy: null, stopped: false, seg: undefined,
    ev: null, loaded: null, loadedText: '', seen: new Set(), traits: {} };
  function flagView() {
    if (full() && !waiting) return 'full';
    return opt.mode === 'full' && consent === 'pending' ? 'pending' : 'values';
  }
  function fetchFlags() {
    if (fl.stopped) return Promise.resolve();
    const view = flagView();
    let tok = null;
    try { tok = new URL(loc.href).searchParams.get(PREVIEW); } catch { /* none */ }
    const q = [];
    if (view === 'values') q.push('view=values');
    if (tok) q.push(PREVIEW + '=' + encodeURIComponent(tok));
    const url = `${endpoint}/v1/flags/${key}${q.length ? '?' + q.join('&') : ''}`;
    const init = { cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' };
    const lookup = view === 'full' && !fl.noLookup;
    if (lookup) {
      init.method = 'POST';
      init.headers = { 'Content-Type': TEXT };
      init.body = JSON.stringify({ anonymousId: ids.a, identified: !!ids.u });
    }
    fl.at = env.now();
    const seq = ++fl.seq; // only the latest request's answer counts
    const p = env.fetch(url, init).then(async (r) => {
      if (seq !== fl.seq) return;
      if (lookup && r.status === 403) { // a consentless source: no lookups, documents by GET
        fl.noLookup = true;
        return fetchFlags();
      }
      if (r.status === 401 || r.status === 403) fl.stopped = true;
      if (!r.ok) return;
      const text = await r.text();
      const body = JSON.parse(text);
      const d = lookup ? body.document : body;
      if (!d || d.v !== 1 || seq !== fl.seq) return; // unreadable: keep the last document
      fl.doc = d;
      fl.text = lookup ? JSON.stringify(d) : text;
      fl.view = view;
      fl.seg = lookup ? body.membership : undefined;
    }).catch(() => { /* keep the last document */ }).finally(() => { if (fl.busy === p) fl.busy = null; });
    fl.busy = p;
    return p;
  }
  function evaluator() {
    if (!fl.ev) fl.ev = env.loadEvaluator().catch((err) => { fl.ev = null; throw err; });
    return fl.ev;
  }
  const failure = (code) => ({ reason: 'ERROR', errorCode: code });

  // ready waits for a document of the current view, or starts a refresh
  // of the one there when it is refreshSeconds old.
  async function ready() {
    if (!fl.stopped && (fl.doc === null || fl.view !== flagView())) await (fl.busy || fetchFlags());
    else if (!fl.stopped && !fl.busy && env.now() - fl.at >= opt.refreshSeconds * 1000) fetchFlags();
  }

  async function flag(name, properties, quiet) {
    try {
      if (!quiet) await ready();
      const d = fl.doc;
      if (!d) return failure('NOT_READY');
      const def = d.flags && d.flags[name];
      if (Array.isArray(d.orig) && d.orig.includes(name)) { // everyone sees the original; no exposure
        const r = { variant: 'a', reason: 'STATIC' };
        if (def && def.p && 'a' in def.p) r.value = def.p.a;
        return r;
      }
      if (d.values) {
        const v = d.values[name];
        if (!Array.isArray(v)) return failure('FLAG_NOT_FOUND');
        return v.length > 1 ? { variant: v[0], reason: 'STATIC', value: v[1] } : { variant: v[0], reason: 'STATIC' };
      }
      if (!def) return failure('FLAG_NOT_FOUND');
      let facts = {};
      if (fl.view === 'full' && ids) {
        facts = { id: ids.a, properties: { ...fl.traits, ...properties } };
        if (ids.u) facts.userId = ids.u;
        facts.segments = fl.seg ? { in: fl.seg.segments || [], unavailable: fl.seg.unavailable || [] } : 'unavailable';
      } else if (def.e === 'o') {
        const r = { variant: def.d, reason: 'DEFAULT' };
        if (def.p && def.d in def.p) r.value = def.p[def.d];
        return r;
      } else if (def.e === 'r') {
        facts = { id: pageId };
      }
      const ev = await evaluator();
      if (fl.loadedText !== fl.text) {
        if (fl.loaded) fl.loaded.free();
        fl.loaded = ev.loadDocument(fl.text);
        fl.loadedText = fl.text;
      }
      const r = fl.loaded.evaluate(name, facts) || failure('FLAG_NOT_FOUND');
      if (!quiet && fl.view === 'full' && def.e && def.c === 'b' && r.variant && r.reason !== 'DISABLED' && full() && !fl.seen.has(name + ' ' + r.variant)) {
        fl.seen.add(name + ' ' + r.variant);
        enqueue('$exposure', { $experiment: name, $variant: r.variant }, null, true);
      }
      return r;
    } catch (err) {
      env.warn(`mf: flag ${name}: ${err && err.message}`);
      return failure('NOT_READY');
    }
  }

  // --- Autocapture ---
  function capture(ev) {
    let el = ev.target;
    if (!el || el.nodeType !== 1) return;
    if (ev.type === 'click') el = el.closest('a,button,input,select,textarea,label,[role=button],[data-mf]') || el;
    const tag = el.tagName.toLowerCase();
    const type = (el.getAttribute('type') || '').toLowerCase();
    if (type === 'password' || el.closest('.mf-no-capture')) return;
    const p = { $event_type: ev.type, $el_tag: tag };
    const cls = typeof el.className === 'string' ? el.className.trim().split(/\s+/).filter(Boolean) : [];
    let sel = tag + (el.id ? '#' + el.id : '') + cls.slice(0, 3).map((c) => '.' + c).join('');
    if (el.parentElement && el.parentElement.tagName !== 'BODY') sel = el.parentElement.tagName.toLowerCase() + ' > ' + sel;
    p.$el_selector = cut(sel, 256);
    if (el.id) p.$el_id = cut(el.id, 128);
    if (cls.length) p.$el_classes = cls.slice(0, 10).map((c) => cut(c, 64));
    const field = /^(input|select|textarea)$/.test(tag);
    if (!field && el.textContent) p.$el_text = cut(el.textContent.replace(/\s+/g, ' ').trim(), 100);
    if (tag === 'a' && el.href) p.$el_href = cut(cleanUrl(el.href, false), 2048);
    if (el.getAttribute('name')) p.$el_name = cut(el.getAttribute('name'), 128);
    if (type) p.$el_type = type;
    const attrs = {};
    for (const a of el.attributes) if (a.name.startsWith('data-') && Object.keys(attrs).length < 10) attrs[cut(a.name, 128)] = cut(a.value, 100);
    if (Object.keys(attrs).length) p.$el_attrs = attrs;
    enqueue('$autocapture', p);
  }

  // --- Start ---
  function start() {
    const held = waiting;
    waiting = false;
    if (opt.flags && !fl.doc && !fl.busy) fetchFlags();
    else if (fl.doc && fl.view !== flagView()) fetchFlags();
    if (opt.pageviews === 'auto') page();
    if (held && queue.length) flush(); // what was held while prerendering
  }
  const w = env.window;
  if (w && w.addEventListener) {
    if (opt.pageviews === 'auto' && env.history) {
      for (const m of ['pushState', 'replaceState']) {
        const orig = env.history[m];
        if (typeof orig !== 'function') continue;
        env.history[m] = function (...args) {
          const r = orig.apply(this, args);
          if (!waiting) navigated();
          return r;
        };
      }
      w.addEventListener('popstate', () => { if (!waiting) navigated(); });
      if (opt.hashRouting) w.addEventListener('hashchange', () => { if (!waiting) navigated(); });
    }
    w.addEventListener('pagehide', unload);
    if (doc && doc.addEventListener) {
      doc.addEventListener('visibilitychange', () => { if (doc.visibilityState === 'hidden') unload(); });
      if (opt.autocapture) for (const t of ['click', 'submit', 'change']) doc.addEventListener(t, (e) => { try { capture(e); } catch { /* never break the page */ } }, true);
    }
  }
  if (waiting) {
    if (opt.flags) fetchFlags();
    doc.addEventListener('prerenderingchange', start, { once: true });
  } else start();

  const client = {
    page() { if (!waiting) page(); },
    track(name, properties) {
      if (typeof name !== 'string' || !name || name !== name.trim() || name.length > 128 || name[0] === '$') {
        env.warn(`mf: track needs a name of 1 to 128 characters, not starting with $ or with spaces: ${name}`);
        return;
      }
      const why = propsProblem(properties);
      if (why) { env.warn(`mf: track ${name} not sent: ${why}`); return; }
      enqueue(name, properties);
    },
    identify(userId, traits) {
      if (typeof userId !== 'string' || !userId.trim() || userId.length > 256) { env.warn('mf: identify needs a user id of 1 to 256 characters'); return; }
      const why = propsProblem(traits);
      if (why) { env.warn(`mf: identify: ${why}`); return; }
      if (traits) fl.traits = { ...traits };
      if (!full()) return;
      const was = ids.u;
      ids.u = userId;
      save();
      enqueue('$identify', traits, null, true);
      if (was !== userId && (fl.doc || fl.busy)) fetchFlags();
    },
    search(query) {
      if (typeof query === 'string' && query.trim()) enqueue('$search', { query: cut(query, 1000) }, undefined, true);
    },
    consent(answer) {
      if (!OPTIONS.consent(answer) || answer === 'pending') { env.warn('mf: consent takes "granted" or "denied"'); return; }
      if (answer === consent) return;
      consent = answer;
      if (full()) loadIds();
      else {
        ids = null;
        forget();
        fl.seen.clear();
        // What was queued with consent goes without identifiers, or not at all.
        for (let i = queue.length - 1; i >= 0; i--) {
          const q = queue[i];
          if (!q.f) continue;
          if (['$identify', '$search', '$exposure'].includes(q.e.name)) { queue.splice(i, 1); continue; }
          delete q.e.anonymousId; delete q.e.sessionId; delete q.e.userId;
          q.f = false;
        }
      }
      if ((opt.flags || fl.doc) && !waiting) fetchFlags();
    },
    flag: (key, properties) => flag(key, properties),
    // Every flag of the document, answered as flag answers, without
    // exposures (OpenFeature's web provider resolves from it).
    async flags(properties) {
      await ready();
      const d = fl.doc || {};
      const out = {};
      for (const k of [...Object.keys(d.flags || d.values || {}), ...(d.orig || [])]) out[k] = await flag(k, properties, true);
      return out;
    },
    flush,
    reset() {
      fl.traits = {};
      if (!full()) return;
      forget();
      ids = { a: env.uuid(), s: env.uuid(), t: env.now() };
      save();
      if (fl.view === 'full') fetchFlags();
    },
  };
  return client;
}
