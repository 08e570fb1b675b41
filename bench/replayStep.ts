/**
 * One train step of a stored run, trained again in this process: the same groups, from the same
 * checkpoint (weights and Adam's state), through the trainer worker's own `trainStep`. The embedded
 * trainer is deterministic, so the step's metrics come out as the run recorded them; then the
 * policy before and after the step each play episodes at the run's sampling temperature. What a
 * step did to a run that collapsed can be looked at here, and again with another trust region
 * (`--max-update-kl`, see trainer.maxUpdateKl) or another advantage estimator (`--advantage`). It
 * prints each group's rewards too: a step whose groups differ only by a few hundredths of reward
 * (a format slip in a solved group) is one GRPO's division by the group's std blows up.
 *
 *   npm run build && node dist/bench/replayStep.js <runId> <step> [--data-dir .trajflow]
 *     [--max-update-kl X] [--advantage grpo|rloo|drgrpo] [--episodes 64]
 *
 * The run's directory is only read: the replay writes into a directory of its own (which links to
 * the run's stored groups and trajectories).
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createTrainerActivities } from '../activities/trainer';
import { readLearningCurve } from '../client/learningCurve';
import { TrainerConfigSchema, type TrainerConfig } from '../config/schema';
import { compatibilityOf } from '../src/core/compatibility';
import type { GroupSummary } from '../src/core/records';
import { createLogger } from '../src/log';
import { buildId } from '../src/paths';
import { loadRunConfig } from '../src/runConfig';
import { CheckpointStore } from '../src/store/checkpointStore';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import type { TrainMetrics } from '../src/rl/trainer';

/** The advantage estimators the config accepts, for `--advantage`. */
const ADVANTAGE_ESTIMATORS = TrainerConfigSchema.shape.advantage.unwrap();

interface Options {
  runId: string;
  step: number;
  dataDir: string;
  maxUpdateKl?: number;
  advantage?: TrainerConfig['advantage'];
  episodes: number;
}

function parseOptions(argv: string[]): Options {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'data-dir': { type: 'string', default: '.trajflow' },
      'max-update-kl': { type: 'string' },
      advantage: { type: 'string' },
      episodes: { type: 'string', default: '64' },
    },
  });
  const [runId, stepText] = positionals;
  const step = Number(stepText);
  if (!runId || !Number.isSafeInteger(step) || step < 0)
    throw new Error(
      `usage: replayStep.js <runId> <step> [--data-dir DIR] [--max-update-kl X] [--advantage ${ADVANTAGE_ESTIMATORS.options.join('|')}] [--episodes N]`,
    );
  const advantage = values.advantage === undefined ? undefined : advantageEstimator(values.advantage);
  const number = (name: string, text: string | undefined) => {
    if (text === undefined) return undefined;
    const value = Number(text);
    if (!(Number.isFinite(value) && value > 0)) throw new Error(`--${name} must be a number > 0, got ${text}`);
    return value;
  };
  return {
    runId,
    step,
    dataDir: values['data-dir'],
    maxUpdateKl: number('max-update-kl', values['max-update-kl']),
    ...(advantage ? { advantage } : {}),
    episodes: Math.round(number('episodes', values.episodes)!),
  };
}

function advantageEstimator(text: string): TrainerConfig['advantage'] {
  const parsed = ADVANTAGE_ESTIMATORS.safeParse(text);
  if (!parsed.success) throw new Error(`--advantage must be one of ${ADVANTAGE_ESTIMATORS.options.join(', ')}, got ${text}`);
  return parsed.data;
}

