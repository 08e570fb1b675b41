/**
 * How fast the embedded trainer takes a train step: the same batch of random-map FrozenLake turns
 * (as a run's agent shows them, each answered with one move) trained with every sequence run
 * through the model alone, and packed (many sequences a pass, the prefix they share run once: what
 * the trainer does), the packed pass both with tfjs's own Slice and SplitV kernels and with
 * trajflow's (src/model/wasmKernels.ts), alternated round by round, printed side by side with their
 * ratios.
 *
 *   npm run build && npm run bench:trainer -- [--config FILE] [--sequences 240] [--rounds 3]
 *
 * With --model DIR it benches the Python trainer of that Hugging Face model instead
 * (python/trajflow_py/trainer/bench.py, which reads every option; docs/benchmarks.md):
 *
 *   npm run bench:trainer -- --model .models/smollm2-135m-instruct [--sequences 8] [--rounds 2] [--micro-batch-tokens 1024]
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createRng, type Rng } from '../src/core/random';
import { encode, renderConversationStart, SPECIAL_TOKENS } from '../src/core/tokenizer';
import { legalMoves } from '../src/agents/frozenlakeAgent';
import { ACTION_NAMES, FrozenLake, type FrozenLakeObservation } from '../src/envs/frozenlake';
import { modelConfig } from '../src/model/config';
import { useSlicing } from '../src/model/wasmKernels';
import { initWeights } from '../src/model/weights';
import { createAgent, createEnvironment } from '../src/plugins/registry';
import type { TrainingSample } from '../src/rl/loss';
import { PolicyTrainer, trainerSettings } from '../src/rl/trainer';
import { loadRunConfig } from '../src/runConfig';
import { PYTHON_BIN, PYTHON_SOURCES } from '../src/paths';
import type { RunConfig } from '../config/schema';

const DEFAULT_CONFIG = 'config/examples/frozenlake-random-train.yaml';

interface Options {
  config: string;
  /** Per-turn samples in the batch: a random-map step trains ~150-300. */
  sequences: number;
  rounds: number;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', default: DEFAULT_CONFIG },
      sequences: { type: 'string', default: '240' },
      rounds: { type: 'string', default: '3' },
    },
  });
  const count = (name: string, text: string) => {
    const value = Number(text);
    if (!(Number.isSafeInteger(value) && value > 0)) throw new Error(`--${name} must be a positive integer, got '${text}'`);
    return value;
  };
  return { config: values.config, sequences: count('sequences', values.sequences), rounds: count('rounds', values.rounds) };
}

/** One turn of a random map at a random frozen cell, answered with a random legal move. */
function randomTurn(config: RunConfig, rng: Rng): TrainingSample {
  for (;;) {
    const env = createEnvironment(config.env, Math.floor(rng() * 2 ** 31), 'train');
    if (!(env instanceof FrozenLake)) throw new Error(`bench:trainer needs env frozenlake, got ${config.env.name}`);
    const { size } = env.options;
    const [row, col] = [Math.floor(rng() * size), Math.floor(rng() * size)];
    if (!'FS'.includes(env.grid[row][col])) continue;
    const observation: FrozenLakeObservation = { grid: [...env.grid], row, col, size, steps: 0 };
    const moves = legalMoves(observation);
    const prompt = renderConversationStart(createAgent(config.agent, env).begin(observation).messages);
    const answer = [...encode(ACTION_NAMES[moves[Math.floor(rng() * moves.length)]]), SPECIAL_TOKENS.end];
    const ids = [...prompt, ...answer];
    const trained = ids.map((_, i) => (i >= prompt.length ? 1 : 0));
    return { ids, lossMask: trained, behaviourLogprobs: trained.map((m) => (m ? -0.3 : 0)), advantage: rng() * 2 - 1 };
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)];

/**
 * The arguments of the real-model bench when they name --model (its directory made absolute: the
 * Python side runs in PYTHON_SOURCES), or undefined: the embedded trainer is benched.
 */
function realModelArguments(argv: string[]): string[] | undefined {
  const index = argv.findIndex((arg) => arg === '--model' || arg.startsWith('--model='));
  if (index < 0) return undefined;
  const [flag, inline] = argv[index].split(/=(.*)/s);
  const dir = inline ?? argv[index + 1];
  if (dir === undefined || dir === '') throw new Error('--model needs a Hugging Face model directory');
  const rest = [...argv.slice(0, index), ...argv.slice(index + (inline === undefined ? 2 : 1))];
  return [flag, path.resolve(dir), ...rest];
}

/** Runs python/trajflow_py/trainer/bench.py, its output straight to ours; resolves to its exit code. */
function runRealModelBench(args: string[]): Promise<number> {
  const child = spawn(PYTHON_BIN, ['-m', 'trajflow_py.trainer.bench', ...args], {
    cwd: PYTHON_SOURCES,
    env: { ...process.env, HF_HUB_OFFLINE: '1' },
    stdio: 'inherit',
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
}

async function main(): Promise<void> {
  const realModel = realModelArguments(process.argv.slice(2));
  if (realModel !== undefined) {
    process.exitCode = await runRealModelBench(realModel);
    return;
  }
  const options = parseOptions(process.argv.slice(2));
  const config = loadRunConfig(options.config);
  if (config.model.path !== undefined) throw new Error(`${options.config}: bench:trainer measures the embedded trainer; this config names a real model`);
  const { seed, checkpoint: _checkpoint, path: _path, ...architecture } = config.model;
  const model = modelConfig(architecture);
  const rng = createRng(config.run.seed);
  const batch = Array.from({ length: options.sequences }, () => randomTurn(config, rng));
  const tokens = batch.reduce((sum, { ids }) => sum + ids.length, 0);
  console.log(
    `${options.sequences} turns of random maps (${tokens} tokens, ${(tokens / options.sequences).toFixed(0)} a turn), ` +
      `model ${JSON.stringify(model)}, ${config.trainer.optimizerStepsPerBatch} Adam steps a batch`,
  );

  const settings = trainerSettings(config.trainer, config.sampling.temperature);
  const ways: { label: string; packTokens?: number; slicing: 'heap' | 'tfjs' }[] = [
    { label: 'every sequence alone', packTokens: 1, slicing: 'heap' },
    { label: 'packed, tfjs slicing', slicing: 'tfjs' },
    { label: 'packed', slicing: 'heap' },
  ];
  const trainers = await Promise.all(ways.map(({ packTokens }) => PolicyTrainer.create({ ...settings, weights: initWeights(model, seed), packTokens })));
  const step = (i: number) => {
    useSlicing(ways[i].slicing);
    return trainers[i].trainBatch(batch).stepMs;
  };
  // One batch each first: tfjs compiles and allocates on the first pass.
  trainers.forEach((_, i) => step(i));
  const times: number[][] = ways.map(() => []);
  for (let round = 0; round < options.rounds; round++) trainers.forEach((_, i) => times[i].push(step(i)));
  useSlicing('heap');
  ways.forEach(({ label }, i) =>
    console.log(`${label.padEnd(22)} median ${median(times[i]).toFixed(0)} ms a batch (${times[i].map((t) => t.toFixed(0)).join(', ')})`),
  );
  const speed = (slower: number, faster: number) => `${(median(times[slower]) / median(times[faster])).toFixed(2)}x`;
  console.log(`packed / alone speed:               ${speed(0, 2)}`);
  console.log(`heap / tfjs slicing speed (packed): ${speed(1, 2)}`);
  for (const trainer of trainers) trainer.dispose();
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
