// Type declarations for mf.mjs, the mf browser client. See docs/browser.md.

/** Any JSON value. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [key: string]: JSONValue };

/** Event properties: a JSON object (at most 64 keys, 64 values, 5 levels, 32,768 bytes). */
export type Properties = { [key: string]: JSONValue };

/** The visitor's consent answer. */
export type Consent = 'pending' | 'granted' | 'denied';

/** Options of init. Any bad option after `key` logs one warning and takes its default. */
export interface Options {
  /** The website key, `mf_…` (required). */
  key: string;
  /** The ingest base URL; default: the origin the module was loaded from. */
  endpoint?: string;
  /** The collection ceiling: "consentless" (default) or "full". */
  mode?: 'consentless' | 'full';
  /** The consent answer when the page starts: "pending" (default), "granted" or "denied". */
  consent?: Consent;
  /** "auto" (default: the first page and every SPA navigation) or "manual". */
  pageviews?: 'auto' | 'manual';
  /** The site routes by hash: keep the fragment (its query cleaned). Default false. */
  hashRouting?: boolean;
  /** Send $autocapture for clicks, submits and changes. Default false. */
  autocapture?: boolean;
  /** Fetch the flag document when the page starts. Default true. */
  flags?: boolean;
  /** Refresh the flag document on read at most this often; at least 10, default 30. */
  refreshSeconds?: number;
}

/** A flag's answer. */
export interface Decision {
  variant: string;
  /** STATIC also for answers of the values view (no definitions, no facts). */
  reason: 'STATIC' | 'TARGETING_MATCH' | 'SPLIT' | 'DEFAULT' | 'DISABLED';
  /** 0-based index of the deciding rule; absent for DISABLED and the final DEFAULT. */
  rule?: number;
  /** The flag's value for the variant, when it has one. */
  value?: JSONValue;
}

/** No answer: the caller's fallback applies. */
export interface Failure {
  reason: 'ERROR';
  /** NOT_READY: no document (yet); FLAG_NOT_FOUND: the document has no such flag. */
  errorCode: 'NOT_READY' | 'UNSUPPORTED' | 'PARSE_ERROR' | 'FLAG_NOT_FOUND';
}

export type FlagResult = Decision | Failure;

/** The client of one page. Every method is safe to call at any time. */
export interface Client {
  /** Sends a $pageview now (what pageviews: "auto" sends). */
  page(): void;
  /** Sends a custom event; `revenue` (number) and `currency` (ISO 4217) carry meaning. */
  track(name: string, properties?: Properties): void;
  /** Names the signed-in person (full mode with consent only). */
  identify(userId: string, traits?: Properties): void;
  /** Sends a site search (full mode with consent only). */
  search(query: string): void;
  /** The visitor's answer; "denied" removes everything the client wrote. */
  consent(answer: 'granted' | 'denied'): void;
  /**
   * A flag's answer, computed by the flag evaluator as the server would.
   * properties are added to the traits of identify as the facts' properties.
   */
  flag(key: string, properties?: Properties): Promise<FlagResult>;
  /**
   * Every flag of the flag document, answered as flag() answers, without
   * sending exposures (for providers that resolve synchronously, such as
   * OpenFeature's web provider).
   */
  flags(properties?: Properties): Promise<{ [key: string]: FlagResult }>;
  /** Sends what is queued now. */
  flush(): Promise<void>;
  /** Sign-out: forgets the user id and starts a new anonymous id. */
  reset(): void;
}

/** The version of the module, as in its URL /v1/sdk/{version}/mf.mjs. */
export const VERSION: string;

/** Starts the client in this page. Throws a TypeError only without a key. */
export function init(options: Options): Client;

/** Cleans a URL by the specification's three steps. */
export function cleanUrl(url: string, hashRouting: boolean): string;
/** A referrer as sent: scheme, host and path. */
export function cleanReferrer(referrer: string): string;
/** Whether nothing is sent from this address (localhost, 127.*, [::1], *.local, file:). */
export function localAddress(hostname: string, protocol: string): boolean;
/** Whether a batch answered with this status (0: no answer) is sent again. */
export function retryable(status: number): boolean;
/** The wait in ms before retry n. */
export function retryDelay(n: number, status: number, retryAfter: string | null, random: () => number, now: number): number;
/** Splits encoded events into batch groups within the limits. */
export function packBatches(events: string[], maxEvents: number, maxBytes: number, overhead: number): string[][];
/** A random version 4 UUID. */
export function uuid(): string;
/** The client over another environment (tests). */
export function createClient(options: Options, env: object): Client;
