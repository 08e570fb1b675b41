/**
 * `npm run bench:learning`: the example training jobs run one after another, each with several
 * seeds and repeats (a seed does not fix an asynchronous run: batch contents and per-token policy
 * versions depend on timing), and how fast and how surely each learned. Per run, and summarized
 * per config as median and worst:
 *   - time and step at which sampled success (the train batch's) first reached 50, 80 and 95%;
 *   - time and version at which held-out success first reached 70% and 95%;
 *   - whether each level held to the end: sampled levels by the mean of every later window of
 *     HOLD_WINDOW steps (one batch is 32 episodes, too few to judge a step alone), held-out
 *     levels by every later evaluation.
 *
 *   npm run bench:learning -- --config config/examples/frozenlake-train.yaml --seeds 1,2,3 --repeats 2 [--steps N]
 *
 * Run it alone: the runs measure seconds on a machine shared by the trainer, the engine, the
 * workflow worker and the dev server.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { EvaluationRecord } from '../activities/evaluation';
import { runTraining } from '../client/runTraining';
import type { RunConfig } from '../config/schema';
import { createLogger } from '../src/log';
import type { StepMetrics } from '../src/rl/stepMetrics';
import { loadRunConfig } from '../src/runConfig';

const SAMPLED_LEVELS = [0.5, 0.8, 0.95];
const HELD_OUT_LEVELS = [0.7, 0.95];
/** Steps averaged when judging whether a sampled level held. */
const HOLD_WINDOW = 5;

export interface Milestone {
  level: number;
  /** Train step (sampled levels) or published version (held-out levels) that first reached it. */
  at?: number;
  elapsedS?: number;
  /** Reached, and never fell below since (see the file comment). */
  held: boolean;
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
  finalHeldOut?: number;
}

/** Sampled levels: the first step at or above, and whether every later HOLD_WINDOW-step mean stayed there. */
export function sampledMilestones(curve: readonly StepMetrics[], levels = SAMPLED_LEVELS): Milestone[] {
  return levels.map((level) => {
    const first = curve.findIndex((m) => m.successRate >= level);
    if (first < 0) return { level, held: false };
    let held = true;
    for (let end = first + HOLD_WINDOW; end <= curve.length; end++) {
      const window = curve.slice(end - HOLD_WINDOW, end);
      if (window.reduce((sum, m) => sum + m.successRate, 0) / HOLD_WINDOW < level) held = false;
    }
    return { level, at: curve[first].step, elapsedS: curve[first].elapsedS, held };
  });
}

/** Held-out levels: the first evaluated version at or above, and whether every later one stayed there. */
export function heldOutMilestones(evaluations: readonly EvaluationRecord[], levels = HELD_OUT_LEVELS): Milestone[] {
  return levels.map((level) => {
    const first = evaluations.findIndex((e) => e.successRate >= level);
    if (first < 0) return { level, held: false };
    const held = evaluations.slice(first).every((e) => e.successRate >= level);
    return { level, at: evaluations[first].version, elapsedS: evaluations[first].elapsedS, held };
  });
}

interface Options {
  configs: string[];
  seeds: number[];
  repeats: number;
  steps?: number;
}

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
  if (configs.length === 0 || configs.some((c) => !c))
    throw new Error('usage: bench:learning -- --config FILE [--config FILE ...] [--seeds 1,2,3] [--repeats 2] [--steps N]');
  const steps = value('steps');
  const repeats = integer('repeats', value('repeats') ?? '1');
  if (repeats < 1) throw new Error('--repeats must be at least 1');
  return {
    configs,
    seeds: (value('seeds') ?? '1').split(',').map((s) => integer('seeds', s)),
    repeats,
    steps: steps === undefined ? undefined : integer('steps', steps),
  };
}

/** One training run of `file` with `seed` (and `steps`, when given), its config written beside its data. */
async function runOnce(file: string, seed: number, repeat: number, steps: number | undefined): Promise<LearningRun> {
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
  const summary = await runTraining(config, { local: true, logger, configFile });
  return {
    config: path.basename(file),
    seed,
    repeat,
    runId: summary.result.runId,
    steps: summary.result.steps,
    wallSeconds: summary.wallSeconds,
    sampled: sampledMilestones(summary.curve),
    heldOut: heldOutMilestones(summary.evaluations),
    finalHeldOut: summary.evaluations.at(-1)?.successRate,
  };
}

const pct = (level: number) => `${Math.round(100 * level)}%`;

function describeMilestone(m: Milestone, unit: 'step' | 'v'): string {
  if (m.at === undefined) return `${pct(m.level)} -`;
  const where = unit === 'step' ? `step ${m.at}` : `v${m.at}`;
  return `${pct(m.level)} ${m.elapsedS?.toFixed(0) ?? '?'} s (${where})${m.held ? '' : ' lost'}`;
}

export function formatRun(r: LearningRun): string {
  const final = r.finalHeldOut === undefined ? '' : `; final held-out ${pct(r.finalHeldOut)}`;
  return [
    `${r.config} seed ${r.seed} #${r.repeat} (${r.runId}): ${r.steps} steps in ${r.wallSeconds.toFixed(0)} s${final}`,
    `    sampled  ${r.sampled.map((m) => describeMilestone(m, 'step')).join(' | ')}`,
    `    held-out ${r.heldOut.map((m) => describeMilestone(m, 'v')).join(' | ')}`,
  ].join('\n');
}

/** Median and worst time to each level over `runs`; a run that never reached it counts as worst. */
export function formatSummary(config: string, runs: readonly LearningRun[]): string {
  const line = (label: string, pick: (r: LearningRun) => Milestone[]) =>
    pick(runs[0])
      .map((_, i) => {
        const times = runs.map((r) => pick(r)[i].elapsedS ?? Infinity).sort((a, b) => a - b);
        const reached = times.filter(Number.isFinite).length;
        const held = runs.filter((r) => pick(r)[i].held).length;
        const seconds = (t: number) => (Number.isFinite(t) ? `${t.toFixed(0)} s` : 'never');
        return `${pct(pick(runs[0])[i].level)}: median ${seconds(times[Math.floor((times.length - 1) / 2)])}, worst ${seconds(times.at(-1)!)} (reached ${reached}/${runs.length}, held ${held}/${runs.length})`;
      })
      .map((text) => `    ${label} ${text}`)
      .join('\n');
  return [`${config}: ${runs.length} runs`, line('sampled ', (r) => r.sampled), line('held-out', (r) => r.heldOut)].join('\n');
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  for (const file of options.configs) {
    const runs: LearningRun[] = [];
    for (const seed of options.seeds) {
      for (let repeat = 1; repeat <= options.repeats; repeat++) {
        const run = await runOnce(file, seed, repeat, options.steps);
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
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
}
