/**
 * `trajflow train`: starts a training run (the training workflow, which starts its rollout
 * controller), shows progress per train step, and prints and stores the learning curve. With
 * `local`, it also starts the dev server, the rollout workers in this process and the trainer in a
 * child process (a train step holds its process's event loop).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import type { RunConfig } from '../../config/schema';
import { describeEnv } from '../envs/label';
import type { Logger } from '../log';
import type { StepMetrics } from '../rl/stepMetrics';
import { PROJECT_ROOT } from '../paths';
import { SEARCH_ATTRIBUTES } from '../temporal/searchAttributes';
import { trainingStatusQuery, trainingWorkflow, TrainingResult } from '../../workflows/training';
import { createProgress } from './progress';
import { episodeSpecOf, exitOnInterrupt, openSession } from './session';

export interface TrainingSummary {
  result: TrainingResult;
  curve: StepMetrics[];
  wallSeconds: number;
}

/** Starts `trajflow worker --role trainer` for a config file; its output goes to `logFile`. */
function spawnTrainer(configFile: string, logFile: string): ChildProcess {
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin', 'trajflow.js'), 'worker', '--role', 'trainer', '-c', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  return child;
}

export async function readLearningCurve(runDir: string): Promise<StepMetrics[]> {
  const text = await fs.readFile(path.join(runDir, 'train', 'metrics.jsonl'), 'utf8').catch(() => '');
  const byStep = new Map<number, StepMetrics>();
  for (const line of text.split('\n').filter(Boolean)) {
    const metrics = JSON.parse(line) as StepMetrics;
    byStep.set(metrics.step, metrics);
  }
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

export async function runTraining(
  config: RunConfig,
  options: { runId?: string; local: boolean; configFile?: string; logger: Logger },
): Promise<TrainingSummary> {
  const { logger } = options;
  const session = await openSession(config, options);
  const { runId, runDir, client } = session;
  let trainer: ChildProcess | undefined;
  try {
    if (options.local) {
      if (!options.configFile) throw new Error('a local training run needs its config file (for the trainer process)');
      trainer = spawnTrainer(options.configFile, path.join(runDir, 'trainer.log'));
    }
    // The trainer process must not outlive an interrupted `trajflow train`.
    exitOnInterrupt(logger, () => trainer?.kill('SIGTERM'));
    const startedAt = Date.now();
    const handle = await client.workflow.start(trainingWorkflow, {
      workflowId: runId,
      taskQueue: episodeSpecOf(config, runId).taskQueues.workflows,
      args: [{ ...episodeSpecOf(config, runId), groupSize: config.rollout.groupSize, maxConcurrency: config.rollout.maxConcurrency, trainer: config.trainer }],
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.run, value: runId },
        { key: SEARCH_ATTRIBUTES.kind, value: 'training' },
        { key: SEARCH_ATTRIBUTES.env, value: describeEnv(config.env) },
      ],
      staticSummary: `training ${runId}: ${config.trainer.steps} steps of ${config.trainer.batchGroups} groups x ${config.rollout.groupSize} on ${describeEnv(config.env)}`,
    });
    logger.info({ runId }, 'training started');

    const progress = createProgress('train steps', config.trainer.steps);
    const poll = setInterval(() => {
      handle.query(trainingStatusQuery).then((s) => {
        const m = s.lastMetrics;
        progress.update(s.step, m ? `success ${(100 * m.successRate).toFixed(0)}%, loss ${m.loss.toFixed(4)}, queue ${s.queueDepth}` : `queue ${s.queueDepth}`);
      }, () => undefined);
    }, 1_000);
    const result = await handle.result().finally(() => {
      clearInterval(poll);
      progress.finish();
    });
    const curve = await readLearningCurve(runDir);
    await fs.writeFile(path.join(runDir, 'learning-curve.csv'), formatCurveCsv(curve));
    return { result, curve, wallSeconds: (Date.now() - startedAt) / 1000 };
  } finally {
    trainer?.kill('SIGTERM');
    await session.close();
  }
}

const CSV_COLUMNS = ['step', 'version', 'trajectories', 'successRate', 'rewardMean', 'loss', 'clipFraction', 'approxKl', 'entropy', 'gradNorm', 'tokens', 'stalenessMax', 'wallMs', 'trainerIdleFraction', 'engineBusyFraction'] as const;

export function formatCurveCsv(curve: readonly StepMetrics[]): string {
  return [CSV_COLUMNS.join(','), ...curve.map((m) => CSV_COLUMNS.map((c) => m[c] ?? '').join(','))].join('\n') + '\n';
}

export function formatCurve(summary: TrainingSummary): string {
  const lines = [`training ${summary.result.runId}: ${summary.result.steps} steps, version ${summary.result.version}, ${summary.wallSeconds.toFixed(1)} s`];
  lines.push('  step  success  reward   loss      kl        staleness<=  trainer idle  engine busy');
  for (const m of summary.curve) {
    lines.push(
      `  ${String(m.step).padStart(4)}  ${(100 * m.successRate).toFixed(1).padStart(6)}%  ${m.rewardMean.toFixed(3)}  ${m.loss.toFixed(5).padStart(8)}  ${m.approxKl.toFixed(5).padStart(8)}  ${String(m.stalenessMax).padStart(11)}  ${(100 * m.trainerIdleFraction).toFixed(0).padStart(11)}%  ${(100 * m.engineBusyFraction).toFixed(0).padStart(10)}%`,
    );
  }
  return lines.join('\n');
}
