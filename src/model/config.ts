/** Architecture of the embedded policy: a small decoder-only transformer over the byte tokenizer. */
import { VOCAB_SIZE } from '../core/tokenizer';

export interface ModelConfig {
  vocabSize: number;
  dModel: number;
  nLayers: number;
  nHeads: number;
  /** Width of the MLP's hidden layer. */
  dFF: number;
  /** Most tokens (prompt + completion) a sequence may hold: the number of learned positions. */
  maxContext: number;
}

export const DEFAULT_MODEL_CONFIG: Readonly<ModelConfig> = {
  vocabSize: VOCAB_SIZE,
  dModel: 64,
  nLayers: 2,
  nHeads: 4,
  dFF: 256,
  maxContext: 1024,
};

const FIELDS: readonly (keyof ModelConfig)[] = ['vocabSize', 'dModel', 'nLayers', 'nHeads', 'dFF', 'maxContext'];

/** The default architecture with `overrides` applied, validated. */
export function modelConfig(overrides: Partial<ModelConfig> = {}): ModelConfig {
  const config = { ...DEFAULT_MODEL_CONFIG, ...overrides };
  const problem = configProblem(config);
  if (problem) throw new Error(`invalid model config: ${problem}`);
  return config;
}

/** Why `value` is not a usable ModelConfig, or undefined if it is. Checks untrusted input too. */
export function configProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return 'not an object';
  const record = value as Record<string, unknown>;
  for (const field of FIELDS) {
    const v = record[field];
    if (!Number.isSafeInteger(v) || (v as number) <= 0) return `${field} must be a positive integer, got ${JSON.stringify(v)}`;
  }
  const extra = Object.keys(record).filter((key) => !FIELDS.includes(key as keyof ModelConfig));
  if (extra.length > 0) return `unknown field(s) ${extra.join(', ')}`;
  const config = value as ModelConfig;
  if (config.dModel % config.nHeads !== 0) return `dModel (${config.dModel}) must be divisible by nHeads (${config.nHeads})`;
  return undefined;
}

/** Names of the fields where `a` and `b` differ. */
export function configDifferences(a: ModelConfig, b: ModelConfig): string[] {
  return FIELDS.filter((field) => a[field] !== b[field]).map((field) => `${field} ${a[field]} vs ${b[field]}`);
}

export function headDim(config: ModelConfig): number {
  return config.dModel / config.nHeads;
}
