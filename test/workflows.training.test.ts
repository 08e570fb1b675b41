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
import type { GroupSummary } from '../src/core/records';
import type { StepMetrics } from '../src/rl/stepMetrics';
import { groupReadySignal } from '../workflows/signals';
import { trainingWorkflow } from '../workflows/training';
import type { TrainingInput } from '../workflows/types';
import { eventually, withClient } from './support/harness';
import { mockRun, withMockWorker } from './support/mockWorker';

const HISTORY_DIR = path.join(__dirname, 'histories');
const next = { messages: [{ role: 'user' as const, content: 'go' }], freshContext: false };

describe('training workflow with scripted activities', () => {
  it('admits each batch under the version that trains it, and trains a twice-signalled group once', async () => {
    const { config, spec } = mockRun('wf-training', {
      agent: { maxTurns: 2 },
      rollout: { groupSize: 2, maxConcurrency: 4 },
      trainer: { steps: 2, batchGroups: 1, maxStaleness: 0, weightSync: 'episode' },
    });
    const queue = spec.taskQueues.workflows;
    const input: TrainingInput = { ...spec, groupSize: 2, maxConcurrency: 4, trainer: config.trainer, evaluationQueue: spec.taskQueues.trainer };

    const generated: GenerateInput[] = [];
    const trained: TrainStepInput[] = [];
    let duplicateSent!: () => void;
    const duplicateDelivered = new Promise<void>((resolve) => (duplicateSent = resolve));
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
      // Trajectory 0 of each group solves the task at its first turn; the others run out of turns.
      async sessionTurn(request: SessionTurnInput) {
        const solves = request.sessionId.includes('.t000.');
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
        trained.push(request);
        // Step 1 waits until the test has delivered step 0's group a second time.
        if (request.step === 1) await duplicateDelivered;
        return { version: request.baseVersion + 1, metrics: {} as StepMetrics };
      },
      async evaluate() {
        throw new Error('no evaluation is configured');
      },
    };

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
    const versionsByGroup = (group: string) => [
      ...new Set(generated.filter((g) => g.trajectoryId.startsWith(`${spec.runId}.${group}.`)).map((g) => g.policy?.minVersion)),
    ];
    expect(versionsByGroup('g00000')).toEqual([0]);
    expect(versionsByGroup('g00001')).toEqual([1]);
  });
});
