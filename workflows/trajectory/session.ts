/**
 * The trajectory's handle on its episode session (agent + environment), held by an env worker or,
 * with `env.sessions: local`, by this workflow worker. It keeps the model's answers so far: when the
 * worker holding the session goes away, a fresh, identically seeded session replays them and the
 * episode goes on where it was.
 */
import { CancellationScope, log } from '@temporalio/workflow';
import type { OpenSessionOutput } from '../../activities/environment';
import type { NextTurn } from '../../src/agents/agent';
import type { TurnOutcome } from '../../src/episode/episode';
import { sessionIdOf } from '../../src/core/ids';
import type { TrajectoryInput } from '../types';
import { isSessionLost } from '../activityFailures';
import { activitySummary } from '../summaries';
import { untilMatchingWorker } from '../workerMismatch';
import type { TrajectoryActivities } from './activities';

/** Rebuilds of a lost session before the trajectory gives up. */
const MAX_SESSION_REBUILDS = 5;

export class EpisodeSession {
  /** The model's answers so far, in turn order: replayed on a fresh session when one is lost. */
  private readonly answers: string[] = [];
  /** The session last opened; a lost one stays here until its replacement is open. */
  private opened: OpenSessionOutput | undefined;
  /** Whether the session closed itself after its last turn. */
  private closed = false;
  /** Times the session was rebuilt after its worker went away. */
  rebuilds = 0;
  /** Time inside session activities, as they report it. */
  activityMs = 0;

  constructor(
    private readonly input: TrajectoryInput,
    private readonly activities: TrajectoryActivities,
  ) {}

  private get sessionId(): string {
    return sessionIdOf(this.input.trajectoryId, this.rebuilds);
  }

  /** How the worker holding the session confines the environment's code, if it says. */
  get isolation(): string | undefined {
    return this.opened?.isolation;
  }

  /** Opens the session (replaying the answers so far) and returns what the model is shown next. */
  async open(): Promise<NextTurn> {
    const { input } = this;
    const summary = activitySummary.openSession(input.envSeed, this.answers.length);
    this.opened = await untilMatchingWorker('an environment session', () =>
      this.activities.openSession.executeWithOptions({ summary }, [
        {
          sessionId: this.sessionId,
          runId: input.runId,
          env: input.env,
          agent: input.agent,
          envSeed: input.envSeed,
          replayAnswers: this.answers,
          compatibility: input.compatibility,
        },
      ]),
    );
    this.activityMs += this.opened.activityMs;
    return this.opened.next;
  }

  /** Hands the answer of the next turn to the session, rebuilding the session if it is lost. */
  async turn(text: string): Promise<TurnOutcome> {
    for (;;) {
      try {
        const turn = this.answers.length;
        const outcome = await this.activities
          .sessionAt(this.opened!.sessionQueue)
          .sessionTurn.executeWithOptions({ summary: activitySummary.sessionTurn(turn, text) }, [{ sessionId: this.sessionId, turn, text }]);
        this.activityMs += outcome.activityMs;
        this.answers.push(text);
        this.closed = outcome.sessionClosed === true;
        return outcome;
      } catch (err) {
        if (!isSessionLost(err) || this.rebuilds >= MAX_SESSION_REBUILDS) throw err;
        this.rebuilds++;
        log.warn('environment session lost; replaying recorded answers on a fresh one', { trajectoryId: this.input.trajectoryId, replay: this.answers.length });
        await this.open();
      }
    }
  }

  /**
   * Closes the session, even in a cancelled trajectory; one never opened, or closed by its last
   * turn, has nothing to close.
   */
  async close(): Promise<void> {
    if (!this.opened || this.closed) return;
    const { sessionQueue } = this.opened;
    await CancellationScope.nonCancellable(() =>
      this.activities
        .sessionAt(sessionQueue)
        .closeSession.executeWithOptions({ summary: activitySummary.closeSession(this.answers.length) }, [{ sessionId: this.sessionId }])
        .catch((err) => log.warn('closeSession failed', { trajectoryId: this.input.trajectoryId, error: String(err) })),
    );
  }
}
