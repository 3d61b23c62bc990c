// The mf flag evaluator for browsers (and Node 20+): loads the WebAssembly
// build of package evaluator (wasm/dist/evaluator.wasm) and evaluates flags
// with it, so that a browser decides every flag exactly as the server does.
// No dependencies. The guest ABI is described in docs/wasm.md.
//
//   import { loadEvaluator } from './evaluator.mjs';
//   const ev = await loadEvaluator('/v1/evaluator/<hash>.wasm');
//   ev.evaluate(flag, { id: 'anon-1', properties: { plan: 'pro' } });
//   // → { variant: 'b', reason: 'SPLIT', rule: 1, value: { color: 'green' } }

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// The result of a case that cannot be read, as the Go evaluator writes it.
const PARSE_ERROR = '{"reason":"ERROR","errorCode":"PARSE_ERROR"}';

// Status bytes that open an mf_eval answer.
const STATUS_OK = 0;
const STATUS_NO_FLAG = 2;
const STATUS_BAD_FACTS = 3;

/**
 * Loads the evaluator module.
 * @param {ArrayBuffer|ArrayBufferView|Response|Promise<Response>|string|URL|WebAssembly.Module} source
 *   the module's bytes, a fetch Response for it, or its URL (fetched).
 * @returns {Promise<Evaluator>}
 */
export async function loadEvaluator(source) {
  const module = await compile(source);
  const ev = new Evaluator(module);
  await ev._start();
  return ev;
}

async function compile(source) {
  if (source instanceof WebAssembly.Module) return source;
  if (typeof source === 'string' || source instanceof URL) source = fetch(source);
  if (source && typeof source.then === 'function') source = await source;
  if (typeof Response !== 'undefined' && source instanceof Response) {
    if (!source.ok) {
      throw new Error(`cannot load the evaluator module: HTTP ${source.status} from ${source.url}`);
    }
    const type = source.headers.get('content-type') || '';
    if (typeof WebAssembly.compileStreaming === 'function' && type.split(';')[0].trim() === 'application/wasm') {
      return WebAssembly.compileStreaming(source);
    }
    source = await source.arrayBuffer();
  }
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return WebAssembly.compile(source);
  }
  throw new TypeError('loadEvaluator: source must be bytes, a Response or a URL');
}

/** Thrown by proc_exit: the Go runtime gave up (a panic or fatal error). */
class WasiExit extends Error {
  constructor(code) {
    super(`evaluator module exited with code ${code}`);
    this.code = code;
  }
}

