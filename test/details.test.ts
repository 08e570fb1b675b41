/**
 * What the Web UI shows of trajflow's workflows, as text: the one-line summaries of activities and
 * timers, and the markdown of current and static details. Expected strings are written out by hand.
 */
import type { StepMetrics } from '../src/rl/stepMetrics';
import type { RolloutStatus } from '../workflows/signals';
import type { TrajectoryInput } from '../workflows/types';
import {
  clipBlock,
  conversationDetails,
  fenced,
  inlineCode,
  outcomeText,
  rolloutDetails,
  shownText,
  trainingDetails,
  trajectoryDetails,
} from '../workflows/details';
import { activitySummary, clipMiddle, summary, timerSummary } from '../workflows/summaries';

const trainer = { steps: 10, batchGroups: 2, maxStaleness: 1, weightSync: 'turn' as const };

describe('activity and timer summaries', () => {
  it('name the turn, the policy version and the answer', () => {
    expect(activitySummary.generate(3, { minVersion: 12, followLatest: false })).toBe('generate turn 3 (v12)');
    expect(activitySummary.generate(3, { minVersion: 12, followLatest: true })).toBe('generate turn 3 (v12+)');
    expect(activitySummary.generate(0)).toBe('generate turn 0');
    expect(activitySummary.sessionTurn(3, 'I go\n right')).toBe('session turn 3: "I go right"');
    expect(activitySummary.openSession(42, 0)).toBe('open session (env seed 42)');
    expect(activitySummary.openSession(42, 5)).toBe('rebuild session: replay 5 answers (env seed 42)');
    expect(activitySummary.trainStep(7, 6, 2)).toBe('train step 7: 2 groups, v6 -> v7');
    expect(activitySummary.recordGroup(4, 7, 1, 0.33333)).toBe('record group 4: 7 trajectories (+1 failed), mean reward 0.333');
    expect(timerSummary.episodeDeadline(600)).toBe('episode deadline: 600 s (agent.episodeTimeoutS)');
  });

  it('keep a long answer to its start and end, on one line', () => {
    expect(clipMiddle('abcdefghij', 5)).toBe('ab…ij');
    expect(clipMiddle('a  b\n\tc', 10)).toBe('a b c');
    const long = activitySummary.sessionTurn(1, `${'think '.repeat(50)}so: left`);
    expect(long).toBe(`session turn 1: "${'think '.repeat(6)}thin… ${'think '.repeat(5)}so: left"`);
  });

  it('stay under the 400-byte limit Temporal sets on a summary, multi-byte text included', () => {
    const bytes = (text: string) => new TextEncoder().encode(JSON.stringify(text)).length;
    expect(bytes(summary('x'.repeat(1000)))).toBeLessThanOrEqual(300);
    expect(bytes(summary('日本'.repeat(500)))).toBeLessThanOrEqual(300);
    expect(bytes(summary('"'.repeat(500)))).toBeLessThanOrEqual(300);
    expect(summary('short')).toBe('short');
  });
});

