// Tests of the client over a fake browser environment (testenv.mjs):
// consent and storage, ids and visits, batching, the retry schedule on a
// manual clock, SPA pageviews and the flag refresh rules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createClient } from './mf.mjs';
import { fakeEnv } from './testenv.mjs';

const KEY = 'mf_abcd1234_Xy-9';

test('consentless: no ids, no device context, nothing written', async () => {
  const f = fakeEnv({ href: 'https://shop.example/p?utm_source=x&secret=1#top' });
  f.doc.referrer = 'https://news.example/item?id=4';
  const mf = createClient({ key: KEY }, f.env);
  mf.track('signup', { plan: 'pro', revenue: 12.5, currency: 'EUR' });
  mf.identify('user-42', { name: 'Ada' });
  mf.search('red shoes');
  assert.equal(f.batches().length, 0, 'sent before the interval');
  await f.advance(5000);
  const [b] = f.batches();
  assert.equal(b.mode, 'consentless');
  assert.deepEqual(b.context, { sdk: 'mf-browser/0.1.2' });
  assert.deepEqual(b.events.map((e) => e.name), ['$pageview', 'signup']);
  assert.deepEqual(b.events[0].page, { url: 'https://shop.example/p?utm_source=x', title: 'Shop', referrer: 'https://news.example/item' });
  assert.equal(b.events[0].properties, undefined, 'no $boot while consent is pending');
  assert.deepEqual(b.events[1].properties, { plan: 'pro', revenue: 12.5, currency: 'EUR' });
  for (const e of b.events) assert.ok(!('anonymousId' in e || 'sessionId' in e || 'userId' in e));
  assert.deepEqual(f.writes, []);
  assert.equal(f.requests.find((r) => r.url.includes('/v1/batch/')).url, `https://mf.example/v1/batch/${KEY}`);
});

test('full mode: nothing written until granted, ids and context after, all removed on denial', async () => {
  const f = fakeEnv();
  f.win.screen = { width: 1280, height: 800 };
  const mf = createClient({ key: KEY, mode: 'full', endpoint: 'https://mf.example/' }, f.env);
  mf.identify('user-42');
  await f.advance(5000);
  assert.deepEqual(f.writes, [], 'written before consent');
  assert.equal(f.batches()[0].mode, 'consentless');
  mf.consent('granted');
  assert.ok(f.items.has('mf:' + KEY));
  mf.identify('user-42', { name: 'Ada' });
  mf.search('red shoes');
  mf.track('buy');
  await mf.flush();
  const b = f.batches()[1];
  assert.equal(b.mode, 'full');
  assert.equal(b.context.locale, 'de-DE');
  assert.ok(b.context.timezone);
  assert.deepEqual(b.context.screen, [1280, 800]);
  assert.deepEqual(b.events.map((e) => e.name), ['$identify', '$search', 'buy']);
  const { a, s } = JSON.parse(f.items.get('mf:' + KEY));
  for (const e of b.events) {
    assert.equal(e.anonymousId, a);
    assert.equal(e.sessionId, s);
    assert.equal(e.userId, 'user-42');
  }
  mf.track('queued');
  mf.search('queued search');
  mf.consent('denied');
  assert.equal(f.items.size, 0, 'storage left after denial');
  await mf.flush();
  const c = f.batches()[2];
  assert.equal(c.mode, 'consentless');
  assert.deepEqual(c.events.map((e) => e.name), ['queued']);
  assert.ok(!('anonymousId' in c.events[0]));
});

