/**
 * trajflow on a Temporal cluster that is not its own dev server: a second server stands for the
 * cluster, on a namespace other than `default` and started without trajflow's search-attribute
 * flags. `trajflow cluster prepare` registers them (and a second run changes nothing); then each
 * role runs as its own process, in its own working directory, told where the cluster is by
 * environment variables alone (the run config has no `temporal:` section), with the data directory
 * the only thing they share; a short training run completes. The single-machine path
 * (`--local`) works on a namespace of its own too. And what must fail fast, in one
 * line: a worker whose data directory lacks its mark, an address that does not answer, a
 * namespace that does not exist, a certificate file that is not there, a search attribute already
 * there with another type (and then nothing is added).
 */
import { ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { spawnLoggedProcess, stopWorker, type LoggedWorker } from '../client/workerProcess';
import { PROJECT_ROOT } from '../src/paths';
import { freePort } from '../src/ports';
import { ensureTemporalBinary } from '../src/temporal/binary';
import { runningDevServer, TUNING_ARGS, waitForServer } from '../src/temporal/devServer';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
// Also points worker processes at the suite's prebuilt workflow bundle (TRAJFLOW_WORKFLOW_BUNDLE).
import { tail } from './support/faultKit';
import { eventually } from './support/harness';

const CLI = path.join(PROJECT_ROOT, 'bin', 'trajflow.js');
const NAMESPACE = 'trajtest';
/** A namespace where one of trajflow's search attributes already exists with another type. */
const CONFLICTING = 'trajconflict';
const ROLES = ['workflows', 'inference', 'env', 'trainer'];

/** A tiny training job: two steps of one group each. No `temporal:` section: the environment says where. */
function runConfig(dataDir: string): string {
  return JSON.stringify({
    run: { name: 'cluster', seed: 3 },
    dataDir,
    env: { name: 'frozenlake', size: 4, map: 'classic', maxSteps: 6 },
    agent: { maxTurns: 3 },
    sampling: { maxTokens: 8 },
    model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 256 },
    rollout: { groupSize: 4, maxConcurrency: 8 },
    trainer: { steps: 2, batchGroups: 1 },
  });
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the CLI to its end (asynchronously: the server and workers keep running meanwhile). */
function cli(args: string[], env: NodeJS.ProcessEnv, options: { cwd?: string; timeoutMs?: number } = {}): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { ...process.env, ...env }, cwd: options.cwd, timeout: options.timeoutMs ?? 60_000 },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: number }).code ?? null) : 0;
        resolve({ code: typeof code === 'number' ? code : null, stdout, stderr, ms: Date.now() - started });
      },
    );
  });
}

