/**
 * `npm run soak` (after `npm run build`): a training run on its own dev server whose rollout
 * worker (inference + env roles, in its own process) is SIGKILLed every 30 s and restarted at once.
 * It first runs a stretch with no kills, then the stretch with kills, and prints, from one run:
 *   - groups trained, groups lost (admitted but never finished or trained: must be 0), groups
 *     trained twice (must be 0);
 *   - model turns lost per kill (a `generate` attempt cut short and sampled again);
 *   - trajectories/s without and with kills, and their ratio.
 *
 * Options: --kill-minutes M (default 5), --calm-minutes C (default 2.5), --every S (default 30),
 * --quick (groups of 4, 16 in flight, one group a step: the smoke run's size).
 */
import { mkdtempSync, promises as fs, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@temporalio/client';
import { loadRunConfig, parseRunConfig } from '../src/runConfig';
import { episodeSpecOf, trainingInputOf } from '../client/launch';
import { killWorker, spawnLoggedWorker, type LoggedWorker } from '../client/workerProcess';
import { PROJECT_ROOT } from '../src/paths';
import { freePort } from '../src/ports';
import { readJson } from '../src/store/files';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { markDataDir } from '../src/store/dataMarker';
import { connectClient, resolveTemporal } from '../src/temporal/connection';
import { startDevServer, stopDevServer } from '../src/temporal/devServer';
import { activityAttempts } from '../src/temporal/history';
import { rolloutStatusQuery } from '../workflows/signals';
import { rolloutIdOf } from '../src/core/ids';
import { stopUpdate, trainingStatusQuery, trainingWorkflow } from '../workflows/training';

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? Number(process.argv[at + 1]) : fallback;
  if (!(value > 0)) throw new Error(`--${name} must be a positive number, got ${process.argv[at + 1]}`);
  return value;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const killSeconds = option('kill-minutes', 5) * 60;
  const calmSeconds = option('calm-minutes', 2.5) * 60;
  const everySeconds = option('every', 30);
  const quick = process.argv.includes('--quick');

  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-soak-'));
  const port = await freePort();
  const example = loadRunConfig(path.join(PROJECT_ROOT, 'config', 'examples', 'frozenlake-train.yaml'));
  // The example training job, run long enough to outlast both stretches; learning is not the point.
  const config = parseRunConfig(
    {
      ...example,
      run: { ...example.run, name: 'soak' },
      dataDir,
      temporal: { ...example.temporal, address: `127.0.0.1:${port}` },
      // Sessions in the env worker that gets killed, so every kill also costs the sessions it held.
      env: { ...example.env, sessions: 'env-worker' },
      trainer: { ...example.trainer, steps: 10_000, formatWarmupSteps: 10, ...(quick ? { batchGroups: 1 } : {}) },
      ...(quick ? { rollout: { ...example.rollout, groupSize: 4, maxConcurrency: 16 } } : {}),
      eval: { ...example.eval, everySteps: 0 },
    },
    'soak config',
  );
  const configFile = path.join(dataDir, 'config.json');
  writeFileSync(configFile, JSON.stringify(config));
  // The worker processes refuse a data directory without its mark (src/store/dataMarker.ts).
  await markDataDir(dataDir);
  const log = (name: string) => path.join(dataDir, `${name}.log`);

  console.log(`soak: data in ${dataDir}`);
  await startDevServer({ dataDir: path.join(dataDir, 'temporal'), port, headless: true });
  const workers: LoggedWorker[] = [];
  let rollout: LoggedWorker | undefined;
  const target = resolveTemporal(config.temporal);
  const connection = await connectClient(target);
  try {
    workers.push(await spawnLoggedWorker('workflows', configFile, log('workflows')));
    workers.push(await spawnLoggedWorker('trainer', configFile, log('trainer')));
    rollout = await spawnLoggedWorker('inference,env', configFile, log('rollout'));

    const client = new Client({ connection, namespace: target.namespace });
    const runId = 'soak';
    const training = await client.workflow.start(trainingWorkflow, {
      workflowId: runId,
      taskQueue: episodeSpecOf(config, runId).taskQueues.workflows,
      args: [trainingInputOf(config, runId)],
    });
    const controller = client.workflow.getHandle(rolloutIdOf(runId));
    const finished = async () => (await controller.query(rolloutStatusQuery)).trajectoriesFinished;

    // Measure from the first published version on, so version 0's warm-up is outside both stretches.
    while ((await training.query(trainingStatusQuery)).step < 1) await sleep(1_000);

    const calmStart = await finished();
    await sleep(calmSeconds * 1000);
    const calmRate = ((await finished()) - calmStart) / calmSeconds;
    console.log(`no kills:   ${calmRate.toFixed(2)} trajectories/s over ${calmSeconds} s`);

    const killStart = await finished();
    const killStartedAt = Date.now();
    let kills = 0;
    while (Date.now() - killStartedAt < killSeconds * 1000) {
      await sleep(Math.min(everySeconds * 1000, killSeconds * 1000 - (Date.now() - killStartedAt)));
      if (Date.now() - killStartedAt >= killSeconds * 1000) break;
      await killWorker(rollout);
      kills++;
      rollout = await spawnLoggedWorker('inference,env', configFile, log('rollout'));
    }
    const killRate = ((await finished()) - killStart) / ((Date.now() - killStartedAt) / 1000);
    console.log(`with kills: ${killRate.toFixed(2)} trajectories/s over ${killSeconds} s, ${kills} SIGKILLs of the rollout worker`);

    // Stop: no new admissions; the groups in flight finish; full batches are trained.
    await training.executeUpdate(stopUpdate);
    const result = await training.result();
    // The controller ends once every group it started has finished.
    const status = await controller.result();

    const run = runLayout(dataDir, runId);
    const trained: string[] = [];
    for (let step = 0; step < result.steps; step++) {
      const file = run.trainStepFile(step);
      trained.push(...(await readJson<{ metrics: { groupIds: string[] } }>(file))!.metrics.groupIds);
    }
    const store = new TrajectoryStore(dataDir);
    const stored = new Set((await fs.readdir(run.groupsDir)).map((file) => file.replace(/\.json$/, '')));
    const lost = status.groupsStarted - stored.size;
    const trainedTwice = trained.length - new Set(trained).size;

    let turnsRedone = 0;
    for (const id of await store.listTrajectories(runId)) {
      const attempts = await activityAttempts(client.workflow.getHandle(id));
      turnsRedone += (attempts.generate?.attempts ?? []).filter((attempt) => attempt > 1).length;
    }

    console.log(`groups started ${status.groupsStarted}, finished and stored ${stored.size}, trained ${trained.length} (the rest wait for a full batch)`);
    console.log(`groups lost: ${lost}; groups trained twice: ${trainedTwice}`);
    console.log(`model turns sampled again after a kill: ${turnsRedone} (${(turnsRedone / Math.max(1, kills)).toFixed(1)} per kill)`);
    console.log(
      calmRate > 0
        ? `throughput with kills / without: ${(killRate / calmRate).toFixed(2)}`
        : 'throughput with kills / without: n/a (no trajectory finished in the calm stretch: lengthen --calm-minutes)',
    );
    if (lost !== 0 || trainedTwice !== 0) process.exitCode = 1;
  } finally {
    await connection.close();
    for (const worker of [...workers, rollout]) await killWorker(worker);
    await stopDevServer(path.join(dataDir, 'temporal'));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
