/**
 * `npm run bench:real-model`: the real-model path on this machine, measured in one run.
 *   1. decode tokens/s at batch 1 and batch 16 through each CPU server, side by side: vLLM's CPU
 *      build and trajflow's own SGLang-API server (HTTP client included);
 *   2. seconds per weight sync on each, side by side: the whole model (the server loads a Hugging
 *      Face directory from disk) and a LoRA adapter of it (`trainer.lora`'s defaults, loaded as a
 *      runtime adapter, after the server holds as many as it keeps, as in a run; target: at most
 *      1/4 of the whole model's time);
 *   3. a short training run of config/examples/arithmetic-smollm2-train.yaml (`--steps N` to
 *      shorten it, `--no-training` to skip it): reward per step, which must rise, and the Python
 *      trainer's train tokens/s.
 * Smaller runs: `--backends vllm,sglang` (either or both), `--decode-tokens N` (default 48),
 * `--syncs N` (default 3).
 * Needs `bash scripts/setup.sh` (the Python environment and the SmolLM2 directory).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnModelServer, spawnVllmServer } from '../client/modelServers';
import { runTraining } from '../client/runTraining';
import { stopWorker } from '../client/workerProcess';
import { createLogger } from '../src/log';
import { PROJECT_ROOT, PYTHON_BIN, PYTHON_SOURCES, SMOLLM2_DIR } from '../src/paths';
import { LoraSchema, type LoraConfig } from '../config/schema';
import { freePort } from '../src/ports';
import { createHttpProvider } from '../src/inference/http/httpProvider';
import { MAX_LOADED_ADAPTERS } from '../src/inference/http/loraAdapters';
import type { InferenceProvider } from '../src/inference/provider';
import { loadRunConfig } from '../src/runConfig';
import { loadChatFormat } from '../src/chat/hfChatFormat';

const BACKENDS = ['vllm', 'sglang'] as const;
type Backend = (typeof BACKENDS)[number];

function argument(name: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

function positiveArgument(name: string, fallback: number): number {
  const text = argument(name);
  const value = text === undefined ? fallback : Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} needs a positive integer, got ${JSON.stringify(text)}`);
  return value;
}

function backendsArgument(): Backend[] {
  const names = (argument('backends') ?? BACKENDS.join(',')).split(',');
  for (const name of names) {
    if (!(BACKENDS as readonly string[]).includes(name))
      throw new Error(`--backends: unknown backend ${JSON.stringify(name)}; backends: ${BACKENDS.join(', ')}`);
  }
  return names as Backend[];
}

const DECODE_TOKENS = positiveArgument('decode-tokens', 48);
const SYNCS = positiveArgument('syncs', 3);

/** Tokens/s of `batch` concurrent requests, each decoding DECODE_TOKENS tokens (no stop token). */
async function decodeRate(provider: InferenceProvider, promptIds: number[], batch: number): Promise<number> {
  const started = performance.now();
  const results = await Promise.all(
    Array.from({ length: batch }, (_, i) =>
      provider.generate({ promptIds, sampling: { maxTokens: DECODE_TOKENS, temperature: 1, topP: 1, seed: 1000 + i, stopTokens: [] } }),
    ),
  );
  const tokens = results.reduce((sum, r) => sum + r.completionIds.length, 0);
  return tokens / ((performance.now() - started) / 1000);
}

/** Version 0 of a LoRA run of `base` as the trainer publishes it (its own code), in `dest`. */
function publishInitialAdapter(base: string, lora: LoraConfig, dest: string): void {
  const script = [
    'import json, sys',
    'from pathlib import Path',
    'from trajflow_py.trainer.adapters import adapter_state, initial_adapter, save_adapter',
    'from trajflow_py.trainer.inputs import LoraSettings',
    'model = initial_adapter(Path(sys.argv[1]), LoraSettings.model_validate(json.loads(sys.argv[2])))',
    'Path(sys.argv[3]).mkdir(parents=True)',
    'save_adapter(model, adapter_state(model), Path(sys.argv[1]), Path(sys.argv[3]))',
  ].join('\n');
  execFileSync(PYTHON_BIN, ['-c', script, base, JSON.stringify(lora), dest], { cwd: PYTHON_SOURCES, env: { ...process.env, HF_HUB_OFFLINE: '1' } });
}

