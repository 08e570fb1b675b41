/**
 * Test harness: configs pointed at the suite's dev server (started in globalSetup) with a fresh
 * data directory and task queue prefix per test, so tests never see each other's work.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { parseRunConfig } from '../../src/runConfig';
import { newDataMarker } from '../../src/store/dataMarker';
import { sealRecord } from '../../src/store/files';
import { dataMarkerFile } from '../../src/store/runLayout';
import type { RunConfig } from '../../config/schema';
import { trainingInputOf } from '../../client/launch';
import type { TrainingInput } from '../../workflows/types';

export function testAddress(): string {
  const address = process.env.TRAJFLOW_TEST_TEMPORAL_ADDRESS;
  if (!address) throw new Error('TRAJFLOW_TEST_TEMPORAL_ADDRESS unset: run through jest (globalSetup starts the server)');
  return address;
}

let counter = 0;

/**
 * A small config for tests; `overrides` are merged one level deep into the defaults, `topLevel`
 * keys (such as `modules`) are set as given. Its data directory is new and marked, as `trajflow
 * cluster prepare` leaves one, so `trajflow worker` processes accept it.
 */
export function testConfig(name: string, overrides: Record<string, Record<string, unknown>> = {}, topLevel: Record<string, unknown> = {}): RunConfig {
  const base = process.env.TRAJFLOW_TEST_DATA_DIR ?? '/tmp';
  const unique = `${name}-${process.pid}-${++counter}`;
  const sections: Record<string, Record<string, unknown>> = {
    run: { name, seed: 7 },
    temporal: { address: testAddress(), taskQueuePrefix: `test-${unique}` },
    env: { name: 'frozenlake', size: 4, map: 'classic', maxSteps: 8 },
    agent: { maxTurns: 6 },
    sampling: { maxTokens: 12 },
    rollout: { groups: 4, groupSize: 4, maxConcurrency: 8 },
    inference: { maxBatch: 16 },
  };
  for (const [key, value] of Object.entries(overrides)) {
    // Another environment replaces the FrozenLake defaults, whose options it would not know.
    const otherEnv = key === 'env' && value.name !== undefined && value.name !== sections.env.name;
    sections[key] = otherEnv ? value : { ...sections[key], ...value };
  }
  const dataDir = mkdtempSync(path.join(base, `${name}-`));
  writeFileSync(dataMarkerFile(dataDir), sealRecord(newDataMarker()));
  return parseRunConfig({ ...sections, ...topLevel, dataDir }, `test config ${name}`);
}

export async function withClient<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address: testAddress() });
  try {
    return await fn(new Client({ connection }));
  } finally {
    await connection.close();
  }
}

/** Polls until `check` returns a value (visibility is eventually consistent). */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Start options of a training workflow for `config`, as `trajflow train` would start it. */
export function trainingStart(config: RunConfig, runId: string): { workflowId: string; taskQueue: string; args: [TrainingInput] } {
  const input = trainingInputOf(config, runId);
  return { workflowId: runId, taskQueue: input.taskQueues.workflows, args: [input] };
}