describe('a Temporal cluster of its own', () => {
  const dir = mkdtempSync(path.join(process.env.TRAJFLOW_TEST_DATA_DIR ?? os.tmpdir(), 'cluster-'));
  const shared = path.join(dir, 'shared');
  const dataDir = path.join(shared, 'data');
  const configFile = path.join(shared, 'run.json');
  let server: ChildProcess | undefined;
  let address = '';
  let env: NodeJS.ProcessEnv = {};
  const workers: LoggedWorker[] = [];

  beforeAll(async () => {
    mkdirSync(shared);
    writeFileSync(configFile, runConfig(dataDir));
    const port = await freePort();
    address = `127.0.0.1:${port}`;
    env = { TEMPORAL_ADDRESS: address, TEMPORAL_NAMESPACE: NAMESPACE, TRAJFLOW_LOG_LEVEL: 'info' };
    // The Temporal CLI itself, not trajflow's launcher (which registers the search attributes).
    // The tuning only makes it quicker (see src/temporal/devServer.ts).
    const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless', '--namespace', NAMESPACE, '--namespace', CONFLICTING];
    args.push('--db-filename', path.join(dir, 'cluster.sqlite'), '--log-level', 'warn');
    args.push(...TUNING_ARGS);
    server = spawn(ensureTemporalBinary(), args, { stdio: 'ignore' });
    await waitForServer(address);
  });

  afterAll(async () => {
    await Promise.all(workers.map((worker) => stopWorker(worker)));
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server!.once('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
  });

  it('prepares the cluster, then trains with every role in its own process configured by environment variables', async () => {
    const first = await cli(['cluster', 'prepare', '--data-dir', dataDir], env);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`namespace ${NAMESPACE} (TEMPORAL_NAMESPACE)`);
    const connection = await Connection.connect({ address });
    try {
      const listed = await connection.operatorService.listSearchAttributes({ namespace: NAMESPACE });
      for (const key of Object.values(SEARCH_ATTRIBUTES)) expect(listed.customAttributes?.[key.name]).toBe(encodeSearchAttributeIndexedValueType(key.type));
    } finally {
      await connection.close();
    }
    const again = await cli(['cluster', 'prepare', '--data-dir', dataDir], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('search attributes added: none');
    expect(again.stdout).toContain('already marked');

    // Each role as if on a host of its own: its own working directory, its own log.
    const started = await Promise.all(
      ROLES.map((role) => {
        const home = path.join(dir, role);
        mkdirSync(home);
        return spawnLoggedProcess(
          {
            name: `worker ${role}`,
            command: process.execPath,
            args: [CLI, 'worker', '--role', role, '-c', configFile],
            cwd: home,
            env,
            readyLine: 'workers polling',
          },
          path.join(home, 'worker.log'),
          { exitWithParent: true },
        );
      }),
    );
    workers.push(...started);
    const client = path.join(dir, 'client');
    mkdirSync(client);
    const trained = await cli(['train', configFile, '--run-id', 'cluster-run'], env, { cwd: client, timeoutMs: 150_000 });
    if (trained.code !== 0) throw new Error(`train exited ${trained.code}:\n${trained.stderr}\n${workers.map((w) => tail(w.logFile, 1500)).join('\n')}`);
    expect(trained.stdout).toContain('training cluster-run: 2 steps, version 2');
  });

  it('refuses, in one line, a namespace where a search attribute has another type, and adds nothing', async () => {
    const reward = SEARCH_ATTRIBUTES.reward.name;
    const connection = await Connection.connect({ address });
    const listed = async () => (await connection.operatorService.listSearchAttributes({ namespace: CONFLICTING })).customAttributes ?? {};
    try {
      await connection.operatorService.addSearchAttributes({
        namespace: CONFLICTING,
        searchAttributes: { [reward]: encodeSearchAttributeIndexedValueType('KEYWORD')! },
      });
      await eventually(async () => ((await listed())[reward] !== undefined ? true : undefined));
      const run = await cli(['cluster', 'prepare'], { ...env, TEMPORAL_NAMESPACE: CONFLICTING });
      expect(run.code).toBe(1);
      expect(run.stderr.trim()).toBe(
        `search attribute type conflict in namespace "${CONFLICTING}": ${reward} is Keyword there, trajflow needs Double (remove or rename it; nothing was added)`,
      );
      const after = await listed();
      expect(Object.keys(after).filter((name) => name.startsWith('Trajflow'))).toEqual([reward]);
    } finally {
      await connection.close();
    }
  });

  it('runs `--local` on a namespace other than default, which the dev server gets ready', async () => {
    const local = path.join(dir, 'local');
    const config = path.join(dir, 'local.json');
    writeFileSync(config, JSON.stringify({ ...JSON.parse(runConfig(local)), rollout: { groups: 2, groupSize: 2, maxConcurrency: 4 } }));
    // --local starts a dev server unless its data directory has one running: adopt the suite's.
    const suite = runningDevServer(process.env.TRAJFLOW_TEST_DATA_DIR!)!;
    mkdirSync(path.join(local, 'temporal'), { recursive: true });
    writeFileSync(path.join(local, 'temporal', 'temporal-server.json'), JSON.stringify(suite));
    const run = await cli(['run', config, '--local', '--run-id', 'local-run'], { TEMPORAL_ADDRESS: suite.address, TEMPORAL_NAMESPACE: 'trajlocal' });
    if (run.code !== 0) throw new Error(`run --local exited ${run.code}:\n${run.stderr}`);
    expect(run.stdout).toContain('trajectories        4 (0 failed)');
  });

  it('refuses, in one line, a worker whose data directory lacks its mark', async () => {
    const elsewhere = path.join(dir, 'unmounted');
    const config = path.join(dir, 'unmounted.json');
    writeFileSync(config, runConfig(elsewhere));
    const run = await cli(['worker', '--role', 'env', '-c', config], env);
    expect(run.code).not.toBe(0);
    expect(run.stderr.trim()).toBe(
      `data directory ${elsewhere} holds no trajflow-data.json: it is not the data directory this deployment shares. Mount the shared data directory there (or set dataDir to where it is mounted); for a new deployment, mark it once with \`trajflow cluster prepare --data-dir ${elsewhere}\` (trajflow run and train mark it too)`,
    );
  });

  it('fails fast, in one line, on an address that does not answer, a missing namespace or certificate', async () => {
    const closed = await freePort();
    const [wrongAddress, wrongNamespace, missingCert] = await Promise.all([
      cli(['worker', '--role', 'env', '-c', configFile], { ...env, TEMPORAL_ADDRESS: `127.0.0.1:${closed}` }),
      cli(['worker', '--role', 'env', '-c', configFile], { ...env, TEMPORAL_NAMESPACE: 'no-such-namespace' }),
      cli(['status', 'some-run'], {
        ...env,
        TEMPORAL_TLS_CLIENT_CERT_PATH: path.join(dir, 'client.pem'),
        TEMPORAL_TLS_CLIENT_KEY_PATH: path.join(dir, 'client.key'),
      }),
    ]);
    for (const run of [wrongAddress, wrongNamespace, missingCert]) {
      expect(run.code).toBe(1);
      expect(run.stderr.trim().split('\n')).toHaveLength(1);
      expect(run.ms).toBeLessThan(20_000);
    }
    expect(wrongAddress.stderr.trim()).toBe(
      `cannot connect to Temporal at 127.0.0.1:${closed} (TEMPORAL_ADDRESS, no TLS): tcp connect error: Connection refused`,
    );
    expect(wrongNamespace.stderr).toContain(`namespace "no-such-namespace" (TEMPORAL_NAMESPACE) does not exist on Temporal at ${address}`);
    expect(missingCert.stderr.trim()).toBe(`TLS client certificate file ${path.join(dir, 'client.pem')} does not exist (TEMPORAL_TLS_CLIENT_CERT_PATH)`);
  });
});
