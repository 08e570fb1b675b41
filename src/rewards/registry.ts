/**
 * Rewards by name, configured as `{ name, options }` or as a weighted sum
 * `{ name: 'weighted', parts: [{ name, weight, options }] }`.
 *
 * Scoring never throws and never turns a failure into 0: a reward that throws (sync or async), or
 * returns something other than a finite number, gives `{ ok: false, error }`, so a broken reward
 * shows up in the run instead of quietly teaching the policy that every answer is wrong.
 */
import { z } from 'zod';
import { describeIssuesInline } from '../core/issues';
import { BUILTIN_REWARDS } from './builtins';
import type { RewardDefinition, RewardInput } from './reward';

export type { RewardDefinition, RewardInput } from './reward';

const WEIGHTED = 'weighted';

const rewards = new Map<string, RewardDefinition>(Object.entries(BUILTIN_REWARDS));

/**
 * Adds a reward under a new name. Without an options schema the reward takes no options (a spec
 * that gives some is rejected rather than silently ignored).
 */
export function registerReward<S extends z.ZodType = z.ZodUndefined>(
  name: string,
  score: (input: RewardInput, options: z.output<S>) => number | Promise<number>,
  options?: S,
): void {
  if (name === '' || name === WEIGHTED || rewards.has(name)) throw new Error(`reward name ${JSON.stringify(name)} is empty or taken`);
  rewards.set(name, { options: options ?? z.undefined(), score });
}

export function knownRewards(): string[] {
  return [...rewards.keys(), WEIGHTED];
}

export function getReward(name: string): RewardDefinition {
  const reward = rewards.get(name);
  if (reward) return reward;
  if (name === WEIGHTED) throw new Error(`"${WEIGHTED}" combines other rewards and has no function of its own; score it with scoreReward`);
  throw new Error(`unknown reward ${JSON.stringify(name)}; known rewards: ${knownRewards().join(', ')}`);
}

const partSchema = z.strictObject({ name: z.string().min(1), weight: z.number().finite(), options: z.unknown().optional() });
const weightedSchema = z.strictObject({ name: z.literal(WEIGHTED), parts: z.array(partSchema).min(1) });
const singleSchema = z.strictObject({ name: z.string().min(1), options: z.unknown().optional() });

export type RewardSpec = z.input<typeof singleSchema> | z.input<typeof weightedSchema>;

interface ResolvedReward {
  name: string;
  reward: RewardDefinition;
  options: unknown;
}

export type ValidatedRewardSpec =
  | { ok: true; kind: 'single'; reward: ResolvedReward }
  | { ok: true; kind: 'weighted'; parts: (ResolvedReward & { weight: number })[] }
  | { ok: false; error: string };

/** Checks a spec (shape, reward names, each reward's options) without scoring; for config loading too. */
export function validateRewardSpec(spec: unknown): ValidatedRewardSpec {
  const isWeighted = typeof spec === 'object' && spec !== null && (spec as { name?: unknown }).name === WEIGHTED;
  if (!isWeighted) {
    const parsed = singleSchema.safeParse(spec);
    if (!parsed.success) return { ok: false, error: `invalid reward spec: ${describeIssuesInline(parsed.error.issues, '(spec)')}` };
    const resolved = resolve(parsed.data.name, parsed.data.options);
    return 'error' in resolved ? { ok: false, error: resolved.error } : { ok: true, kind: 'single', reward: resolved };
  }
  const parsed = weightedSchema.safeParse(spec);
  if (!parsed.success) return { ok: false, error: `invalid weighted reward spec: ${describeIssuesInline(parsed.error.issues, '(spec)')}` };
  const parts: (ResolvedReward & { weight: number })[] = [];
  for (const [i, part] of parsed.data.parts.entries()) {
    const resolved = part.name === WEIGHTED ? { error: 'weighted rewards cannot be nested' } : resolve(part.name, part.options);
    if ('error' in resolved) return { ok: false, error: `weighted part ${i + 1} (${part.name}): ${resolved.error}` };
    parts.push({ ...resolved, weight: part.weight });
  }
  return { ok: true, kind: 'weighted', parts };
}

function resolve(name: string, rawOptions: unknown): ResolvedReward | { error: string } {
  let reward: RewardDefinition;
  try {
    reward = getReward(name);
  } catch (err) {
    return { error: (err as Error).message };
  }
  const options = reward.options.safeParse(rawOptions);
  if (!options.success) {
    const issues = options.error.issues.map((issue) => ({ ...issue, path: ['options', ...issue.path] }));
    return { error: `invalid options for reward ${JSON.stringify(name)}: ${describeIssuesInline(issues, '(options)')}` };
  }
  return { name, reward, options: options.data };
}

export type RewardScore = { ok: true; value: number; parts?: { name: string; weight: number; value: number }[] } | { ok: false; error: string };

/** Scores one answer; a weighted spec is Σ weight·value of its parts, and fails if any part fails. */
export async function scoreReward(spec: unknown, input: RewardInput): Promise<RewardScore> {
  const validated = validateRewardSpec(spec);
  if (!validated.ok) return validated;
  if (validated.kind === 'single') return run(validated.reward, input);

  const scores = await Promise.all(validated.parts.map((part) => run(part, input)));
  const parts: { name: string; weight: number; value: number }[] = [];
  for (const [i, score] of scores.entries()) {
    const { name, weight } = validated.parts[i];
    if (!score.ok) return { ok: false, error: `weighted part ${i + 1} (${name}): ${score.error}` };
    parts.push({ name, weight, value: score.value });
  }
  return { ok: true, value: parts.reduce((sum, p) => sum + p.weight * p.value, 0), parts };
}

async function run({ name, reward, options }: ResolvedReward, input: RewardInput): Promise<RewardScore> {
  let value: unknown;
  try {
    value = await reward.score(input, options);
  } catch (err) {
    return { ok: false, error: `reward ${JSON.stringify(name)} threw: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return { ok: false, error: `reward ${JSON.stringify(name)} returned ${typeof value === 'number' ? value : typeof value}, not a finite number` };
  }
  return { ok: true, value };
}
