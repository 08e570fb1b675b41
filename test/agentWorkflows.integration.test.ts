/**
 * An agent written as a Temporal workflow with the AI SDK, trained as it is: trajflow starts it as
 * each trajectory's child, its model calls (the AI SDK's activities, routed by trajflow's
 * interceptor) are sampled and stored as the trajectory's turns, and its answer is scored by the
 * environment. Checked against what the model was actually given: each call's prompt continues
 * the earlier calls' sampled ids exactly (never re-tokenized), so the training sequence is what was
 * sampled; a call whose history the agent edited starts a new segment, recorded with its reason.
 */
import path from 'node:path';
import type { RunConfig } from '../config/schema';
import { runRollout } from '../client/runRollout';
import { buildTrainingSequences, nextPromptIds } from '../src/core/sequence';
import { createLogger } from '../src/log';
import { createProvider } from '../src/model/createProvider';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { ROLLOUT_ROLES, startWorkers, type RunningWorkers } from '../workers/start';
import { testConfig } from './support/harness';
import { recordingProvider, type ModelCall } from './support/recordingProvider';

const AGENT_WORKFLOWS = path.join(__dirname, 'support', 'agentWorkflows', 'workflows.ts');

describe('an AI SDK agent workflow as the trajectory', () => {
  const logger = createLogger('test');
  logger.level = 'error';
  const config: RunConfig = testConfig('agent-workflow', {
    env: { name: 'arithmetic', digits: 3, terms: 2, operators: ['*'] },
    agent: { name: 'workflow', workflowType: 'checkedAgent', workflows: AGENT_WORKFLOWS, maxTurns: 4 },
    rollout: { groups: 1, groupSize: 2, maxConcurrency: 4 },
    sampling: { maxTokens: 8 },
  });
  const calls: ModelCall[] = [];
  let workers: RunningWorkers;

  beforeAll(async () => {
    workers = await startWorkers(config, ROLLOUT_ROLES, logger, { provider: recordingProvider(await createProvider(config, logger), calls) });
  }, 120_000);
  afterAll(async () => {
    await workers?.shutdown();
  });

  it('stores each model call as a turn continuing the sampled ids, and an edited history as a new segment', async () => {
    const runId = 'agent-workflow-1';
    const summary = await runRollout(config, { runId, local: false, logger });
    expect(summary).toMatchObject({ trajectories: 2, failedTrajectories: 0 });

    const store = new TrajectoryStore(config.dataDir);
    for (const trajectoryId of await store.listTrajectories(runId)) {
      const trajectory = (await store.getTrajectory(runId, trajectoryId))!;
      expect(trajectory).toMatchObject({ status: 'ended', turns: 3, envSteps: 1 });
      const turns = await store.getTurns(runId, trajectoryId, trajectory.turns);
      // The answer's user message came from the environment's task, under the agent's own system prompt.
      expect(turns[0].messages).toEqual([
        { role: 'system', content: 'Answer with the number only.' },
        { role: 'user', content: expect.stringMatching(/^What is \d{3} \* \d{3}\?$/) },
      ]);
      // The check continues the conversation: only its new message was rendered.
      expect(turns[1].startsContext).toBeUndefined();
      expect(turns[1].messages).toEqual([{ role: 'user', content: 'Check it.' }]);
      // The summary's history was edited: a context of its own, with the reason.
      expect(turns[2]).toMatchObject({ startsContext: true, segmentReason: expect.stringContaining('differs from message 1 of turn 0') });

      // What the model was given for each turn is the stored context (the earlier turns' prompt
      // deltas and sampled ids, then this turn's delta), and it sampled the stored ids: one call
      // of the provider each (the group's two trajectories share their first prompt, not their samples).
      turns.forEach((turn, index) => {
        const prompt = nextPromptIds(turns.slice(0, index), turn.promptDeltaIds, index === 0 || turn.startsContext === true);
        const given = calls.filter((call) => call.promptIds.join() === prompt.join() && call.completionIds.join() === turn.completionIds.join());
        expect(given).toHaveLength(1);
      });
      // The second call's prompt holds the first call's sampled ids verbatim.
      const [first, second] = turns;
      const secondPrompt = calls.find((call) => call.completionIds.join() === second.completionIds.join())!.promptIds;
      expect(secondPrompt.slice(0, first.promptDeltaIds.length + first.completionIds.length)).toEqual([...first.promptDeltaIds, ...first.completionIds]);

      // Two training sequences, split where the history was edited; each is exactly what was sampled.
      const sequences = buildTrainingSequences(turns);
      expect(sequences).toHaveLength(2);
      expect(sequences[0].ids).toEqual([...secondPrompt, ...second.completionIds]);
      expect(sequences[1].ids).toEqual([...turns[2].promptDeltaIds, ...turns[2].completionIds]);
      expect(sequences[0].lossMask.filter((bit) => bit === 1)).toHaveLength(first.completionIds.length + second.completionIds.length);
    }
  }, 180_000);
});
