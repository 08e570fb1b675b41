/** A turn's model call as a trajectory makes it: the workflow, and the benchmarks' in-process copy of it. */
import type { GenerateInput, PolicyRequirement } from '../../activities/inference';
import type { NextTurn } from '../../src/agents/agent';
import type { TrajectoryInput } from '../types';

/** The weights a training run's turns must sample with (none outside training). */
export function policyRequirementOf({ runId, minPolicyVersion, weightSync }: TrajectoryInput): PolicyRequirement | undefined {
  return minPolicyVersion === undefined ? undefined : { runId, minVersion: minPolicyVersion, followLatest: weightSync === 'turn' };
}

/** Turn `turn`'s request: the messages the agent shows next, under the episode's sampling and policy. */
export function generateInputOf(input: TrajectoryInput, turn: number, next: NextTurn, policy: PolicyRequirement | undefined): GenerateInput {
  return {
    runId: input.runId,
    runSeed: input.runSeed,
    trajectoryId: input.trajectoryId,
    turn,
    messages: next.messages,
    // Turn 0 always starts a context; later turns say so when the agent shows no history.
    ...(turn > 0 && next.freshContext ? { freshContext: true } : {}),
    sampling: input.sampling,
    policy,
    compatibility: input.compatibility,
  };
}
