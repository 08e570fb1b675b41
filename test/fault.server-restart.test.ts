/**
 * The Temporal dev server itself crashes (SIGKILL) in the middle of a rollout and is started again
 * on the same SQLite file. The workers (a child process) keep running through the outage and
 * reconnect; the rollout finishes with every trajectory and group stored exactly once. This test
 * runs its own server (own port, own data directory) so the suite's shared one is never touched.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '../src/log';
import { freePort } from '../src/ports';
import { runRollout } from '../client/runRollout';
import { runningDevServer, startDevServer, stopDevServer } from '../src/temporal/devServer';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { groupIdOf } from '../src/core/ids';
import { testConfig } from './support/harness';
import { writeConfigFile } from './support/workerProcess';
import { auditRun, isRunning, killWorker, LoggedWorker, spawnLoggedWorker, tail, trajectoryProgress, waitFor, within } from './support/faultKit';

const GROUPS = 3;
const GROUP_SIZE = 4;

describe('Temporal dev server SIGKILLed and restarted mid-rollout', () => {
  it('workers ride through the outage; every trajectory stored exactly once', async () => {
    const serverDataDir = mkdtempSync(path.join(process.env.TRAJFLOW_TEST_DATA_DIR ?? os.tmpdir(), 'own-server-'));
    const port = await freePort();
    let worker: LoggedWorker | undefined;
    try {
      const server = await startDevServer({ dataDir: serverDataDir, port, headless: true });
      const config = testConfig('fault-server', {
        temporal: { address: server.address },
        agent: { maxTurns: 4 },
        sampling: { maxTokens: 16 },
        rollout: { groups: GROUPS, groupSize: GROUP_SIZE, maxConcurrency: 6 },
      });
      const runId = 'fault-server-run';
      const logger = createLogger('test');
      logger.level = 'warn';
      const configFile = writeConfigFile(config);
      const store = new TrajectoryStore(config.dataDir);
      const workerLog = path.join(config.dataDir, 'workers.log');

      // All rollout roles in one child process: the process that has to survive the outage.
      worker = await spawnLoggedWorker('workflows,inference,env', configFile, workerLog);
      const started = Date.now();
      const rollout = runRollout(config, { runId, local: false, logger });
      rollout.catch(() => undefined);

      const atCrash = await waitFor(
        'some trajectories finished and others in flight',
        async () => {
          const p = await trajectoryProgress(store, runId);
          return p.finished >= 2 && p.inFlight >= 1 ? p : undefined;
        },
        180_000,
        100,
      );
      process.kill(server.pid, 'SIGKILL');
      await waitFor('the killed dev server to exit', async () => (runningDevServer(serverDataDir) ? undefined : true), 10_000, 50);
      const down = Date.now();
      console.log(`SIGKILLed the dev server with ${atCrash.finished} trajectories finished and ${atCrash.inFlight} in flight`);
      // Stay down until the worker has seen the outage (its polls fail), so the restart is one it
      // has to reconnect through rather than one that happened between two polls.
      await waitFor(
        'the worker to notice the server is gone',
        async () => (/tcp connect error|Connection refused|Unavailable/.test(tail(workerLog, 20_000)) ? true : undefined),
        60_000,
        200,
      );
      const restarted = await startDevServer({ dataDir: serverDataDir, port, headless: true });
      console.log(`dev server back (same SQLite file, ${restarted.address}) after ${((Date.now() - down) / 1000).toFixed(1)} s`);
      expect(restarted.dbFile).toBe(server.dbFile);

      const summary = await within(
        rollout,
        240_000,
        `rollout ${runId} after the server restart`,
        async () =>
          `store: ${JSON.stringify(await trajectoryProgress(store, runId))}\nworker log:\n${tail(workerLog)}\nserver log:\n${tail(restarted.logFile, 2000)}`,
      );
      console.log(`rollout finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      // The same worker process did all of it: it rode through the outage instead of dying.
      expect({ workerRunning: isRunning(worker), log: isRunning(worker) ? '' : tail(workerLog) }).toEqual({ workerRunning: true, log: '' });

      expect(summary.groups).toBe(GROUPS);
      expect(summary.trajectories).toBe(GROUPS * GROUP_SIZE);
      expect(summary.failedTrajectories).toBe(0);
      const groupIds = Array.from({ length: GROUPS }, (_, g) => groupIdOf(runId, g));
      expect(await auditRun(store, runId, groupIds, GROUP_SIZE)).toEqual([]);
    } finally {
      await killWorker(worker);
      await stopDevServer(serverDataDir);
    }
  }, 420_000);
});
