// Runs the evaluator over corpus cases (evaluator/testdata/corpus.jsonl:
// one {"name", "in" | "in64", "want"} object a line) for the identity tests
// of package wasm, in Node (run-corpus.mjs) and in Chromium
// (wasm/testdata/corpus.html). Each case is evaluated three ways:
//
//   raw: evaluateCase with the input's exact bytes;
//   obj: evaluate(flag, facts) with the objects JSON.parse makes of the
//        input, the way a page calls it; sent is the case line that this
//        amounts to (what evaluate serializes), for the Go test to
//        evaluate natively;
//   doc: loadDocument({v: 1, flags: {f: flag}}).evaluate('f', facts), when
//        the flag is an object; sentDoc and sentFacts are its JSON.
//
// obj and doc are null when the input is not JSON that JavaScript reads, or
// not valid UTF-8. Results are JSON text of the result objects; the Go test
// compares them with the Go evaluator's result lines as values.

function decodeBase64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// json is JSON.stringify, with undefined for values it cannot write.
function json(v) {
  try {
    return JSON.stringify(v);
  } catch {
    return undefined;
  }
}

/**
 * @param {object} ev an evaluator from loadEvaluator
 * @param {string} corpusText the corpus file's text
 * @returns {object[]} one {name, raw, obj, sent, doc, sentDoc, sentFacts} per case
 */
export function runCorpus(ev, corpusText) {
  const out = [];
  for (const line of corpusText.split('\n')) {
    if (line === '') continue;
    const c = JSON.parse(line);
    const r = { name: c.name, raw: null, obj: null, sent: null, doc: null, sentDoc: null, sentFacts: null };
    r.raw = JSON.stringify(ev.evaluateCase(c.in64 !== undefined ? decodeBase64(c.in64) : c.in));
    out.push(r);
    if (c.in64 !== undefined) continue;
    let parsed;
    try {
      parsed = JSON.parse(c.in);
    } catch {
      continue;
    }
    const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
    const flag = isObject(parsed) ? parsed.flag : undefined;
    const facts = isObject(parsed) ? parsed.facts : undefined;
    r.obj = JSON.stringify(ev.evaluate(flag, facts));
    const f = json(flag), fa = facts === undefined ? 'null' : json(facts);
    r.sent = f === undefined || fa === undefined ? null : '{"flag":' + f + ',"facts":' + fa + '}';
    if (isObject(flag)) {
      const doc = { v: 1, flags: { f: flag } };
      r.sentDoc = json(doc);
      r.sentFacts = fa === undefined ? null : fa;
      let d;
      try {
        d = ev.loadDocument(doc);
      } catch (err) {
        r.doc = 'DOCUMENT_ERROR ' + err.message;
        continue;
      }
      const res = d.evaluate('f', facts);
      r.doc = res === undefined ? 'NO_FLAG' : JSON.stringify(res);
      d.free();
    }
  }
  return out;
}

/**
 * Makes the next call into the instance fail as a trap would, and checks
 * that the evaluator drops the instance, reports the failure, and answers
 * the following call from a fresh instance (created synchronously: in a
 * browser, on the main thread), documents loaded again.
 * @returns {string} 'ok', or what went wrong
 */
export function checkRecovery(ev) {
  const flag = { s: '3f9a1c0b7e2d', t: 'm', u: 'b', d: 'a', p: { b: { x: 1 } }, r: [{ if: [['p', 'k', 'is', ['v']]], x: 'b' }] };
  const facts = { properties: { k: 'v' } };
  const want = '{"variant":"b","reason":"TARGETING_MATCH","rule":0,"value":{"x":1}}';
  const doc = ev.loadDocument({ v: 1, flags: { f: flag } });
  const exports = ev._x;
  ev._x = new Proxy(exports, {
    get(target, name) {
      if (name === 'mf_eval_case' || name === 'mf_eval') {
        return () => { throw new WebAssembly.RuntimeError('unreachable (simulated trap)'); };
      }
      return target[name];
    },
  });
  let thrown = null;
  try {
    ev.evaluate(flag, facts);
  } catch (err) {
    thrown = err;
  }
  if (thrown === null || !/simulated trap/.test(thrown.message)) return `the trap was not reported: ${thrown}`;
  if (ev._x !== null) return 'the failed instance was kept';
  const again = JSON.stringify(ev.evaluate(flag, facts));
  if (again !== want) return `after the trap evaluate gives ${again}, want ${want}`;
  const byKey = JSON.stringify(doc.evaluate('f', facts));
  if (byKey !== want) return `after the trap the document gives ${byKey}, want ${want}`;
  doc.free();
  return 'ok';
}