/** Seconds of each of `count` syncs to versions 1.. of `checkpoint`. */
async function syncTimes(provider: InferenceProvider, checkpoint: string, count: number): Promise<number[]> {
  const seconds: number[] = [];
  for (let version = 1; version <= count; version++) {
    const started = performance.now();
    await provider.loadWeights(checkpoint, version);
    seconds.push((performance.now() - started) / 1000);
  }
  return seconds;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function benchmarkServer(backend: Backend): Promise<void> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-bench-'));
  const log = path.join(dir, 'model-server.log');
  const lora = LoraSchema.parse({});
  const adapter = path.join(dir, 'lora', 'checkpoints', 'v000000');
  publishInitialAdapter(SMOLLM2_DIR, lora, adapter);
  const server = backend === 'vllm' ? await spawnVllmServer(SMOLLM2_DIR, port, log, 2048, lora) : await spawnModelServer(SMOLLM2_DIR, port, log, 16, lora);
  const provider = createHttpProvider({ backend, servers: [`http://127.0.0.1:${port}`], requestTimeoutS: 300 });
  const loraProvider = createHttpProvider({ backend, servers: [`http://127.0.0.1:${port}`], requestTimeoutS: 300 });
  try {
    // Adapters first: once whole weights replaced the base model, the server takes no adapters.
    // A run loads an adapter a step: once the server holds as many as it keeps, each load replaces
    // the oldest. The first MAX_LOADED_ADAPTERS loads fill the server; the SYNCS after them are a run's steady state.
    const adapterSyncs = await syncTimes(loraProvider, adapter, MAX_LOADED_ADAPTERS + SYNCS);
    await loraProvider.close();
    const chat = await loadChatFormat(SMOLLM2_DIR);
    const promptIds = chat.renderConversationStart([{ role: 'user', content: 'Write a short story about a robot learning to add numbers.' }]);
    await provider.loadWeights(SMOLLM2_DIR, 0);
    await decodeRate(provider, promptIds, 1); // warm-up
    const one = await decodeRate(provider, promptIds, 1);
    const sixteen = await decodeRate(provider, promptIds, 16);
    const name = backend === 'vllm' ? 'vLLM 0.32 CPU' : "trajflow's SGLang-API server";
    console.log(`${name} (SmolLM2-135M-Instruct, float32, ${os.cpus().length} cores), ${DECODE_TOKENS} tokens per request, prompt ${promptIds.length} tokens`);
    console.log(`  batch  1: ${one.toFixed(1)} tokens/s`);
    console.log(`  batch 16: ${sixteen.toFixed(1)} tokens/s (${(sixteen / one).toFixed(2)}x)`);
    const fullSyncs = await syncTimes(provider, SMOLLM2_DIR, SYNCS);
    const [filling, steady] = [adapterSyncs.slice(0, MAX_LOADED_ADAPTERS), adapterSyncs.slice(MAX_LOADED_ADAPTERS)];
    const ratio = median(steady) / median(fullSyncs);
    console.log(`  weight sync, whole model from disk: ${fullSyncs.map((s) => s.toFixed(2)).join(', ')} s`);
    const seconds = (xs: number[]) => xs.map((s) => s.toFixed(3)).join(', ');
    console.log(
      `  weight sync, LoRA adapter (rank ${lora.rank}, ${lora.targetModules.length} modules): ${seconds(steady)} s (the first ${MAX_LOADED_ADAPTERS}, filling the server: ${seconds(filling)} s)`,
    );
    console.log(`  LoRA once the server is full / whole (medians): ${ratio.toFixed(3)}   target <= 0.25: ${ratio <= 0.25 ? 'MET' : 'NOT MET'}`);
  } finally {
    await provider.close();
    await loraProvider.close();
    await stopWorker(server);
  }
}

async function benchmarkTraining(): Promise<void> {
  const file = path.join(PROJECT_ROOT, 'config', 'examples', 'arithmetic-smollm2-train.yaml');
  const loaded = loadRunConfig(file);
  const steps = Number(argument('steps') ?? loaded.trainer.steps);
  const config = { ...loaded, trainer: { ...loaded.trainer, steps } };
  const logger = createLogger('bench');
  logger.level = 'warn';
  const summary = await runTraining(config, { local: true, logger, configFile: file });
  console.log(`training ${summary.result.runId}: ${summary.result.steps} steps in ${summary.wallSeconds.toFixed(0)} s`);
  console.log('  step  reward  success  trained tokens  train tokens/s  staleness<=  mismatch KL');
  for (const m of summary.curve) {
    const rate = m.stepMs > 0 ? m.tokens / (m.stepMs / 1000) : 0;
    console.log(
      `  ${String(m.step).padStart(4)}  ${m.rewardMean.toFixed(3)}  ${(100 * m.successRate).toFixed(1).padStart(6)}%  ${String(m.tokens).padStart(14)}  ${rate.toFixed(1).padStart(14)}  ${String(m.stalenessMax).padStart(11)}  ${m.logprobTokensCompared ? `${m.logprobMismatchKl!.toExponential(2)} (${m.logprobTokensCompared} tokens)` : '-'}`,
    );
  }
  for (const e of summary.evaluations) {
    console.log(`  held-out v${e.version}: ${e.solved}/${e.episodes} solved (sampled by v${e.sampledVersions?.min ?? '?'}), at ${e.elapsedS?.toFixed(0)} s`);
  }
  const half = Math.floor(summary.curve.length / 2);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const first = mean(summary.curve.slice(0, half).map((m) => m.rewardMean));
  const second = mean(summary.curve.slice(half).map((m) => m.rewardMean));
  console.log(`  mean reward, first half ${first.toFixed(3)} -> second half ${second.toFixed(3)}`);
}

async function main(): Promise<void> {
  process.env.HF_HUB_OFFLINE = '1';
  for (const backend of backendsArgument()) await benchmarkServer(backend);
  if (!process.argv.includes('--no-training')) await benchmarkTraining();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
