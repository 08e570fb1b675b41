/**
 * Which workers may serve a run. A worker takes the parts of its behaviour that are not in the
 * workflow input from its own config and code: the model architecture and initial weights
 * (inference, trainer), the plugin modules (env, trainer), and the code itself. A run records
 * the fingerprint of its own when it starts; a worker whose fingerprint differs refuses the task
 * with a message saying what differs, as a retryable failure, so that a matching worker takes
 * the retry and nothing is lost. Pure.
 */
import { hashString } from './random';

export interface Compatibility {
  /** The code's build: `TRAJFLOW_BUILD_ID` if set (a deploy's git sha), else the package version. */
  code: string;
  /** Hash of the model section (architecture, seed, initial checkpoint path). */
  model: string;
  /** Hash of the plugin module paths. */
  modules: string;
}

export type CompatibilityPart = keyof Compatibility;

/** The parts each worker role depends on. */
export const ROLE_PARTS = {
  inference: ['code', 'model'],
  env: ['code', 'modules'],
  trainer: ['code', 'model', 'modules'],
} as const satisfies Record<string, readonly CompatibilityPart[]>;

/** Stable JSON: object keys sorted, so the same settings always hash the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function digest(value: unknown): string {
  return hashString(canonical(value)).toString(16).padStart(8, '0');
}

export function compatibilityOf(settings: { model: unknown; modules: readonly string[] }, build: string): Compatibility {
  return { code: build, model: digest(settings.model), modules: digest(settings.modules) };
}

/** What differs between the run's fingerprint and a worker's, for the parts the role depends on. */
export function incompatibilities(run: Compatibility, worker: Compatibility, parts: readonly CompatibilityPart[]): string[] {
  return parts.filter((part) => run[part] !== worker[part]).map((part) => `${part} differs (run ${run[part]}, worker ${worker[part]})`);
}
