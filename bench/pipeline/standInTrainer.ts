/**
 * BENCH-ONLY STAND-IN for the trainer (never used by rollouts or tests other than the bench's own
 * smoke test): the trainer activities with the real ones' inputs and outputs, served on the
 * trainer task queue by a worker the bench starts (and called in-process by the runs without
 * Temporal).
 *
 * A train step does the data work of a real one: it reads the batch's stored turns through the
 * TrajectoryStore, builds the training sequences (src/core/sequence), computes the group
 * advantages and the staleness of every trained token against the step's base version. It then
 * stands in for the optimizer by waiting (a timer: a GPU trainer leaves this machine's CPUs free)
 * `msPerToken` per trained token, and publishes version v+1 as a checkpoint file under the real
 * CheckpointStore name, so the inference activities' weight sync (loadNewest -> loadWeights) finds
 * it. Its metrics are the real StepMetrics: no loss is computed, so the loss fields stay at 0 as
 * for a step that took no optimizer step; tokens, staleness and utilization are measured.
 */
import type { PrepareInput, TrainStepInput, TrainStepOutput } from '../../activities/trainer';
import { buildTrainingSequences } from '../../src/core/sequence';
import { computeAdvantages } from '../../src/rl/advantages';
import { summarizeStep } from '../../src/rl/stepMetrics';
import { NOTHING_TRAINED } from '../../src/rl/trainer';
import type { CheckpointStore } from '../../src/store/checkpointStore';
import { readJson, writeJsonAtomically } from '../../src/store/files';
import { runLayout } from '../../src/store/runLayout';
import type { TrajectoryStore } from '../../src/store/trajectoryStore';

export interface TrainerRunSettings {
  /** Simulated optimizer time per trained (loss mask 1) token. */
  msPerToken: number;
  /** The run's model busy time so far, for the steps' engine-busy figure. */
  engineBusyMs: () => number;
}

/** One train step as the bench saw it (performance.now() ms). */
export interface TrainStepRecord {
  step: number;
  startedAt: number;
  endedAt: number;
  tokens: number;
  engineBusyMsAtEnd: number;
  output: TrainStepOutput;
}

export interface TrainerDepsForBench {
  store: TrajectoryStore;
  checkpoints: CheckpointStore;
  dataDir: string;
}

export class StandInTrainer {
  private readonly runs = new Map<string, { settings: TrainerRunSettings; steps: TrainStepRecord[] }>();

  constructor(private readonly deps: TrainerDepsForBench) {}

  /** Settings for a run's steps; call before the run starts. */
  beginRun(runId: string, settings: TrainerRunSettings): void {
    this.runs.set(runId, { settings, steps: [] });
  }

  stepsOf(runId: string): TrainStepRecord[] {
    return this.runOf(runId).steps;
  }

  readonly activities = {
    preparePolicy: (input: PrepareInput) => this.preparePolicy(input),
    trainStep: (input: TrainStepInput) => this.trainStep(input),
  };

  private runOf(runId: string) {
    const run = this.runs.get(runId);
    if (!run) throw new Error(`the stand-in trainer was not told about run ${runId}`);
    return run;
  }

  private async publish(runId: string, version: number): Promise<void> {
    await writeJsonAtomically(this.deps.checkpoints.file(runId, version), { standIn: 'bench trainer: no weights', runId, version });
  }

  private async preparePolicy({ runId }: PrepareInput): Promise<{ version: number; step: number }> {
    const latest = await this.deps.checkpoints.latestVersion(runId);
    if (latest !== undefined) return { version: latest, step: latest };
    await this.publish(runId, 0);
    return { version: 0, step: 0 };
  }

  private async trainStep(input: TrainStepInput): Promise<TrainStepOutput> {
    const { runId, step, baseVersion, groups, trainer } = input;
    const run = this.runOf(runId);
    const resultFile = runLayout(this.deps.dataDir, runId).trainStepFile(step);
    // Idempotent by step number, like the real trainer: a retry returns the first result.
    const done = await readJson<TrainStepOutput>(resultFile);
    if (done) return done;
    const startedAt = performance.now();
    const previousEnd = run.steps.at(-1);

    const tokenVersions: number[] = [];
    const advantages: number[] = [];
    let sequences = 0;
    for (const group of groups) {
      advantages.push(...computeAdvantages(group.rewards, trainer.advantage));
      for (const trajectoryId of group.trajectoryIds) {
        for (const sequence of buildTrainingSequences(await this.deps.store.getTurns(runId, trajectoryId))) {
          sequences++;
          tokenVersions.push(...sequence.policyVersions.filter((v) => v >= 0));
        }
      }
    }
    const trainMs = tokenVersions.length * run.settings.msPerToken;
    await new Promise((resolve) => setTimeout(resolve, trainMs));

    const version = baseVersion + 1;
    await this.publish(runId, version);
    const endedAt = performance.now();
    const engineBusyMsAtEnd = run.settings.engineBusyMs();
    // Utilization over the interval since the previous step ended (a first step: its own span).
    const intervalStart = previousEnd?.endedAt ?? startedAt;
    const intervalMs = endedAt - intervalStart;
    const metrics = summarizeStep({
      step,
      version,
      groups,
      groupsSkipped: 0,
      groupsTargetsOnly: 0,
      groupsCorrupt: 0,
      advantages,
      train: { ...NOTHING_TRAINED, tokens: tokenVersions.length, sequences, stepMs: trainMs },
      tokenVersions,
      baseVersion,
      learningRate: trainer.learningRate,
      wallMs: endedAt - startedAt,
      trainerIdleFraction: intervalMs > 0 ? (startedAt - intervalStart) / intervalMs : 0,
      engineBusyFraction: previousEnd && intervalMs > 0 ? (engineBusyMsAtEnd - previousEnd.engineBusyMsAtEnd) / intervalMs : 0,
    });
    const output: TrainStepOutput = { version, metrics };
    await writeJsonAtomically(resultFile, output);
    run.steps.push({ step, startedAt, endedAt, tokens: tokenVersions.length, engineBusyMsAtEnd, output });
    return output;
  }
}
