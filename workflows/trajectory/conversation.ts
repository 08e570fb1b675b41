/**
 * The trajectory's conversation as its Web UI page shows it (Current Details): the last turns,
 * each what the model was shown, what it answered and what came of it, with what the trajectory
 * waits for now on top. Only the last SHOWN_TURNS turns are kept, each cut to size, so the details
 * stay small however long the episode; the stored turn files hold everything.
 */
import { setCurrentDetails } from '@temporalio/workflow';
import type { GenerateOutput } from '../../activities/inference';
import type { NextTurn } from '../../src/agents/agent';
import type { TurnOutcome } from '../../src/episode/episode';
import { clipBlock, conversationDetails, outcomeText, SHOWN_ANSWER_CHARS, shownText, storedTurnsOf, type TurnView } from '../details';
import type { TrajectoryInput } from '../types';

const SHOWN_TURNS = 6;

export class Conversation {
  private readonly turns: TurnView[] = [];
  /** How the environment's code is confined where the session is (a sandbox's level). */
  isolation: string | undefined;

  constructor(private readonly input: TrajectoryInput) {}

  private get last(): TurnView {
    return this.turns[this.turns.length - 1];
  }

  /** Turn `turn` shows the model `next`; it is now answering. */
  shown(turn: number, next: NextTurn): void {
    this.turns.push({ turn, shown: shownText(next) });
    if (this.turns.length > SHOWN_TURNS) this.turns.shift();
    this.show(`turn ${turn}: the model is answering`);
  }

  answered(reply: GenerateOutput): void {
    this.last.answer = { text: clipBlock(reply.text, SHOWN_ANSWER_CHARS), tokens: reply.completionTokens, version: reply.maxPolicyVersion };
    this.show(`turn ${this.last.turn}: the environment is taking the answer`);
  }

  answerTaken(outcome: TurnOutcome): void {
    this.last.outcome = outcomeText(outcome);
  }

  /** Shows the conversation under `headline` (the trajectory's state or how it ended). */
  show(headline: string): void {
    setCurrentDetails(conversationDetails({ headline, turns: this.turns, storedAt: storedTurnsOf(this.input), isolation: this.isolation }));
  }
}
