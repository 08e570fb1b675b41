/**
 * SIGKILL the inference worker in the middle of a rollout, start a new one, and the rollout
 * still completes: every trajectory exactly once, every turn stored once and in order.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createLogger } from '../src/log';
import { runRollout } from '../client/runRollout';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { startWorkers } from '../workers/start';
import { eventually, testConfig } from './support/harness';
import { killWorker, type LoggedWorker, spawnLoggedWorker } from './support/faultKit';
import { writeConfigFile } from './support/workerProcess';

async function storedTurns(runDir: string): Promise<number> {
  const dir = path.join(runDir, 'trajectories');
  const trajectories = await fs.readdir(dir).catch(() => [] as string[]);
  let count = 0;
  for (const t of trajectories) count += (await fs.readdir(path.join(dir, t))).filter((f) => f.startsWith('turn-')).length;
  return count;
}

describe('inference worker SIGKILLed mid-rollout', () => {
  it('loses no trajectory and duplicates none', async () => {
    const config = testConfig('fault-inference', { rollout: { groups: 4, groupSize: 4, maxConcurrency: 8 }, sampling: { maxTokens: 24 } });
    const runId = 'fault-inference-run';
    const logger = createLogger('test');
    logger.level = 'warn';
    const configFile = writeConfigFile(config);
    const store = new TrajectoryStore(config.dataDir);

    const local = await startWorkers(config, ['workflows', 'env'], logger);
    // Started inside the try: should it fail, the in-process workers still shut down (or jest
    // would never exit).
    let inference: LoggedWorker | undefined;
    try {
      inference = await spawnLoggedWorker('inference', configFile, path.join(config.dataDir, 'inference-worker.log'));
      const rollout = runRollout(config, { runId, local: false, logger });
      const turnsBeforeKill = await eventually(async () => {
        const n = await storedTurns(store.runDir(runId));
        return n >= 12 ? n : undefined;
      }, 120_000);
      await killWorker(inference);
      console.log(`killed the inference worker after ${turnsBeforeKill} stored turns`);
      inference = await spawnLoggedWorker('inference', configFile, path.join(config.dataDir, 'inference-worker.log'));

      const summary = await rollout;
      expect(summary.trajectories).toBe(16);
      expect(summary.failedTrajectories).toBe(0);

      const ids = await store.listTrajectories(runId);
      expect(new Set(ids).size).toBe(16);
      const grouped: string[] = [];
      for (let g = 0; g < 4; g++) grouped.push(...(await store.getGroup(runId, `${runId}.g0000${g}`))!.trajectoryIds);
      expect(grouped.sort()).toEqual([...ids].sort());
      for (const id of ids) {
        const trajectory = (await store.getTrajectory(runId, id))!;
        // getTurns throws on a missing turn; the count must match what the workflow recorded.
        expect(await store.getTurns(runId, id)).toHaveLength(trajectory.turns);
      }
    } finally {
      await killWorker(inference);
      await local.shutdown();
    }
  });
});
