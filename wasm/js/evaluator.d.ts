// Type declarations for evaluator.mjs, the mf flag evaluator for browsers
// and Node 20+. See docs/wasm.md.

/** Any JSON value. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** A condition of a rule: a property test or a segment test. */
export type Condition =
  | ['p', string, 'is' | 'not' | 'has' | 'nhas' | 'pre' | 'gt' | 'lt' | 'set' | 'unset', JSONValue]
  | ['s', string]
  | ['s', string, 1];

/** A rule: fixed (x) or split (sh, w). */
export interface Rule {
  if?: Condition[];
  x?: string;
  sh?: number;
  w?: [string, number][];
  [unknown: string]: unknown;
}

/** A flag as in a compiled flag document (ingest-and-flags specification, "Flag"). */
export interface Flag {
  s: string;
  t: 'b' | 'm' | 'c';
  u: 'b' | 'p';
  d: string;
  p?: { [variant: string]: JSONValue };
  r: Rule[];
  off?: 1;
  e?: string;
  c?: string;
  need?: number;
  w?: 1;
  [unknown: string]: unknown;
}

/** What a flag is evaluated against. */
export interface Facts {
  /** The anonymous id: the unit of flags with u = "b". */
  id?: string;
  /** The signed-in person's id: the unit of flags with u = "p". */
  userId?: string;
  properties?: { [name: string]: JSONValue };
  segments?: { in?: string[]; unavailable?: string[] } | 'pending' | 'unavailable';
  [unknown: string]: unknown;
}

/** A decision. */
export interface Decision {
  variant: string;
  reason: 'STATIC' | 'TARGETING_MATCH' | 'SPLIT' | 'DEFAULT' | 'DISABLED';
  /** 0-based index of the deciding rule; absent for DISABLED and the final DEFAULT. */
  rule?: number;
  /** p[variant], when the flag has a value for the variant. */
  value?: JSONValue;
}

/** A failure: no variant, the caller's fallback applies. */
export interface Failure {
  reason: 'ERROR';
  errorCode: 'UNSUPPORTED' | 'NOT_READY' | 'PARSE_ERROR';
}

/** The result of an evaluation: the same fields and values as a `mf eval` output line. */
export type Result = Decision | Failure;

/** A flag document loaded into the evaluator. */
export interface LoadedDocument {
  /** Evaluates the document's flag key; undefined when the document has no such flag. */
  evaluate(key: string, facts?: Facts): Result | undefined;
  /** Releases the document. */
  free(): void;
}

/** One instance of the evaluator module. Calls are synchronous. */
export interface Evaluator {
  /** Evaluates a flag for facts (undefined: no facts). */
  evaluate(flag: Flag, facts?: Facts): Result;
  /** Evaluates one case given as JSON text or UTF-8 bytes: {"flag": …, "facts": …}. */
  evaluateCase(line: string | Uint8Array): Result;
  /**
   * Loads a flag document (an object, its JSON text or its UTF-8 bytes) to
   * evaluate its flags by key without sending them again. Throws a
   * SyntaxError when the document is unreadable.
   */
  loadDocument(doc: object | string | Uint8Array): LoadedDocument;
}

/**
 * Loads the evaluator module: its bytes, a fetch Response for it, or its
 * URL (fetched; served as application/wasm it compiles while it downloads).
 */
export function loadEvaluator(
  source: ArrayBuffer | ArrayBufferView | Response | Promise<Response> | string | URL | WebAssembly.Module,
): Promise<Evaluator>;
