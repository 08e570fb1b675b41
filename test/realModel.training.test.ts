/**
 * A real pretrained LLM end to end on the dev server: SmolLM2-135M-Instruct (made by
 * scripts/setup.sh) served by vLLM's CPU build (token-in/token-out endpoint, RL endpoints, the
 * logprobs of the sampling distribution), and trained by the Python trainer worker (PyTorch). Three train steps: every version is published as a Hugging
 * Face directory and loaded by the server (the server's weight version is what each sampled token
 * records), every trained token is within `maxStaleness`, rewards are recorded, the trainer's
 * recomputed logprobs of the tokens sampled by the version it trains agree with the server's, and
 * held-out evaluations play through the server.
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { spawnVllmServer } from '../client/modelServers';
import { stopWorker, type LoggedWorker } from '../client/workerProcess';
import { readEvaluations, readLearningCurve } from '../client/learningCurve';
import { createLogger } from '../src/log';
import { SMOLLM2_DIR } from '../src/paths';
import { freePort } from '../src/ports';
import { runLayout } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { trainingWorkflow } from '../workflows/training';
import { startWorkers, type RunningWorkers } from '../workers/start';
import { tail, within } from './support/faultKit';
import { trainingStart, withClient } from './support/harness';
import { MAX_STALENESS, realModelConfig, STEPS } from './support/realModel';

/** The reference gate for train/inference mismatch (k3 estimate of KL(behaviour || trainer)). */
const MISMATCH_KL_GATE = 0.015;

describe('a real model (SmolLM2-135M-Instruct) served by vLLM, on the dev server', () => {
  let server: LoggedWorker | undefined;
  let workers: RunningWorkers | undefined;

  afterEach(async () => {
    await workers?.shutdown();
    await stopWorker(server);
  });

  it('trains 3 steps: versions published and loaded by the server, staleness bounded, logprobs agree', async () => {
    if (!existsSync(path.join(SMOLLM2_DIR, 'config.json'))) throw new Error(`no model at ${SMOLLM2_DIR}: run bash scripts/setup.sh`);
    const port = await freePort();
    // Held-out evaluation through the server at version 0 and at the end.
    const config = realModelConfig('real-model', port, {}, 'vllm', { everySteps: STEPS, episodes: 4 });
    const runId = 'real-model-run';
    const layout = runLayout(config.dataDir, runId);
    await fs.mkdir(layout.dir, { recursive: true });
    server = await spawnVllmServer(SMOLLM2_DIR, port, layout.modelServerLog(port), config.model.maxContext);
    const logger = createLogger('test');
    logger.level = 'warn';
    workers = await startWorkers(config, ['workflows', 'inference', 'env', 'trainer'], logger);

    const result = await within(
      withClient(async (client) => (await client.workflow.start(trainingWorkflow, trainingStart(config, runId))).result()),
      480_000,
      'the real-model training run',
      () => tail(layout.modelServerLog(port)),
    );
    expect(result.version).toBe(STEPS);

    // Every version is a Hugging Face directory with its weights, config and tokenizer.
    for (let version = 0; version <= STEPS; version++) {
      const dir = layout.checkpointDir(version);
      for (const file of ['config.json', 'model.safetensors', 'tokenizer.json']) expect(existsSync(path.join(dir, file))).toBe(true);
    }

    // Versions recorded per token come from the server's weight version: tokens of version >= 1
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
