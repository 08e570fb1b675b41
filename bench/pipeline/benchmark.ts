/**
 * benchmarkPipeline: measures the engine, starts the Temporal stack once, then runs every
 * configuration round-robin (so drift on a shared machine spreads over all of them) and returns
 * every run's measurement with the per-configuration means and the targets.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createLogger } from '../../src/log';
import { ContinuousBatchingStandIn } from './batchingStandIn';
import { cpuSince, loadAverage, readCpu } from './cpuClock';
import { selectConfigurations, type Pipeline, type RunSpec } from './configurations';
import { measureEngineCost, type EngineCostFit } from './engineCost';
import { FixedLatencyStandIn } from './fixedLatencyStandIn';
import { runStreamingInProcess } from './inProcessStreaming';
import { registerLatencyEnvironment } from './latencyEnvironment';
import { measureRun, type RunMeasurement } from './measurement';
import { resolveOptions, type PipelineBenchOptions } from './options';
import type { PipelineRunner } from './runContext';
import type { StandInModel } from './standInModel';
import { runStreamingOnTemporal } from './streamingOnTemporal';
import { summarize, type ConfigurationSummary, type TargetCheck, checkTargets } from './summary';
import { runSynchronousOnTemporal } from './synchronousOnTemporal';
import { startTemporalStack } from './temporalStack';
import { meanDecodeContext, runConfigFor } from './workload';

export interface PipelineBenchResult {
  options: PipelineBenchOptions;
  engineCost: EngineCostFit;
  runs: RunMeasurement[];
  configurations: ConfigurationSummary[];
  targets: TargetCheck[];
  wallSeconds: number;
}

const RUNNERS: Record<Pipeline, PipelineRunner> = {
  'temporal-streaming': runStreamingOnTemporal,
  'temporal-synchronous': runSynchronousOnTemporal,
  'in-process-streaming': runStreamingInProcess,
};

export async function benchmarkPipeline(given: Partial<PipelineBenchOptions> = {}): Promise<PipelineBenchResult> {
  const options = resolveOptions(given);
  const startedAt = performance.now();
  const logger = createLogger('bench');
  logger.level = 'warn';
  registerLatencyEnvironment();

  options.log('measuring the embedded engine decode step ...');
  // Measured at the workload's typical context: a decode step attends over all of it.
  const promptLength = meanDecodeContext(options);
  const engineCost = await measureEngineCost(
    options.quick
      ? { batchSizes: [1, 8, 32], promptLength, newTokens: 8, repeats: 1 }
      : { batchSizes: [1, 4, 16, 32], promptLength, newTokens: 16, repeats: 5 },
  );
  const dataDir = options.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'trajflow-bench-pipeline-'));
  options.log('starting the Temporal dev server and workers ...');
  const stack = await startTemporalStack(options, dataDir, logger);
  const stamp = Date.now().toString(36);
  const specs = selectConfigurations(options.only);
  const runs: RunMeasurement[] = [];
  try {
    for (let round = 0; round < options.rounds; round++) {
      for (const spec of specs) {
        const runId = `pipeline-${stamp}-${spec.key}-r${round}`;
        const model = modelFor(spec, options, engineCost);
        stack.model.use(model);
        stack.trainer.beginRun(runId, {
          msPerToken: spec.trainer === 'slow' ? options.slowTrainerMsPerToken : options.trainerMsPerToken,
          engineBusyMs: () => model.busyMsNow(),
        });
        const config = runConfigFor(options, stack.place, spec);
        const cpuBefore = readCpu(stack.serverPid);
        const runStartedAt = await RUNNERS[spec.pipeline]({ stack, config, runId, model, logger });
        const cost = { cpu: cpuSince(cpuBefore, readCpu(stack.serverPid)), loadAverage: loadAverage() };
        await model.close();
        const run = measureRun(spec, round, runId, runStartedAt, stack.trainer.stepsOf(runId), cost);
        runs.push(run);
        options.log(
          `round ${round + 1}/${options.rounds} ${spec.label}: ${run.trajectoriesPerSecond.toFixed(2)} trajectories/s, ${(run.wallMs / 1000).toFixed(1)} s`,
        );
      }
    }
  } finally {
    await stack.close();
    if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
  const configurations = summarize(specs, runs);
  return { options, engineCost, runs, configurations, targets: checkTargets(configurations), wallSeconds: (performance.now() - startedAt) / 1000 };
}

function modelFor(spec: RunSpec, options: PipelineBenchOptions, cost: EngineCostFit): StandInModel {
  return spec.model === 'fixed-latency' ? new FixedLatencyStandIn(options.fixedModelLatencyMs) : new ContinuousBatchingStandIn(cost, options.maxBatch);
}
