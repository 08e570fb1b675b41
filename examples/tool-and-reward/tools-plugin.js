/**
 * A tool and a reward for the built-in `arithmetic` environment: `square` (a number times
 * itself), and `closeness`, which gives partial credit to an answer near the expected one where
 * the built-in numeric_match gives 0. `modules:` in tools.yaml loads this file.
 */
const { z } = require('zod');
const { defineTool } = require('trajflow');

const square = defineTool({
  name: 'square',
  description: 'The square of a number.',
  input: z.strictObject({ x: z.number() }),
  run: ({ x }) => String(x * x),
  // Optional: plausible arguments for trainer.formatWarmupSteps.
  example: (rng) => ({ x: Math.floor(rng() * 10) }),
});

/** The first number written in `text` (`-12`, `3.5`), or undefined. */
function firstNumber(text) {
  const match = /-?\d+(\.\d+)?/.exec(text);
  return match ? Number(match[0]) : undefined;
}

/** 1 within `tolerance` of the reference, falling as 1 / (1 + distance past it); 0 without a number. */
function closeness({ answer, reference }, { tolerance }) {
  const got = firstNumber(answer);
  if (got === undefined) return 0;
  const expected = Number(reference);
  // A reference that is not a number is the environment's fault: throwing records a scoring error, not a 0.
  if (!Number.isFinite(expected)) throw new Error(`closeness: reference ${JSON.stringify(reference)} is not a number`);
  return 1 / (1 + Math.max(0, Math.abs(got - expected) - tolerance));
}

function register(trajflow) {
  trajflow.registerTool(square);
  trajflow.registerReward('closeness', closeness, z.strictObject({ tolerance: z.number().nonnegative().default(0.5) }));
}

module.exports = { register, closeness };
