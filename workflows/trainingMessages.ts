/** What a user asks of a training run (the CLI's status, pause, resume and stop), and its answer. */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { EvaluationRecord } from '../activities/evaluation';
import type { TrainStepOutput } from '../activities/trainer';

export interface TrainingStatus {
  version: number;
  step: number;
  steps: number;
  groupsConsumed: number;
  queueDepth: number;
  paused: boolean;
  stopping: boolean;
  lastMetrics?: TrainStepOutput['metrics'];
  lastEvaluation?: EvaluationRecord;
}

export const trainingStatusQuery = defineQuery<TrainingStatus>('trainingStatus');
export const pauseUpdate = defineUpdate<TrainingStatus>('pause');
export const resumeUpdate = defineUpdate<TrainingStatus>('resume');
/**
 * No new admissions; a batch already complete is trained; groups still in flight finish and are
 * recorded, but the run ends without waiting to train them.
 */
export const stopUpdate = defineUpdate<TrainingStatus>('stop');