test('a new visit after 30 minutes without activity; the anonymous id stays', async () => {
  const f = fakeEnv();
  const mf = createClient({ key: KEY, mode: 'full', consent: 'granted', pageviews: 'manual' }, f.env);
  mf.track('a');
  await f.advance(29 * 60 * 1000);
  mf.track('b');
  await f.advance(30 * 60 * 1000 + 1);
  mf.track('c');
  await mf.flush();
  const ev = f.batches().flatMap((b) => b.events);
  assert.equal(ev[0].sessionId, ev[1].sessionId, 'activity within 30 minutes keeps the visit');
  assert.notEqual(ev[1].sessionId, ev[2].sessionId);
  assert.equal(ev[0].anonymousId, ev[2].anonymousId);
  // A second page with the same storage continues the visit.
  const g = fakeEnv({ start: f.now + 1000 });
  for (const [k, v] of f.items) g.items.set(k, v);
  const mf2 = createClient({ key: KEY, mode: 'full', consent: 'granted', pageviews: 'manual' }, g.env);
  mf2.track('d');
  await mf2.flush();
  const [d] = g.batches()[0].events;
  assert.equal(d.sessionId, ev[2].sessionId);
  assert.equal(d.anonymousId, ev[0].anonymousId);
  mf2.reset();
  mf2.track('e');
  await mf2.flush();
  const [e] = g.batches()[1].events;
  assert.notEqual(e.anonymousId, d.anonymousId, 'reset starts a new anonymous id');
});

test('$boot on the first pageview when the answer was known at start', async () => {
  for (const consent of ['granted', 'denied']) {
    const f = fakeEnv();
    const mf = createClient({ key: KEY, mode: 'full', consent }, f.env);
    mf.page();
    await mf.flush();
    const ev = f.batches().flatMap((b) => b.events);
    assert.deepEqual(ev[0].properties, { $boot: 1 }, consent);
    assert.equal(ev[1].properties, undefined);
    if (consent === 'denied') assert.deepEqual(f.writes.filter((w) => w[0] === 'set'), []);
  }
});

test('nothing is sent under DNT, GPC, on local addresses or while prerendering', async () => {
  const cases = [
    { nav: { doNotTrack: '1' } }, { nav: { globalPrivacyControl: true } },
    { href: 'http://localhost:3000/' }, { href: 'http://127.0.0.1/' }, { href: 'http://[::1]:8080/' },
    { href: 'http://printer.local/' }, { href: 'file:///tmp/index.html' },
  ];
  for (const c of cases) {
    const f = fakeEnv(c);
    const mf = createClient({ key: KEY, mode: 'full', consent: 'granted' }, f.env);
    mf.track('x');
    f.win.dispatchEvent(new Event('pagehide'));
    await mf.flush();
    await f.advance(10000);
    assert.deepEqual(f.batches(), [], JSON.stringify(c));
    assert.ok(!f.requests.some((r) => r.method === 'POST'), 'a segment lookup was sent: ' + JSON.stringify(c));
  }
  const f = fakeEnv({ prerendering: true, route: (r) => ({ status: r.url.includes('/flags/') ? 200 : 202, body: { v: 1, at: 1, values: {} } }) });
  const mf = createClient({ key: KEY }, f.env);
  mf.track('during');
  await f.advance(10000);
  assert.deepEqual(f.batches(), []);
  f.doc.prerendering = false;
  f.doc.dispatchEvent(new Event('prerenderingchange'));
  await f.advance(0);
  await mf.flush();
  assert.deepEqual(f.batches().flatMap((b) => b.events.map((e) => e.name)), ['during', '$pageview']);
});

