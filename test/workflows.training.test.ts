/**
 * A whole training run's workflows (training, rollout controller, groups, trajectories: the real
 * workflow code on the real dev server) with small scripted activities in place of the model, the
 * environment and the trainer. Checks the pipeline's own rules: with maxStaleness 0 a group is
 * admitted only once the version it will be trained by is published, and a group signalled twice
 * is trained exactly once.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import type { OpenSessionInput, SessionTurnInput } from '../activities/environment';
import type { GenerateInput, GenerateOutput } from '../activities/inference';
import type { TrainStepInput, TrainStepOutput } from '../activities/trainer';
import { groupIdOf, parseGroupOrTrajectoryId, rolloutIdOf } from '../src/core/ids';
import type { GroupSummary } from '../src/core/records';
import type { StepMetrics } from '../src/rl/stepMetrics';
import { groupReadySignal } from '../workflows/signals';
import { trainingWorkflow } from '../workflows/training';
import type { TrainingInput } from '../workflows/types';
import { eventually, withClient } from './support/harness';
import { mockRun, withMockWorker } from './support/mockWorker';

const HISTORY_DIR = path.join(__dirname, 'histories');
const next = { messages: [{ role: 'user' as const, content: 'go' }], freshContext: false };

/**
 * Scripted activities for a whole training run: the model always answers, an episode ends at its
 * first turn where `solves(sessionId)` (return 1) or runs out of turns, and `trainStep` publishes
 * the next version after `onTrain`. `generated` collects every model call.
 */
function scriptedActivities(queue: string, script: { solves: (sessionId: string) => boolean; trainStep: (request: TrainStepInput) => Promise<void> }) {
  const generated: GenerateInput[] = [];
  const activities = {
    async generate(request: GenerateInput): Promise<GenerateOutput> {
      generated.push(request);
      const version = request.policy?.minVersion ?? 0;
      return {
        text: 'right',
        finishReason: 'stop',
        completionTokens: 2,
        contextTokens: 5,
        minPolicyVersion: version,
        maxPolicyVersion: version,
        activityMs: 1,
      };
    },
    async openSession(_: OpenSessionInput) {
      return { sessionQueue: queue, activityMs: 1, next };
    },
    async sessionTurn(request: SessionTurnInput) {
      const solves = script.solves(request.sessionId);
      return { kind: 'stepped' as const, reward: solves ? 1 : 0, done: solves, info: {}, ...(solves ? {} : { next }), activityMs: 1 };
    },
    async closeSession() {},
    async computeReward(request: { envReturn: number }) {
      return request.envReturn;
    },
    async recordTrajectory() {},
    async recordGroup(_: GroupSummary) {},
    async preparePolicy() {
      return { version: 0, step: 0 };
    },
    async trainStep(request: TrainStepInput): Promise<TrainStepOutput> {
      await script.trainStep(request);
      return { version: request.baseVersion + 1, metrics: {} as StepMetrics };
    },
    async evaluate() {
      throw new Error('no evaluation is configured');
    },
  };
  return { activities, generated };
}

/** The policy versions that a group's model calls asked for. */
function versionsOf(generated: GenerateInput[], runId: string, groupIndex: number): (number | undefined)[] {
  const prefix = `${groupIdOf(runId, groupIndex)}.`;
  return [...new Set(generated.filter((g) => g.trajectoryId.startsWith(prefix)).map((g) => g.policy?.minVersion))];
}

