/**
 * SIGKILL the env worker that holds the environment sessions in the middle of a rollout, start a
 * new one, and every trajectory still completes: its session is rebuilt on the new worker by
 * replaying the recorded actions on a fresh, identically seeded environment.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { modelConfig, type ModelConfig } from '../src/model/config';
import { initWeights, saveCheckpoint } from '../src/model/weights';
import { runFormatWarmup } from '../src/rl/formatWarmup';
import { PolicyTrainer } from '../src/rl/trainer';
import { createLogger } from '../src/log';
import { runRollout } from '../client/runRollout';
import { parseRunConfig } from '../src/runConfig';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { startWorkers } from '../workers/start';
import { eventually, testConfig } from './support/harness';
import { killWorker, type LoggedWorker, spawnLoggedWorker } from './support/faultKit';
import { writeConfigFile } from './support/workerProcess';

async function warmedCheckpoint(architecture: Partial<ModelConfig>): Promise<string> {
  const trainer = await PolicyTrainer.create({ weights: initWeights(modelConfig(architecture), 3) });
  const { env, agent } = parseRunConfig({ env: { name: 'frozenlake', map: 'random' } });
  await runFormatWarmup(trainer, { steps: 40, seed: 3, env, agent });
  const file = path.join(mkdtempSync(path.join(process.env.TRAJFLOW_TEST_DATA_DIR ?? os.tmpdir(), 'warm-')), 'warm.ckpt');
  await saveCheckpoint(file, { weights: trainer.snapshot(), policyVersion: 0 });
  trainer.dispose();
  return file;
}

describe('env worker SIGKILLed mid-rollout', () => {
  it('rebuilds lost sessions by replay; no trajectory lost, hung or duplicated', async () => {
    // A format-warmed tiny policy, so answers parse and trajectories keep stepping their sessions
    // after the kill (an untrained one never reaches the environment).
    const architecture = { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 };
    const checkpoint = await warmedCheckpoint(architecture);
    const config = testConfig('fault-env', {
      model: { ...architecture, checkpoint },
      env: { map: 'random', pFrozen: 0.95, maxSteps: 10 },
      agent: { maxTurns: 10 },
      rollout: { groups: 2, groupSize: 4, maxConcurrency: 8 },
    });
    const runId = 'fault-env-run';
    const logger = createLogger('test');
    logger.level = 'warn';
    const configFile = writeConfigFile(config);
    const store = new TrajectoryStore(config.dataDir);

    const local = await startWorkers(config, ['workflows', 'inference'], logger);
    // Started inside the try: should it fail, the in-process workers still shut down (or jest
    // would never exit).
    let env: LoggedWorker | undefined;
    try {
      env = await spawnLoggedWorker('env', configFile, path.join(config.dataDir, 'env-worker.log'));
      const rollout = runRollout(config, { runId, local: false, logger });
      // Sessions are open once the first turns are stored (reset happens before turn 0).
      await eventually(async () => ((await store.listTrajectories(runId)).length >= 4 ? true : undefined), 120_000);
      await killWorker(env);
      env = await spawnLoggedWorker('env', configFile, path.join(config.dataDir, 'env-worker.log'));

      const summary = await rollout;
      expect(summary.trajectories + summary.failedTrajectories).toBe(8);
      expect(summary.failedTrajectories).toBe(0);
      const ids = await store.listTrajectories(runId);
      expect(new Set(ids).size).toBe(8);
      let restores = 0;
      for (const id of ids) restores += (await store.getTrajectory(runId, id))!.envRestores;
      console.log(`environment sessions rebuilt by replay: ${restores}`);
      expect(restores).toBeGreaterThan(0);
    } finally {
      await killWorker(env);
      await local.shutdown();
    }
  }, 300_000);
});
