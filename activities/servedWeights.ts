/**
 * The training-run weights one inference provider serves, shared by every activity of the process
 * that samples through it (a trajectory's turns, a real model's held-out evaluation). The provider
 * holds one run's weights at a time: a caller holds a lease on its run's weights from loading them
 * until its tokens are sampled, so two runs on one worker never sample with each other's weights,
 * and the weights a caller needs are named by run and version together, never by number alone.
 */
import type { Logger } from 'pino';
import type { InferenceProvider } from '../src/inference/provider';
import { RunWeightsLease } from '../src/inference/runWeightsLease';
import type { CheckpointStore } from '../src/store/checkpointStore';
import { tracer } from '../src/trace/recorder';

export interface PolicyRequirement {
  runId: string;
  minVersion: number;
  /** Turn-level weight sync: use the newest published version as soon as it exists. */
  followLatest: boolean;
}

/** How long a looked-up "newest published version" is trusted before the folder is read again. */
const LATEST_VERSION_TTL_MS = 500;

export class ServedWeights {
  /** The run and version of the weights the provider holds, once a run set them. */
  private loaded: { runId: string; version: number } | undefined;
  private loading: Promise<void> | undefined;
  private latestSeen: { runId: string; version: number; at: number } | undefined;
  private readonly lease = new RunWeightsLease();

  constructor(
    private readonly provider: InferenceProvider,
    private readonly checkpoints: CheckpointStore,
    private readonly logger: Logger,
  ) {}

  /** Runs `sample` once the provider holds weights meeting `need`, keeping them there until it is done. */
  with<T>(need: PolicyRequirement, sample: () => Promise<T>): Promise<T> {
    return this.lease.with(need.runId, async () => {
      await this.ensure(need);
      return sample();
    });
  }

  private satisfies(runId: string, version: number): boolean {
    return this.loaded !== undefined && this.loaded.runId === runId && this.loaded.version >= version;
  }

  /** The newest published version of a run, read from disk at most every LATEST_VERSION_TTL_MS. */
  private async newestPublished(runId: string): Promise<number> {
    if (this.latestSeen?.runId !== runId || Date.now() - this.latestSeen.at > LATEST_VERSION_TTL_MS) {
      this.latestSeen = { runId, version: (await this.checkpoints.latestVersion(runId)) ?? -1, at: Date.now() };
    }
    return this.latestSeen.version;
  }

  /**
   * Makes the provider hold `need.runId`'s newest weights if it holds none as new as required.
   * Concurrent calls share one load; newer-than-required is fine (and is what turn-level sync
   * wants); episode-level sync is kept by the controller, which admits no trajectory needing a
   * new version while older episodes are still running.
   */
  private async ensure(need: PolicyRequirement): Promise<void> {
    // Looked up again after each load: a newest version refused as corrupt makes the one before it the newest.
    const target = async () => (need.followLatest ? Math.max(need.minVersion, await this.newestPublished(need.runId)) : need.minVersion);
    while (!this.satisfies(need.runId, await target())) {
      this.loading ??= this.load(need).finally(() => {
        this.loading = undefined;
      });
      await this.loading;
    }
  }

  private async load(need: PolicyRequirement): Promise<void> {
    // Weight sync, traced under the call that started it (others wait inside theirs).
    const from = this.loaded?.version ?? -1;
    // Until the load succeeds the provider may hold neither run's weights (a load that failed half way).
    this.loaded = undefined;
    const version = await tracer.span('weights.load', { from }, async (span) => {
      const to = await this.checkpoints.loadNewest(need.runId, need.minVersion, (location, v) => this.provider.loadWeights(location, v), this.logger);
      span.set({ to });
      return to;
    });
    this.loaded = { runId: need.runId, version };
    this.latestSeen = undefined;
    this.logger.info({ runId: need.runId, version }, 'switched to published weights');
  }
}
