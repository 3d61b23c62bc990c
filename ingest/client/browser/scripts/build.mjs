// Writes dist/mf.mjs, the minified module mf serves (npm run build), and
// prints the sizes of mf.mjs and dist/mf.mjs, raw and gzipped. The build is
// deterministic for a terser version (pinned in package.json):
// TestDistIsFresh rebuilds it and compares.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { minify } from 'terser';

const here = (p) => new URL('../' + p, import.meta.url);
const src = readFileSync(here('mf.mjs'), 'utf8');
const out = await minify(src, {
  module: true,
  ecma: 2020,
  compress: { passes: 2 },
  mangle: true,
  format: { comments: false, preamble: '// mf browser client, minified from mf.mjs (readable source: the mf repository, ingest/client/browser/mf.mjs).' },
});
const check = process.argv.includes('--check');
const built = out.code + '\n';
if (check) {
  process.stdout.write(built);
} else {
  mkdirSync(here('dist'), { recursive: true });
  writeFileSync(here('dist/mf.mjs'), built);
}
const gz = (s) => gzipSync(Buffer.from(s), { level: 9 }).length;
console.error(`mf.mjs: ${Buffer.byteLength(src)} bytes, ${gz(src)} gzip; minified: ${Buffer.byteLength(built)} bytes, ${gz(built)} gzip`);
