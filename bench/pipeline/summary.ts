/** Per-configuration means over the rounds, and the targets checked against them. */
import {
  FIXED_IN_PROCESS,
  FIXED_TEMPORAL,
  FIXED_TEMPORAL_REMOTE,
  IN_PROCESS_ETA0,
  IN_PROCESS_ETA1,
  IN_PROCESS_ETA2,
  SLOW_TRAINER,
  STREAM_ETA0,
  STREAM_ETA1,
  STREAM_ETA2,
  STREAM_ETA4,
  SYNCHRONOUS,
  type RunSpec,
} from './configurations';
import { addStaleness, type RunMeasurement } from './measurement';

/** Means over a configuration's rounds; its staleness histogram sums them, its max is theirs. */
export type ConfigurationSummary = Pick<
  RunMeasurement,
  | 'spec'
  | 'trajectoriesPerSecond'
  | 'trainedTokensPerSecond'
  | 'engineBusyFraction'
  | 'trainerIdleFraction'
  | 'staleness'
  | 'stalenessMax'
  | 'processCpuMsPerTrajectory'
  | 'serverCpuMsPerTrajectory'
> & { runs: RunMeasurement[] };

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

export function summarize(specs: readonly RunSpec[], runs: readonly RunMeasurement[]): ConfigurationSummary[] {
  return specs.map((spec) => {
    const own = runs.filter((r) => r.spec.key === spec.key);
    const staleness: Record<string, number> = {};
    for (const run of own) addStaleness(staleness, run.staleness);
    return {
      spec,
      runs: own,
      trajectoriesPerSecond: mean(own.map((r) => r.trajectoriesPerSecond)),
      trainedTokensPerSecond: mean(own.map((r) => r.trainedTokensPerSecond)),
      engineBusyFraction: mean(own.map((r) => r.engineBusyFraction)),
      trainerIdleFraction: mean(own.map((r) => r.trainerIdleFraction)),
      staleness,
      stalenessMax: Math.max(0, ...own.map((r) => r.stalenessMax)),
      processCpuMsPerTrajectory: mean(own.map((r) => r.processCpuMsPerTrajectory)),
      ...(own.every((r) => r.serverCpuMsPerTrajectory !== undefined) ? { serverCpuMsPerTrajectory: mean(own.map((r) => r.serverCpuMsPerTrajectory!)) } : {}),
    };
  });
}

export interface TargetCheck {
  name: string;
  measured: number;
  target: number;
  /** Whether the measured figure must be at least or at most the target. */
  atLeast: boolean;
  unit: 'x' | '%';
  met: boolean;
}

/** Informational ratios, no target. */
export interface Comparison {
  name: string;
  ratio: number;
}

function check(name: string, measured: number, target: number, atLeast: boolean, unit: TargetCheck['unit']): TargetCheck {
  return { name, measured, target, atLeast, unit, met: atLeast ? measured >= target : measured <= target };
}

/**
 * Lookups into one bench's summaries: a configuration's, the throughput ratio of two, and `when`,
 * which makes a figure only if every configuration it needs ran (see `only` in options.ts).
 */
function lookup(configurations: readonly ConfigurationSummary[]) {
  const find = (spec: RunSpec) => configurations.find((c) => c.spec.key === spec.key);
  const of = (spec: RunSpec) => find(spec)!;
  const when = <T>(needs: readonly RunSpec[], make: () => T): T[] => (needs.every((spec) => find(spec) !== undefined) ? [make()] : []);
  return { of, when, throughputRatio: (a: RunSpec, b: RunSpec) => of(a).trajectoriesPerSecond / of(b).trajectoriesPerSecond };
}

export function checkTargets(configurations: readonly ConfigurationSummary[]): TargetCheck[] {
  const { of, when, throughputRatio } = lookup(configurations);
  return [
    ...when([STREAM_ETA1, SYNCHRONOUS], () => check('streaming eta=1 / synchronous throughput', throughputRatio(STREAM_ETA1, SYNCHRONOUS), 3, true, 'x')),
    ...when([STREAM_ETA2, SYNCHRONOUS], () => check('streaming eta=2 / synchronous throughput', throughputRatio(STREAM_ETA2, SYNCHRONOUS), 3, true, 'x')),
    ...when([FIXED_TEMPORAL, FIXED_IN_PROCESS], () =>
      check('Temporal / in-process throughput, fixed-latency model', throughputRatio(FIXED_TEMPORAL, FIXED_IN_PROCESS), 0.95, true, 'x'),
    ),
    ...when([STREAM_ETA1], () => check('rollout-bound (fast trainer) engine busy, eta=1', 100 * of(STREAM_ETA1).engineBusyFraction, 95, true, '%')),
    ...when([STREAM_ETA2], () => check('rollout-bound (fast trainer) engine busy, eta=2', 100 * of(STREAM_ETA2).engineBusyFraction, 95, true, '%')),
    ...when([SLOW_TRAINER], () => check('trainer-bound (slow trainer) trainer idle, eta=1', 100 * of(SLOW_TRAINER).trainerIdleFraction, 5, false, '%')),
  ];
}

export function comparisons(configurations: readonly ConfigurationSummary[]): Comparison[] {
  const { when, throughputRatio } = lookup(configurations);
  const ratio = (name: string, a: RunSpec, b: RunSpec) => when([a, b], () => ({ name, ratio: throughputRatio(a, b) }));
  return [
    ...ratio('streaming eta=0 / synchronous throughput', STREAM_ETA0, SYNCHRONOUS),
    ...ratio('streaming eta=4 / synchronous throughput', STREAM_ETA4, SYNCHRONOUS),
    ...ratio('in-process eta=1 / in-process eta=0 throughput', IN_PROCESS_ETA1, IN_PROCESS_ETA0),
    ...ratio('in-process eta=2 / in-process eta=0 throughput', IN_PROCESS_ETA2, IN_PROCESS_ETA0),
    ...ratio('Temporal / in-process throughput, measured-engine model, eta=1', STREAM_ETA1, IN_PROCESS_ETA1),
    ...ratio('fixed-latency model, Temporal: calls as local activities / on inference workers', FIXED_TEMPORAL, FIXED_TEMPORAL_REMOTE),
  ];
}
