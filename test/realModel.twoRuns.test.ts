/**
 * A model server outlives a run: one long-lived inference worker (its HTTP provider and inference
 * activities) serves run A up to version 1, then run B from its version 0. Run B's first tokens
 * must carry B's version 0 and be sampled by B's weights: their logprobs match what the trainer
 * computes for them under B's v0 checkpoint, and not under A's v1 (same model, other weights).
 * Against both real servers: vLLM's CPU build and trajflow's SGLang-API server.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createInferenceActivities, type GenerateInput } from '../activities/inference';
import { ServedWeights } from '../activities/servedWeights';
import { spawnModelServer, spawnVllmServer } from '../client/modelServers';
import { stopWorker, type LoggedWorker } from '../client/workerProcess';
import { loadChatFormat } from '../src/chat/hfChatFormat';
import { compatibilityOf } from '../src/core/compatibility';
import type { TurnRecord } from '../src/core/records';
import { createHttpProvider } from '../src/inference/http/httpProvider';
import type { InferenceProvider } from '../src/inference/provider';
import { createLogger } from '../src/log';
import { PYTHON_BIN, PYTHON_SOURCES, SMOLLM2_DIR } from '../src/paths';
import { freePort } from '../src/ports';
import { parseRunConfig } from '../src/runConfig';
import { CheckpointStore } from '../src/store/checkpointStore';
import { runLayout, serverLocksDir } from '../src/store/runLayout';
import { TrajectoryStore } from '../src/store/trajectoryStore';

const run = promisify(execFile);
const SCRIPT = path.join(__dirname, 'support', 'realCheckpoints.py');
const MAX_CONTEXT = 1024;
const TEMPERATURE = 1;

async function python(...args: string[]): Promise<string> {
  const { stdout } = await run(PYTHON_BIN, [SCRIPT, ...args], {
    cwd: PYTHON_SOURCES,
    env: { ...process.env, PYTHONPATH: PYTHON_SOURCES, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' },
    maxBuffer: 1 << 24,
  });
  return stdout;
}

/** Each completion's logprobs under each of `checkpoints`, as the trainer computes them. */
async function trainerLogprobs(dir: string, checkpoints: string[], turns: TurnRecord[]): Promise<Record<string, number[][]>> {
  const request = path.join(dir, 'score.json');
  const samples = turns.map((turn) => ({ prompt: turn.promptDeltaIds, completion: turn.completionIds }));
  await fs.writeFile(request, JSON.stringify({ checkpoints, temperature: TEMPERATURE, samples }));
  return (JSON.parse(await python('score', request)) as { logprobs: Record<string, number[][]> }).logprobs;
}

const meanAbsDiff = (a: number[][], b: number[][]) => {
  const diffs = a.flatMap((row, i) => row.map((value, t) => Math.abs(value - b[i][t])));
  return diffs.reduce((sum, d) => sum + d, 0) / diffs.length;
};

describe('a model server that outlives a run', () => {
  let dataDir: string;
  let checkpoints: CheckpointStore;
  const firstTurnsOfB: Record<string, TurnRecord[]> = {};

  beforeAll(async () => {
    if (!existsSync(path.join(SMOLLM2_DIR, 'config.json'))) throw new Error(`no model at ${SMOLLM2_DIR}: run bash scripts/setup.sh`);
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-real-two-runs-'));
    checkpoints = new CheckpointStore(dataDir, 'huggingface');
    // Run A trained to version 1 (its weights moved; its version 0 plays no part); run B starts from the base model.
    await python('publish', SMOLLM2_DIR, checkpoints.location('run-a', 1), '1');
    await python('publish', SMOLLM2_DIR, checkpoints.location('run-b', 0));
  }, 300_000);

  afterAll(async () => {
    await fs.rm(dataDir, { recursive: true, force: true });
  });

  it.each(['sglang', 'vllm'] as const)(
    '%s: run B after run A v1 samples with B v0',
    async (backend) => {
      const port = await freePort();
      const log = runLayout(dataDir, 'run-b').modelServerLog(port);
      await fs.mkdir(path.dirname(log), { recursive: true });
      let server: LoggedWorker | undefined;
      let provider: InferenceProvider | undefined;
      try {
        server = backend === 'vllm' ? await spawnVllmServer(SMOLLM2_DIR, port, log, MAX_CONTEXT) : await spawnModelServer(SMOLLM2_DIR, port, log, 4);
        const logger = createLogger('test');
        logger.level = 'warn';
        provider = createHttpProvider({ backend, servers: [`http://127.0.0.1:${port}`], requestTimeoutS: 120, syncLockDir: serverLocksDir(dataDir), logger });
        const store = new TrajectoryStore(dataDir);
        const config = parseRunConfig({
          env: { name: 'arithmetic' },
          model: { path: SMOLLM2_DIR, maxContext: MAX_CONTEXT },
          inference: { backend, servers: [`http://127.0.0.1:${port}`] },
        });
        const { generate } = createInferenceActivities({
          provider,
          store,
          weights: new ServedWeights(provider, checkpoints, logger),
          chat: await loadChatFormat(SMOLLM2_DIR),
          maxContext: MAX_CONTEXT,
          compatibility: compatibilityOf(config, 'test'),
          logger,
        });
        const turn = async (runId: string, minVersion: number, trajectory: number) => {
          const input: GenerateInput = {
            runId,
            runSeed: 1,
            trajectoryId: `${runId}-${backend}.g00000.t${String(trajectory).padStart(3, '0')}`,
            turn: 0,
            messages: [{ role: 'user', content: `What is ${trajectory} + 4? Answer with the number.` }],
            sampling: { maxTokens: 16, temperature: TEMPERATURE, topP: 1 },
            policy: { runId, minVersion, followLatest: false },
          };
          await new MockActivityEnvironment().run(generate, input);
          return (await store.getTurn(runId, input.trajectoryId, 0))!;
        };

        const ofA = await turn('run-a', 1, 0);
        expect(new Set(ofA.policyVersions)).toEqual(new Set([1]));
        const ofB = await Promise.all([1, 2, 3].map((trajectory) => turn('run-b', 0, trajectory)));
        for (const record of ofB) {
          expect(record.completionIds.length).toBeGreaterThan(0);
          expect(new Set(record.policyVersions)).toEqual(new Set([0]));
        }
        firstTurnsOfB[backend] = ofB;
      } finally {
        await provider?.close();
        await stopWorker(server);
      }
    },
    300_000,
  );

  it("run B's tokens were sampled by B's v0 weights: the trainer's logprobs under B v0 match them, under A v1 they do not", async () => {
    const turns = [...(firstTurnsOfB.sglang ?? []), ...(firstTurnsOfB.vllm ?? [])];
    expect(turns).toHaveLength(6);
    const served = turns.map((turn) => turn.logprobs);
    const [b0, a1] = [checkpoints.location('run-b', 0), checkpoints.location('run-a', 1)];
    const { [b0]: underB0, [a1]: underA1 } = await trainerLogprobs(dataDir, [b0, a1], turns);
    const matchB = meanAbsDiff(served, underB0);
    const matchA = meanAbsDiff(served, underA1);
    // Same weights in float32 on both sides: they agree to rounding. A's noisy weights are far off.
    expect(matchB).toBeLessThan(0.02);
    expect(matchA).toBeGreaterThan(10 * matchB);
  }, 300_000);
});
