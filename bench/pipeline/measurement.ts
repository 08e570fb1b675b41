/**
 * What one run measured, from the trainer's step records: end-to-end throughput (run start to the
 * last published version), and utilization in the steady state, between the end of the first
 * train step and the end of the last (the pipeline's initial fill, when the trainer can only
 * wait, is the same for every configuration and left out).
 */
import type { RunSpec } from './configurations';
import type { CpuReading } from './cpuClock';
import type { TrainStepRecord } from './standInTrainer';

export interface RunMeasurement {
  spec: RunSpec;
  round: number;
  runId: string;
  steps: number;
  trajectories: number;
  trainedTokens: number;
  wallMs: number;
  trajectoriesPerSecond: number;
  trainedTokensPerSecond: number;
  /** Share of the steady state the model spent decoding (fixed-latency model: with a call in flight). */
  engineBusyFraction: number;
  /** Share of the steady state the trainer waited for data. */
  trainerIdleFraction: number;
  /** Trained tokens by staleness (trained version minus the version that sampled the token). */
  staleness: Record<string, number>;
  stalenessMax: number;
  /** CPU time per trajectory: this process (workers, stand-ins, in-process loop) and the dev server (when known). */
  processCpuMsPerTrajectory: number;
  serverCpuMsPerTrajectory?: number;
  /** The machine's 1-minute load average when the run ended (other work shares the CPUs). */
  loadAverage: number;
}

/** Adds a histogram of tokens by staleness into `total`. */
export function addStaleness(total: Record<string, number>, counts: Readonly<Record<string, number>>): void {
  for (const [lag, count] of Object.entries(counts)) total[lag] = (total[lag] ?? 0) + count;
}

export interface RunCost {
  cpu: CpuReading;
  loadAverage: number;
}

export function measureRun(spec: RunSpec, round: number, runId: string, startedAt: number, steps: readonly TrainStepRecord[], cost: RunCost): RunMeasurement {
  if (steps.length < 2) throw new Error(`run ${runId} recorded ${steps.length} train steps; a measurement needs 2 or more`);
  const first = steps[0];
  const last = steps[steps.length - 1];
  const wallMs = last.endedAt - startedAt;
  const steadyMs = last.endedAt - first.endedAt;
  const trainingMs = steps.slice(1).reduce((sum, s) => sum + (s.endedAt - s.startedAt), 0);
  const trajectories = steps.reduce((sum, s) => sum + s.output.metrics.trajectories, 0);
  const trainedTokens = steps.reduce((sum, s) => sum + s.tokens, 0);
  const staleness: Record<string, number> = {};
  for (const s of steps) addStaleness(staleness, s.output.metrics.stalenessHistogram);
  return {
    spec,
    round,
    runId,
    steps: steps.length,
    trajectories,
    trainedTokens,
    wallMs,
    trajectoriesPerSecond: (1000 * trajectories) / wallMs,
    trainedTokensPerSecond: (1000 * trainedTokens) / wallMs,
    engineBusyFraction: (last.engineBusyMsAtEnd - first.engineBusyMsAtEnd) / steadyMs,
    trainerIdleFraction: 1 - trainingMs / steadyMs,
    staleness,
    stalenessMax: Math.max(0, ...steps.map((s) => s.output.metrics.stalenessMax)),
    processCpuMsPerTrajectory: cost.cpu.processMs / trajectories,
    ...(cost.cpu.serverMs === undefined ? {} : { serverCpuMsPerTrajectory: cost.cpu.serverMs / trajectories }),
    loadAverage: cost.loadAverage,
  };
}
