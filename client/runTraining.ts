/**
 * `trajflow train`: starts a training run (the training workflow, which starts its rollout
 * controller), shows progress per train step, and prints and stores the learning curve. With
 * `local`, it also starts the dev server, the rollout workers in this process and the trainer in a
 * child process (a train step holds its process's event loop).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { RunConfig } from '../config/schema';
import { describeEnvironment } from '../src/plugins/registry';
import type { Logger } from '../src/log';
import type { StepMetrics } from '../src/rl/stepMetrics';
import type { EvaluationRecord } from '../activities/trainer';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { trainingStatusQuery, trainingWorkflow, TrainingResult } from '../workflows/training';
import { createProgress, pollEvery } from '../cli/progress';
import { episodeSpecOf, exitOnInterrupt, openSession } from './session';
import { spawnLoggedWorker, type LoggedWorker } from './workerProcess';

export interface TrainingSummary {
  result: TrainingResult;
  curve: StepMetrics[];
  evaluations: EvaluationRecord[];
  wallSeconds: number;
}

/** The records of a JSONL file under the run's train/ folder, last one per key, sorted by key. */
async function readJsonLines<T>(runDir: string, file: string, keyOf: (record: T) => number): Promise<T[]> {
  const text = await fs.readFile(path.join(runDir, 'train', file), 'utf8').catch(() => '');
  // A retried step or evaluation may have appended its line twice.
  const byKey = new Map<number, T>();
  for (const line of text.split('\n').filter(Boolean)) {
    const record = JSON.parse(line) as T;
    byKey.set(keyOf(record), record);
  }
  return [...byKey.entries()].sort(([a], [b]) => a - b).map(([, record]) => record);
}

export function readLearningCurve(runDir: string): Promise<StepMetrics[]> {
  return readJsonLines<StepMetrics>(runDir, 'metrics.jsonl', (m) => m.step);
}

export function readEvaluations(runDir: string): Promise<EvaluationRecord[]> {
  return readJsonLines<EvaluationRecord>(runDir, 'eval.jsonl', (e) => e.version);
}

export async function runTraining(
  config: RunConfig,
  options: { runId?: string; local: boolean; configFile?: string; logger: Logger },
): Promise<TrainingSummary> {
  const { logger } = options;
  const session = await openSession(config, options);
  const { runId, runDir, client } = session;
  let trainer: LoggedWorker | undefined;
  try {
    if (options.local) {
      if (!options.configFile) throw new Error('a local training run needs its config file (for the trainer process)');
      trainer = await spawnLoggedWorker('trainer', options.configFile, path.join(runDir, 'trainer.log'));
    }
    // The trainer process must not outlive an interrupted `trajflow train`.
    exitOnInterrupt(logger, () => trainer?.child.kill('SIGTERM'));
    const startedAt = Date.now();
    const handle = await client.workflow.start(trainingWorkflow, {
      workflowId: runId,
      taskQueue: episodeSpecOf(config, runId).taskQueues.workflows,
      args: [{
        ...episodeSpecOf(config, runId),
        groupSize: config.rollout.groupSize,
        maxConcurrency: config.rollout.maxConcurrency,
        trainer: config.trainer,
        eval: config.eval,
      }],
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.run, value: runId },
        { key: SEARCH_ATTRIBUTES.kind, value: 'training' },
        { key: SEARCH_ATTRIBUTES.env, value: describeEnvironment(config.env) },
      ],
      staticSummary: `training ${runId}: ${config.trainer.steps} steps of ${config.trainer.batchGroups} groups x ${config.rollout.groupSize} on ${describeEnvironment(config.env)}`,
    });
    logger.info({ runId }, 'training started');

    const progress = createProgress('train steps', config.trainer.steps);
    const poll = pollEvery(1_000, async () => {
      const s = await handle.query(trainingStatusQuery);
      const m = s.lastMetrics;
      const evaluation = s.lastEvaluation ? `, held-out v${s.lastEvaluation.version} ${(100 * s.lastEvaluation.successRate).toFixed(0)}%` : '';
      progress.update(s.step, `${m ? `success ${(100 * m.successRate).toFixed(0)}%, loss ${m.loss.toFixed(4)}, ` : ''}queue ${s.queueDepth}${evaluation}`);
    });
    const result = await handle.result().finally(async () => {
      await poll.stop();
      progress.finish();
    });
    const curve = await readLearningCurve(runDir);
    const evaluations = await readEvaluations(runDir);
    await fs.writeFile(path.join(runDir, 'learning-curve.csv'), formatCurveCsv(curve, evaluations));
    return { result, curve, evaluations, wallSeconds: (Date.now() - startedAt) / 1000 };
  } finally {
    trainer?.child.kill('SIGTERM');
    await session.close();
  }
}

