// Copies the flag evaluator (wasm/js/evaluator.mjs, its types and
// wasm/dist/evaluator.wasm) beside mf.mjs, where the module loads it from,
// before `npm pack` or `npm publish`. The copies are not committed.
import { copyFileSync } from 'node:fs';

const root = new URL('../../../../', import.meta.url);
for (const [from, to] of [
  ['wasm/js/evaluator.mjs', 'evaluator.mjs'],
  ['wasm/js/evaluator.d.ts', 'evaluator.d.ts'],
  ['wasm/dist/evaluator.wasm', 'evaluator.wasm'],
]) {
  copyFileSync(new URL(from, root), new URL('../' + to, import.meta.url));
}
