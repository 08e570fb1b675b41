import type { TurnRecord } from '../src/core/records';
import { buildTrainingSequences, nextPromptIds } from '../src/core/sequence';
import SEQUENCES_FIXTURE from './fixtures/twins/sequences.json';

/** The twins' hand-worked cases (shared with python/tests/test_trainer_sequences.py). */
const TWINS = SEQUENCES_FIXTURE as { cases: { why: string; turns: TurnRecord[]; expected?: unknown[]; error?: string }[] };

describe('training sequences from recorded turns', () => {
  it.each(TWINS.cases)('$why', ({ turns, expected, error }) => {
    if (error !== undefined) expect(() => buildTrainingSequences(turns)).toThrow(error);
    else expect(buildTrainingSequences(turns)).toEqual(expected);
  });

  it('prompts exactly as sampled: a continuation extends the current context, a fresh context is its delta alone', () => {
    const [first, fresh] = TWINS.cases.map(({ turns }) => turns);
    expect(nextPromptIds(first, [7], false)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(nextPromptIds(fresh.slice(0, 1), [1, 5], true)).toEqual([1, 5]);
    expect(nextPromptIds(fresh.slice(0, 2), [8], false)).toEqual([1, 5, 6, 8]);
  });
});
