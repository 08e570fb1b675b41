/**
 * The trajectory workflow's own logic, with small scripted activities in place of the model and
 * the environment (the real workflow code on the real dev server; nothing of Temporal is mocked):
 * how an episode ends, how a lost session is rebuilt by replaying the answers, how environment
 * failures and the episode deadline become a status and a reason, and that the session is closed.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { OpenSessionInput, SessionTurnInput, SessionTurnOutput } from '../activities/environment';
import type { GenerateInput, GenerateOutput } from '../activities/inference';
import type { TurnOutcome } from '../src/episode/episode';
import { EPISODE_FAILURES, SESSION_LOST } from '../src/core/failures';
import type { TrajectorySummary } from '../src/core/records';
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';
import { trajectoryWorkflow } from '../workflows/trajectory';
import type { TrajectoryInput } from '../workflows/types';
import { withClient } from './support/harness';
import { mockRun, withMockWorker } from './support/mockWorker';

const next = (text: string) => ({ messages: [{ role: 'user' as const, content: text }], freshContext: false });

type ScriptedOutcome = Omit<SessionTurnOutput, 'activityMs'>;

/**
 * Scripted activities: the model answers `a<turn>`; `turn` decides what the session makes of each
 * answer; sessions are held on `sessionQueue`. No `computeReward`: the workflow scores the episode
 * itself, and a call to it would fail the trajectory.
 */
function scriptedActivities(sessionQueue: string, turn: (input: SessionTurnInput, call: number) => Promise<ScriptedOutcome> | ScriptedOutcome) {
  const calls = {
    generate: [] as GenerateInput[],
    openSession: [] as OpenSessionInput[],
    sessionTurn: [] as SessionTurnInput[],
    closeSession: [] as string[],
    recorded: [] as TrajectorySummary[],
  };
  const activities = {
    async generate(input: GenerateInput): Promise<GenerateOutput> {
      calls.generate.push(input);
      return {
        text: `a${input.turn}`,
        finishReason: 'stop',
        completionTokens: 3,
        contextTokens: 10 * (input.turn + 1),
        minPolicyVersion: 0,
        maxPolicyVersion: 0,
        activityMs: 1,
      };
    },
    async openSession(input: OpenSessionInput) {
      calls.openSession.push(input);
      return { sessionQueue, activityMs: 1, next: next(`start after ${input.replayAnswers.length} answers`) };
    },
    async sessionTurn(input: SessionTurnInput) {
      calls.sessionTurn.push(input);
      return { ...(await turn(input, calls.sessionTurn.length - 1)), activityMs: 1 };
    },
    async closeSession(input: { sessionId: string }) {
      calls.closeSession.push(input.sessionId);
    },
    async recordTrajectory(summary: TrajectorySummary) {
      calls.recorded.push(summary);
    },
  };
  return { calls, activities };
}

const stepped = (reward: number, done: boolean, info: Record<string, unknown> = {}): TurnOutcome => ({
  kind: 'stepped',
  reward,
  done,
  info,
  ...(done ? {} : { next: next('go on') }),
});

async function runTrajectory(name: string, script: Parameters<typeof scriptedActivities>[1], agent: Record<string, unknown> = {}) {
  const { spec } = mockRun(name, { agent: { maxTurns: 4, ...agent }, reward: { formatWeight: 0.5 } });
  const trajectoryId = `${spec.runId}.g00000.t000`;
  const input: TrajectoryInput = { ...spec, groupId: `${spec.runId}.g00000`, trajectoryId, envSeed: 11 };
  const mock = scriptedActivities(spec.taskQueues.workflows, script);
  const { summary, attributes } = await withMockWorker(spec.taskQueues.workflows, mock.activities, () =>
    withClient(async (client) => {
      const handle = await client.workflow.start(trajectoryWorkflow, { workflowId: trajectoryId, taskQueue: spec.taskQueues.workflows, args: [input] });
      const summary = await handle.result();
      return { summary, attributes: (await handle.describe()).typedSearchAttributes };
    }),
  );
  return { summary, attributes, calls: mock.calls, trajectoryId };
}

