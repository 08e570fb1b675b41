/**
 * A training run's learning curve as stored under its run folder: the train step metrics and the
 * held-out evaluations, their CSV file, and when the run first reached the benchmark levels.
 */
import type { EvaluationRecord } from '../activities/evaluation';
import type { StepMetrics } from '../src/rl/stepMetrics';
import { readJsonLines } from '../src/store/jsonLines';
import type { RunLayout } from '../src/store/runLayout';

export function readLearningCurve(layout: RunLayout): Promise<StepMetrics[]> {
  return readJsonLines<StepMetrics>(layout.metricsFile, (m) => m.step);
}

export function readEvaluations(layout: RunLayout): Promise<EvaluationRecord[]> {
  return readJsonLines<EvaluationRecord>(layout.evaluationsFile, (e) => e.version);
}

const CSV_COLUMNS = [
  'step',
  'version',
  'elapsedS',
  'trajectories',
  'successRate',
  'heldOutSuccessRate',
  'rewardMean',
  'loss',
  'clipFraction',
  'approxKl',
  'entropy',
  'gradNorm',
  'tokens',
  'stalenessMax',
  'wallMs',
  'trainerIdleFraction',
  'engineBusyFraction',
] as const;

export type CurveRow = Partial<Record<(typeof CSV_COLUMNS)[number], number>>;

/**
 * One row per train step (with the held-out success of the version it published, where evaluated),
 * after a row for version 0 when it was evaluated: the untrained baseline.
 */
export function curveRows(curve: readonly StepMetrics[], evaluations: readonly EvaluationRecord[]): CurveRow[] {
  const heldOut = new Map(evaluations.map((e) => [e.version, e.successRate]));
  const first = evaluations.find((e) => e.version === 0);
  const baseline = first ? [{ version: 0, heldOutSuccessRate: first.successRate, elapsedS: first.elapsedS }] : [];
  return [...baseline, ...curve.map((m) => ({ ...m, heldOutSuccessRate: heldOut.get(m.version) }))];
}

export function formatCurveCsv(curve: readonly StepMetrics[], evaluations: readonly EvaluationRecord[] = []): string {
  const rows = curveRows(curve, evaluations).map((row) => CSV_COLUMNS.map((c) => row[c] ?? '').join(','));
  return [CSV_COLUMNS.join(','), ...rows].join('\n') + '\n';
}

export const percent = (x: number | undefined) => (x === undefined ? '' : `${(100 * x).toFixed(1)}%`);

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
    // "not reached" would claim versions were judged: a run without evaluations says so.
    best
      ? `  held-out success first ${heldOut.join(', ')}; best ${percent(best.successRate)} (version ${best.version})`
      : '  held-out success: no version evaluated (eval.everySteps)',
  ];
}
