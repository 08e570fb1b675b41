/**
 * Smoke test of `npm run bench:pipeline` at its --quick sizes, on the suite's dev server: every
 * configuration runs its train steps through its own pipeline, and what the bench reports holds
 * together (throughput measured, staleness within each run's bound, the synchronous baseline
 * strictly on-policy). Performance targets are not asserted: a shared CI machine cannot promise them.
 */
import { ContinuousBatchingStandIn, decodeStepMs } from '../bench/pipeline/batchingStandIn';
import { benchmarkPipeline } from '../bench/pipeline/benchmark';
import { standInCompletion } from '../bench/pipeline/completion';
import { CONFIGURATIONS, FIXED_IN_PROCESS, FIXED_TEMPORAL, STREAM_ETA1, type RunSpec } from '../bench/pipeline/configurations';
import { parseFlags } from '../bench/pipeline/flags';
import { resolveOptions } from '../bench/pipeline/options';
import { checkTargets, comparisons, type ConfigurationSummary } from '../bench/pipeline/summary';
import type { SamplingParams } from '../src/inference/provider';
import { testAddress } from './support/harness';

// The suite's prebuilt workflow bundle: the bench's workflow worker starts in a second, not ten.
if (process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE) process.env.TRAJFLOW_WORKFLOW_BUNDLE ??= process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE;

const sampling = (seed: number): SamplingParams => ({ maxTokens: 16, temperature: 1, topP: 1, seed, stopTokens: [261] });
const request = (seed: number) => ({ promptIds: [1, 2, 3], sampling: sampling(seed) });
const lengthOf = (seed: number) => standInCompletion(sampling(seed)).completionIds.length;

test('the batching model stand-in decodes in steps of the fitted cost, batching up to maxBatch', async () => {
  const cost = { fixedMs: 3, perSequenceMs: 1 };
  const seeds = [11, 12, 13];
  // Sent together, all join the first step and leave as they finish: the run lasts as many steps
  // as the longest request, each paying the fixed cost, and every token its per-sequence cost.
  const batched = new ContinuousBatchingStandIn(cost, 8);
  const results = await Promise.all(seeds.map((seed) => batched.generate(request(seed))));
  const lengths = seeds.map(lengthOf);
  expect(results.map((r) => r.completionIds.length)).toEqual(lengths);
  expect(batched.busyMsNow()).toBeCloseTo(Math.max(...lengths) * cost.fixedMs + lengths.reduce((a, b) => a + b) * cost.perSequenceMs, 6);
  // One at a time: the steps add up, and the second request waits for the first to finish.
  const serial = new ContinuousBatchingStandIn(cost, 1);
  const [first, second] = await Promise.all(seeds.slice(0, 2).map((seed) => serial.generate(request(seed))));
  expect(serial.busyMsNow()).toBeCloseTo((lengthOf(11) + lengthOf(12)) * decodeStepMs(cost, 1), 6);
  expect(second.queueMs).toBeGreaterThanOrEqual(first.decodeMs);
  expect(second.queueMs).toBeLessThan(first.decodeMs + 50);
});

test('a weights load lands between decode steps and a request spanning it reports the version of each token', async () => {
  const model = new ContinuousBatchingStandIn({ fixedMs: 20, perSequenceMs: 0 }, 8);
  const seed = [21, 22, 23, 24, 25].find((s) => lengthOf(s) >= 10)!;
  const pending = model.generate(request(seed));
  await new Promise((resolve) => setTimeout(resolve, 70));
  await model.loadWeights('unused', 5);
  const result = await pending;
  expect(result.policyVersion).toBe(0);
  const versions = result.tokenPolicyVersions!;
  expect(versions).toHaveLength(result.completionIds.length);
  // Old version first, then the new one for every later token.
  expect(versions.indexOf(5)).toBeGreaterThan(0);
  expect(versions.slice(versions.indexOf(5)).every((v) => v === 5)).toBe(true);
  expect(versions.slice(0, versions.indexOf(5)).every((v) => v === 0)).toBe(true);
});

