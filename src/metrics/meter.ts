/**
 * trajflow's metrics, recorded through the Temporal runtime's metric meter: the runtime's one
 * Prometheus exporter (config `metrics.prometheusPort`) serves them beside the SDK's own
 * `temporal_*` metrics, histograms included. Counters are whole numbers (the exporter adds
 * `_total`); durations are histograms in seconds.
 */
import type { MetricCounter, MetricGauge, MetricHistogram, MetricMeter, MetricTags } from '@temporalio/common';
import { Runtime, type MetricsExporterConfig } from '@temporalio/worker';
import type { BusyStats } from './busy';

/** How often gauges read from elsewhere (engine counters, busy time) are sampled. */
export const GAUGE_SAMPLE_MS = 2_000;

/** Bucket bounds (seconds) of the duration histograms: a 1 ms env step up to a train step of minutes. */
const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** The runtime's exporter settings for `metrics.prometheusPort`. */
export function prometheusExporter(bindAddress: string): MetricsExporterConfig {
  return {
    prometheus: {
      bindAddress,
      countersTotalSuffix: true,
      useSecondsForDurations: true,
      histogramBucketOverrides: { trajflow_activity_duration_seconds: DURATION_BUCKETS },
    },
  };
}

/** The last train step's metrics, one gauge each, labelled by run. */
const TRAIN_STEP_GAUGES = {
  step: ['trajflow_train_step', 'Number of the last completed train step'],
  rewardMean: ['trajflow_train_reward_mean', 'Mean reward of the last train step batch'],
  successRate: ['trajflow_train_success_rate', 'Success rate of the last train step batch (0-1)'],
  loss: ['trajflow_train_loss', 'Loss of the last train step'],
  tokens: ['trajflow_train_tokens', 'Trained tokens in the last train step'],
  stalenessMax: ['trajflow_train_staleness_max', 'Largest staleness (policy versions) of a token in the last train step'],
  learningRate: ['trajflow_train_learning_rate', 'Learning rate of the last train step'],
  trainerIdleFraction: ['trajflow_train_trainer_idle_fraction', 'Trainer idle fraction over the last train step interval'],
  engineBusyFraction: ['trajflow_train_engine_busy_fraction', 'Engine busy fraction over the last train step interval'],
  envBusyFraction: ['trajflow_train_env_busy_fraction', 'Env worker busy fraction over the last train step interval'],
} as const;

export type TrainStepMetrics = Partial<Record<keyof typeof TRAIN_STEP_GAUGES, number>>;

/** The inference engine's counters since it started, and its state now. */
export interface EngineGaugeValues {
  busySeconds: number;
  uptimeSeconds: number;
  generatedTokens: number;
  decodeSteps: number;
  meanBatchSize: number;
  runningSequences: number;
  waitingSequences: number;
  policyVersion: number;
}

const ENGINE_GAUGES: Record<keyof EngineGaugeValues, [string, string]> = {
  busySeconds: ['trajflow_engine_busy_seconds', 'Seconds the inference engine spent in forward passes since it started'],
  uptimeSeconds: ['trajflow_engine_uptime_seconds', 'Seconds since the inference engine started'],
  generatedTokens: ['trajflow_engine_generated_tokens', 'Tokens the inference engine generated since it started'],
  decodeSteps: ['trajflow_engine_decode_steps', 'Decode steps the inference engine ran since it started'],
  meanBatchSize: ['trajflow_engine_mean_batch_size', 'Mean sequences per decode step since the engine started'],
  runningSequences: ['trajflow_engine_running_sequences', 'Sequences the engine is decoding now'],
  waitingSequences: ['trajflow_engine_waiting_sequences', 'Sequences waiting for a batch slot now'],
  policyVersion: ['trajflow_engine_policy_version', 'Policy version the engine serves now'],
};

