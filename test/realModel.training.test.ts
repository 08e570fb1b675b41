/**
 * A real pretrained LLM end to end on the dev server: SmolLM2-135M-Instruct (made by
 * scripts/setup.sh) served by vLLM's CPU build (token-in/token-out endpoint, RL endpoints, the
 * logprobs of the sampling distribution, runtime LoRA adapters), one server for the file.
 *
 * 1. The HTTP provider loads peft adapter directories as runtime adapters named by their labels,
 *    samples with each, records every token under the adapter's version (vLLM's spans name the
 *    base model's label) and keeps at most MAX_LOADED_ADAPTERS loaded; the served logprobs are
 *    peft's under the adapter named, not under the base or another adapter.
 * 2. A LoRA run trained by the Python trainer worker (PyTorch, peft). Three train steps: every
 *    version is published as an adapter and loaded by the server (the adapter's version is what
 *    each sampled token records), every trained token is within `maxStaleness`, rewards are
 *    recorded, the trainer's recomputed logprobs of the tokens sampled by the version it trains
 *    agree with the server's, and held-out evaluations play through the server.
 * Full-weight syncs on vLLM are trained end to end by test/cli.realModelResume.test.ts.
 */
import { existsSync, mkdtempSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnVllmServer } from '../client/modelServers';
import { stopWorker, type LoggedWorker } from '../client/workerProcess';
import { readEvaluations, readLearningCurve } from '../client/learningCurve';
import { createHttpProvider } from '../src/inference/http/httpProvider';
import { MAX_LOADED_ADAPTERS } from '../src/inference/http/loraAdapters';
import { lineageOf } from '../src/inference/http/weightVersions';
import type { GenerateResult } from '../src/inference/provider';
import { createLogger } from '../src/log';
import { SMOLLM2_DIR } from '../src/paths';
import { freePort } from '../src/ports';
import { CheckpointStore } from '../src/store/checkpointStore';
import { isLoraAdapterFolder } from '../src/store/loraAdapter';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { trainingWorkflow } from '../workflows/training';
import { startWorkers, type RunningWorkers } from '../workers/start';
import { tail, within } from './support/faultKit';
import { trainingStart, withClient } from './support/harness';
import { MAX_STALENESS, realModelConfig, STEPS } from './support/realModel';
import { LORA_RANK, makeAdapters, meanAbsDiff, request, sampledDifferently, scoreWithPeft } from './support/realLora';

/** The reference gate for train/inference mismatch (k3 estimate of KL(behaviour || trainer)). */
const MISMATCH_KL_GATE = 0.015;

/** Versions 1..ADAPTERS of a stand-in run: one more than the server keeps, so the oldest is unloaded. */
const ADAPTERS = MAX_LOADED_ADAPTERS + 1;
const LORA = { rank: LORA_RANK, alpha: 16, targetModules: ['q_proj', 'v_proj'] };

