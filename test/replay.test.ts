/**
 * Replays recorded histories of the training, controller, group and trajectory workflows against today's
 * workflow code: a nondeterministic change (reordered activities, a new awaited call) fails here
 * before it can wedge running workflows. One training history comes from a run pinned to a build
 * of a versioned deployment (test/workerDeployment.test.ts), as workflows of a cluster run. Re-record
 * after an intended, versioned change:
 *
 *   TRAJFLOW_RECORD_HISTORIES=1 npx jest test/rollout.integration.test.ts test/workflows.training.test.ts test/workerDeployment.test.ts
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker } from '@temporalio/worker';

const HISTORY_DIR = path.join(__dirname, 'histories');

describe('workflow replay', () => {
  const files = readdirSync(HISTORY_DIR).filter((f) => f.endsWith('.json'));
  const histories = files.map((f) => ({
    workflowId: f.replace(/\.json$/, ''),
    history: historyFromJSON(JSON.parse(readFileSync(path.join(HISTORY_DIR, f), 'utf8'))),
  }));

  it('has recorded histories of every workflow type, one of them from a versioned deployment', () => {
    const types = histories.map(({ history }) => history.events?.[0].workflowExecutionStartedEventAttributes?.workflowType?.name);
    expect(new Set(types)).toEqual(new Set(['trainingWorkflow', 'rolloutWorkflow', 'groupWorkflow', 'trajectoryWorkflow']));
    const pinned = histories.filter(({ history }) => history.events?.some((e) => e.workflowTaskCompletedEventAttributes?.deploymentVersion?.buildId));
    expect(pinned.map(({ workflowId }) => workflowId)).toEqual(['versioned-run-a']);
  });

  it('replays them all without nondeterminism', async () => {
    const bundlePath = process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE!;
    let replayed = 0;
    for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath: bundlePath } }, histories)) {
      expect(result.error).toBeUndefined();
      replayed++;
    }
    expect(replayed).toBe(files.length);
  });
});
