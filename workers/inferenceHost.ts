/**
 * What serves model calls in a process: the provider, the inference activities over it, the
 * activity interceptors that trace and meter them, and the engine counters published for the
 * trainer. One per process: the inference worker serves the activities on the inference queue,
 * and the workflow worker runs `generate` as a local activity for runs with `inference.calls: local`.
 */
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { RunConfig } from '../config/schema';
import { createServerEvaluationActivities } from '../activities/evaluation';
import { createAgentModelActivities, type AgentModelActivities } from '../activities/agentModel';
import { createInferenceActivities, createTurnSampler, type InferenceActivities } from '../activities/inference';
import { ServedWeights } from '../activities/servedWeights';
import { chatFormatFor } from '../src/chat/load';
import { compatibilityOf } from '../src/core/compatibility';
import type { EngineStats, InferenceProvider } from '../src/inference/provider';
import { engineStatsReporter } from '../src/inference/statsReporter';
import type { Logger } from '../src/log';
import { meterActivities } from '../src/metrics/activityMetrics';
import type { SnapshotReporter } from '../src/metrics/snapshots';
import { buildId } from '../src/paths';
import { CheckpointStore } from '../src/store/checkpointStore';
import { enginesDir } from '../src/store/runLayout';
import type { TrajectoryStorage } from '../src/store/trajectoryStore';
import { traceActivities } from '../src/trace/activityInterceptor';

export interface InferenceHost {
  provider: InferenceProvider;
  /**
   * `generate`; the AI SDK's model activities of agents written as workflows (they sample and
   * store turns as `generate` does); a real model's held-out `evaluate`, through the same servers.
   */
  activities: InferenceActivities & AgentModelActivities & Partial<ReturnType<typeof createServerEvaluationActivities>>;
  activityInterceptors: ActivityInterceptorsFactory[];
  /** Publishes the provider's counters to <dataDir>/engines/ (read by the trainer and the run summary). */
  stats: SnapshotReporter<EngineStats>;
}

export async function createInferenceHost(
  config: Pick<RunConfig, 'model' | 'modules' | 'dataDir'>,
  store: TrajectoryStorage,
  provider: InferenceProvider,
  logger: Logger,
): Promise<InferenceHost> {
  const checkpoints = new CheckpointStore(config.dataDir, config.model.path ? 'huggingface' : 'embedded');
  const chat = await chatFormatFor(config.model);
  const compatibility = compatibilityOf(config, buildId());
  const { maxContext } = config.model;
  // Turns and evaluations sample through one provider: they share its weights and their lease.
  const weights = new ServedWeights(provider, checkpoints, logger);
  const samplingDeps = { provider, store, weights, chat, maxContext, compatibility, logger };
  return {
    provider,
    activities: {
      ...createInferenceActivities(samplingDeps),
      ...createAgentModelActivities({ store, turnOf: createTurnSampler(samplingDeps) }),
      ...(config.model.path ? createServerEvaluationActivities({ provider, weights, chat, maxContext, compatibility, dataDir: config.dataDir, logger }) : {}),
    },
    activityInterceptors: [traceActivities(config.dataDir, 'inference'), meterActivities('inference')],
    stats: engineStatsReporter(provider, enginesDir(config.dataDir)),
  };
}
