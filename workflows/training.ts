/**
 * The training workflow (consumer) and root of a training run. It prepares version 0 of the
 * policy, starts the rollout controller (producer), takes each trajectory group the moment the
 * controller hands it over, and as soon as the next batch (the next `batchGroups` groups in
 * admission order) is all in, runs one train step on the trainer queue, which publishes weights
 * version v+1; then it tells the controller, whose staleness bound and weight-sync mode decide
 * when new trajectories use them. State, handlers and the exactly-once rule: ./trainingRun.
 */
import { allHandlersFinished, condition, continueAsNew, workflowInfo } from '@temporalio/workflow';
import { TrainingRun, type TrainingState } from './trainingRun';
import type { TrainingInput } from './types';

export { pauseUpdate, resumeUpdate, stopUpdate, trainingStatusQuery, type TrainingStatus } from './trainingMessages';
export type { TrainingState } from './trainingRun';

export interface TrainingResult {
  runId: string;
  version: number;
  steps: number;
  groupsTrained: number;
}

export async function trainingWorkflow(input: TrainingInput, carried?: TrainingState): Promise<TrainingResult> {
  const run = new TrainingRun(input, carried);
  // Handlers first, so status answers while version 0 is still being prepared.
  run.setHandlers();
  run.showDetails();
  if (!carried) {
    await run.preparePolicy();
    if (!run.state.stopping) await run.startRollouts();
    // The untrained baseline is measured while the first groups are being generated.
    await run.evaluateIfDue();
  }

  while (!run.finished) {
    await condition(() => (run.batchReady() && !run.state.paused) || run.state.stopping);
    if (!run.batchReady()) break;
    await run.trainNextBatch();
    await run.evaluateIfDue();
    if (workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      await continueAsNew<typeof trainingWorkflow>(input, run.state);
    }
  }
  // A stop update is still telling the controller when the loop ends: let it answer first.
  await condition(allHandlersFinished);
  run.ended();
  return { runId: input.runId, version: run.state.version, steps: run.state.step, groupsTrained: run.state.trained.length };
}