describe('a real model (SmolLM2-135M-Instruct) served by vLLM, on the dev server', () => {
  const port = { value: 0 };
  const adaptersDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-real-lora-'));
  const adapterDir = (version: number) => new CheckpointStore(adaptersDir, 'huggingface').location('lora-run', version);
  let server: LoggedWorker | undefined;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    if (!existsSync(path.join(SMOLLM2_DIR, 'config.json'))) throw new Error(`no model at ${SMOLLM2_DIR}: run bash scripts/setup.sh`);
    port.value = await freePort();
    const dirs = Array.from({ length: ADAPTERS }, (_, i) => adapterDir(i + 1));
    const maxContext = realModelConfig('real-model', port.value).model.maxContext;
    [, server] = await Promise.all([
      makeAdapters(SMOLLM2_DIR, dirs),
      spawnVllmServer(SMOLLM2_DIR, port.value, path.join(adaptersDir, 'vllm.log'), maxContext, { rank: LORA_RANK }),
    ]);
  }, 300_000);

  afterAll(async () => {
    await stopWorker(server);
    await fs.rm(adaptersDir, { recursive: true, force: true });
  });

  afterEach(async () => {
    await workers?.shutdown();
    workers = undefined;
  });

  it('loads each version as an adapter, samples with it under its version, and keeps the newest few', async () => {
    const url = `http://127.0.0.1:${port.value}`;
    const logger = createLogger('test');
    logger.level = 'warn';
    const provider = createHttpProvider({ backend: 'vllm', servers: [url], requestTimeoutS: 120, logger });
    const adaptersListed = async () => {
      const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string; parent?: string | null }[] };
      return models.data.filter((card) => card.parent).map((card) => card.id);
    };
    const label = (version: number) => `${version}@${lineageOf(adapterDir(version))}`;
    try {
      expect(await isLoraAdapterFolder(adapterDir(1))).toBe(true);
      // The base model (labelled 0 at start), twice: same seed, same sample.
      const base = await provider.generate(request());
      expect(base.policyVersion).toBe(0);
      expect(sampledDifferently(base, await provider.generate(request()))).toBe(false);

      const byVersion: GenerateResult[] = [];
      for (const version of [1, 2]) {
        await expect(provider.loadWeights(adapterDir(version), version)).resolves.toBe(version);
        const sampled = await provider.generate(request());
        expect(sampled.completionIds.length).toBeGreaterThan(0);
        // Every token is the adapter's version (none mixed), though vLLM's spans carry the base's label.
        expect(sampled.policyVersion).toBe(version);
        expect(sampled.tokenPolicyVersions).toBeUndefined();
        expect(sampledDifferently(sampled, base)).toBe(true);
        byVersion[version] = sampled;
      }
      expect(sampledDifferently(byVersion[1], byVersion[2])).toBe(true);
      // Sampled by the adapter each names: the server's logprobs are peft's under that adapter, not the other's nor the base's.
      const samples = [1, 2].map((version) => ({ prompt: request().promptIds, completion: byVersion[version].completionIds }));
      const scored = await scoreWithPeft(SMOLLM2_DIR, [adapterDir(1), adapterDir(2)], samples);
      for (const [i, version] of [1, 2].entries()) {
        const served = byVersion[version].logprobs;
        // Float32 on both sides: rounding apart. The adapters move these logprobs by several hundredths.
        expect(meanAbsDiff(served, scored[adapterDir(version)][i])).toBeLessThan(0.001);
        expect(meanAbsDiff(served, scored.base[i])).toBeGreaterThan(0.01);
        expect(meanAbsDiff(served, scored[adapterDir(3 - version)][i])).toBeGreaterThan(0.01);
      }
      expect(new Set(await adaptersListed())).toEqual(new Set([label(1), label(2)]));

      // More versions than the server keeps: the oldest is unloaded to make room.
      for (let version = 3; version <= ADAPTERS; version++) await provider.loadWeights(adapterDir(version), version);
      const kept = Array.from({ length: MAX_LOADED_ADAPTERS }, (_, i) => label(ADAPTERS - i));
      expect(new Set(await adaptersListed())).toEqual(new Set(kept));
      expect((await provider.generate(request())).policyVersion).toBe(ADAPTERS);
    } finally {
      await provider.close();
    }
  }, 300_000);

  it('trains a LoRA adapter 3 steps: versions published as adapters and loaded by the server, staleness bounded, logprobs agree', async () => {
    // Held-out evaluation through the server at version 0 and at the end.
    const config = realModelConfig('real-model', port.value, { lora: LORA }, 'vllm', { everySteps: STEPS, episodes: 4 });
    const runId = 'real-model-run';
    const layout = runLayout(config.dataDir, runId);
    await fs.mkdir(layout.dir, { recursive: true });
    const logger = createLogger('test');
    logger.level = 'warn';
    workers = await startWorkers(config, ['workflows', 'inference', 'env', 'trainer'], logger);

    const result = await within(
      withClient(async (client) => (await client.workflow.start(trainingWorkflow, trainingStart(config, runId))).result()),
      480_000,
      'the real-model training run',
      () => tail(path.join(adaptersDir, 'vllm.log')),
    );
    expect(result.version).toBe(STEPS);

    // Every version is a peft adapter (no full weights) with the tokenizer beside it.
    for (let version = 0; version <= STEPS; version++) {
      const dir = layout.checkpointDir(version);
      for (const file of ['adapter_config.json', 'adapter_model.safetensors', 'tokenizer.json']) expect(existsSync(path.join(dir, file))).toBe(true);
      expect(existsSync(path.join(dir, 'model.safetensors'))).toBe(false);
    }

    // Versions recorded per token come from the adapter each request named: tokens of version >= 1
    // mean the server loaded what the trainer published.
    const store = new TrajectoryStore(config.dataDir);
    const trajectories = await store.listTrajectories(runId);
    const versions = new Set<number>();
    for (const id of trajectories) for (const turn of await store.getTurns(runId, id)) turn.policyVersions.forEach((v) => versions.add(v));
    expect(Math.max(...versions)).toBeGreaterThanOrEqual(1);

    const curve = await readLearningCurve(layout);
    expect(curve.map((m) => m.step)).toEqual([0, 1, 2]);
    console.log(
      curve
        .map(
          (m) =>
            `step ${m.step}: reward ${m.rewardMean.toFixed(3)}, loss ${m.loss.toFixed(5)}, staleness <= ${m.stalenessMax}, ` +
            `logprob diff max ${m.logprobDiffMax?.toFixed(5)} mean ${m.logprobDiffMean?.toFixed(6)}, mismatch KL ${m.logprobMismatchKl?.toExponential(2)} over ${m.logprobTokensCompared} tokens`,
        )
        .join('\n'),
    );
    let compared = 0;
    for (const m of curve) {
      expect(m.trajectories).toBe(config.rollout.groupSize);
      expect(Number.isFinite(m.rewardMean)).toBe(true);
      expect(Number.isFinite(m.loss)).toBe(true);
      expect(m.stalenessMax).toBeLessThanOrEqual(MAX_STALENESS);
      compared += m.logprobTokensCompared ?? 0;
      if ((m.logprobTokensCompared ?? 0) > 0) expect(m.logprobMismatchKl).toBeLessThan(MISMATCH_KL_GATE);
    }
    // Step 0 trains version 0, which sampled every token of its batch.
    expect(compared).toBeGreaterThan(0);
    for (const id of trajectories) {
      const summary = await store.getTrajectory(runId, id);
      if (summary) expect(Number.isFinite(summary.reward)).toBe(true);
    }

    // Evaluated through the server, on the version asked for (nothing newer existed then).
    const evaluations = await readEvaluations(layout);
    console.log(
      evaluations
        .map((e) => `evaluation of v${e.version}: ${e.solved}/${e.episodes} solved, sampled by v${e.sampledVersions?.min}-${e.sampledVersions?.max}`)
        .join('\n'),
    );
    expect(evaluations.map((e) => e.version)).toEqual([0, STEPS]);
    for (const e of evaluations) {
      expect(e.episodes).toBe(4);
      expect(e.sampledVersions?.min).toBeGreaterThanOrEqual(e.version);
    }
    expect(evaluations[1].sampledVersions).toEqual({ min: STEPS, max: STEPS });
  }, 600_000);
});
