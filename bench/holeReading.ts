/**
 * How fast the embedded model learns to read the holes of a random FrozenLake map when it is told
 * the answer. A random-map run must learn this by RL (docs/learning.md); this measures
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
 * `--skill dead-ends` measures the next skill instead, reading one cell further: turns where one of
 * down and right leads onto a dead end (a cell, not G, with down and right both a hole or the
 * edge) and the other onto ice that is not one, answered with the other; the share printed is
 * the first-token probability of the move onto the dead end, of those two (a policy that reads only
 * the cells next to it: 0.5). `--skill step-back`: turns on a dead end itself, answered with an
 * open one of left and up; the share printed is the first-token probability, among the legal
 * moves (those that stay on the map), of the others: the moves into a hole.
 *
 *   npm run build && node dist/bench/holeReading.js [--config FILE] [--skill holes|dead-ends|step-back]
 *     [--steps 100] [--batch 32] [--learning-rate 3e-3] [--warmup-steps N]
 *     [--model '{"dModel":128}'] [--every 10] [--maps-per-step N] [--train-seed 1000]
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
import { withoutReference, type MaskedSequence } from '../src/rl/loss';
import { PolicyTrainer, trainerSettings } from '../src/rl/trainer';
import { loadRunConfig } from '../src/runConfig';
import { beyond, isDeadEnd, isOpen } from './frozenlakeCells';

const DEFAULT_CONFIG = 'config/examples/frozenlake-random-train.yaml';
/** Turns the policy is measured on: enough that one measurement moves by ~0.01, not more. */
const PROBE_TURNS = 200;
/** Seed of the measured turns, apart from the training turns' (`--train-seed`). */
const PROBE_SEED = 12345;

const SKILLS = ['holes', 'dead-ends', 'step-back'] as const;
type Skill = (typeof SKILLS)[number];