function gauges<K extends string>(meter: MetricMeter, specs: Record<K, readonly [string, string]>): Record<K, MetricGauge> {
  const out = {} as Record<K, MetricGauge>;
  for (const key of Object.keys(specs) as K[]) out[key] = meter.createGauge(specs[key][0], 'float', undefined, specs[key][1]);
  return out;
}

export class TrajflowMetrics {
  readonly activities: MetricCounter;
  readonly activityDuration: MetricHistogram;
  readonly activitiesInFlight: MetricGauge;
  readonly trajectoriesFinished: MetricCounter;
  readonly turnsGenerated: MetricCounter;
  readonly trainSteps: MetricCounter;
  private readonly workerBusySeconds: MetricGauge;
  private readonly workerUptimeSeconds: MetricGauge;
  private readonly trainStep: Record<keyof typeof TRAIN_STEP_GAUGES, MetricGauge>;
  private readonly engine: Record<keyof EngineGaugeValues, MetricGauge>;

  constructor(meter: MetricMeter) {
    this.activities = meter.createCounter('trajflow_activities', undefined, 'Activity executions finished on this worker, by role, activity type and outcome');
    this.activityDuration = meter.createHistogram(
      'trajflow_activity_duration_seconds',
      'float',
      undefined,
      'Duration of activity executions, by role and activity type (seconds)',
    );
    this.activitiesInFlight = meter.createGauge('trajflow_activities_in_flight', 'int', undefined, 'Activity executions running now, by role');
    this.trajectoriesFinished = meter.createCounter(
      'trajflow_trajectories_finished',
      undefined,
      'Trajectories recorded (recordTrajectory activities completed) on this worker',
    );
    this.turnsGenerated = meter.createCounter('trajflow_turns_generated', undefined, 'Model turns generated (generate activities completed) on this worker');
    this.trainSteps = meter.createCounter('trajflow_train_steps', undefined, 'Train steps completed on this worker');
    this.workerBusySeconds = meter.createGauge(
      'trajflow_worker_busy_seconds',
      'float',
      undefined,
      'Seconds with at least one activity running since the worker started, by role',
    );
    this.workerUptimeSeconds = meter.createGauge('trajflow_worker_uptime_seconds', 'float', undefined, 'Seconds since the worker role started, by role');
    this.trainStep = gauges(meter, TRAIN_STEP_GAUGES);
    this.engine = gauges(meter, ENGINE_GAUGES);
  }

  recordTrainStep(runId: string, metrics: TrainStepMetrics): void {
    this.trainSteps.add(1);
    for (const key of Object.keys(TRAIN_STEP_GAUGES) as (keyof typeof TRAIN_STEP_GAUGES)[]) {
      const value = metrics[key];
      if (typeof value === 'number' && Number.isFinite(value)) this.trainStep[key].set(value, { run: runId });
    }
  }

  recordBusy(role: string, stats: BusyStats): void {
    this.workerBusySeconds.set(stats.busyMs / 1000, { role });
    this.workerUptimeSeconds.set(stats.uptimeMs / 1000, { role });
  }

  recordEngine(values: EngineGaugeValues, tags: MetricTags = {}): void {
    for (const key of Object.keys(ENGINE_GAUGES) as (keyof EngineGaugeValues)[]) this.engine[key].set(values[key], tags);
  }
}

let processMetrics: TrajflowMetrics | undefined;

/**
 * This process's metrics. The first call reads the Temporal runtime, installing a default one if
 * none was: call it only once the workers' runtime is set up (recording happens in activities,
 * which run after a worker exists).
 */
export function trajflowMetrics(): TrajflowMetrics {
  return (processMetrics ??= new TrajflowMetrics(Runtime.instance().metricMeter));
}

/** Runs `sample` now and every `intervalMs`, for gauges read from elsewhere; returns its stopper. */
export function sampleEvery(intervalMs: number, sample: () => void | Promise<void>): () => void {
  const run = () => void Promise.resolve(sample()).catch(() => undefined);
  run();
  const timer = setInterval(run, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
