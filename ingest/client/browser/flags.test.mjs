// Flag rules of the client over the fake environment and the real
// WebAssembly evaluator: which document is fetched when, refresh on read,
// what is kept on failure, exposures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createClient } from './mf.mjs';
import { fakeEnv } from './testenv.mjs';

const KEY = 'mf_abcd1234_Xy-9';
const split = { d: 'a', r: [{ w: [['a', 5000], ['b', 5000]] }], s: 'exp000000001', t: 'm', u: 'b' };
const browserDoc = (at, extra = {}) => ({
  v: 1, at,
  flags: {
    checkout: { ...split, e: 'r', c: 'b', p: { b: { color: 'green' } } },
    'hero-o': { ...split, e: 'o', s: 'exp000000002' },
    server: { ...split, e: 'r', c: 's', s: 'exp000000003' },
    seg: { d: 'off', r: [{ if: [['s', 'ref00001']], x: 'on' }], s: 'seg000000001', t: 'b', u: 'b' },
    dark: { d: 'off', r: [{ x: 'on' }], s: 'dark00000001', t: 'b', u: 'b' },
  },
  orig: ['old-test'],
  ...extra,
});

function server(handlers) {
  const log = [];
  return {
    log,
    route: (r) => {
      if (!r.url.includes('/v1/flags/')) return { status: 202 };
      log.push(r);
      const h = handlers.shift() || handlers.last;
      return typeof h === 'function' ? h(r) : h;
    },
  };
}