describe('trajectory workflow with scripted activities', () => {
  it('ends when the environment says done: status ended, solved, reward with the format term', async () => {
    const { summary, attributes, calls, trajectoryId } = await runTrajectory('wf-ends', (input) =>
      input.turn === 0 ? { kind: 'invalid', error: 'no action', next: next('try again') } : stepped(1, true, { outcome: 'goal' }),
    );
    expect(summary).toMatchObject({
      status: 'ended',
      reason: 'episode ended: goal',
      turns: 2,
      envSteps: 1,
      invalidActions: 1,
      envReturn: 1,
      completionTokens: 6,
      envRestores: 0,
      minPolicyVersion: 0,
      maxPolicyVersion: 0,
    });
    // envReturn 1 + formatWeight 0.5 x (1 of 2 answers parsed).
    expect(summary.reward).toBe(1.25);
    expect(calls.sessionTurn.map((t) => [t.turn, t.text])).toEqual([
      [0, 'a0'],
      [1, 'a1'],
    ]);
    expect(calls.generate.map((g) => g.messages[0].content)).toEqual(['start after 0 answers', 'try again']);
    expect(calls.closeSession).toEqual([`${trajectoryId}.s0`]);
    expect(calls.recorded).toEqual([summary]);
    expect(attributes.get(SEARCH_ATTRIBUTES.status)).toBe('ended');
    expect(attributes.get(SEARCH_ATTRIBUTES.solved)).toBe(true);
    expect(attributes.get(SEARCH_ATTRIBUTES.turns)).toBe(2);
  });

  it('a session that closed itself on its last turn gets no close', async () => {
    const { summary, calls } = await runTrajectory('wf-self-closed', (input) =>
      input.turn === 1 ? { ...stepped(1, true, { outcome: 'goal' }), sessionClosed: true } : stepped(0, false),
    );
    expect(summary).toMatchObject({ status: 'ended', turns: 2, envReturn: 1 });
    expect(calls.sessionTurn).toHaveLength(2);
    expect(calls.closeSession).toEqual([]);
    expect(calls.recorded).toEqual([summary]);
  });

  it('an episode that ends unsolved is ended but not solved', async () => {
    const { summary, attributes } = await runTrajectory('wf-hole', () => stepped(0, true, { outcome: 'hole' }));
    expect(summary).toMatchObject({ status: 'ended', reason: 'episode ended: hole', turns: 1, envReturn: 0 });
    expect(attributes.get(SEARCH_ATTRIBUTES.solved)).toBe(false);
  });

  it('stops at maxTurns', async () => {
    const { summary, calls } = await runTrajectory('wf-max-turns', () => stepped(0, false), { maxTurns: 3 });
    expect(summary).toMatchObject({ status: 'max_turns', reason: 'no terminal state within 3 turns', turns: 3, envSteps: 3 });
    expect(calls.generate.map((g) => g.turn)).toEqual([0, 1, 2]);
  });

  it('rebuilds a lost session by replaying the answers so far, and goes on', async () => {
    const { summary, calls, trajectoryId } = await runTrajectory('wf-session-lost', (input, call) => {
      if (call === 2) throw ApplicationFailure.create({ type: SESSION_LOST, message: 'worker restarted', nonRetryable: true });
      return input.turn === 2 ? stepped(1, true, { outcome: 'goal' }) : stepped(0, false);
    });
    expect(summary).toMatchObject({ status: 'ended', turns: 3, envSteps: 3, envRestores: 1, envReturn: 1 });
    expect(calls.openSession.map((o) => [o.sessionId, o.replayAnswers])).toEqual([
      [`${trajectoryId}.s0`, []],
      [`${trajectoryId}.s1`, ['a0', 'a1']],
    ]);
    // The answer of turn 2 goes to the fresh session, once the old one's answers are replayed.
    expect(calls.sessionTurn.map((t) => [t.sessionId, t.turn, t.text])).toEqual([
      [`${trajectoryId}.s0`, 0, 'a0'],
      [`${trajectoryId}.s0`, 1, 'a1'],
      [`${trajectoryId}.s0`, 2, 'a2'],
      [`${trajectoryId}.s1`, 2, 'a2'],
    ]);
    expect(calls.generate).toHaveLength(3);
    expect(calls.closeSession).toEqual([`${trajectoryId}.s1`]);
  });

  it('an environment failure fails the trajectory with its reason, and still closes and records it', async () => {
    const { summary, calls, trajectoryId } = await runTrajectory('wf-env-failure', (input) => {
      if (input.turn === 1)
        throw ApplicationFailure.create({
          type: EPISODE_FAILURES.environment,
          message: 'environment "x": step 1 failed: simulator crashed',
          nonRetryable: true,
        });
      return stepped(0, false);
    });
    expect(summary).toMatchObject({ status: 'failed', reason: 'environment "x": step 1 failed: simulator crashed', turns: 2, envSteps: 1 });
    expect(calls.closeSession).toEqual([`${trajectoryId}.s0`]);
    expect(calls.recorded).toHaveLength(1);
  });

  it('the episode deadline ends a trajectory whose turn hangs, with status timeout', async () => {
    const { summary, calls } = await runTrajectory(
      'wf-deadline',
      async (input) => {
        if (input.turn === 1) await new Promise((resolve) => setTimeout(resolve, 4_000));
        return stepped(0, false);
      },
      { episodeTimeoutS: 1.5 },
    );
    expect(summary).toMatchObject({ status: 'timeout', reason: 'episode took longer than 1.5 s (agent.episodeTimeoutS)', turns: 2, envSteps: 1 });
    expect(calls.closeSession).toHaveLength(1);
  });
});