describe('markdown details', () => {
  it('fences model text so that no markdown in it renders or closes the block', () => {
    expect(fenced('left')).toBe('```\nleft\n```');
    expect(fenced('a ```` b')).toBe('`````\na ```` b\n`````');
    expect(inlineCode('left')).toBe('`left`');
    expect(inlineCode('`x` y')).toBe('`` `x` y ``');
    expect(inlineCode('  ')).toBe('_(nothing)_');
    expect(clipBlock('0123456789', 4)).toBe('01\n[… 6 characters not shown …]\n89');
  });

  it('training: step, version, queue, the last step and evaluation', () => {
    const lastMetrics = { step: 2, rewardMean: 0.3125, rewardStd: 0.2, successRate: 0.25, loss: 0.01234, stalenessMax: 1, wallMs: 1234 } as StepMetrics;
    const lastEvaluation = { version: 2, episodes: 4, solved: 2, successRate: 0.5, meanReturn: 0.5, validAnswerShare: 1, meanTurns: 3, wallMs: 10 };
    const status = { version: 3, step: 3, steps: 10, groupsConsumed: 6, queueDepth: 1, paused: false, stopping: false, lastMetrics, lastEvaluation };
    expect(trainingDetails({ status, trainer, now: 'training step 3 on 2 groups' })).toBe(
      [
        '**training: step 3 of 10, policy v3**: training step 3 on 2 groups',
        '',
        '- queue: 1 group waiting (a step trains 2); 6 groups trained',
        '- last step (2): reward 0.313 ± 0.2, success 25%, loss 0.012, staleness max 1 (bound 1, turn sync), 1.234 s',
        '- evaluation of v2: 2 of 4 solved (50%), mean return 0.5, valid answers 100%',
      ].join('\n'),
    );
    const paused = { ...status, paused: true, lastMetrics: undefined, lastEvaluation: undefined };
    expect(trainingDetails({ status: paused, trainer, now: 'waiting' })).toBe(
      '**training: step 3 of 10, policy v3 (paused)**: waiting\n\n- queue: 1 group waiting (a step trains 2); 6 groups trained',
    );
  });

  it('rollout: groups, trajectories in flight, success, reward, the policy and admission', () => {
    const status: RolloutStatus = {
      groupsTotal: 8,
      groupsStarted: 3,
      groupsFinished: 2,
      trajectoriesInFlight: 5,
      trajectoriesFinished: 8,
      trajectoriesFailed: 1,
      rewardSum: 3,
      successes: 2,
      turnsSum: 30,
      trajectoriesAdmitted: 13,
      policyVersion: 2,
      pendingPolicyVersion: 3,
      admissionBlocked: 1,
    };
    expect(rolloutDetails({ status, training: { maxStaleness: 1, weightSync: 'episode' } })).toBe(
      [
        '**rollout: 3 of 8 groups started, 2 finished; 5 trajectories in flight**',
        '',
        '- trajectories: 8 finished (1 failed), success 25%, mean reward 0.375, mean turns 3.75',
        '- policy: new trajectories sample v2 (v3 waits for the episodes in flight); staleness bound 1, episode sync; admission held back 1 time',
      ].join('\n'),
    );
    const fresh = { ...status, groupsStarted: 0, groupsFinished: 0, trajectoriesInFlight: 0, trajectoriesFinished: 0, trajectoriesFailed: 0 };
    expect(rolloutDetails({ status: { ...fresh, pendingPolicyVersion: undefined, policyVersion: 0 } })).toBe(
      '**rollout: 0 of 8 groups started, 0 finished; 0 trajectories in flight**\n\n- trajectories: 0 finished\n- policy: v0 (no training)',
    );
  });

  it('trajectory: the conversation turn by turn, the last turns only, with where the rest is stored', () => {
    const shown = shownText({
      messages: [
        { role: 'system', content: 'You play FrozenLake.' },
        { role: 'user', content: 'PF\nHG' },
        { role: 'tool', content: 'ok' },
      ],
      freshContext: true,
    });
    expect(shown).toBe('PF\nHG\n\n[tool] ok');
    expect(outcomeText({ kind: 'invalid', error: 'no move', next: { messages: [], freshContext: false } })).toBe('not an action: no move');
    expect(outcomeText({ kind: 'stepped', reward: 1, done: true, info: { outcome: 'goal' } })).toBe('env reward 1, episode over: goal');
    expect(outcomeText({ kind: 'stepped', reward: 0, done: false, info: { outcome: 'running' }, penalty: 0.5 })).toBe('env reward 0, penalty 0.5');
    expect(outcomeText({ kind: 'stepped', reward: 0, done: true, info: { truncated: true } })).toBe('env reward 0, episode over, step limit reached');

    const details = conversationDetails({
      headline: 'turn 5: the model is answering',
      storedAt: 'runs/r/trajectories/r.g00000.t000/',
      turns: [
        { turn: 4, shown, answer: { text: 'down', tokens: 1, version: 2 }, outcome: 'env reward 0' },
        { turn: 5, shown: 'Invalid answer.', answer: { text: 'I think\nleft', tokens: 3, version: 3 } },
        { turn: 6, shown: 'FH' },
      ],
    });
    expect(details).toBe(
      [
        '**turn 5: the model is answering**',
        '',
        '_turns 0 to 3 are not shown here; every turn is stored in full under `runs/r/trajectories/r.g00000.t000/`_',
        '',
        '**turn 4**: the model was shown',
        '```\nPF\nHG\n\n[tool] ok\n```',
        'answered (v2, 1 token): `down` → env reward 0',
        '',
        '**turn 5**: the model was shown',
        '```\nInvalid answer.\n```',
        'answered (v3, 3 tokens)',
        '```\nI think\nleft\n```',
        '',
        '**turn 6**: the model was shown',
        '```\nFH\n```',
      ].join('\n'),
    );
  });

  it('a trajectory says what it plays and where its turns are stored', () => {
    const input = {
      runId: 'r',
      trajectoryId: 'r.g00001.t002',
      envLabel: 'frozenlake-4x4',
      envSeed: 99,
      agent: { name: 'frozenlake', maxTurns: 6, episodeTimeoutS: 600 },
      sampling: { temperature: 1, maxTokens: 1 },
      minPolicyVersion: 4,
      weightSync: 'turn',
    } as TrajectoryInput;
    expect(trajectoryDetails(input)).toBe(
      [
        '- one episode of frozenlake-4x4 (env seed 99), agent frozenlake, at most 6 turns and 600 s',
        '- sampling: policy v4 or newer (turn sync), temperature 1, at most 1 token per answer',
        '- its turns, token for token: `runs/r/trajectories/r.g00001.t002/` under the data directory',
      ].join('\n'),
    );
  });
});
