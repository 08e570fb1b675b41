/**
 * A group: G trajectories of one prompt (one seeded environment instance). The controller grants
 * trajectory slots one by one; the group starts a child trajectory per slot, frees the slot the
 * moment that trajectory ends, and once all G have ended scores and records the group.
 */
import { condition, getExternalWorkflowHandle, proxyActivities, setHandler, startChild, workflowInfo } from '@temporalio/workflow';
import type { EnvActivities } from '../activities/environment';
import { summarizeGroup, TrajectoryOutcome } from '../src/core/groupStats';
import { trajectoryIdOf } from '../src/core/ids';
import { ACTIVITY_HEARTBEAT_TIMEOUT } from '../src/core/liveness';
import type { GroupSummary } from '../src/core/records';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { failureReason } from './activityFailures';
import { trajectoryDetails } from './details';
import { admitSignal, groupFinishedSignal, slotFreedSignal } from './signals';
import { activitySummary } from './summaries';
import { trajectoryWorkflow } from './trajectory';
import { episodeSpec, GroupInput, type TrajectoryInput } from './types';

export async function groupWorkflow(input: GroupInput): Promise<GroupSummary> {
  const { groupId, groupSize } = input;
  // The heartbeat timeout is what notices a dead env worker: without one, a record lost with its
  // worker waits out the whole start-to-close timeout before it is retried.
  const { recordGroup } = proxyActivities<EnvActivities>({
    taskQueue: input.taskQueues.env,
    startToCloseTimeout: '1 minute',
    heartbeatTimeout: ACTIVITY_HEARTBEAT_TIMEOUT,
  });
  const controller = getExternalWorkflowHandle(input.controllerId);

  let granted = input.initialAdmits;
  // Policy version of each granted slot, in grant order (training runs only).
  const slotVersions: (number | undefined)[] = Array(input.initialAdmits).fill(input.policyVersion);
  setHandler(admitSignal, (count, policyVersion) => {
    granted += count;
    slotVersions.push(...Array(count).fill(policyVersion));
  });

  const outcomes: TrajectoryOutcome[] = [];
  const running: Promise<void>[] = [];
  const searchAttributes = workflowInfo().typedSearchAttributes;

  /** Starts trajectory `index`, follows it to its end and frees its slot. */
  async function play(index: number): Promise<void> {
    const trajectoryId = trajectoryIdOf(groupId, index);
    const trajectory: TrajectoryInput = {
      ...episodeSpec(input),
      groupId,
      trajectoryId,
      envSeed: input.envSeed,
      minPolicyVersion: slotVersions[index],
      weightSync: input.weightSync,
    };
    const child = await startChild(trajectoryWorkflow, {
      workflowId: trajectoryId,
      taskQueue: input.taskQueues.workflows,
      args: [trajectory],
      typedSearchAttributes: searchAttributes.updateCopy([
        { key: SEARCH_ATTRIBUTES.kind, value: 'trajectory' },
        { key: SEARCH_ATTRIBUTES.status, value: 'running' },
      ]),
      staticSummary: `trajectory ${index + 1}/${groupSize} of ${groupId}`,
      staticDetails: trajectoryDetails(trajectory),
    });
    const outcome = await child.result().then(
      (summary): TrajectoryOutcome => ({ ok: true, summary }),
      (err): TrajectoryOutcome => ({ ok: false, trajectoryId, reason: failureReason(err) }),
    );
    outcomes.push(outcome);
    await controller.signal(slotFreedSignal, { groupId, trajectoryId });
  }

  // Every slot granted so far starts in the same workflow task: a start is not awaited before
  // the next, which would cost one round trip to the server per trajectory.
  for (let index = 0; index < groupSize; index++) {
    await condition(() => granted > index);
    running.push(play(index));
  }
  await Promise.all(running);

  // Order by trajectory id so the record does not depend on which child finished first.
  const ordered = [...outcomes].sort((a, b) => idOf(a).localeCompare(idOf(b)));
  const summary = summarizeGroup(input.runId, groupId, ordered);
  await recordGroup.executeWithOptions(
    { summary: activitySummary.recordGroup(input.groupIndex, summary.trajectoryIds.length, summary.failed.length, summary.rewardMean) },
    [summary],
  );
  await controller.signal(groupFinishedSignal, summary);
  return summary;
}

function idOf(outcome: TrajectoryOutcome): string {
  return outcome.ok ? outcome.summary.trajectoryId : outcome.trajectoryId;
}