const CSV_COLUMNS = ['step', 'version', 'elapsedS', 'trajectories', 'successRate', 'heldOutSuccessRate', 'rewardMean', 'loss', 'clipFraction', 'approxKl', 'entropy', 'gradNorm', 'tokens', 'stalenessMax', 'wallMs', 'trainerIdleFraction', 'engineBusyFraction'] as const;

type CurveRow = Partial<Record<(typeof CSV_COLUMNS)[number], number>>;

/**
 * One row per train step (with the held-out success of the version it published, where evaluated),
 * after a row for version 0 when it was evaluated: the untrained baseline.
 */
function curveRows(curve: readonly StepMetrics[], evaluations: readonly EvaluationRecord[]): CurveRow[] {
  const heldOut = new Map(evaluations.map((e) => [e.version, e.successRate]));
  const first = evaluations.find((e) => e.version === 0);
  const baseline = first ? [{ version: 0, heldOutSuccessRate: first.successRate, elapsedS: first.elapsedS }] : [];
  return [...baseline, ...curve.map((m) => ({ ...m, heldOutSuccessRate: heldOut.get(m.version) }))];
}

export function formatCurveCsv(curve: readonly StepMetrics[], evaluations: readonly EvaluationRecord[] = []): string {
  const rows = curveRows(curve, evaluations).map((row) => CSV_COLUMNS.map((c) => row[c] ?? '').join(','));
  return [CSV_COLUMNS.join(','), ...rows].join('\n') + '\n';
}

const percent = (x: number | undefined) => (x === undefined ? '' : `${(100 * x).toFixed(1)}%`);

export function formatCurve(summary: TrainingSummary): string {
  const lines = [`training ${summary.result.runId}: ${summary.result.steps} steps, version ${summary.result.version}, ${summary.wallSeconds.toFixed(1)} s`];
  lines.push('  step  elapsed  success  held-out  reward   loss      kl        staleness<=  trainer idle  engine busy');
  for (const m of curveRows(summary.curve, summary.evaluations)) {
    const fixed = (x: number | undefined, digits: number, width: number) => (x === undefined ? '' : x.toFixed(digits)).padStart(width);
    lines.push(
      [
        (m.step === undefined ? '-' : String(m.step)).padStart(6),
        `${fixed(m.elapsedS, 0, 6)}s`,
        percent(m.successRate).padStart(7),
        percent(m.heldOutSuccessRate).padStart(9),
        fixed(m.rewardMean, 3, 7),
        fixed(m.loss, 5, 8),
        fixed(m.approxKl, 5, 8),
        fixed(m.stalenessMax, 0, 11),
        percent(m.trainerIdleFraction).padStart(13),
        percent(m.engineBusyFraction).padStart(12),
      ].join('  '),
    );
  }
  lines.push(...formatMilestones(summary.curve, summary.evaluations));
  return lines.join('\n');
}

/** Sampled-success levels and held-out levels the learning benchmarks are judged by. */
const SAMPLED_LEVELS = [0.5, 0.8, 0.95];
const HELD_OUT_LEVELS = [0.7];

/** When the run first reached each level: the sampled success of a step, the held-out success of an evaluated version. */
export function formatMilestones(curve: readonly StepMetrics[], evaluations: readonly EvaluationRecord[]): string[] {
  const when = (elapsedS: number | undefined) => (elapsedS === undefined ? '' : ` (${elapsedS.toFixed(0)} s)`);
  const sampled = SAMPLED_LEVELS.map((level) => {
    const step = curve.find((m) => m.successRate >= level);
    return `>= ${percent(level)}: ${step ? `step ${step.step}${when(step.elapsedS)}` : 'not reached'}`;
  });
  const heldOut = HELD_OUT_LEVELS.map((level) => {
    const evaluation = evaluations.find((e) => e.successRate >= level);
    return `>= ${percent(level)}: ${evaluation ? `version ${evaluation.version}${when(evaluation.elapsedS)}` : 'not reached'}`;
  });
  const best = evaluations.reduce<EvaluationRecord | undefined>((top, e) => (top && top.successRate >= e.successRate ? top : e), undefined);
  return [
    `  sampled success first ${sampled.join(', ')}`,
    `  held-out success first ${heldOut.join(', ')}${best ? `; best ${percent(best.successRate)} (version ${best.version})` : ''}`,
  ];
}
