// OpenFeature web provider for mf: resolves flags for @openfeature/web-sdk
// from an mf browser client (mf.mjs). The web SDK resolves synchronously,
// so the provider evaluates every flag of the document when it starts and
// when the evaluation context changes (mf.flags), answers from those
// results, and asks the client for the flag in the background so that an
// experiment's exposure is sent as mf.flag sends it.
//
//   import { OpenFeature } from '@openfeature/web-sdk';
//   import { init } from 'https://mf.example/v1/sdk/mf.mjs';
//   import { MfProvider } from 'mf-openfeature-web';
//   await OpenFeature.setProviderAndWait(new MfProvider(init({ key: 'mf_…' })));
//   OpenFeature.getClient().getBooleanValue('dark-mode', false);
import { OpenFeatureEventEmitter, ProviderEvents } from '@openfeature/web-sdk';

// mf's reasons are OpenFeature's standard reasons, one to one.
const REASONS = new Set(['STATIC', 'TARGETING_MATCH', 'SPLIT', 'DEFAULT', 'DISABLED', 'ERROR']);

// mf's error codes as OpenFeature error codes.
const ERRORS = {
  NOT_READY: 'PROVIDER_NOT_READY',
  FLAG_NOT_FOUND: 'FLAG_NOT_FOUND',
  PARSE_ERROR: 'PARSE_ERROR',
  UNSUPPORTED: 'GENERAL',
};

/** The properties an evaluation context gives the facts: every attribute but targetingKey. */
function properties(context) {
  const p = {};
  for (const [k, v] of Object.entries(context || {})) {
    if (k === 'targetingKey' || v === undefined) continue;
    p[k] = v instanceof Date ? v.toISOString() : v;
  }
  return p;
}

/**
 * Maps an mf answer to OpenFeature resolution details for a flag of type
 * type ('boolean', 'string', 'number' or 'object'), with defaultValue on
 * error. Exported for tests.
 */
export function toResolution(answer, type, defaultValue) {
  if (!answer) return { value: defaultValue, reason: 'ERROR', errorCode: 'FLAG_NOT_FOUND', errorMessage: 'no such flag in the flag document' };
  if (answer.reason === 'ERROR') {
    return { value: defaultValue, reason: 'ERROR', errorCode: ERRORS[answer.errorCode] || 'GENERAL', errorMessage: `mf: ${answer.errorCode}` };
  }
  let value = answer.value;
  if (type === 'boolean' && typeof value !== 'boolean') value = answer.variant === 'on' ? true : answer.variant === 'off' ? false : undefined;
  if (type === 'string' && typeof value !== 'string') value = answer.variant;
  const ok = type === 'object' ? value !== null && typeof value === 'object' : typeof value === type;
  if (!ok) {
    return { value: defaultValue, reason: 'ERROR', errorCode: 'TYPE_MISMATCH', errorMessage: `mf: flag variant ${answer.variant} has no ${type} value` };
  }
  const details = { value, variant: answer.variant, reason: REASONS.has(answer.reason) ? answer.reason : 'UNKNOWN' };
  if (answer.rule !== undefined) details.flagMetadata = { rule: answer.rule };
  return details;
}

/** The OpenFeature web provider over an mf browser client. */
export class MfProvider {
  constructor(client) {
    this.metadata = { name: 'mf' };
    this.runsOn = 'client';
    this.events = new OpenFeatureEventEmitter();
    this.hooks = [];
    this._client = client;
    this._answers = {};
  }

  async initialize(context) {
    await this._load(context);
  }

  async onContextChange(_old, context) {
    await this._load(context);
  }

  /** Evaluates again (after mf.consent or mf.identify) and tells the SDK. */
  async refresh(context) {
    await this._load(context);
    this.events.emit(ProviderEvents.ConfigurationChanged, { flagsChanged: Object.keys(this._answers) });
  }

  async _load(context) {
    this._context = context;
    this._answers = await this._client.flags(properties(context));
  }

  _resolve(key, type, defaultValue) {
    const answer = this._answers[key];
    const details = toResolution(answer, type, defaultValue);
    // The client sends the exposure of an experiment when it is read.
    if (!details.errorCode) this._client.flag(key, properties(this._context)).catch(() => {});
    return details;
  }

  resolveBooleanEvaluation(key, defaultValue) { return this._resolve(key, 'boolean', defaultValue); }
  resolveStringEvaluation(key, defaultValue) { return this._resolve(key, 'string', defaultValue); }
  resolveNumberEvaluation(key, defaultValue) { return this._resolve(key, 'number', defaultValue); }
  resolveObjectEvaluation(key, defaultValue) { return this._resolve(key, 'object', defaultValue); }
}
