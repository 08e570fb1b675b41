/**
 * (b) The synchronous baseline, built from the same parts, as Tunix or veRL run without their
 * async modes: per train step, one rollout controller (no training link) samples exactly that
 * step's groups at once through the same workers, every trajectory is waited for, the same
 * stand-in trainer trains the batch, and the model loads the new weights before the next batch.
 *
 * The trainer is called in-process rather than through a workflow (trajflow has no workflow that
 * only trains); a Temporal activity round trip would add milliseconds to steps of seconds.
 */
import { episodeSpecOf } from '../../client/launch';
import { groupIdOf } from '../../src/core/ids';
import type { GroupSummary } from '../../src/core/records';
import { rolloutWorkflow } from '../../workflows/rollout';
import type { RunContext } from './runContext';

export async function runSynchronousOnTemporal({ stack, config, runId, model, logger }: RunContext): Promise<number> {
  const { trainer: settings, rollout } = config;
  const spec = episodeSpecOf(config, runId);
  const syncWeights = (version: number) => stack.checkpoints.loadNewest(runId, version, (location, v) => model.loadWeights(location, v), logger);
  const startedAt = performance.now();
  let { version } = await stack.trainer.activities.preparePolicy({
    runId,
    trainer: settings,
    temperature: config.sampling.temperature,
    env: config.env,
    agent: config.agent,
  });
  await syncWeights(version);
  for (let step = 0; step < settings.steps; step++) {
    const firstGroupIndex = step * settings.batchGroups;
    await stack.client.workflow.execute(rolloutWorkflow, {
      workflowId: `${runId}.sync-step-${step}`,
      taskQueue: spec.taskQueues.workflows,
      args: [{ ...spec, groups: settings.batchGroups, firstGroupIndex, groupSize: rollout.groupSize, maxConcurrency: rollout.maxConcurrency }],
    });
    const groups = await Promise.all(Array.from({ length: settings.batchGroups }, (_, j) => recordedGroup(stack.store, runId, firstGroupIndex + j)));
    ({ version } = await stack.trainer.activities.trainStep({
      runId,
      step,
      baseVersion: version,
      groups,
      trainer: settings,
      temperature: config.sampling.temperature,
    }));
    await syncWeights(version);
  }
  return startedAt;
}

async function recordedGroup(store: RunContext['stack']['store'], runId: string, groupIndex: number): Promise<GroupSummary> {
  const group = await store.getGroup(runId, groupIdOf(runId, groupIndex));
  if (!group) throw new Error(`group ${groupIndex} of run ${runId} finished but is not recorded`);
  return group;
}
