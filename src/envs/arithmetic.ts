/**
 * Arithmetic with a calculator: the task is an expression such as "23 + 58 * 3", drawn from the
 * seed; the model may call tools (the calculator by default) and then answers, and the answer is
 * scored against the exact value by a reward spec (numeric_match by default).
 *
 * A task is a pure function of the seed and the options, so durable recovery rebuilds the same
 * episode. A fixed share of tasks (by a hash of the expression) is held out for evaluation:
 * training never draws them, evaluation draws only them.
 */
import { z } from 'zod';
import { isHeldOut } from '../core/heldOut';
import { createRng, type Rng } from '../core/random';
import { validateRewardSpec, type RewardSpec } from '../rewards/registry';
import { calculatorTool } from '../tools/calculator';
import type { Tool } from '../tools/tool';
import type { EnvironmentRegistrar, InstancePool } from './definition';
import type { Task } from './taskEnvironment';
import { ToolEnvironment } from './toolEnvironment';

export const ARITHMETIC_OPERATORS = ['+', '-', '*', '/'] as const;
export type ArithmeticOperator = (typeof ARITHMETIC_OPERATORS)[number];

export const ArithmeticOptionsSchema = z.strictObject({
  /**
   * Digits of each operand (a divisor may have fewer). At most 4, so that every value (up to
   * 9999^3) is an exact integer in a float and the reference is exact.
   */
  digits: z.number().int().min(1).max(4).default(2),
  /** Operands in the expression. */
  terms: z.number().int().min(2).max(3).default(2),
  /** Operators drawn from; a division always divides evenly, so every answer is an integer. */
  operators: z.array(z.enum(ARITHMETIC_OPERATORS)).min(1).default(['+', '-', '*']),
  /** Registered tools offered to the model, by name. */
  tools: z
    .array(z.string().min(1))
    .min(1)
    .refine((names) => new Set(names).size === names.length, 'tool names must be unique')
    .default(['calculator']),
  /** How the answer is scored; checked here, so a bad spec fails config loading, not an episode. */
  reward: z
    .custom<RewardSpec>()
    .superRefine((spec, ctx) => {
      const validated = validateRewardSpec(spec);
      if (!validated.ok) ctx.addIssue({ code: 'custom', message: validated.error });
    })
    .default({ name: 'numeric_match' }),
  /** What the model is asked to do, first in a tool agent's system prompt. Keep it short. */
  instructions: z.string().min(1).default('Compute the answer. Use the calculator tool.'),
  /** Per tool call; default: ToolEnvironment's. */
  toolTimeoutMs: z.number().int().positive().optional(),
  /** Share of tasks (by a hash of the expression) reserved for evaluation; 0 = no split. */
  heldOutShare: z.number().min(0).max(0.5).default(0.2),
});

export type ArithmeticOptions = z.output<typeof ArithmeticOptionsSchema>;

/** What decides the shape of a task. */
export interface ArithmeticTaskSpec {
  digits: number;
  terms: number;
  operators: readonly ArithmeticOperator[];
}

export interface ArithmeticTask extends Task {
  /** The expression asked about, as written in the prompt (the calculator reads it as is). */
  expression: string;
  /** Its exact value, an integer. */
  reference: string;
}

/** Which side of the held-out split to draw from. */
export interface ArithmeticSplit {
  share: number;
  pool: InstancePool;
}

/** Draws tried before giving up on finding a task on the asked side of the split. */
const MAX_DRAWS = 10_000;

/** Whether an expression belongs to the held-out share: a fixed function of the expression alone. */
export function isHeldOutTask(expression: string, share: number): boolean {
  return isHeldOut(expression, share);
}

/**
 * The task of `seed`. Tasks on the wrong side of `split` are redrawn from the same stream, so a
 * seed always gives the same task; without a split, any task may come.
 */
