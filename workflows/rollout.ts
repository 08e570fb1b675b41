/**
 * The rollout controller (producer): keeps up to `maxConcurrency` trajectories in flight and
 * refills a slot the moment one finishes. There is no batch barrier: a slow trajectory holds one
 * slot, never the others.
 *
 * Groups are its children and report back by signal (addressed to this workflow id, so they
 * reach the latest run), which lets the controller continue-as-new with groups still running.
 *
 * In a training run it is the producer half of the pipeline: it forwards each finished group to
 * the training workflow and admits trajectories within the staleness bound (src/core/admission).
 * With `episode` weight sync, a new version takes effect only once every in-flight episode has
 * finished, and no episode starts meanwhile. State and handlers: ./rolloutController.
 */
import { allHandlersFinished, condition, continueAsNew, workflowInfo } from '@temporalio/workflow';
import { counterTracker } from '../src/trace/workflowSinks';
import { initialRolloutState, RolloutController, type RolloutState } from './rolloutController';
import type { RolloutStatus } from './signals';
import type { RolloutInput } from './types';

export { envSeedOf, type RolloutState } from './rolloutController';

export type RolloutResult = RolloutStatus & { runId: string };

export async function rolloutWorkflow(input: RolloutInput, carried?: RolloutState): Promise<RolloutResult> {
  const controller = new RolloutController(input, carried ?? initialRolloutState(input));
  controller.setHandlers();
  const { status } = controller;

  // Trace counters (no history events: a sink, skipped on replay), recorded when they change.
  const traceCounter = counterTracker();
  const trace = (blocked: boolean) =>
    traceCounter(input.runId, 'rollout', {
      in_flight: status.trajectoriesInFlight,
      admission_blocked: blocked ? 1 : 0,
      blocked_total: status.admissionBlocked,
      policy_version: status.policyVersion,
    });
  while (!controller.done) {
    await controller.admit();
    trace(controller.countBlocked());
    controller.showDetails();
    await condition(() => controller.changed);
    controller.changed = false;
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof rolloutWorkflow>(input, controller.state);
    }
  }
  trace(false);
  controller.showDetails();
  // Groups forwarded to the trainer by the last handlers must leave before this run closes.
  await condition(allHandlersFinished);
  return { ...status, runId: input.runId };
}