interface Options {
  config: string;
  skill: Skill;
  steps: number;
  batch: number;
  learningRate: number;
  warmupSteps?: number;
  model: Record<string, unknown>;
  every: number;
  /** The maps a step's turns come from (a train step of N groups sees N maps); unset: one map per turn. */
  mapsPerStep?: number;
  /**
   * Seeds the training turns and their answers. One setting's result moves a lot from one seed
   * to another, so compare settings over several.
   */
  trainSeed: number;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', default: DEFAULT_CONFIG },
      skill: { type: 'string', default: 'holes' },
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
  const skill = SKILLS.find((name) => name === values.skill);
  if (skill === undefined) throw new Error(`--skill must be one of ${SKILLS.join(', ')}, got ${values.skill}`);
  return {
    config: values.config,
    skill,
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

/** A turn as the run's agent shows it, the moves measured on it, and which of them are wrong. */
interface ProbeTurn {
  promptIds: number[];
  moves: number[];
  wrong: number[];
}

/** A fresh random map of the training pool, as the run's environment draws it. */
function randomMap(config: RunConfig, rng: Rng): FrozenLake {
  const env = createEnvironment(config.env, Math.floor(rng() * 2 ** 31), 'train');
  if (!(env instanceof FrozenLake) || env.options.map !== 'random')
    throw new Error(`holeReading needs env frozenlake with map: random, got ${config.env.name}`);
  return env;
}

const DOWN_MOVE = ACTION_NAMES.indexOf('down');
const RIGHT_MOVE = ACTION_NAMES.indexOf('right');
const LEFT_MOVE = ACTION_NAMES.indexOf('left');
const UP_MOVE = ACTION_NAMES.indexOf('up');

/**
 * The moves a skill measures on a cell, and which of them are wrong, or undefined if the cell
 * does not test the skill. `holes`: the legal moves, those into a hole (some, not all). `dead-ends`:
 * down and right, both open, the one onto a dead end (exactly one). `step-back`: on a dead end, the
 * legal moves, all but the open ones of left and up (some of them open).
 */
function skillMoves(skill: Skill, observation: FrozenLakeObservation): Pick<ProbeTurn, 'moves' | 'wrong'> | undefined {
  const { grid, row, col } = observation;
  const landing = (move: number) => beyond([row, col], MOVES[move]);
  if (skill === 'holes') {
    const legal = legalMoves(observation);
    const intoHole = legal.filter((move) => !isOpen(grid, landing(move)));
    return intoHole.length === 0 || intoHole.length === legal.length ? undefined : { moves: legal, wrong: intoHole };
  }
  if (skill === 'step-back') {
    if (!isDeadEnd(grid, [row, col])) return undefined;
    const legal = legalMoves(observation);
    const wrong = legal.filter((move) => !([LEFT_MOVE, UP_MOVE].includes(move) && isOpen(grid, landing(move))));
    return wrong.length === legal.length ? undefined : { moves: legal, wrong };
  }
  const moves = [DOWN_MOVE, RIGHT_MOVE];
  if (!moves.every((move) => isOpen(grid, landing(move)))) return undefined;
  const wrong = moves.filter((move) => isDeadEnd(grid, landing(move)));
  return wrong.length === 1 ? { moves, wrong } : undefined;
}

/** A random cell of `env` as a turn, if it is a frozen cell that tests `skill`. */
function probeTurn(config: RunConfig, skill: Skill, env: FrozenLake, rng: Rng): ProbeTurn | undefined {
  const size = env.options.size;
  const row = Math.floor(rng() * size);
  const col = Math.floor(rng() * size);
  if (!'FS'.includes(env.grid[row][col])) return undefined;
  const observation: FrozenLakeObservation = { grid: [...env.grid], row, col, size, steps: 0 };
  const measured = skillMoves(skill, observation);
  if (!measured) return undefined;
  // Without history every turn is a fresh context, exactly what an episode's first turn shows.
  return { promptIds: renderConversationStart(createAgent(config.agent, env).begin(observation).messages), ...measured };
}

/** Every this many cells tried in vain, the map of the turn being drawn is given up for a new one (it may have no turn that tests the skill). */
const TRIES_PER_MAP = 100;

/**
 * `count` turns that test `skill` on random training-pool maps: each on a map of its own, or,
 * given `maps`, taken in turn from that many maps, as a train step of that many groups sees them.
 */
function probeTurns(config: RunConfig, skill: Skill, count: number, rng: Rng, maps?: number): ProbeTurn[] {
  const stepMaps: FrozenLake[] = [];
  const turns: ProbeTurn[] = [];
  let misses = 0;
  while (turns.length < count) {
    const slot = turns.length % (maps ?? 1);
    const env = maps === undefined ? randomMap(config, rng) : (stepMaps[slot] ??= randomMap(config, rng));
    const turn = probeTurn(config, skill, env, rng);
    if (turn) turns.push(turn);
    else if (maps !== undefined && ++misses % TRIES_PER_MAP === 0) stepMaps[slot] = randomMap(config, rng);
  }
  return turns;
}

/** Mean over `turns` of the policy's first-token probability on the wrong moves, among the measured ones. */
function wrongShare(trainer: PolicyTrainer, turns: readonly ProbeTurn[]): number {
  const firstTokens = ACTION_NAMES.map((name) => encode(name)[0]);
  const weights = toTensorWeights(trainer.checkpoint().weights);
  try {
    let sum = 0;
    for (const turn of turns) {
      const { logits } = prefill(weights, turn.promptIds);
      const top = Math.max(...logits);
      const p = firstTokens.map((id) => Math.exp(logits[id] - top));
      const mass = (moves: number[]) => moves.reduce((total, move) => total + p[move], 0);
      sum += mass(turn.wrong) / mass(turn.moves);
    }
    return sum / turns.length;
  } finally {
    disposeTensorWeights(weights);
  }
}

/** One supervised example per turn: the prompt, then a uniformly random right move (trained). */
function rightMoveSamples(turns: readonly ProbeTurn[], rng: Rng): MaskedSequence[] {
  return turns.map(({ promptIds, moves, wrong }) => {
    const safe = moves.filter((move) => !wrong.includes(move));
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
  const trainer = await PolicyTrainer.create({ ...settings, loss: withoutReference(settings.loss), weights: initWeights(model, seed) });
  await runFormatWarmup(trainer, {
    steps: warmupSteps,
    learningRate: config.trainer.formatWarmupLearningRate,
    seed: config.run.seed,
    env: config.env,
    agent: config.agent,
  });
  trainer.resetOptimizer();

  const probe = probeTurns(config, options.skill, PROBE_TURNS, createRng(PROBE_SEED));
  const uniform = probe.reduce((sum, turn) => sum + turn.wrong.length / turn.moves.length, 0) / probe.length;
  console.log(
    `${options.config}: model ${JSON.stringify(model)}; warm-up ${warmupSteps} steps; then ${options.steps} supervised steps of ${options.batch} turns (${options.mapsPerStep === undefined ? 'a map each' : `from ${options.mapsPerStep} maps`}) at ${options.learningRate}, training seed ${options.trainSeed}`,
  );
  const measured: Record<Skill, string> = {
    holes: `share of the first move into a visible hole, over ${probe.length} turns beside one (a uniform legal move: ${uniform.toFixed(3)})`,
    'dead-ends': `share of the first move onto a dead end, of down and right, over ${probe.length} turns where one of them leads onto one (either at even odds: ${uniform.toFixed(3)})`,
    'step-back': `share of the first move other than an open one of left and up, over ${probe.length} turns on a dead end (a uniform legal move: ${uniform.toFixed(3)})`,
  };
  console.log(measured[options.skill]);
  console.log(`step 0: ${wrongShare(trainer, probe).toFixed(3)} (${elapsed()})`);
  const trainRng = createRng(options.trainSeed);
  for (let step = 1; step <= options.steps; step++) {
    const turns = probeTurns(config, options.skill, options.batch, trainRng, options.mapsPerStep);
    trainer.supervisedStep(rightMoveSamples(turns, trainRng), { learningRate: options.learningRate });
    if (step % options.every === 0 || step === options.steps) console.log(`step ${step}: ${wrongShare(trainer, probe).toFixed(3)} (${elapsed()})`);
  }
  trainer.dispose();
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
