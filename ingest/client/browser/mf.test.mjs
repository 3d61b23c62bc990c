// Unit tests of the browser client's rules, run with `node --test` (Node 20+).
// Cases are data in testdata/.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { cleanUrl, cleanReferrer, localAddress, retryable, retryDelay, packBatches } from './mf.mjs';

const data = (name) => JSON.parse(readFileSync(new URL('./testdata/' + name, import.meta.url), 'utf8'));

test('URL cleaning', () => {
  for (const c of data('clean-url.json')) {
    assert.equal(cleanUrl(c.url, !!c.hashRouting), c.want, c.name);
  }
});

test('referrer keeps scheme, host and path', () => {
  assert.equal(cleanReferrer('https://news.example/item?id=1#c'), 'https://news.example/item');
  assert.equal(cleanReferrer(''), '');
});

test('local addresses', () => {
  for (const c of data('local-address.json')) {
    assert.equal(localAddress(c.hostname, c.protocol || 'https:'), c.want, `${c.protocol} ${c.hostname}`);
  }
});

test('retry decisions', () => {
  const r = data('retry.json');
  for (const c of r.retryable) assert.equal(retryable(c.status), c.want, `status ${c.status}`);
  for (const c of r.delay) {
    assert.equal(retryDelay(c.n, c.status, c.retryAfter || null, () => c.random, c.now || 0), c.want, c.name);
  }
});

test('batch limits', () => {
  for (const c of data('batches.json')) {
    const events = [];
    for (const [count, bytes] of c.sizes) for (let i = 0; i < count; i++) events.push('x'.repeat(bytes - 1));
    const got = packBatches(events, c.maxEvents, c.maxBytes, c.overhead);
    assert.deepEqual(got.map((b) => b.length), c.want, c.name);
    for (const b of got) {
      const size = c.overhead + b.reduce((n, e) => n + e.length + 1, 0);
      assert.ok(size <= c.maxBytes && b.length <= c.maxEvents, `${c.name}: a batch of ${size} bytes`);
    }
  }
});
