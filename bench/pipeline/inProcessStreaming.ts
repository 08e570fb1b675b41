/**
 * (c) The streaming pipeline in one process, without Temporal: what durability costs. The same
 * admission rule as the rollout controller (src/core/admission: concurrency and the staleness
 * bound, slots granted in group then trajectory order, a slot refilled the moment its trajectory
 * ends), the same per-step batches in admission order as the training workflow, the same activity
 * functions (./inProcessTrajectory) and the same stand-ins. Nothing here survives a crash.
 */
import { createEnvActivities, createSessionActivities, SessionRegistry } from '../../activities/environment';
import { createInferenceActivities } from '../../activities/inference';
import { ServedWeights } from '../../activities/servedWeights';
import { episodeSpecOf } from '../../client/launch';
import type { RunConfig } from '../../config/schema';
import { embeddedChatFormat } from '../../src/chat/format';
import { admissionAllowance } from '../../src/core/admission';
import { compatibilityOf } from '../../src/core/compatibility';
import { summarizeGroup, type TrajectoryOutcome } from '../../src/core/groupStats';
import { groupIdOf, trajectoryIdOf } from '../../src/core/ids';
import type { GroupSummary } from '../../src/core/records';
import { buildId } from '../../src/paths';
import { envSeedOf } from '../../workflows/rolloutController';
import { playInProcess, type InProcessActivities } from './inProcessTrajectory';
import type { RunContext } from './runContext';
import type { StandInTrainer } from './standInTrainer';

export async function runStreamingInProcess({ stack, config, runId, model, logger }: RunContext): Promise<number> {
  const compatibility = compatibilityOf(config, buildId());
  const sessions = new SessionRegistry();
  const activities: InProcessActivities = {
    env: createEnvActivities({ sessions, sessionQueue: 'in-process', compatibility, store: stack.store, logger }),
    session: createSessionActivities({ sessions, logger }),
    inference: createInferenceActivities({
      provider: model,
      store: stack.store,
      weights: new ServedWeights(model, stack.checkpoints, logger),
      chat: embeddedChatFormat,
      maxContext: config.model.maxContext,
      compatibility,
      logger,
    }),
  };
  const startedAt = performance.now();
  await new InProcessPipeline(config, runId, activities, stack.trainer).run();
  return startedAt;
}

interface OpenGroup {
  index: number;
  groupId: string;
  envSeed: number;
  granted: number;
  outcomes: TrajectoryOutcome[];
}

class InProcessPipeline {
  private version = 0;
  private admitted = 0;
  private inFlight = 0;
  private groupsStarted = 0;
  /** Started groups that still have slots to be granted, oldest first. */
  private readonly open: OpenGroup[] = [];
  private readonly finished = new Map<number, GroupSummary>();
  private readonly running: Promise<void>[] = [];
  private failure: unknown;
  private waiters: (() => void)[] = [];

  constructor(
    private readonly config: RunConfig,
    private readonly runId: string,
    private readonly activities: InProcessActivities,
    private readonly trainer: StandInTrainer,
  ) {}

  private get batchTrajectories(): number {
    return this.config.trainer.batchGroups * this.config.rollout.groupSize;
  }

  async run(): Promise<void> {
    const { config, runId, trainer } = this;
    const { trainer: settings, sampling } = config;
    ({ version: this.version } = await trainer.activities.preparePolicy({
      runId,
      trainer: settings,
      temperature: sampling.temperature,
      env: config.env,
      agent: config.agent,
    }));
    this.admit();
    for (let step = 0; step < settings.steps; step++) {
      // Step k trains groups kB..kB+B-1, the k-th batch in admission order, as the training workflow does.
      const indices = Array.from({ length: settings.batchGroups }, (_, j) => step * settings.batchGroups + j);
      await this.until(() => indices.every((i) => this.finished.has(i)));
      const groups = indices.map((i) => this.finished.get(i)!);
      ({ version: this.version } = await trainer.activities.trainStep({
        runId,
        step,
        baseVersion: this.version,
        groups,
        trainer: settings,
        temperature: sampling.temperature,
      }));
      // A published version moves the staleness bound: admit what it allows.
      this.admit();
    }
    await Promise.all(this.running);
  }

  /** Hands out free slots strictly in group order, as the rollout controller does. */
  private admit(): void {
    const { groupSize } = this.config.rollout;
    const groups = this.config.trainer.steps * this.config.trainer.batchGroups;
    for (;;) {
      const free = admissionAllowance({
        maxConcurrency: this.config.rollout.maxConcurrency,
        inFlight: this.inFlight,
        admitted: this.admitted,
        training: { maxStaleness: this.config.trainer.maxStaleness, version: this.version, batchTrajectories: this.batchTrajectories, syncPending: false },
      });
      if (free <= 0) return;
      const short = this.open[0];
      if (short) {
        const count = Math.min(groupSize - short.granted, free);
        for (let i = 0; i < count; i++) this.startTrajectory(short);
        if (short.granted === groupSize) this.open.shift();
      } else if (this.groupsStarted < groups) {
        const index = this.groupsStarted++;
        this.open.push({ index, groupId: groupIdOf(this.runId, index), envSeed: envSeedOf(this.config.run.seed, index), granted: 0, outcomes: [] });
      } else return;
    }
  }

  private startTrajectory(group: OpenGroup): void {
    const trajectoryId = trajectoryIdOf(group.groupId, group.granted++);
    this.inFlight++;
    this.admitted++;
    const input = {
      ...episodeSpecOf(this.config, this.runId),
      groupId: group.groupId,
      trajectoryId,
      envSeed: group.envSeed,
      minPolicyVersion: this.version,
      weightSync: this.config.trainer.weightSync,
    };
    const played = playInProcess(this.activities, input).then(
      (summary): TrajectoryOutcome => ({ ok: true, summary }),
      (err): TrajectoryOutcome => ({ ok: false, trajectoryId, reason: String(err) }),
    );
    this.running.push(played.then((outcome) => this.trajectoryEnded(group, outcome)));
  }

  private async trajectoryEnded(group: OpenGroup, outcome: TrajectoryOutcome): Promise<void> {
    group.outcomes.push(outcome);
    this.inFlight--;
    this.admit();
    if (group.outcomes.length < this.config.rollout.groupSize) return;
    try {
      const ordered = [...group.outcomes].sort((a, b) => idOf(a).localeCompare(idOf(b)));
      const summary = summarizeGroup(this.runId, group.groupId, ordered);
      await this.activities.env.recordGroup(summary);
      this.finished.set(group.index, summary);
    } catch (err) {
      this.failure = err;
    }
    for (const wake of this.waiters.splice(0)) wake();
  }

  private async until(ready: () => boolean): Promise<void> {
    while (!ready()) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }
}

function idOf(outcome: TrajectoryOutcome): string {
  return outcome.ok ? outcome.summary.trajectoryId : outcome.trajectoryId;
}
