/**
 * How fast the embedded model learns to read the holes of a random FrozenLake map when it is told
 * the answer. A random-map run must learn this by RL (docs/learning-benchmarks.md); this measures
 * the same skill under supervision, in a minute instead of a 10-minute run, so a change of the
 * model, its warm-up or its prompt can be judged here first.
 *
 * From the run config's model after a format warm-up of the config's length and rate (its
 * episodes seeded by the run seed, so not the very ones a run's trainer worker plays), supervised
 * steps on single turns next to a visible hole, each answered with a uniformly random move that
 * stays on the map and out of the holes. Every `--every` steps it prints the share of the policy's
 * first-token probability, among the legal moves, that goes to moves into a visible hole, over a
 * fixed set of such turns on other maps (0 reads the holes perfectly; a policy blind to them scores
 * what a uniform legal move scores, printed first). `--maps-per-step N` draws each step's turns from
 * N maps, as a train step of N groups sees them (one map per group), instead of a map per turn.
 *
 *   npm run build && node dist/bench/holeReading.js [--config FILE] [--steps 100] [--batch 32]
 *     [--learning-rate 3e-3] [--warmup-steps N] [--model '{"dModel":128}'] [--every 10]
 *     [--maps-per-step N] [--train-seed 1000]
 */
import { parseArgs } from 'node:util';
import { ModelConfigSchema, type RunConfig } from '../config/schema';
import { describeIssuesInline } from '../src/core/issues';
import { createRng, type Rng } from '../src/core/random';
import { encode, renderConversationStart, SPECIAL_TOKENS } from '../src/core/tokenizer';
import { ACTION_NAMES, FrozenLake, MOVES, type FrozenLakeObservation } from '../src/envs/frozenlake';
import { legalMoves } from '../src/agents/frozenlakeAgent';
import { modelConfig } from '../src/model/config';
import { disposeTensorWeights, prefill, toTensorWeights } from '../src/model/transformer';
import { initWeights } from '../src/model/weights';
import { createAgent, createEnvironment } from '../src/plugins/registry';
import { runFormatWarmup } from '../src/rl/formatWarmup';
import type { MaskedSequence } from '../src/rl/loss';
import { PolicyTrainer, trainerSettings } from '../src/rl/trainer';
import { loadRunConfig } from '../src/runConfig';

const DEFAULT_CONFIG = 'config/examples/frozenlake-random-train.yaml';
/** Turns the policy is measured on: enough that one measurement moves by ~0.01, not more. */
const PROBE_TURNS = 200;
/** Seed of the measured turns, apart from the training turns' (`--train-seed`). */
const PROBE_SEED = 12345;

interface Options {
  config: string;
  steps: number;
  batch: number;
  learningRate: number;
  warmupSteps?: number;
  model: Record<string, unknown>;
  every: number;
  /** The maps a step's turns come from (a train step of N groups sees N maps); unset: one map per turn. */
  mapsPerStep?: number;
  /**
   * Seeds the training turns and their answers. Three streams of one setting ranged from 0.070
   * to 0.165 at step 75 (docs/learning-benchmarks.md), so compare settings over several.
   */
  trainSeed: number;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', default: DEFAULT_CONFIG },
      steps: { type: 'string', default: '100' },
      batch: { type: 'string', default: '32' },
      'learning-rate': { type: 'string', default: '3e-3' },
      'warmup-steps': { type: 'string' },
      model: { type: 'string', default: '{}' },
      every: { type: 'string', default: '10' },
      'maps-per-step': { type: 'string' },
      'train-seed': { type: 'string', default: '1000' },
    },
  });
  const count = (name: string, text: string, min: number) => {
    const value = Number(text);
    if (!(Number.isSafeInteger(value) && value >= min)) throw new Error(`--${name} must be an integer >= ${min}, got ${text}`);
    return value;
  };
  const learningRate = Number(values['learning-rate']);
  if (!(Number.isFinite(learningRate) && learningRate > 0)) throw new Error(`--learning-rate must be a number > 0, got ${values['learning-rate']}`);
  let model: unknown;
  try {
    model = JSON.parse(values.model);
  } catch (err) {
    throw new Error(`--model must be a JSON object of model settings, e.g. '{"dModel":128}': ${(err as Error).message}`, { cause: err });
  }
  if (typeof model !== 'object' || model === null || Array.isArray(model)) throw new Error(`--model must be a JSON object, got ${values.model}`);
  return {
    config: values.config,
    steps: count('steps', values.steps, 0),
    batch: count('batch', values.batch, 1),
    learningRate,
    ...(values['warmup-steps'] === undefined ? {} : { warmupSteps: count('warmup-steps', values['warmup-steps'], 0) }),
    model: model as Record<string, unknown>,
    every: count('every', values.every, 1),
    trainSeed: count('train-seed', values['train-seed'], 0),
    ...(values['maps-per-step'] === undefined ? {} : { mapsPerStep: count('maps-per-step', values['maps-per-step'], 1) }),
  };
}

/** A turn next to a visible hole, as the run's agent shows it, and which legal moves fall in. */
interface HoleTurn {
  promptIds: number[];
  legal: number[];
  intoHole: number[];
}

/** A fresh random map of the training pool, as the run's environment draws it. */
function randomMap(config: RunConfig, rng: Rng): FrozenLake {
  const env = createEnvironment(config.env, Math.floor(rng() * 2 ** 31), 'train');
  if (!(env instanceof FrozenLake) || env.options.map !== 'random')
    throw new Error(`holeReading needs env frozenlake with map: random, got ${config.env.name}`);
  return env;
}

/**
 * A random cell of `env` as a turn, if it is a frozen cell with a hole beside it and some legal move
 * that is not a hole.
 */
