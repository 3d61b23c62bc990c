// node wasm/js/run-corpus.mjs MODULE.wasm CORPUS.jsonl
//
// Evaluates every corpus case with the browser module in Node and prints
// one JSON line per case (see corpus.mjs), then {"recovery": "ok"} when the
// evaluator survives a trap (checkRecovery). Used by the identity test of
// package wasm (go test ./wasm).
import { readFileSync } from 'node:fs';
import { loadEvaluator } from './evaluator.mjs';
import { runCorpus, checkRecovery } from './corpus.mjs';

const [modulePath, corpusPath] = process.argv.slice(2);
if (!modulePath || !corpusPath) {
  console.error('usage: node run-corpus.mjs MODULE.wasm CORPUS.jsonl');
  process.exit(2);
}
const ev = await loadEvaluator(readFileSync(modulePath));
const results = runCorpus(ev, readFileSync(corpusPath, 'utf8'));
const recovery = checkRecovery(ev);
process.stdout.write(results.map((r) => JSON.stringify(r)).join('\n') + '\n');
process.stdout.write(JSON.stringify({ recovery }) + '\n');
