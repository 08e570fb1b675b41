/**
 * What a trajectory's summary charges to each turn's own answer: the environment's penalty for the
 * action, and the format credit an unreadable answer forwent (per-turn credit reads both).
 */
import type { GenerateOutput } from '../activities/inference';
import type { TurnOutcome } from '../src/episode/episode';
import type { TrajectoryInput } from '../workflows/types';
import { EpisodeTally } from '../workflows/trajectory/tally';

function input(formatWeight: number, unreadablePenalty?: number): TrajectoryInput {
  return {
    runId: 'r',
    groupId: 'r.g00000',
    trajectoryId: 'r.g00000.t000',
    env: { name: 'frozenlake' },
    agent: { name: 'frozenlake', maxTurns: 8 },
    reward: { formatWeight, unreadablePenalty },
  } as TrajectoryInput;
}

const reply: GenerateOutput = { text: '', finishReason: 'stop', completionTokens: 1, contextTokens: 10, minPolicyVersion: 0, maxPolicyVersion: 0 };
const next = { messages: [], freshContext: true };
const unreadable: TurnOutcome = { kind: 'invalid', error: 'no move', next };
const safeMove: TurnOutcome = { kind: 'stepped', reward: 0, done: false, info: {}, next };
const intoHole: TurnOutcome = { kind: 'stepped', reward: 0, done: true, info: { outcome: 'hole' }, penalty: 0.25 };

function play(formatWeight: number, outcomes: TurnOutcome[], unreadablePenalty?: number): ReturnType<EpisodeTally['summary']> {
  const tally = new EpisodeTally(input(formatWeight, unreadablePenalty));
  for (const outcome of outcomes) {
    tally.generated(reply);
    tally.answered(outcome);
  }
  return tally.summary(0, 0, 0);
}

describe('EpisodeTally', () => {
  it('charges an unreadable answer its format credit and a move into a hole its penalty, each to its own turn', () => {
    const summary = play(0.2, [safeMove, unreadable, safeMove, unreadable, intoHole]);
    expect(summary).toMatchObject({ turns: 5, envSteps: 3, invalidActions: 2, reason: 'episode ended: hole' });
    expect(summary.turnPenalties).toEqual([0, 0.2, 0, 0.2, 0.25]);
  });

  it('charges nothing for an unreadable answer when answers earn no format credit', () => {
    expect(play(0, [unreadable, safeMove, unreadable]).turnPenalties).toBeUndefined();
    expect(play(0, [unreadable, intoHole]).turnPenalties).toEqual([0, 0.25]);
  });

  it('charges reward.unreadablePenalty instead of the format credit where it is set', () => {
    expect(play(0.2, [unreadable, safeMove, intoHole], 1).turnPenalties).toEqual([1, 0, 0.25]);
    expect(play(0.2, [unreadable, intoHole], 0).turnPenalties).toEqual([0, 0.25]);
    expect(play(0, [unreadable, safeMove], 0.5).turnPenalties).toEqual([0.5, 0]);
  });

  it('leaves the summary without penalties when no turn paid one', () => {
    expect(play(0.2, [safeMove, safeMove]).turnPenalties).toBeUndefined();
    expect(play(0.2, [safeMove, safeMove]).turnAnswerPenalties).toBeUndefined();
  });

  it('keeps what every answer would have cost on each turn the environment priced, {} on the others', () => {
    const prices = { left: 0.1, down: 0, right: 0, up: 0.1 };
    const priced: TurnOutcome = { ...safeMove, answerPenalties: prices };
    expect(play(0.2, [priced, unreadable, safeMove, { ...intoHole, answerPenalties: { ...prices, down: 1.1 } }]).turnAnswerPenalties).toEqual([
      prices,
      {},
      {},
      { ...prices, down: 1.1 },
    ]);
  });
});
