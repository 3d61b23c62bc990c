// Type declarations for provider.mjs, the OpenFeature web provider for mf.
import type { EvaluationContext, JsonValue, OpenFeatureEventEmitter, Provider, ResolutionDetails } from '@openfeature/web-sdk';

/** What the provider needs of an mf browser client (init's result). */
export interface MfFlagClient {
  flag(key: string, properties?: { [key: string]: unknown }): Promise<unknown>;
  flags(properties?: { [key: string]: unknown }): Promise<{ [key: string]: unknown }>;
}

/** Maps an mf answer to OpenFeature resolution details. */
export function toResolution<T>(answer: unknown, type: 'boolean' | 'string' | 'number' | 'object', defaultValue: T): ResolutionDetails<T>;

export class MfProvider implements Provider {
  constructor(client: MfFlagClient);
  readonly metadata: { name: 'mf' };
  readonly runsOn: 'client';
  readonly events: OpenFeatureEventEmitter;
  hooks: [];
  initialize(context?: EvaluationContext): Promise<void>;
  onContextChange(oldContext: EvaluationContext, newContext: EvaluationContext): Promise<void>;
  /** Evaluates again (after the visitor's consent or sign-in) and emits ConfigurationChanged. */
  refresh(context?: EvaluationContext): Promise<void>;
  resolveBooleanEvaluation(key: string, defaultValue: boolean): ResolutionDetails<boolean>;
  resolveStringEvaluation(key: string, defaultValue: string): ResolutionDetails<string>;
  resolveNumberEvaluation(key: string, defaultValue: number): ResolutionDetails<number>;
  resolveObjectEvaluation<T extends JsonValue>(key: string, defaultValue: T): ResolutionDetails<T>;
}
