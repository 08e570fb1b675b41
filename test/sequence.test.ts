import type { TurnRecord } from '../src/core/records';
import { buildTrainingSequences, nextPromptIds } from '../src/core/sequence';

function turn(index: number, promptDeltaIds: number[], completionIds: number[], startsContext?: boolean): TurnRecord {
  return {
    trajectoryId: 't',
    turn: index,
    messages: [],
    ...(startsContext ? { startsContext } : {}),
    promptDeltaIds,
    completionIds,
    logprobs: completionIds.map((id) => -id / 100),
    policyVersions: completionIds.map(() => index),
    finishReason: 'stop',
    text: '',
    contextTokens: 0,
  };
}

describe('training sequences from recorded turns', () => {
  it('with history: one sequence, each turn continuing the last', () => {
    const turns = [turn(0, [1, 2], [3, 4]), turn(1, [5], [6])];
    expect(nextPromptIds(turns, [7], false)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const sequences = buildTrainingSequences(turns);
    expect(sequences).toHaveLength(1);
    expect(sequences[0]).toEqual({
      ids: [1, 2, 3, 4, 5, 6],
      lossMask: [0, 0, 1, 1, 0, 1],
      behaviourLogprobs: [0, 0, -0.03, -0.04, 0, -0.06],
      policyVersions: [-1, -1, 0, 0, -1, 1],
    });
  });

  it('without history: a sequence per fresh context, prompts exactly as sampled', () => {
    const turns = [turn(0, [1, 2], [3]), turn(1, [1, 5], [6], true), turn(2, [8], [9])];
    // A fresh context is the delta alone; a continuation extends the current context only.
    expect(nextPromptIds(turns.slice(0, 1), [1, 5], true)).toEqual([1, 5]);
    expect(nextPromptIds(turns.slice(0, 2), [8], false)).toEqual([1, 5, 6, 8]);
    expect(buildTrainingSequences(turns).map((s) => s.ids)).toEqual([
      [1, 2, 3],
      [1, 5, 6, 8, 9],
    ]);
    expect(buildTrainingSequences(turns).map((s) => s.lossMask)).toEqual([
      [0, 0, 1],
      [0, 0, 1, 0, 1],
    ]);
  });

  it('refuses turns with a gap', () => {
    expect(() => buildTrainingSequences([turn(0, [1], [2]), turn(2, [3], [4])])).toThrow(/expected turn 1, found turn 2/);
  });
});