// The WASI preview 1 functions the module imports (and nothing else): the Go
// runtime reads no arguments or environment, asks for time and randomness,
// writes panics to stderr, and sleeps or yields only when idle.
function wasiImports(state) {
  const ESUCCESS = 0, EBADF = 8, EINVAL = 28;
  const view = () => new DataView(state.memory.buffer);
  const bytes = () => new Uint8Array(state.memory.buffer);
  const now = (id) => {
    // 0 realtime, 1 monotonic (2 and 3, CPU time, read as monotonic).
    if (id === 0) return BigInt(Date.now()) * 1000000n;
    return BigInt(Math.round(performance.now() * 1e6));
  };
  return {
    args_sizes_get(argc, bufSize) {
      const v = view();
      v.setUint32(argc, 0, true);
      v.setUint32(bufSize, 0, true);
      return ESUCCESS;
    },
    args_get() { return ESUCCESS; },
    environ_sizes_get(count, bufSize) {
      const v = view();
      v.setUint32(count, 0, true);
      v.setUint32(bufSize, 0, true);
      return ESUCCESS;
    },
    environ_get() { return ESUCCESS; },
    clock_time_get(id, _precision, out) {
      if (id < 0 || id > 3) return EINVAL;
      view().setBigUint64(out, now(id), true);
      return ESUCCESS;
    },
    random_get(ptr, len) {
      // getRandomValues takes at most 65536 bytes at a time.
      for (let off = 0; off < len; off += 65536) {
        crypto.getRandomValues(new Uint8Array(state.memory.buffer, ptr + off, Math.min(65536, len - off)));
      }
      return ESUCCESS;
    },
    fd_write(fd, iovs, iovsLen, nwritten) {
      if (fd !== 1 && fd !== 2) return EBADF;
      const v = view();
      let n = 0;
      for (let i = 0; i < iovsLen; i++) {
        const ptr = v.getUint32(iovs + i * 8, true);
        const len = v.getUint32(iovs + i * 8 + 4, true);
        state.output += decoder.decode(bytes().subarray(ptr, ptr + len));
        n += len;
      }
      if (state.output.length > 4096) state.output = state.output.slice(-4096);
      v.setUint32(nwritten, n, true);
      return ESUCCESS;
    },
    poll_oneoff(inPtr, outPtr, nsubs, neventsPtr) {
      // Nothing here can block: every subscription is answered at once as
      // ready (a clock as expired), which the Go runtime handles as an
      // early wake-up.
      const v = view();
      for (let i = 0; i < nsubs; i++) {
        const sub = inPtr + i * 48, ev = outPtr + i * 32;
        v.setBigUint64(ev, v.getBigUint64(sub, true), true); // userdata
        v.setUint16(ev + 8, 0, true); // error
        const tag = v.getUint8(sub + 8);
        v.setUint8(ev + 10, tag); // type
        v.setBigUint64(ev + 16, 0n, true); // nbytes
        v.setUint16(ev + 24, 0, true); // flags
      }
      v.setUint32(neventsPtr, nsubs, true);
      return ESUCCESS;
    },
    sched_yield() { return ESUCCESS; },
    proc_exit(code) { throw new WasiExit(code); },
  };
}

/**
 * One instance of the evaluator module. Calls are synchronous. A call that
 * traps discards the instance; the next call starts a new one.
 */
class Evaluator {
  constructor(module) {
    this._module = module;
    this._state = null;
    this._docs = new Map();
    this._nextDoc = 1;
  }

  async _start() {
    const state = { memory: null, output: '' };
    const instance = await WebAssembly.instantiate(this._module, { wasi_snapshot_preview1: wasiImports(state) });
    this._init(state, instance);
  }

  _startSync() {
    const state = { memory: null, output: '' };
    const instance = new WebAssembly.Instance(this._module, { wasi_snapshot_preview1: wasiImports(state) });
    this._init(state, instance);
  }

  _init(state, instance) {
    const x = instance.exports;
    for (const name of ['memory', '_initialize', 'mf_input', 'mf_eval_case', 'mf_load', 'mf_free', 'mf_eval']) {
      if (!(name in x)) throw new Error(`cannot use the evaluator module: it does not export ${name}`);
    }
    state.memory = x.memory;
    x._initialize();
    this._state = state;
    this._x = x;
    this._loaded = new Map(); // document id → handle in this instance
  }

  // _call runs one export; a failure leaves the instance undefined, so it
  // is dropped and the next call starts a fresh one.
  _call(fn) {
    if (this._state === null) this._startSync();
    try {
      return fn(this._x);
    } catch (err) {
      const output = this._state.output;
      this._state = null;
      this._x = null;
      const e = new Error(`the evaluator instance failed: ${err && err.message}${output ? `; guest output: ${output}` : ''}`);
      e.cause = err;
      throw e;
    }
  }

  // _write copies bytes into the guest's input buffer.
  _write(x, data) {
    const ptr = x.mf_input(data.length);
    if (ptr === 0) throw new RangeError(`input of ${data.length} bytes is too large`);
    new Uint8Array(x.memory.buffer, ptr, data.length).set(data);
    return data.length;
  }

  _read(x, packed) {
    const ptr = Number(packed >> 32n), len = Number(packed & 0xffffffffn);
    return new Uint8Array(x.memory.buffer, ptr, len);
  }