export function generateTask(seed: number, spec: ArithmeticTaskSpec, split?: ArithmeticSplit): ArithmeticTask {
  checkSpec(spec);
  const rng = createRng(seed);
  for (let draw = 0; draw < MAX_DRAWS; draw++) {
    const task = drawTask(rng, spec);
    if (!split || isHeldOutTask(task.expression, split.share) === (split.pool === 'eval')) return task;
  }
  throw new Error(`arithmetic: no task in the ${split!.pool} pool (held-out share ${split!.share}) after ${MAX_DRAWS} draws; widen digits, terms or operators`);
}

/** The options schema's limits, for callers that build a spec by hand. */
function checkSpec({ digits, terms, operators }: ArithmeticTaskSpec): void {
  if (!(Number.isInteger(digits) && digits >= 1 && digits <= 4)) throw new Error(`arithmetic: digits must be an integer from 1 to 4, got ${digits}`);
  if (!(Number.isInteger(terms) && terms >= 2 && terms <= 3)) throw new Error(`arithmetic: terms must be 2 or 3, got ${terms}`);
  if (operators.length === 0 || operators.some((op) => !ARITHMETIC_OPERATORS.includes(op))) {
    throw new Error(`arithmetic: operators must be a non-empty list of ${ARITHMETIC_OPERATORS.join(' ')}, got ${JSON.stringify(operators)}`);
  }
}

/**
 * One random task. The value is computed here, term by term with the usual precedence, rather
 * than by the calculator's parser, so the two check each other; and a divisor is drawn from the
 * divisors of what it divides, which keeps every division exact.
 */
function drawTask(rng: Rng, { digits, terms, operators }: ArithmeticTaskSpec): ArithmeticTask {
  const max = 10 ** digits - 1;
  const operand = () => randomInt(rng, 10 ** (digits - 1), max);
  let value = operand();
  const parts = [String(value)];
  // `value` is the product being built (the next * or / applies to it), `sign` the sign it will
  // be added with, `total` the sum of the products before it.
  let total = 0;
  let sign = 1;
  for (let i = 1; i < terms; i++) {
    const op = pick(rng, operators);
    const next = op === '/' ? pick(rng, divisors(value, max)) : operand();
    if (op === '*') value *= next;
    else if (op === '/') value /= next;
    else {
      total += sign * value;
      sign = op === '+' ? 1 : -1;
      value = next;
    }
    parts.push(op, String(next));
  }
  const expression = parts.join(' ');
  return { prompt: `What is ${expression}?`, expression, reference: String(total + sign * value) };
}

/** Divisors of `n` (a non-negative integer) from 1 to `max`; every one of them for 0. */
function divisors(n: number, max: number): number[] {
  const found: number[] = [];
  for (let d = 1; d <= max; d++) if (n % d === 0) found.push(d);
  return found;
}

function randomInt(rng: Rng, min: number, max: number): number {
  return min + Math.floor(rng() * (max - min + 1));
}

function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[randomInt(rng, 0, items.length - 1)];
}

/** Where an instance comes from: its seed, its side of the split, and the tools it offers. */
export interface ArithmeticInstance {
  seed: number;
  pool: InstancePool;
  tools: readonly Tool[];
}

export class ArithmeticEnvironment extends ToolEnvironment<ArithmeticTask> {
  constructor(options: ArithmeticOptions, { seed, pool, tools }: ArithmeticInstance) {
    super({
      // With no held-out share, evaluation draws from all tasks, as training does.
      task: generateTask(seed, options, options.heldOutShare > 0 ? { share: options.heldOutShare, pool } : undefined),
      tools,
      scorer: options.reward,
      instructions: options.instructions,
      toolTimeoutMs: options.toolTimeoutMs,
    });
  }
}

/** Registers the `calculator` tool and the `arithmetic` environment. */
export function registerArithmetic(api: EnvironmentRegistrar): void {
  api.registerTool(calculatorTool);
  api.registerEnvironment('arithmetic', {
    options: ArithmeticOptionsSchema,
    create: (options, { seed, pool, tools }) => new ArithmeticEnvironment(options, { seed, pool, tools: tools(options.tools) }),
    describe: (options) => `arithmetic-${options.digits}d-${options.terms}t`,
  });
}
