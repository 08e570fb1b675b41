/**
 * A real rollout on the real dev server and the embedded model: 4 groups x 4 trajectories through
 * the trajectory, group and controller workflows, with every trajectory stored token for token
 * and visible in the Web UI through its search attributes.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { buildTrainingSequences } from '../src/core/sequence';
import { createLogger } from '../src/log';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { activityAttempts, localActivityResults } from '../src/temporal/history';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { runRollout } from '../client/runRollout';
import { openWorkflowsQuery } from '../client/runWorkflows';
import { ROLLOUT_ROLES, startWorkers } from '../workers/start';
import { eventually, testConfig, withClient } from './support/harness';

const HISTORY_DIR = path.join(__dirname, 'histories');

describe('rollout on the dev server', () => {
  const config = testConfig('integration');
  const logger = createLogger('test');
  logger.level = 'warn';

  it('runs 4 groups x 4 trajectories, stores every one, and tags them for the Web UI', async () => {
    const workers = await startWorkers(config, ROLLOUT_ROLES, logger);
    let summary;
    try {
      summary = await runRollout(config, { runId: 'integration-run', local: false, logger });
      // The run returns once its groups have closed too, so none is left for other runs' workers.
      await withClient(async (client) => expect((await client.workflow.count(openWorkflowsQuery('integration-run'))).count).toBe(0));
    } finally {
      await workers.shutdown();
    }
    expect(summary.groups).toBe(4);
    expect(summary.trajectories + summary.failedTrajectories).toBe(16);
    expect(summary.failedTrajectories).toBe(0);
    expect(summary.engineBusyFraction).toBeGreaterThan(0);

    const store = new TrajectoryStore(config.dataDir);
    const ids = await store.listTrajectories('integration-run');
    expect(ids).toHaveLength(16);
    for (const id of ids) {
      const trajectory = await store.getTrajectory('integration-run', id);
      expect(trajectory).toBeDefined();
      const turns = await store.getTurns('integration-run', id);
      expect(turns).toHaveLength(trajectory!.turns);
      const [sequence, ...more] = buildTrainingSequences(turns);
      expect(more).toHaveLength(0);
      expect(sequence.lossMask.reduce((a, b) => a + b, 0)).toBe(trajectory!.completionTokens);
      for (const turn of turns) {
        expect(turn.logprobs).toHaveLength(turn.completionIds.length);
        expect(turn.logprobs.every((lp) => Number.isFinite(lp) && lp <= 0)).toBe(true);
      }
    }
    for (let g = 0; g < 4; g++) {
      const group = await store.getGroup('integration-run', `integration-run.g0000${g}`);
      expect(group?.trajectoryIds).toHaveLength(4);
    }

    await withClient(async (client) => {
      const query = `TrajflowRun = "integration-run" AND TrajflowKind = "trajectory" AND ExecutionStatus = "Completed"`;
      const listed = await eventually(async () => {
        const found = [];
        for await (const execution of client.workflow.list({ query })) found.push(execution);
        return found.length === 16 ? found : undefined;
      });
      for (const execution of listed) {
        const attrs = execution.typedSearchAttributes;
        expect(attrs.get(SEARCH_ATTRIBUTES.status)).not.toBe('running');
        expect(typeof attrs.get(SEARCH_ATTRIBUTES.reward)).toBe('number');
        expect(attrs.get(SEARCH_ATTRIBUTES.turns)).toBeGreaterThan(0);
        expect(attrs.get(SEARCH_ATTRIBUTES.policyVersion)).toBe(0);
        expect(attrs.get(SEARCH_ATTRIBUTES.group)).toMatch(/^integration-run\.g/);
      }

      // Keep fresh histories of each workflow type for the replay test when asked to.
      if (process.env.TRAJFLOW_RECORD_HISTORIES) {
        mkdirSync(HISTORY_DIR, { recursive: true });
        for (const id of ['integration-run', 'integration-run.g00000', 'integration-run.g00000.t000']) {
          const history = await client.workflow.getHandle(id).fetchHistory();
          writeFileSync(path.join(HISTORY_DIR, `${id}.json`), historyToJSON(history));
        }
      }
    });
  });

  it('with local model calls and sessions, runs each episode without one activity task', async () => {
    const local = testConfig('integration-local', {
      env: { sessions: 'local' },
      inference: { calls: 'local' },
      rollout: { groups: 2, groupSize: 4, maxConcurrency: 8 },
    });
    const runId = 'integration-local-run';
    const workers = await startWorkers(local, ROLLOUT_ROLES, logger);
    let summary;
    try {
      summary = await runRollout(local, { runId, local: false, logger });
    } finally {
      await workers.shutdown();
    }
    expect(summary.trajectories).toBe(8);
    expect(summary.failedTrajectories).toBe(0);
    const store = new TrajectoryStore(local.dataDir);
    await withClient(async (client) => {
      for (const id of await store.listTrajectories(runId)) {
        const trajectory = (await store.getTrajectory(runId, id))!;
        const handle = client.workflow.getHandle(id);
        // Every generate is a local activity's recorded result, one per stored turn; no activity went through the server.
        expect(await activityAttempts(handle)).toEqual({});
        const results = await localActivityResults(handle);
        expect({ id, generate: results.generate?.recorded }).toEqual({ id, generate: (await store.getTurns(runId, id)).length });
        expect({ id, turns: trajectory.turns, recordTrajectory: results.recordTrajectory?.recorded }).toEqual({
          id,
          turns: trajectory.turns,
          recordTrajectory: 1,
        });
      }
    });
  });
});
