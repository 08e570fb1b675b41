/**
 * What holds episode sessions in a process: the session registry, the env activities over it, the
 * activity interceptors that trace and meter them, and the busy time published for the trainer's
 * env-busy metric. One per process: env workers serve it on task queues, workflow workers run the
 * same activities as local activities for runs with `env.sessions: local`.
 */
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { createEnvActivities, createSessionActivities, SessionRegistry, type EnvActivities, type SessionActivities } from '../activities/environment';
import { compatibilityOf } from '../src/core/compatibility';
import type { Logger } from '../src/log';
import { buildId } from '../src/paths';
import type { TrajectoryStorage } from '../src/store/trajectoryStore';
import { traceActivities } from '../src/trace/activityInterceptor';
import { busyReporter, BusyTracker, type BusyStats } from '../src/metrics/busy';
import { envWorkersDir } from '../src/store/runLayout';
import type { SnapshotReporter } from '../src/metrics/snapshots';
import { meterActivities } from '../src/metrics/activityMetrics';
import { sessionQueueFor, taskQueuePrefixOf, type QueueScopedConfig } from './taskQueues';

export interface SessionHost {
  sessions: SessionRegistry;
  /** This process's own queue, where the turns of the sessions it holds for env workers are routed. */
  sessionQueue: string;
  envActivities: EnvActivities;
  sessionActivities: SessionActivities;
  activityInterceptors: ActivityInterceptorsFactory[];
  /** The time this process's env activities were running. */
  busyTracker: BusyTracker;
  /** Publishes this process's env busy time to <dataDir>/env-workers/ (read by the trainer). */
  busy: SnapshotReporter<BusyStats>;
}

export function createSessionHost(config: QueueScopedConfig, store: TrajectoryStorage, logger: Logger): SessionHost {
  const sessions = new SessionRegistry();
  const sessionQueue = sessionQueueFor(taskQueuePrefixOf(config));
  const tracker = new BusyTracker();
  return {
    sessions,
    sessionQueue,
    envActivities: createEnvActivities({ sessions, sessionQueue, compatibility: compatibilityOf(config, buildId()), store, logger }),
    sessionActivities: createSessionActivities({ sessions, logger }),
    activityInterceptors: [traceActivities(config.dataDir, 'env'), meterActivities('env', tracker)],
    busyTracker: tracker,
    busy: busyReporter(tracker, envWorkersDir(config.dataDir)),
  };
}