test('consentless: the values view, no evaluator, refresh on read at most every refreshSeconds', async () => {
  const answers = [
    { status: 200, body: { v: 1, at: 1, values: { dark: ['on'], cfg: ['b', { n: 1 }] }, orig: ['old-test'] } },
    { status: 500 },
    { status: 200, body: { v: 2, at: 3, values: {} } },
    { status: 200, body: { v: 1, at: 4, values: { dark: ['off'] } } },
    { status: 401 },
  ];
  const s = server(answers);
  const f = fakeEnv({ route: s.route, href: 'https://shop.example/?svc-preview-token=a%2Bb' });
  const mf = createClient({ key: KEY, refreshSeconds: 10 }, f.env);
  assert.deepEqual(await mf.flag('dark'), { variant: 'on', reason: 'STATIC' });
  assert.deepEqual(await mf.flag('cfg'), { variant: 'b', reason: 'STATIC', value: { n: 1 } });
  assert.deepEqual(await mf.flag('nope'), { reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND' });
  assert.deepEqual(await mf.flag('old-test'), { variant: 'a', reason: 'STATIC' });
  assert.equal(s.log.length, 1);
  const r = s.log[0];
  assert.equal(r.url, `https://mf.example/v1/flags/${KEY}?view=values&svc-preview-token=a%2Bb`);
  assert.deepEqual({ ...r.init }, { cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' });
  await f.advance(9999);
  await mf.flag('dark');
  assert.equal(s.log.length, 1, 'refreshed before refreshSeconds');
  await f.advance(1);
  assert.deepEqual(await mf.flag('dark'), { variant: 'on', reason: 'STATIC' }); // answered from the last document
  await f.advance(0);
  assert.equal(s.log.length, 2, 'not refreshed on read after refreshSeconds');
  assert.deepEqual(await mf.flag('dark'), { variant: 'on', reason: 'STATIC' }, 'a failed refresh keeps the document');
  await f.advance(10000);
  await mf.flag('dark');
  await f.advance(0);
  assert.deepEqual(await mf.flag('dark'), { variant: 'on', reason: 'STATIC' }, 'a v2 document replaced v1');
  await f.advance(10000);
  await mf.flag('dark');
  await f.advance(0);
  assert.deepEqual(await mf.flag('dark'), { variant: 'off', reason: 'STATIC' });
  await f.advance(10000);
  await mf.flag('dark');
  await f.advance(0);
  assert.equal(s.log.length, 5);
  for (let i = 0; i < 3; i++) {
    await f.advance(10000);
    assert.deepEqual(await mf.flag('dark'), { variant: 'off', reason: 'STATIC' }, 'the last document is kept after 401');
  }
  assert.equal(s.log.length, 5, 'fetched again after a 401');
  assert.equal(f.evaluatorLoads, 0, 'the values view loaded the evaluator');
  assert.equal(f.batches().filter((b) => b.events.some((e) => e.name === '$exposure')).length, 0);
});

test('refreshSeconds defaults to 30 s and is never below 10 s', async () => {
  const doc = { status: 200, body: { v: 1, at: 1, values: { dark: ['on'] } } };
  for (const [opt, want] of [[undefined, 30000], [5, 30000], [12, 12000]]) {
    const s = server([doc]);
    s.route.last = doc;
    const answers = [];
    const f = fakeEnv({ route: (r) => { answers.push(r); return r.url.includes('/flags/') ? doc : { status: 202 }; } });
    const mf = createClient({ key: KEY, refreshSeconds: opt, pageviews: 'manual' }, f.env);
    await mf.flag('dark');
    await f.advance(want - 1);
    await mf.flag('dark');
    assert.equal(answers.length, 1, `refreshSeconds ${opt}: refreshed early`);
    await f.advance(1);
    await mf.flag('dark');
    assert.equal(answers.length, 2, `refreshSeconds ${opt}: not refreshed after ${want} ms`);
  }
});

test('full mode: experiments before consent, then membership, person facts and one exposure per variant', async () => {
  const posts = [];
  const route = (r) => {
    if (!r.url.includes('/v1/flags/')) return { status: 202 };
    if (r.method === 'POST') {
      posts.push(JSON.parse(r.body));
      return { status: 200, body: { document: browserDoc(2), membership: { segments: ['ref00001'], unavailable: [], refreshedAt: 1, stale: false } } };
    }
    return { status: 200, body: browserDoc(1) };
  };
  const f = fakeEnv({ route });
  const mf = createClient({ key: KEY, mode: 'full', pageviews: 'manual' }, f.env);
  const before = await mf.flag('hero-o');
  assert.deepEqual(before, { variant: 'a', reason: 'DEFAULT' }, 'e: o shows the default before consent');
  const r = await mf.flag('checkout');
  assert.equal(r.reason, 'SPLIT', 'e: r shows a random variant before consent');
  assert.deepEqual(await mf.flag('seg'), { variant: 'off', reason: 'DEFAULT' }, 'no membership before consent');
  assert.deepEqual(await mf.flag('old-test'), { variant: 'a', reason: 'STATIC' });
  assert.equal(posts.length, 0, 'a segment lookup before consent');
  mf.consent('granted');
  const seg = await mf.flag('seg');
  assert.deepEqual(seg, { variant: 'on', reason: 'TARGETING_MATCH', rule: 0 });
  const ids = JSON.parse(f.items.get('mf:' + KEY));
  assert.deepEqual(posts, [{ anonymousId: ids.a, identified: false }]);
  const a = await mf.flag('checkout');
  const b = await mf.flag('checkout');
  assert.deepEqual(a, b);
  await mf.flag('server');
  await mf.flag('dark');
  await mf.flush();
  const exposures = f.batches().flatMap((x) => x.events).filter((e) => e.name === '$exposure');
  assert.equal(exposures.length, 1, 'one exposure per experiment and variant');
  assert.deepEqual(exposures[0].properties, { $experiment: 'checkout', $variant: a.variant });
  assert.equal(exposures[0].anonymousId, ids.a);
  assert.equal(f.evaluatorLoads, 1);
});

test('flags() answers every flag as flag() does, without exposures', async () => {
  const route = (r) => {
    if (!r.url.includes('/v1/flags/')) return { status: 202 };
    if (r.method === 'POST') return { status: 200, body: { document: browserDoc(2), membership: { segments: [], unavailable: ['ref00001'] } } };
    return { status: 200, body: browserDoc(1) };
  };
  const f = fakeEnv({ route });
  const mf = createClient({ key: KEY, mode: 'full', consent: 'granted', pageviews: 'manual' }, f.env);
  const all = await mf.flags({ plan: 'pro' });
  assert.deepEqual(Object.keys(all).sort(), ['checkout', 'dark', 'hero-o', 'old-test', 'seg', 'server']);
  for (const [k, v] of Object.entries(all)) assert.deepEqual(v, await mf.flag(k, { plan: 'pro' }), k);
  assert.deepEqual(all.seg, { variant: 'off', reason: 'DEFAULT' }, 'an unavailable segment holds for neither form');
  await mf.flush();
  const exposures = f.batches().flatMap((x) => x.events).filter((e) => e.name === '$exposure');
  assert.equal(exposures.length, 1, 'only flag() sends exposures');
});