/** A data directory for the replay: the step's starting checkpoint, and links to the run's stored groups and episodes. */
function replayDir(options: Options, baseVersion: number): string {
  const source = runLayout(options.dataDir, options.runId);
  const root = mkdtempSync(path.join(os.tmpdir(), 'trajflow-replay-'));
  const target = runLayout(root, options.runId);
  mkdirSync(target.checkpointsDir, { recursive: true });
  const checkpoint = (layout: string) => new CheckpointStore(layout).file(options.runId, baseVersion);
  if (!existsSync(checkpoint(options.dataDir))) {
    throw new Error(
      `run ${options.runId} no longer holds version ${baseVersion} (${checkpoint(options.dataDir)}): checkpoint retention removed it; ` +
        'runs to replay need trainer.checkpoints.keepEvery: 1',
    );
  }
  copyFileSync(checkpoint(options.dataDir), checkpoint(root));
  for (const [from, to] of [
    [source.groupsDir, target.groupsDir],
    [source.trajectoriesDir, target.trajectoriesDir],
  ]) {
    symlinkSync(path.resolve(from), to);
  }
  return root;
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const { runId, step } = options;
  const run = runLayout(options.dataDir, runId);
  if (!existsSync(run.configFile)) throw new Error(`no run ${runId} under ${path.resolve(options.dataDir)} (no ${run.configFile})`);
  const config = loadRunConfig(run.configFile);
  const recorded = (await readLearningCurve(run)).find((metrics) => metrics.step === step);
  if (!recorded) throw new Error(`run ${runId} has no metrics for step ${step} in ${run.metricsFile}`);
  const baseVersion = recorded.version - 1;
  const trainer = {
    ...config.trainer,
    ...(options.maxUpdateKl === undefined ? {} : { maxUpdateKl: options.maxUpdateKl }),
    ...(options.advantage === undefined ? {} : { advantage: options.advantage }),
  };

  const root = replayDir(options, baseVersion);
  try {
    const store = new TrajectoryStore(root);
    const groups: GroupSummary[] = [];
    for (const groupId of recorded.groupIds) {
      const group = await store.getGroup(runId, groupId);
      if (!group) throw new Error(`group ${groupId} of step ${step} is not stored`);
      groups.push(group);
    }
    const logger = createLogger('replay');
    logger.level = 'warn';
    const checkpoints = new CheckpointStore(root);
    const activities = createTrainerActivities({
      model: config.model,
      compatibility: compatibilityOf(config, buildId()),
      store,
      checkpoints,
      dataDir: root,
      logger,
    });
    // The activities heartbeat: they run in a mock activity context, as the orchestration bench's do.
    const inActivity = <T>(fn: () => Promise<T>) => new MockActivityEnvironment().run(fn) as Promise<T>;
    const input = { runId, step, baseVersion, groups, trainer, temperature: config.sampling.temperature };
    const { metrics } = await inActivity(() => activities.trainStep(input));
    const kl = (value: number | undefined) => (value === undefined ? '-' : value.toPrecision(3));
    console.log(`run ${runId}, step ${step} (v${baseVersion} -> v${baseVersion + 1}), ${groups.length} groups, ${metrics.sequences} sequences`);
    console.log(`  rewards by group (${trainer.advantage}): ${groups.map(rewardCounts).join(' | ')}`);
    console.log(`  recorded: approxKl ${kl(recorded.approxKl)}, gradNorm ${recorded.gradNorm.toPrecision(3)}, loss ${recorded.loss.toPrecision(4)}`);
    console.log(
      `  replayed: approxKl ${kl(metrics.approxKl)}, gradNorm ${metrics.gradNorm.toPrecision(3)}, loss ${metrics.loss.toPrecision(4)}; ` +
        `update KL ${kl(metrics.proposedUpdateKl)} (maxUpdateKl ${trainer.maxUpdateKl ?? 'off'})${regionOutcome(metrics)}`,
    );
    // The trainer's own evaluation, at the sampling temperature: what the training rollouts play.
    const successRate = async (version: number) =>
      (
        await inActivity(() =>
          activities.evaluate({
            runId,
            runSeed: config.run.seed,
            version,
            env: config.env,
            agent: config.agent,
            maxTokens: config.sampling.maxTokens,
            eval: { ...config.eval, episodes: options.episodes, temperature: config.sampling.temperature },
          }),
        )
      ).successRate;
    const before = await successRate(baseVersion);
    const after = await successRate(baseVersion + 1);
    const percent = (rate: number) => `${Math.round(100 * rate)}%`;
    console.log(
      `  success at temperature ${config.sampling.temperature} over ${options.episodes} episodes: v${baseVersion} ${percent(before)}, replayed v${baseVersion + 1} ${percent(after)}`,
    );
    // Recorded while the run's other roles shared the CPUs; replayed here alone.
    console.log(`  trainer time for the step: recorded ${Math.round(recorded.stepMs)} ms, replayed ${Math.round(metrics.stepMs)} ms`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});

/** A group's rewards as value x count, most frequent first: `1.2 x15, 1.171 x1`. */
function rewardCounts({ rewards }: GroupSummary): string {
  const counts = new Map<string, number>();
  for (const reward of rewards) {
    const shown = String(Number(reward.toFixed(3)));
    counts.set(shown, (counts.get(shown) ?? 0) + 1);
  }
  return [...counts]
    .sort((a, b) => b[1] - a[1])
    .map(([reward, count]) => `${reward} x${count}`)
    .join(', ');
}

/** What the trust region did, when it changed the step. */
function regionOutcome({ updateScale, updateKl }: TrainMetrics): string {
  if (updateScale === undefined || updateScale === 1) return '';
  return updateScale === 0 ? ', undone' : `, shortened to ${updateScale.toPrecision(3)} of it (update KL ${updateKl!.toPrecision(3)})`;
}