test('retry schedule: Retry-After, full jitter, the same bytes, then give up', async () => {
  const answers = [
    { status: 503, headers: { 'Retry-After': '3' } }, { error: true }, { status: 500 }, { status: 202 },
  ];
  const f = fakeEnv({ route: (r) => (r.url.includes('/batch/') ? answers.shift() : { status: 404 }) });
  const mf = createClient({ key: KEY, pageviews: 'manual', flags: false }, f.env);
  mf.track('x');
  const done = mf.flush();
  await f.advance(60000);
  await done;
  const sent = f.batches();
  assert.equal(sent.length, 4);
  assert.deepEqual(sent.map((b) => b.at - sent[0].at), [0, 3000, 4000, 6000], 'Retry-After 3 s, then 0.5 x 1 s, 0.5 x 2 s... (n = 1, 2)');
  for (const b of sent) assert.equal(b.raw, sent[0].raw, 'resent bytes differ');
  assert.equal(f.requests[0].init.headers['Content-Type'], 'text/plain;charset=UTF-8');

  const g = fakeEnv({ route: () => ({ status: 503 }) });
  const mf2 = createClient({ key: KEY, pageviews: 'manual', flags: false }, g.env);
  mf2.track('y');
  mf2.flush();
  await g.advance(10 * 60000);
  assert.equal(g.batches().length, 4, 'gives up after 4 attempts');
  for (const status of [400, 401, 403, 413, 202]) {
    const h = fakeEnv({ route: () => ({ status }) });
    const mf3 = createClient({ key: KEY, pageviews: 'manual', flags: false }, h.env);
    mf3.track('z');
    mf3.flush();
    await h.advance(10 * 60000);
    assert.equal(h.batches().length, 1, `status ${status} retried`);
  }
});

test('batching: a full queue goes at once; pagehide hands the queue and pending retries to sendBeacon', async () => {
  let fail = true;
  const f = fakeEnv({ route: () => ({ status: fail ? 503 : 202 }) });
  const mf = createClient({ key: KEY, pageviews: 'manual', flags: false }, f.env);
  for (let i = 0; i < 19; i++) mf.track('e' + i);
  assert.equal(f.batches().length, 0);
  mf.track('e19');
  await f.advance(0);
  const first = f.batches();
  assert.equal(first.length, 1);
  assert.equal(first[0].events.length, 20);
  fail = false;
  mf.track('late');
  f.doc.visibilityState = 'hidden';
  f.doc.dispatchEvent(new Event('visibilitychange'));
  const beacons = f.batches().filter((b) => b.method === 'BEACON');
  assert.equal(beacons.length, 2);
  assert.equal(beacons[0].raw, first[0].raw, 'the batch waiting for a retry goes by beacon with the same bytes');
  assert.deepEqual(beacons[1].events.map((e) => e.name), ['late']);
  assert.notEqual(beacons[1].batch, first[0].batch);
});

test('SPA navigation sends a pageview with the previous page as referrer', async () => {
  const f = fakeEnv({ href: 'https://shop.example/' });
  createClient({ key: KEY, flags: false }, f.env);
  f.env.history.pushState({}, '', '/products?id=3&utm_campaign=x');
  f.env.history.replaceState({}, '', '/products?id=4&utm_campaign=x'); // same cleaned URL: no pageview
  f.env.history.pushState({}, '', '/cart#step-2');
  await f.advance(5000);
  const pv = f.batches().flatMap((b) => b.events).map((e) => e.page);
  assert.deepEqual(pv, [
    { url: 'https://shop.example/', title: 'Shop' },
    { url: 'https://shop.example/products?utm_campaign=x', title: 'Shop', referrer: 'https://shop.example/' },
    { url: 'https://shop.example/cart', title: 'Shop', referrer: 'https://shop.example/products?utm_campaign=x' },
  ]);
  const g = fakeEnv({ href: 'https://shop.example/#/' });
  createClient({ key: KEY, flags: false, hashRouting: true }, g.env);
  g.location.href = 'https://shop.example/#/cart?coupon=1';
  g.win.dispatchEvent(new Event('hashchange'));
  await g.advance(5000);
  assert.deepEqual(g.batches()[0].events.map((e) => e.page.url), ['https://shop.example/#/', 'https://shop.example/#/cart']);
});

test('bad options warn once and take defaults; a missing key throws', () => {
  const f = fakeEnv();
  createClient({ key: KEY, mode: 'everything', refreshSeconds: 5, pageviews: 'manual' }, f.env);
  assert.equal(f.warnings.length, 1);
  assert.match(f.warnings[0], /mode, refreshSeconds/);
  assert.throws(() => createClient({}, f.env), TypeError);
});