function turnBesideHole(config: RunConfig, env: FrozenLake, rng: Rng): HoleTurn | undefined {
  const size = env.options.size;
  const row = Math.floor(rng() * size);
  const col = Math.floor(rng() * size);
  if (!'FS'.includes(env.grid[row][col])) return undefined;
  const observation: FrozenLakeObservation = { grid: [...env.grid], row, col, size, steps: 0 };
  const legal = legalMoves(observation);
  const intoHole = legal.filter((move) => env.grid[row + MOVES[move][0]][col + MOVES[move][1]] === 'H');
  if (intoHole.length === 0 || intoHole.length === legal.length) return undefined;
  // Without history every turn is a fresh context, exactly what an episode's first turn shows.
  return { promptIds: renderConversationStart(createAgent(config.agent, env).begin(observation).messages), legal, intoHole };
}

/** Every this many cells tried in vain, the map of the turn being drawn is given up for a new one (it may have no turn beside a hole). */
const TRIES_PER_MAP = 100;

/**
 * `count` turns beside a hole on random training-pool maps: each on a map of its own, or, given
 * `maps`, taken in turn from that many maps, as a train step of that many groups sees them.
 */
function holeTurns(config: RunConfig, count: number, rng: Rng, maps?: number): HoleTurn[] {
  const stepMaps: FrozenLake[] = [];
  const turns: HoleTurn[] = [];
  let misses = 0;
  while (turns.length < count) {
    const slot = turns.length % (maps ?? 1);
    const env = maps === undefined ? randomMap(config, rng) : (stepMaps[slot] ??= randomMap(config, rng));
    const turn = turnBesideHole(config, env, rng);
    if (turn) turns.push(turn);
    else if (maps !== undefined && ++misses % TRIES_PER_MAP === 0) stepMaps[slot] = randomMap(config, rng);
  }
  return turns;
}

/** Mean over `turns` of the policy's first-token probability on moves into a hole, among the legal moves. */
function holeShare(trainer: PolicyTrainer, turns: readonly HoleTurn[]): number {
  const firstTokens = ACTION_NAMES.map((name) => encode(name)[0]);
  const weights = toTensorWeights(trainer.checkpoint().weights);
  try {
    let sum = 0;
    for (const turn of turns) {
      const { logits } = prefill(weights, turn.promptIds);
      const top = Math.max(...logits);
      const p = firstTokens.map((id) => Math.exp(logits[id] - top));
      const mass = (moves: number[]) => moves.reduce((total, move) => total + p[move], 0);
      sum += mass(turn.intoHole) / mass(turn.legal);
    }
    return sum / turns.length;
  } finally {
    disposeTensorWeights(weights);
  }
}

/** One supervised example per turn: the prompt, then a uniformly random safe move (trained). */
function safeMoveSamples(turns: readonly HoleTurn[], rng: Rng): MaskedSequence[] {
  return turns.map(({ promptIds, legal, intoHole }) => {
    const safe = legal.filter((move) => !intoHole.includes(move));
    const answer = [...encode(ACTION_NAMES[safe[Math.floor(rng() * safe.length)]]), SPECIAL_TOKENS.end];
    return { ids: [...promptIds, ...answer], lossMask: [...promptIds.map(() => 0), ...answer.map(() => 1)] };
  });
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const config = loadRunConfig(options.config);
  if (config.model.path !== undefined) throw new Error(`${options.config}: holeReading measures the embedded model; this config names a real one (model.path)`);
  const parsed = ModelConfigSchema.safeParse({ ...config.model, ...options.model });
  if (!parsed.success) throw new Error(`--model: ${describeIssuesInline(parsed.error.issues, '(model)')}`);
  const { seed, checkpoint: _checkpoint, path: _path, ...architecture } = parsed.data;
  const model = modelConfig(architecture);
  const warmupSteps = options.warmupSteps ?? config.trainer.formatWarmupSteps;
  const started = Date.now();
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)} s`;

  const settings = trainerSettings(config.trainer, config.sampling.temperature);
  const trainer = await PolicyTrainer.create({ ...settings, loss: { ...settings.loss, beta: 0 }, weights: initWeights(model, seed) });
  await runFormatWarmup(trainer, {
    steps: warmupSteps,
    learningRate: config.trainer.formatWarmupLearningRate,
    seed: config.run.seed,
    env: config.env,
    agent: config.agent,
  });
  trainer.resetOptimizer();

  const probe = holeTurns(config, PROBE_TURNS, createRng(PROBE_SEED));
  const uniform = probe.reduce((sum, turn) => sum + turn.intoHole.length / turn.legal.length, 0) / probe.length;
  console.log(
    `${options.config}: model ${JSON.stringify(model)}; warm-up ${warmupSteps} steps; then ${options.steps} supervised steps of ${options.batch} turns (${options.mapsPerStep === undefined ? 'a map each' : `from ${options.mapsPerStep} maps`}) at ${options.learningRate}, training seed ${options.trainSeed}`,
  );
  console.log(`share of the first move into a visible hole, over ${probe.length} turns beside one (a uniform legal move: ${uniform.toFixed(3)})`);
  console.log(`step 0: ${holeShare(trainer, probe).toFixed(3)} (${elapsed()})`);
  const trainRng = createRng(options.trainSeed);
  for (let step = 1; step <= options.steps; step++) {
    trainer.supervisedStep(safeMoveSamples(holeTurns(config, options.batch, trainRng, options.mapsPerStep), trainRng), { learningRate: options.learningRate });
    if (step % options.every === 0 || step === options.steps) console.log(`step ${step}: ${holeShare(trainer, probe).toFixed(3)} (${elapsed()})`);
  }
  trainer.dispose();
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
