/**
 * SIGKILL the trainer process in the middle of a train step, start a new one, and the training run
 * still finishes: every version published once and in order, every group trained in exactly one
 * step, no trajectory in two batches. The lost attempt is retried (after the step's heartbeat
 * timeout) on the new trainer, which restores checkpoint v and the optimizer state from disk.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createLogger } from '../src/log';
import { loadCheckpoint } from '../src/model/weights';
import { runTraining } from '../client/runTraining';
import { CheckpointStore } from '../src/store/checkpointStore';
import { readJson, unsealRecord } from '../src/store/files';
import { readLearningCurve } from '../client/learningCurve';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import type { TrainStepOutput } from '../activities/trainer';
import { trainingStatusQuery } from '../workflows/training';
import { startWorkers } from '../workers/start';
import { testConfig, withClient } from './support/harness';
import { writeConfigFile } from './support/workerProcess';
import { activityAttempts, killWorker, PENDING_ACTIVITY_STARTED, LoggedWorker, spawnLoggedWorker, tail, waitFor, within } from './support/faultKit';

// Steps take a few hundred ms, and a poll under a loaded suite can take longer: enough steps that
// some kill lands inside one.
const STEPS = 8;
const BATCH_GROUPS = 1;
const GROUP_SIZE = 4;

const exists = (file: string) =>
  fs.access(file).then(
    () => true,
    () => false,
  );

describe('trainer process SIGKILLed mid-step', () => {
  it('retries the step on a new trainer; every version once, every group in exactly one step', async () => {
    process.env.TRAJFLOW_WORKFLOW_BUNDLE ??= process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE;
    const config = testConfig('fault-trainer', {
      model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
      agent: { maxTurns: 3 },
      sampling: { maxTokens: 24 },
      rollout: { groups: STEPS * BATCH_GROUPS, groupSize: GROUP_SIZE, maxConcurrency: 8 },
      // Several optimizer steps per batch make a step last long enough to be killed inside it. The
      // trainer heartbeats every 5 s, so a 15 s heartbeat timeout notices the dead attempt soon.
      trainer: {
        steps: STEPS,
        batchGroups: BATCH_GROUPS,
        maxStaleness: 1,
        formatWarmupSteps: 0,
        optimizerStepsPerBatch: GROUP_SIZE,
        heartbeatTimeoutS: 15,
        // Every version kept: the test reads each one.
        checkpoints: { keepEvery: 1 },
      },
      reward: { formatWeight: 0.5 },
    });
    const runId = 'fault-trainer-run';
    const logger = createLogger('test');
    logger.level = 'warn';
    const configFile = writeConfigFile(config);
    const run = runLayout(config.dataDir, runId);
    const trainerLog = path.join(config.dataDir, 'trainer.log');

    const rollout = await startWorkers(config, ['workflows', 'inference', 'env'], logger);
    let trainer: LoggedWorker | undefined;
    try {
      trainer = await spawnLoggedWorker('trainer', configFile, trainerLog);
      const started = Date.now();
      const training = runTraining(config, { runId, local: false, logger });
      // A rejection before we await it below must not go unhandled.
      training.catch(() => undefined);

      // Kill while step >= 1 is taken by the trainer: the replacement then has to restore a
      // published version (and its optimizer state) instead of starting from version 0. A step lasts
      // a few hundred ms, so the kill can land after the trainer answered; then the server no longer
      // holds the attempt, and the next step is killed instead.
      for (let fromStep = 1; ;) {
        if (fromStep >= STEPS) throw new Error(`every kill from step 1 to ${STEPS - 1} landed after the trainer had answered its step`);
        const inStep = await withClient((client) => {
          const handle = client.workflow.getHandle(runId);
          return waitFor(
            `a train step (step >= ${fromStep}) in progress on the trainer`,
            async () => {
              const status = await handle.query(trainingStatusQuery).catch(() => undefined);
              if (status && status.step >= STEPS) throw new Error(`every step from ${fromStep} on finished between two polls; no kill landed inside one`);
              if (!status || status.step < fromStep) return undefined;
              const { raw } = await handle.describe();
              const pending = raw.pendingActivities?.find((a) => a.activityType?.name === 'trainStep' && a.state === PENDING_ACTIVITY_STARTED);
              return pending ? { step: status.step, attempt: pending.attempt ?? 1, activityId: pending.activityId ?? '' } : undefined;
            },
            240_000,
            50,
          );
        });
        await killWorker(trainer);
        trainer = undefined;
        // With the trainer dead nothing can answer the attempt now (an answer already on the wire
        // gets a second to arrive): still pending means it was lost.
        await new Promise((resolve) => setTimeout(resolve, 1000));
        const lost = await withClient(async (client) =>
          ((await client.workflow.getHandle(runId).describe()).raw.pendingActivities ?? []).some(
            (a) => a.activityId === inStep.activityId && a.state === PENDING_ACTIVITY_STARTED && (a.attempt ?? 1) === inStep.attempt,
          ),
        );
        const finishedBeforeKill = await exists(run.trainStepFile(inStep.step));
        console.log(
          `SIGKILLed the trainer in step ${inStep.step} (attempt ${inStep.attempt}); step result already written: ${finishedBeforeKill}; attempt lost: ${lost}`,
        );
        trainer = await spawnLoggedWorker('trainer', configFile, trainerLog);
        if (lost) break;
        fromStep = inStep.step + 1;
      }

      // The dead attempt is detected by the step's heartbeat timeout, then retried.
      const summary = await within(training, 360_000, `training run ${runId} after the trainer kill`, async () => {
        const status = await withClient((c) => c.workflow.getHandle(runId).describe()).catch((err) => String(err));
        return `workflow: ${JSON.stringify(typeof status === 'string' ? status : status.raw.pendingActivities, null, 1)}\ntrainer log:\n${tail(trainerLog)}`;
      });
      console.log(`training finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);

      expect(summary.result.version).toBe(STEPS);
      expect(summary.result.steps).toBe(STEPS);
      expect(summary.result.groupsTrained).toBe(STEPS * BATCH_GROUPS);

      // The step files are the source of truth: one per step, version = step + 1.
      const steps: TrainStepOutput[] = [];
      for (let step = 0; step < STEPS; step++) steps.push((await readJson<TrainStepOutput>(run.trainStepFile(step)))!);
      expect(await exists(run.trainStepFile(STEPS))).toBe(false);
      expect(steps.map((s) => s.metrics.step)).toEqual([...Array(STEPS).keys()]);
      expect(steps.map((s) => s.version)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));

      // Every group of the run trained in exactly one step, and no trajectory in two batches.
      const trainedGroups = steps.flatMap((s) => s.metrics.groupIds);
      const storedGroups = (await fs.readdir(run.groupsDir)).map((f) => f.replace(/\.json$/, '')).sort();
      expect(storedGroups).toHaveLength(STEPS * BATCH_GROUPS);
      expect([...trainedGroups].sort()).toEqual(storedGroups);
      const store = new TrajectoryStore(config.dataDir);
      const trainedTrajectories: string[] = [];
      for (const [i, s] of steps.entries()) {
        let count = 0;
        for (const groupId of s.metrics.groupIds) {
          const ids = (await store.getGroup(runId, groupId))!.trajectoryIds;
          trainedTrajectories.push(...ids);
          count += ids.length;
        }
        expect({ step: i, trajectories: s.metrics.trajectories }).toEqual({ step: i, trajectories: count });
      }
      expect(new Set(trainedTrajectories).size).toBe(trainedTrajectories.length);
      expect(trainedTrajectories).toHaveLength(STEPS * BATCH_GROUPS * GROUP_SIZE);

      // Every step has its line in the learning curve, and every line is whole; a retry may have appended one twice.
      const lines = (await fs.readFile(run.metricsFile, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((l) => (unsealRecord(Buffer.from(l), run.metricsFile) as { step: number }).step);
      expect([...new Set(lines)].sort()).toEqual([...Array(STEPS).keys()]);
      expect((await readLearningCurve(run)).map((m) => m.step)).toEqual([...Array(STEPS).keys()]);

      // One checkpoint per version 0..STEPS, each loadable and labelled with its version.
      const checkpoints = new CheckpointStore(config.dataDir);
      expect(await checkpoints.latestVersion(runId)).toBe(STEPS);
      for (let version = 0; version <= STEPS; version++) expect((await loadCheckpoint(checkpoints.file(runId, version))).policyVersion).toBe(version);

      const attempts = await withClient(async (client) => (await activityAttempts(client.workflow.getHandle(runId))).trainStep);
      const retried = attempts.attempts.filter((a) => a > 1).length;
      console.log(
        `train steps scheduled ${attempts.scheduled}, retried ${retried} (final attempts ${attempts.attempts.join(', ')}); metrics lines ${lines.length} for ${STEPS} steps; step wall ms ${steps.map((s) => s.metrics.wallMs).join(', ')}`,
      );
      expect(attempts.scheduled).toBe(STEPS);
      // The killed attempt was taken and never answered, so its step must have been retried.
      expect(retried).toBeGreaterThanOrEqual(1);
    } finally {
      await killWorker(trainer);
      await rollout.shutdown();
    }
  }, 480_000);
});