/** A configuration's summary with only its throughput and engine busy share set. */
const summaryOf = (spec: RunSpec, trajectoriesPerSecond: number, engineBusyFraction = 0): ConfigurationSummary => ({
  spec,
  runs: [],
  trajectoriesPerSecond,
  trainedTokensPerSecond: 0,
  engineBusyFraction,
  trainerIdleFraction: 0,
  staleness: {},
  stalenessMax: 0,
  processCpuMsPerTrajectory: 0,
});

test('--only picks configurations by key; an unknown key is named with the keys there are', () => {
  expect(parseFlags(['--only', 'fixed-temporal, fixed-inproc']).only).toEqual(['fixed-temporal', 'fixed-inproc']);
  expect(resolveOptions({ only: ['fixed-temporal'] }).only).toEqual(['fixed-temporal']);
  expect(() => resolveOptions({ only: ['fixed-temporal', 'fixed-tmeporal'] })).toThrow(
    `only names no configuration "fixed-tmeporal"; configurations: ${CONFIGURATIONS.map((c) => c.key).join(', ')}`,
  );
  expect(() => resolveOptions(parseFlags(['--only', ',']))).toThrow('only must name at least one configuration');
});

test('with some configurations left out, only the targets and ratios they allow are reported', () => {
  const fixedPair = [summaryOf(FIXED_TEMPORAL, 9), summaryOf(FIXED_IN_PROCESS, 18)];
  expect(checkTargets(fixedPair)).toEqual([
    { name: 'Temporal / in-process throughput, fixed-latency model', measured: 0.5, target: 0.95, atLeast: true, unit: 'x', met: false },
  ]);
  expect(comparisons(fixedPair)).toEqual([]);
  const streaming = [summaryOf(STREAM_ETA1, 7, 0.97)];
  expect(checkTargets(streaming)).toEqual([
    { name: 'rollout-bound (fast trainer) engine busy, eta=1', measured: 97, target: 95, atLeast: true, unit: '%', met: true },
  ]);
});

test('the quick pipeline benchmark runs every configuration and reports consistent figures', async () => {
  const result = await benchmarkPipeline({ quick: true, temporalAddress: testAddress() });
  const { steps, groupSize, batchGroups } = result.options;

  expect(result.runs.map((r) => r.spec.key).sort()).toEqual(CONFIGURATIONS.map((c) => c.key).sort());
  for (const run of result.runs) {
    expect({ run: run.spec.key, steps: run.steps, trajectories: run.trajectories }).toEqual({
      run: run.spec.key,
      steps,
      trajectories: steps * batchGroups * groupSize,
    });
    expect(run.trajectoriesPerSecond).toBeGreaterThan(0);
    expect(run.trainedTokens).toBeGreaterThan(0);
    expect(run.trainedTokensPerSecond).toBeGreaterThan(0);
    expect({ run: run.spec.key, stalenessMax: Math.min(run.stalenessMax, run.spec.maxStaleness) }).toEqual({
      run: run.spec.key,
      stalenessMax: run.stalenessMax,
    });
    // Every trained token is in the histogram, at a lag within the bound.
    const lags = Object.keys(run.staleness).map(Number);
    expect(Math.max(...lags)).toBeLessThanOrEqual(run.spec.maxStaleness);
    expect(Object.values(run.staleness).reduce((a, b) => a + b, 0)).toBe(run.trainedTokens);
    expect(run.engineBusyFraction).toBeGreaterThanOrEqual(0);
    expect(run.engineBusyFraction).toBeLessThanOrEqual(1.01);
    expect(run.trainerIdleFraction).toBeGreaterThanOrEqual(0);
    expect(run.trainerIdleFraction).toBeLessThanOrEqual(1);
  }
  const sync = result.runs.filter((r) => r.spec.pipeline === 'temporal-synchronous');
  expect(sync.length).toBeGreaterThan(0);
  for (const run of sync) expect(Object.keys(run.staleness)).toEqual(['0']);

  expect(result.engineCost.samples.length).toBeGreaterThanOrEqual(2);
  expect(result.engineCost.fixedMs + result.engineCost.perSequenceMs).toBeGreaterThan(0);
  expect(result.targets.every((t) => Number.isFinite(t.measured))).toBe(true);
}, 90_000);
