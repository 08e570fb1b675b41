/**
 * Activity interceptor that keeps a worker's Prometheus counters (src/metrics/prometheus.ts) and,
 * when given one, its busy tracker (src/metrics/busy.ts): executions by type and outcome, time in
 * activities, trajectories recorded, turns generated, train steps and the last step's metrics.
 */
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { BusyTracker } from './busy';
import { metrics as registry, type MetricsRegistry } from './prometheus';

interface StepResult {
  metrics?: {
    step?: number;
    rewardMean?: number;
    successRate?: number;
    loss?: number;
    tokens?: number;
    stalenessMax?: number;
    trainerIdleFraction?: number;
    engineBusyFraction?: number;
    envBusyFraction?: number;
  };
}

const STEP_GAUGES = [
  ['trajflow_train_step', 'step'],
  ['trajflow_train_reward_mean', 'rewardMean'],
  ['trajflow_train_success_rate', 'successRate'],
  ['trajflow_train_loss', 'loss'],
  ['trajflow_train_tokens', 'tokens'],
  ['trajflow_train_staleness_max', 'stalenessMax'],
  ['trajflow_train_trainer_idle_fraction', 'trainerIdleFraction'],
  ['trajflow_train_engine_busy_fraction', 'engineBusyFraction'],
  ['trajflow_train_env_busy_fraction', 'envBusyFraction'],
] as const;

export function recordTrainStep(runId: string, result: StepResult, metrics: MetricsRegistry = registry): void {
  metrics.inc('trajflow_train_steps_total');
  for (const [name, key] of STEP_GAUGES) {
    const value = result.metrics?.[key];
    if (typeof value === 'number') metrics.set(name, { run: runId }, value);
  }
}

export function meterActivities(role: string, tracker?: BusyTracker, metrics: MetricsRegistry = registry): ActivityInterceptorsFactory {
  let inFlight = 0;
  if (tracker) {
    metrics.onCollect(() => {
      const s = tracker.stats();
      metrics.set('trajflow_worker_busy_seconds', { role }, s.busyMs / 1000);
      metrics.set('trajflow_worker_uptime_seconds', { role }, s.uptimeMs / 1000);
    });
  }
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const type = ctx.info.activityType;
        const end = tracker?.begin();
        const started = performance.now();
        metrics.set('trajflow_activities_in_flight', { role }, ++inFlight);
        let outcome = 'failed';
        try {
          const result = await next(input);
          outcome = 'completed';
          if (type === 'recordTrajectory') metrics.inc('trajflow_trajectories_finished_total');
          else if (type === 'generate') metrics.inc('trajflow_turns_generated_total');
          else if (type === 'trainStep') {
            const runId = (input.args[0] as { runId?: string } | undefined)?.runId ?? '';
            recordTrainStep(runId, result as StepResult, metrics);
          }
          return result;
        } finally {
          end?.();
          metrics.set('trajflow_activities_in_flight', { role }, --inFlight);
          metrics.inc('trajflow_activities_total', { role, activity: type, outcome });
          metrics.inc('trajflow_activity_seconds_total', { role, activity: type }, (performance.now() - started) / 1000);
        }
      },
    },
  });
}
