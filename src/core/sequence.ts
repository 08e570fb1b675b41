/**
 * Builds the training sequences of a trajectory from its recorded turns, token for token.
 *
 * A context starts at turn 0 and at every turn recorded as starting afresh (an agent that keeps no
 * history). Within a context, the prompt the model saw at turn t is every earlier (delta,
 * completion) pair followed by turn t's delta, so concatenating the pairs in order reproduces each
 * turn's prompt exactly; each context is one training sequence. The loss mask is 1 on sampled
 * tokens and 0 on template/environment tokens. Nothing is re-tokenized.
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

function startsContext(record: TurnRecord): boolean {
  return record.turn === 0 || record.startsContext === true;
}

/** The turns split into contexts, each starting at a turn that starts afresh. */
function contexts(turns: readonly TurnRecord[]): TurnRecord[][] {
  assertContiguousTurns(turns);
  const result: TurnRecord[][] = [];
  for (const record of turns) {
    if (startsContext(record)) result.push([]);
    result[result.length - 1].push(record);
  }
  return result;
}

function sequenceOf(context: readonly TurnRecord[]): TrainingSequence {
  const sequence: TrainingSequence = { ids: [], lossMask: [], behaviourLogprobs: [], policyVersions: [] };
  for (const record of context) {
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

/** One training sequence per context of the trajectory, in turn order. */
export function buildTrainingSequences(turns: readonly TurnRecord[]): TrainingSequence[] {
  return contexts(turns).map(sequenceOf);
}

/**
 * The prompt ids of the next turn: a fresh context is the delta alone; otherwise every recorded
 * token of the current context, then the delta.
 */
export function nextPromptIds(turns: readonly TurnRecord[], delta: readonly number[], freshContext: boolean): number[] {
  if (freshContext || turns.length === 0) return [...delta];
  const current = contexts(turns).pop() ?? [];
  return [...current.flatMap((record) => [...record.promptDeltaIds, ...record.completionIds]), ...delta];
}