describe('training workflow with scripted activities', () => {
  it('admits each batch under the version that trains it, and trains a twice-signalled group once', async () => {
    const { config, spec } = mockRun('wf-training', {
      agent: { maxTurns: 2 },
      rollout: { groupSize: 2, maxConcurrency: 4 },
      trainer: { steps: 2, batchGroups: 1, maxStaleness: 0, weightSync: 'episode' },
    });
    const queue = spec.taskQueues.workflows;
    const input: TrainingInput = { ...spec, groupSize: 2, maxConcurrency: 4, trainer: config.trainer, evaluationQueue: spec.taskQueues.trainer };

    const trained: TrainStepInput[] = [];
    let duplicateSent!: () => void;
    const duplicateDelivered = new Promise<void>((resolve) => (duplicateSent = resolve));
    // Trajectory 0 of each group solves the task at its first turn; the others run out of turns.
    const { activities, generated } = scriptedActivities(queue, {
      solves: (sessionId) => sessionId.includes('.t000.'),
      async trainStep(request) {
        trained.push(request);
        // Step 1 waits until the test has delivered step 0's group a second time.
        if (request.step === 1) await duplicateDelivered;
      },
    });

    const result = await withMockWorker(queue, activities, () =>
      withClient(async (client) => {
        const handle = await client.workflow.start(trainingWorkflow, { workflowId: spec.runId, taskQueue: queue, args: [input] });
        const first = await eventually(async () => trained[0]?.groups[0]);
        await handle.signal(groupReadySignal, first);
        duplicateSent();
        const result = await handle.result();
        if (process.env.TRAJFLOW_RECORD_HISTORIES) {
          mkdirSync(HISTORY_DIR, { recursive: true });
          writeFileSync(path.join(HISTORY_DIR, 'training-run.json'), historyToJSON(await handle.fetchHistory()));
        }
        return result;
      }),
    );

    expect(result).toEqual({ runId: spec.runId, version: 2, steps: 2, groupsTrained: 2 });
    expect(trained.map((t) => [t.step, t.baseVersion, t.groups.map((g) => g.groupId)])).toEqual([
      [0, 0, [`${spec.runId}.g00000`]],
      [1, 1, [`${spec.runId}.g00001`]],
    ]);
    expect(trained[0].groups[0]).toMatchObject({
      trajectoryIds: [`${spec.runId}.g00000.t000`, `${spec.runId}.g00000.t001`],
      rewards: [1, 0],
      solved: [true, false],
      turns: [1, 2],
    });
    // maxStaleness 0: group 1's trajectories were admitted only once version 1 was published.
    expect(versionsOf(generated, spec.runId, 0)).toEqual([0]);
    expect(versionsOf(generated, spec.runId, 1)).toEqual([1]);
  });

  it('replaces the groups the filter drops within the staleness bound, and stops at the step limit', async () => {
    const { config, spec } = mockRun('wf-replace', {
      agent: { maxTurns: 2 },
      rollout: { groupSize: 2, maxConcurrency: 4 },
      trainer: { steps: 3, batchGroups: 1, maxStaleness: 0, groupFilter: 'mixed-outcomes', filteredGroups: 'replace', maxGroupsPerStep: 3 },
    });
    const queue = spec.taskQueues.workflows;
    const input: TrainingInput = { ...spec, groupSize: 2, maxConcurrency: 4, trainer: config.trainer, evaluationQueue: spec.taskQueues.trainer };
    // Groups 0 and 3 have one solved and one failed episode; 1, 2 and from 4 on fail both.
    const mixed = new Set([0, 3]);
    const trained: TrainStepInput[] = [];
    const { activities, generated } = scriptedActivities(queue, {
      solves: (sessionId) => sessionId.includes('.t000.') && mixed.has(parseGroupOrTrajectoryId(sessionId.replace(/\.s\d+$/, ''))!.groupIndex),
      async trainStep(request) {
        trained.push(request);
      },
    });

    const { result, rollout } = await withMockWorker(queue, activities, () =>
      withClient(async (client) => {
        const handle = await client.workflow.start(trainingWorkflow, { workflowId: spec.runId, taskQueue: queue, args: [input] });
        const result = await handle.result();
        // The last step stopped the controller, which then finished: nothing left running.
        const rollout = await client.workflow.getHandle(rolloutIdOf(spec.runId)).result();
        return { result, rollout };
      }),
    );

    expect(result).toMatchObject({ version: 3, steps: 3 });
    // Step 0: group 0. Step 1: 1 and 2 dropped, 3 passes. Step 2: 4-6 dropped, and 3 groups is the most a step looks at.
    const group = (index: number) => groupIdOf(spec.runId, index);
    expect(trained.map((t) => [t.step, t.groups.map((g) => g.groupId)])).toEqual([
      [0, [group(0)]],
      [1, [group(1), group(2), group(3)]],
      [2, [group(4), group(5), group(6)]],
    ]);
    // maxStaleness 0: every group was admitted under the version of the step that took it, and none after the last.
    expect([0, 1, 2, 3, 4, 5, 6].map((index) => versionsOf(generated, spec.runId, index))).toEqual([[0], [1], [1], [1], [2], [2], [2]]);
    expect(versionsOf(generated, spec.runId, 7)).toEqual([]);
    expect(rollout).toMatchObject({ groupsStarted: 7, groupsFinished: 7 });
  });
});