  /**
   * Evaluates a flag (as in a compiled document) for facts ({id, userId,
   * properties, segments}; undefined means none).
   * @returns {object} the result: {variant, reason, rule?, value?} or
   *   {reason: 'ERROR', errorCode}
   */
  evaluate(flag, facts) {
    let line;
    try {
      const f = JSON.stringify(flag);
      const fa = facts === undefined ? 'null' : JSON.stringify(facts);
      if (f === undefined || fa === undefined) return JSON.parse(PARSE_ERROR);
      line = '{"flag":' + f + ',"facts":' + fa + '}';
    } catch {
      // Cycles and BigInts cannot be written as JSON.
      return JSON.parse(PARSE_ERROR);
    }
    return this.evaluateCase(line);
  }

  /**
   * Evaluates one case given as JSON text or UTF-8 bytes,
   * {"flag": {...}, "facts": {...}}: one `mf eval` input line.
   * @returns {object} the result, as evaluate
   */
  evaluateCase(line) {
    const data = typeof line === 'string' ? encoder.encode(line) : line;
    const text = this._call((x) => decoder.decode(this._read(x, x.mf_eval_case(this._write(x, data)))));
    return JSON.parse(text);
  }

  /**
   * Loads a flag document (browser or server view) once, to evaluate its
   * flags by key without sending them again.
   * @param {object|string|ArrayBufferView} doc the document, or its JSON text
   * @returns {{evaluate(key: string, facts?: object): object|undefined, free(): void}}
   */
  loadDocument(doc) {
    const data = typeof doc === 'string' ? encoder.encode(doc)
      : ArrayBuffer.isView(doc) ? new Uint8Array(doc.buffer, doc.byteOffset, doc.byteLength)
        : encoder.encode(JSON.stringify(doc));
    const id = this._nextDoc++;
    const self = this;
    this._docs.set(id, { data });
    // Parse it now, so that an unreadable document fails here.
    this._handle(id);
    return {
      /** Evaluates flag key; undefined when the document has no such flag. */
      evaluate(key, facts) {
        let text;
        try {
          text = facts === undefined ? 'null' : JSON.stringify(facts);
        } catch {
          return JSON.parse(PARSE_ERROR);
        }
        if (text === undefined) return JSON.parse(PARSE_ERROR);
        return self._evalKey(id, key, encoder.encode(text));
      },
      /** Releases the document. */
      free() {
        const h = self._loaded && self._loaded.get(id);
        self._docs.delete(id);
        if (h !== undefined && self._state !== null) {
          self._loaded.delete(id);
          self._call((x) => x.mf_free(h));
        }
      },
    };
  }

  // _handle returns the document's handle in the current instance, loading
  // it there first if needed (after a failure, into the new instance).
  _handle(id) {
    const entry = this._docs.get(id);
    if (entry === undefined) throw new Error('the document was freed');
    const h = this._call((x) => {
      let h = this._loaded.get(id);
      if (h === undefined) {
        h = x.mf_load(this._write(x, entry.data));
        if (h !== 0) this._loaded.set(id, h);
      }
      return h;
    });
    if (h === 0) {
      this._docs.delete(id);
      throw new SyntaxError('the flag document is unreadable (evaluator.ParseDocument rejects it)');
    }
    return h;
  }

  _evalKey(id, key, facts) {
    const h = this._handle(id);
    const k = encoder.encode(key);
    const out = this._call((x) => {
      const n = k.length + facts.length;
      const ptr = x.mf_input(n);
      if (ptr === 0) throw new RangeError(`input of ${n} bytes is too large`);
      const input = new Uint8Array(x.memory.buffer, ptr, n);
      input.set(k);
      input.set(facts, k.length);
      const b = this._read(x, x.mf_eval(h, k.length, facts.length, 1));
      return { status: b[0], text: decoder.decode(b.subarray(1)) };
    });
    switch (out.status) {
      case STATUS_OK: return JSON.parse(out.text);
      case STATUS_NO_FLAG: return undefined;
      case STATUS_BAD_FACTS: return JSON.parse(PARSE_ERROR);
      default: throw new Error(`the evaluator answered status ${out.status}`);
    }
  }
}
