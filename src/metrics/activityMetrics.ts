/**
 * Activity interceptor that keeps a worker's metrics (src/metrics/meter.ts) and, when given one,
 * its busy tracker (src/metrics/busy.ts, whose totals workers/start.ts samples into gauges): executions by type and outcome, their durations,
 * trajectories recorded, turns generated, train steps and the last step's metrics.
 */
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { BusyTracker } from './busy';
import { trajflowMetrics, type TrainStepMetrics, type TrajflowMetrics } from './meter';

export function meterActivities(role: string, tracker?: BusyTracker, metrics: () => TrajflowMetrics = trajflowMetrics): ActivityInterceptorsFactory {
  let inFlight = 0;
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const m = metrics();
        const type = ctx.info.activityType;
        const end = tracker?.begin();
        const started = performance.now();
        m.activitiesInFlight.set(++inFlight, { role });
        let outcome = 'failed';
        try {
          const result = await next(input);
          outcome = 'completed';
          if (type === 'recordTrajectory') m.trajectoriesFinished.add(1);
          else if (type === 'generate') m.turnsGenerated.add(1);
          else if (type === 'trainStep') {
            const runId = (input.args[0] as { runId?: string } | undefined)?.runId ?? '';
            m.recordTrainStep(runId, (result as { metrics?: TrainStepMetrics } | undefined)?.metrics ?? {});
          }
          return result;
        } finally {
          end?.();
          m.activitiesInFlight.set(--inFlight, { role });
          m.activities.add(1, { role, activity: type, outcome });
          m.activityDuration.record((performance.now() - started) / 1000, { role, activity: type });
        }
      },
    },
  });
}
