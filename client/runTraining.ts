/**
 * `trajflow train`: starts a training run (the training workflow, which starts its rollout
 * controller), follows its progress per train step, and stores and returns the learning curve. With
 * `local`, it also starts the dev server, the rollout workers in this process and the trainer in a
 * child process (a train step holds its process's event loop). Given the id of a run still open,
 * it follows that run instead: `--local --run-id` brings back all a `--local` run had started.
 */
import { promises as fs } from 'node:fs';
import type { RunConfig } from '../config/schema';
import type { StepMetrics } from '../src/rl/stepMetrics';
import type { EvaluationRecord } from '../activities/evaluation';
import { assertTrainingConfig } from '../src/runConfig';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { runDetails } from '../workflows/details';
import { plural } from '../workflows/summaries';
import { stopUpdate, trainingStatusQuery, trainingWorkflow, type TrainingResult, type TrainingStatus } from '../workflows/training';
import type { TrainingInput } from '../workflows/types';
import { ROLES } from '../workers/start';
import { useLocalBuild } from './deployment';
import { formatCurveCsv, readEvaluations, readLearningCurve } from './learningCurve';
import { pollProgress } from './poll';
import { awaitRunClosed } from './runWorkflows';
import { configFileMemo } from './openRuns';
import { openLaunch, reportFinalProgress, RunInterrupted, trainingInputOf, unlessInterrupted, type RunOptions } from './launch';
import { spawnLoggedWorker, stopWorker, WORKER_STOP_GRACE_MS, type LoggedWorker } from './workerProcess';

export interface TrainingSummary {
  result: TrainingResult;
  curve: StepMetrics[];
  evaluations: EvaluationRecord[];
  wallSeconds: number;
}

/** How a run's training workflow is started: its id, queue and input, its search attributes, and what the Web UI says of it. */
export function trainingStartOptions(config: RunConfig, runId: string) {
  const input = trainingInputOf(config, runId);
  const { rollout, trainer } = config;
  return {
    workflowId: runId,
    taskQueue: input.taskQueues.workflows,
    args: [input] as [TrainingInput],
    typedSearchAttributes: [
      { key: SEARCH_ATTRIBUTES.run, value: runId },
      { key: SEARCH_ATTRIBUTES.kind, value: 'training' },
      { key: SEARCH_ATTRIBUTES.env, value: input.envLabel },
    ],
    staticSummary: `training ${runId}: ${plural(trainer.steps, 'step')} of ${plural(trainer.batchGroups, 'group')} x ${rollout.groupSize} on ${input.envLabel}`,
    staticDetails: runDetails(input, {
      groups: trainer.steps * trainer.batchGroups,
      groupSize: rollout.groupSize,
      maxConcurrency: rollout.maxConcurrency,
      trainer,
    }),
  };
}

export interface TrainingRunOptions extends RunOptions<TrainingStatus> {
  /**
   * Asks the run to stop (the CLI's `stop`) this long after its training workflow started: the
   * run ends as if it had reached its last step, with fewer steps.
   */
  stopAfterMs?: number;
}

export async function runTraining(config: RunConfig, options: TrainingRunOptions): Promise<TrainingSummary> {
  const { logger, onStatus, signal } = options;
  // Before anything starts: a rollout alone may use these settings, training would learn nothing.
  assertTrainingConfig(config, options.configFile);
  const launch = await openLaunch(config, options);
  const { runId, layout, client } = launch;
  let trainer: LoggedWorker | undefined;
  try {
    if (options.local) {
      if (!options.configFile) throw new Error('a local training run needs its config file (for the trainer process)');
      // Should this process die without stopping it, the trainer notices and stops by itself.
      trainer = await spawnLoggedWorker('trainer', options.configFile, layout.trainerLog, { exitWithParent: true });
      await useLocalBuild(client, config, ROLES);
    }
    if (signal?.aborted) throw new RunInterrupted(runId);
    const startedAt = Date.now();
    const handle = launch.resuming
      ? client.workflow.getHandle<typeof trainingWorkflow>(runId)
      : await client.workflow.start(trainingWorkflow, { ...trainingStartOptions(config, runId), memo: configFileMemo(options.configFile) });
    logger.info({ runId }, launch.resuming ? 'following the open run: it resumes on these workers' : 'training started');

    const poll = onStatus && pollProgress(client, () => handle.query(trainingStatusQuery), onStatus);
    const timeLimit =
      options.stopAfterMs === undefined
        ? undefined
        : setTimeout(() => {
            logger.info({ runId, afterMs: options.stopAfterMs }, 'time limit reached: stopping the run');
            handle.executeUpdate(stopUpdate).catch((err: unknown) => logger.warn({ runId, err }, 'could not ask the run to stop at its time limit'));
          }, options.stopAfterMs);
    const result = await unlessInterrupted(runId, signal, (calls) => client.withAbortSignal(calls, () => handle.result())).finally(() => {
      clearTimeout(timeLimit);
      return poll?.stop();
    });
    if (onStatus) await reportFinalProgress(client, runId, signal, () => handle.query(trainingStatusQuery), onStatus);
    const wallSeconds = (Date.now() - startedAt) / 1000;
    // The groups its rollout had started still finish and are recorded; a local run's workers stay up for them.
    if (options.local) await awaitRunClosed(client, runId, { logger, signal });
    const curve = await readLearningCurve(layout);
    const evaluations = await readEvaluations(layout);
    await fs.writeFile(layout.learningCurveFile, formatCurveCsv(curve, evaluations));
    return { result, curve, evaluations, wallSeconds };
  } finally {
    await Promise.all([stopWorker(trainer), launch.close(signal?.aborted ? WORKER_STOP_GRACE_MS : undefined)]);
  }
}
