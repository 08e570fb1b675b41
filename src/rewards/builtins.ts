/**
 * The rewards every run can name: exact answer, numeric answer within a tolerance, and answer
 * format. Each compares the model's answer with `input.reference`, the expected answer the
 * environment supplies; a missing reference is a data error and throws (recorded as a scoring
 * error, not as a 0 the policy would learn from).
 */
import { z } from 'zod';
import type { RewardDefinition, RewardInput } from './reward';

const exactOptions = z
  .strictObject({
    /** Ignore leading and trailing whitespace. */
    trim: z.boolean().default(true),
    ignoreCase: z.boolean().default(true),
  })
  .prefault({});

const numericOptions = z
  .strictObject({
    absTol: z.number().nonnegative().default(0),
    /** Relative to the reference; the default absorbs float noise (0.1 + 0.2 vs 0.3) only. */
    relTol: z.number().nonnegative().default(1e-9),
    /** Read `3/4` as 0.75 rather than as the number 4. */
    fractions: z.boolean().default(true),
  })
  .prefault({});

const formatOptions = z
  .strictObject({
    /** A JavaScript regular expression, searched for anywhere in the answer (anchor it with ^…$). */
    pattern: z.string(),
    flags: z.string().default(''),
  })
  .superRefine(({ pattern, flags }, ctx) => {
    try {
      new RegExp(pattern, flags);
    } catch (err) {
      ctx.addIssue({ code: 'custom', path: ['pattern'], message: (err as Error).message });
    }
  });

export const BUILTIN_REWARDS = {
  exact_match: {
    options: exactOptions,
    score: (input, { trim, ignoreCase }) => {
      const normalize = (text: string) => {
        const trimmed = trim ? text.trim() : text;
        return ignoreCase ? trimmed.toLowerCase() : trimmed;
      };
      return normalize(input.answer) === normalize(reference(input, 'exact_match')) ? 1 : 0;
    },
  } satisfies RewardDefinition<typeof exactOptions>,

  numeric_match: {
    options: numericOptions,
    score: (input, { absTol, relTol, fractions }) => {
      const ref = reference(input, 'numeric_match');
      const expected = extractLastNumber(ref, { fractions });
      if (expected === undefined) throw new Error(`numeric_match: reference ${JSON.stringify(ref)} holds no number`);
      const got = extractLastNumber(input.answer, { fractions });
      if (got === undefined) return 0;
      return Math.abs(got - expected) <= Math.max(absTol, relTol * Math.abs(expected)) ? 1 : 0;
    },
  } satisfies RewardDefinition<typeof numericOptions>,

  format: {
    options: formatOptions,
    score: (input, { pattern, flags }) => (new RegExp(pattern, flags).test(input.answer) ? 1 : 0),
  } satisfies RewardDefinition<typeof formatOptions>,
};

function reference(input: RewardInput, reward: string): string {
  if (typeof input.reference !== 'string') throw new Error(`${reward} needs input.reference (the expected answer) as a string`);
  return input.reference;
}

const NUMBER = String.raw`(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+`;
// Not glued to a preceding word ("H2O", "v2"), and a minus only where it cannot be a hyphen ("3-4").
const SIGNED = String.raw`(?<![\w)])-?(?:${NUMBER})`;
const PLAIN_RE = new RegExp(`(${SIGNED})`, 'g');
const FRACTION_RE = new RegExp(String.raw`(${SIGNED})(?:\s*/\s*(${NUMBER}))?`, 'g');

/**
 * The last number written in the text: thousands separators (`1,234.5`), exponents (`1e-3`) and,
 * optionally, fractions (`3/4`). Undefined when there is none (or the last is `x/0`).
 */
export function extractLastNumber(text: string, { fractions = true }: { fractions?: boolean } = {}): number | undefined {
  const matches = [...text.matchAll(fractions ? FRACTION_RE : PLAIN_RE)];
  const last = matches.at(-1);
  if (!last) return undefined;
  const toNumber = (s: string) => Number(s.replace(/,/g, ''));
  const value = last[2] === undefined ? toNumber(last[1]) : toNumber(last[1]) / toNumber(last[2]);
  return Number.isFinite(value) ? value : undefined;
}
