/**
 * Builds the training sequence of a trajectory from its recorded turns, token for token.
 *
 * The context the model saw at turn t is every earlier (delta, completion) pair followed by turn
 * t's delta, so concatenating the pairs in order reproduces each turn's prompt exactly; the loss
 * mask is 1 on sampled tokens and 0 on template/environment tokens. Nothing is re-tokenized.
 */
import type { TurnRecord } from './records';

export interface TrainingSequence {
  ids: number[];
  /** 1 where the model produced the token, 0 where trajflow wrote it. */
  lossMask: number[];
  /** Behaviour logprob at masked-in positions, 0 elsewhere. */
  behaviourLogprobs: number[];
  /** Policy version that sampled each masked-in token, -1 elsewhere. */
  policyVersions: number[];
}

export function assertContiguousTurns(turns: readonly TurnRecord[]): void {
  turns.forEach((record, index) => {
    if (record.turn !== index) throw new Error(`trajectory ${record.trajectoryId}: expected turn ${index}, found turn ${record.turn}`);
  });
}

export function buildTrainingSequence(turns: readonly TurnRecord[]): TrainingSequence {
  assertContiguousTurns(turns);
  const sequence: TrainingSequence = { ids: [], lossMask: [], behaviourLogprobs: [], policyVersions: [] };
  for (const record of turns) {
    for (const id of record.promptDeltaIds) {
      sequence.ids.push(id);
      sequence.lossMask.push(0);
      sequence.behaviourLogprobs.push(0);
      sequence.policyVersions.push(-1);
    }
    record.completionIds.forEach((id, i) => {
      sequence.ids.push(id);
      sequence.lossMask.push(1);
      sequence.behaviourLogprobs.push(record.logprobs[i]);
      sequence.policyVersions.push(record.policyVersions[i]);
    });
  }
  return sequence;
}

/** The prompt ids of the next turn: all recorded tokens so far, then the new delta. */
export function nextPromptIds(turns: readonly TurnRecord[], delta: readonly number[]): number[] {
  assertContiguousTurns(turns);
  return [...turns.flatMap((record) => [...record.promptDeltaIds, ...record.completionIds]), ...delta];
}
