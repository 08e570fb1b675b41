/**
 * Crash the real-model path and lose nothing: on a SmolLM2 training run served by trajflow's
 * SGLang-API model server, SIGKILL the model server while trajectories are generating (it is
 * restarted on the same port: the HTTP client retries the requests there, the server is brought
 * back to the run's version, and no turn is stored twice), then SIGKILL one rank of the Python
 * trainer, run on 2 gloo ranks (torchrun, FSDP2), in the middle of a train step: the other rank
 * leaves the broken lock-step, torchrun starts both again, and the new rank 0 takes the retried
 * step from the published checkpoint (every version once, every group trained in exactly one step).
 */
import { readFileSync, promises as fs } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import type { TrainStepOutput } from '../activities/trainer';
import { spawnModelServer } from '../client/modelServers';
import { stopWorker } from '../client/workerProcess';
import { groupIdOf } from '../src/core/ids';
import { SMOLLM2_DIR } from '../src/paths';
import { freePort } from '../src/ports';
import { readJson } from '../src/store/files';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { trainingStatusQuery, trainingWorkflow } from '../workflows/training';
import { startWorkers, type RunningWorkers } from '../workers/start';
import { activityAttempts, auditRun, killWorker, spawnLoggedWorker, tail, waitFor, within, type LoggedWorker } from './support/faultKit';
import { trainingStart, withClient } from './support/harness';
import { realModelConfig } from './support/realModel';
import { writeConfigFile } from './support/workerProcess';

// PENDING_ACTIVITY_STATE_STARTED: a worker has taken the attempt and not yet answered.
const STARTED = 2;
// Two steps: the trainer is killed in the last one (step 1), which must restore published version 1.
const STEPS = 2;

function childrenOf(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

/** The process of trainer rank `rank`: a child of the torchrun that the `trajflow worker --role trainer` process started. */
function trainerRankPid(worker: LoggedWorker, rank: number): number | undefined {
  const ranks = childrenOf(worker.child.pid!).flatMap(childrenOf);
  return ranks.find((pid) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`RANK=${rank}`));
}

describe('real-model faults', () => {
  let server: LoggedWorker | undefined;
  let trainer: LoggedWorker | undefined;
  let rollout: RunningWorkers | undefined;

  afterEach(async () => {
    await killWorker(trainer);
    await rollout?.shutdown();
    await stopWorker(server);
  });

  it('a model server and a rank of the 2-rank Python trainer SIGKILLed mid-work: the run finishes, nothing lost or done twice', async () => {
    const port = await freePort();
    // The Python trainer heartbeats every 5 s: a dead one is noticed after 15 s.
    const config = realModelConfig('real-faults', port, { heartbeatTimeoutS: 15, steps: STEPS, distributed: { processes: 2 } });
    const runId = 'real-faults-run';
    const run = runLayout(config.dataDir, runId);
    await fs.mkdir(run.dir, { recursive: true });
    const serverLog = run.modelServerLog(port);
    const trainerLog = path.join(config.dataDir, 'trainer.log');
    const inferenceLog = path.join(config.dataDir, 'rollout-workers.log');
    const logger = pino({ level: 'info' }, pino.destination({ dest: inferenceLog, sync: true }));

    server = await spawnModelServer(SMOLLM2_DIR, port, serverLog, config.inference.maxBatch);
    rollout = await startWorkers(config, ['workflows', 'inference', 'env'], logger);
    trainer = await spawnLoggedWorker('trainer', writeConfigFile(config), trainerLog);
    const training = withClient(async (client) => (await client.workflow.start(trainingWorkflow, trainingStart(config, runId))).result());
    training.catch(() => undefined);
    const store = new TrajectoryStore(config.dataDir);

    // 1. The model server dies while a request is on it (a trajectory's generate activity has
    // been taken: it is decoding); it comes back on the same port.
    await withClient((client) =>
      waitFor(
        'a generate activity in progress',
        async () => {
          const running = client.workflow.list({ query: `TrajflowRun = '${runId}' AND TrajflowKind = 'trajectory' AND ExecutionStatus = 'Running'` });
          for await (const trajectory of running) {
            const { raw } = await client.workflow.getHandle(trajectory.workflowId).describe();
            if (raw.pendingActivities?.some((a) => a.activityType?.name === 'generate' && a.state === STARTED)) return true;
          }
          return undefined;
        },
        240_000,
        100,
      ),
    );
    await killWorker(server);
    console.log('SIGKILLed the model server with a generate request in flight');
    server = await spawnModelServer(SMOLLM2_DIR, port, serverLog, config.inference.maxBatch);

    // 2. A rank of the Python trainer dies inside a train step (step >= 1: the retry must restore a
    // published version and its optimizer state). Rank 1, which does not poll Temporal: the leader
    // must notice the lock-step is broken.
    const killed = await withClient((client) => {
      const handle = client.workflow.getHandle(runId);
      return waitFor(
        'a train step (step >= 1) in progress on the Python trainer',
        async () => {
          const status = await handle.query(trainingStatusQuery).catch(() => undefined);
          if (!status || status.step < 1) return undefined;
          const { raw } = await handle.describe();
          return raw.pendingActivities?.some((a) => a.activityType?.name === 'trainStep' && a.state === STARTED) ? status.step : undefined;
        },
        300_000,
        100,
      );
    });
    const follower = trainerRankPid(trainer, 1);
    expect(follower).toBeDefined();
    process.kill(follower!, 'SIGKILL');
    console.log(`SIGKILLed trainer rank 1 (pid ${follower}) in step ${killed}`);

    const result = await within(
      training,
      420_000,
      `training run ${runId} after the kills`,
      () => `trainer log:\n${tail(trainerLog)}\nserver log:\n${tail(serverLog)}`,
    );
    expect(result.version).toBe(STEPS);
    // torchrun started both ranks again under the same `trajflow worker`.
    expect(trainer.child.exitCode).toBeNull();
    expect(readFileSync(trainerLog, 'utf8').split('trainer rank following the leader').length - 1).toBe(2);

    // The HTTP client sent requests again after the server died, and the turns are exactly once.
    expect(readFileSync(inferenceLog, 'utf8')).toContain('model server failed; sending the request to another');
    const groupIds = Array.from({ length: STEPS }, (_, i) => groupIdOf(runId, i));
    expect(await auditRun(store, runId, groupIds, config.rollout.groupSize)).toEqual([]);

    // Every version published once, every group trained in exactly one step.
    const steps: TrainStepOutput[] = [];
    for (let step = 0; step < STEPS; step++) steps.push((await readJson<TrainStepOutput>(run.trainStepFile(step)))!);
    expect(steps.map((s) => s.version)).toEqual([1, 2]);
    expect(steps.flatMap((s) => s.metrics.groupIds).sort()).toEqual(groupIds);
    const attempts = await withClient(async (client) => (await activityAttempts(client.workflow.getHandle(runId))).trainStep);
    console.log(`train step attempts: ${attempts.attempts.join(', ')}`);
    expect(attempts.scheduled).toBe(STEPS);
    expect(attempts.attempts.some((a) => a > 1)).toBe(true);
  }, 900_000);
});
