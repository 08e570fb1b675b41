/**
 * One inference worker, two training runs (shared task queues, or a run left over on the server):
 * every turn is sampled with its own run's weights. The provider holds one run's weights at a
 * time, so turns of the two runs taken at once must not swap them under each other.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createInferenceActivities, type GenerateInput } from '../activities/inference';
import { ServedWeights } from '../activities/servedWeights';
import { parseRunConfig } from '../src/runConfig';
import { embeddedChatFormat } from '../src/chat/format';
import { compatibilityOf } from '../src/core/compatibility';
import { createLogger } from '../src/log';
import { modelConfig } from '../src/model/config';
import { EmbeddedProvider } from '../src/model/embeddedProvider';
import { initWeights, saveCheckpoint } from '../src/model/weights';
import { CheckpointStore } from '../src/store/checkpointStore';
import { TrajectoryStore } from '../src/store/trajectoryStore';

const model = { maxContext: 256 };
const RUNS = ['run-a', 'run-b'];

/** Samples `turns` (run, trajectory) turns through one provider's inference activities, all at once or one by one. */
async function sampleTurns(turns: [runId: string, trajectory: number][], together: boolean): Promise<number[][]> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-two-runs-'));
  const checkpoints = new CheckpointStore(dataDir);
  // Each run has published version 1, with weights of its own.
  await Promise.all(RUNS.map((runId, i) => saveCheckpoint(checkpoints.file(runId, 1), { weights: initWeights(modelConfig(model), 20 + i), policyVersion: 1 })));
  const provider = await EmbeddedProvider.create({ model, seed: 3, maxBatch: 8 });
  const store = new TrajectoryStore(dataDir);
  const config = parseRunConfig({ env: { name: 'frozenlake' }, model });
  const logger = createLogger('test');
  logger.level = 'error';
  const { generate } = createInferenceActivities({
    provider,
    store,
    weights: new ServedWeights(provider, checkpoints, logger),
    chat: embeddedChatFormat,
    maxContext: model.maxContext,
    compatibility: compatibilityOf(config, 'test'),
    logger,
  });
  const input = ([runId, trajectory]: [string, number]): GenerateInput => ({
    runId,
    runSeed: 1,
    trajectoryId: `${runId}.g00000.t${String(trajectory).padStart(3, '0')}`,
    turn: 0,
    messages: [{ role: 'user', content: 'You are at the start. Which way?' }],
    sampling: { maxTokens: 24, temperature: 1, topP: 1 },
    policy: { runId, minVersion: 1, followLatest: false },
  });
  const call = (turn: [string, number]) => new MockActivityEnvironment().run(generate, input(turn));
  try {
    if (together) await Promise.all(turns.map(call));
    else for (const turn of turns) await call(turn);
    const stored = await Promise.all(turns.map(async (turn) => (await store.getTurn(turn[0], input(turn).trajectoryId, 0))!));
    return stored.map(({ completionIds, logprobs }) => [...completionIds, ...logprobs]);
  } finally {
    await provider.close();
  }
}

describe('inference activities serving two training runs', () => {
  it("sample each run's turns with its own weights when the runs' turns come at once", async () => {
    const turns: [string, number][] = [0, 1, 2, 3].flatMap((trajectory) => RUNS.map((runId) => [runId, trajectory] as [string, number]));
    const together = await sampleTurns(turns, true);
    const alone = await sampleTurns(turns, false);
    expect(together).toEqual(alone);
    // The runs' weights differ, so the same trajectory's turn differs between them.
    expect(alone[0]).not.toEqual(alone[1]);
  });
});
