// The provider through @openfeature/web-sdk against a real mf serve with the
// demo project (cmd/mf TestOpenFeatureWebProvider sets MF_INGEST): the
// SDK's evaluation details (value, variant, reason, error code, default on
// error) for the cases in testdata/cases.json, context changes, and the
// mf client's own answer for the same flag.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { OpenFeature } from '@openfeature/web-sdk';
import { createClient } from '../browser/mf.mjs';
import { loadEvaluator } from '../../../wasm/js/evaluator.mjs';
import { MfProvider, toResolution } from './provider.mjs';

const ingest = process.env.MF_INGEST;
const key = process.env.MF_WEBSITE_KEY || 'mf_demoweb1_Website-Key_1';
const cases = JSON.parse(readFileSync(new URL('./testdata/cases.json', import.meta.url), 'utf8'));
const wasm = readFileSync(new URL('../../../wasm/dist/evaluator.wasm', import.meta.url));

// nodePage is the environment of a page at https://shop.example/ whose
// visitor granted consent: real fetch and timers, storage in memory.
function nodePage() {
  const items = new Map();
  const doc = new EventTarget();
  Object.assign(doc, { title: 'Shop', referrer: '', visibilityState: 'visible' });
  return {
    window: new EventTarget(), document: doc, navigator: {}, location: { href: 'https://shop.example/', hostname: 'shop.example', protocol: 'https:' },
    storage: () => ({ getItem: (k) => items.get(k) ?? null, setItem: (k, v) => items.set(k, v), removeItem: (k) => items.delete(k) }),
    now: () => Date.now(), random: Math.random, uuid: () => crypto.randomUUID(),
    setTimeout: (f, ms) => setTimeout(f, ms), clearTimeout: (t) => clearTimeout(t),
    fetch: (u, o) => fetch(u, o), beacon: () => false, warn: (m) => console.warn(m),
    origin: ingest, loadEvaluator: () => loadEvaluator(wasm),
  };
}

test('mapping of answers', () => {
  assert.deepEqual(toResolution({ reason: 'ERROR', errorCode: 'NOT_READY' }, 'boolean', true),
    { value: true, reason: 'ERROR', errorCode: 'PROVIDER_NOT_READY', errorMessage: 'mf: NOT_READY' });
  assert.deepEqual(toResolution({ reason: 'ERROR', errorCode: 'UNSUPPORTED' }, 'string', 'd').errorCode, 'GENERAL');
  assert.deepEqual(toResolution({ variant: 'b', reason: 'SPLIT', rule: 1, value: { color: 'green' } }, 'object', {}),
    { value: { color: 'green' }, variant: 'b', reason: 'SPLIT', flagMetadata: { rule: 1 } });
  assert.deepEqual(toResolution({ variant: 'b', reason: 'SPLIT', rule: 1, value: 3 }, 'number', 0).value, 3);
});

test('through the OpenFeature web SDK against mf', { skip: !ingest && 'MF_INGEST is not set (run by cmd/mf TestOpenFeatureWebProvider)' }, async () => {
  const mf = createClient({ key, endpoint: ingest, mode: 'full', consent: 'granted', pageviews: 'manual' }, nodePage());
  const provider = new MfProvider(mf);
  await OpenFeature.setContext({});
  await OpenFeature.setProviderAndWait(provider);
  const client = OpenFeature.getClient();
  const get = { boolean: 'getBooleanDetails', string: 'getStringDetails', number: 'getNumberDetails', object: 'getObjectDetails' };
  for (const c of cases) {
    await OpenFeature.setContext(c.context);
    const d = client[get[c.type]](c.flag, c.default);
    const got = { value: d.value, reason: d.reason, flagMetadata: { ...d.flagMetadata } };
    if (d.variant !== undefined) got.variant = d.variant;
    if (d.errorCode !== undefined) got.errorCode = d.errorCode;
    assert.deepEqual(got, c.want, c.name);
    assert.equal(d.flagKey, c.flag);
    // The same answer as the client's own.
    const own = await mf.flag(c.flag, c.context);
    if (own.reason !== 'ERROR') assert.equal(own.variant, d.variant ?? own.variant, c.name);
  }
  // An answer that changes with the context is re-resolved on setContext.
  await OpenFeature.setContext({ plan: 'pro' });
  assert.equal(client.getBooleanValue('dark-mode', false), true);
  await OpenFeature.setContext({ plan: 'free' });
  assert.equal(client.getBooleanValue('dark-mode', true), false);
  await OpenFeature.close();
});
