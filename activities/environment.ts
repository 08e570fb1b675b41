/**
 * Environment activities. Episode sessions (agent + environment) live in this worker's memory, so
 * a trajectory's turns must come back to the same process: `openSession` runs on the shared env
 * queue and answers with this worker's own session queue, where `sessionTurn` / `closeSession`
 * are routed (Temporal's worker-specific task queue pattern). When the worker dies, its queue goes quiet and
 * the trajectory rebuilds the session elsewhere by replaying the model's recorded answers on a
 * fresh, identically seeded environment.
 *
 * With `env.sessions: local` the same activities run as local activities in the workflow worker,
 * which then holds the sessions; a trajectory that moves to another workflow worker finds no
 * session there and rebuilds it the same way.
 *
 * Episode failures become non-retryable failures whose type (src/core/failures) the trajectory
 * records as its outcome: environment, reward or agent code that threw, a turn past the env's
 * `turnTimeoutS`, and a result too large for workflow history (./payloadLimit).
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { AgentConfig, EnvConfig } from '../config/schema';
import type { NextTurn } from '../src/agents/agent';
import type { Compatibility } from '../src/core/compatibility';
import { environmentIsolation } from '../src/plugins/registry';
import { refuseIfIncompatible } from './compatibility';
import { deliverable } from './payloadLimit';
import { turnOutput, type GenerateOutput } from './inference';
import { Episode, EpisodeError, type TurnOutcome } from '../src/episode/episode';
import { endsEpisode, episodeReward, type EpisodeCounts } from '../src/core/episode';
import { ENV_TURN_TIMEOUT, EPISODE_FAILURES, SESSION_LOST } from '../src/core/failures';
import { HEARTBEAT_INTERVAL_MS } from '../src/core/liveness';
import type { GroupSummary, TrajectorySummary } from '../src/core/records';
import type { TrajectoryStorage } from '../src/store/trajectoryStore';

interface Session {
  episode: Episode;
  turnTimeoutMs: number;
  /** The agent's `maxTurns`: after that turn the trajectory asks nothing more of the session. */
  maxTurns: number;
  /** Outcomes by turn, so a retried turn returns its first outcome instead of acting twice. */
  turns: Promise<TurnOutcome>[];
}

/** The sessions one env worker process holds. */
export class SessionRegistry {
  private readonly sessions = new Map<string, Session>();

  async open(sessionId: string, session: Session): Promise<void> {
    await this.close(sessionId);
    this.sessions.set(sessionId, session);
  }

  get(sessionId: string): Session {
    const session = this.sessions.get(sessionId);
    if (!session) throw ApplicationFailure.create({ type: SESSION_LOST, message: `no environment session ${sessionId} on this worker`, nonRetryable: true });
    return session;
  }

  async close(sessionId: string): Promise<boolean> {
    const session = this.sessions.get(sessionId);
    if (!session) return false;
    this.sessions.delete(sessionId);
    await session.episode.close();
    return true;
  }

  get size(): number {
    return this.sessions.size;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((id) => this.close(id).catch(() => false)));
  }
}

export interface OpenSessionInput {
  sessionId: string;
  runId: string;
  env: EnvConfig;
  agent: AgentConfig;
  envSeed: number;
  /** The model's answers so far in this episode, replayed to rebuild a lost session. */
  replayAnswers: string[];
  compatibility?: Compatibility;
}

export interface OpenSessionOutput {
  sessionQueue: string;
  /** Time spent opening the session (and replaying answers). */
  activityMs: number;
  /** What the model is shown next (after the replayed answers, if any). */
  next: NextTurn;
  /** How this worker confines the environment's code (a sandbox's level), for the trajectory's details. */
  isolation?: string;
}

export interface SessionTurnInput {
  sessionId: string;
  /** The turn this answer belongs to (0-based): a retry of a done turn returns its outcome. */
  turn: number;
  text: string;
}

export type SessionTurnOutput = TurnOutcome & {
  activityMs: number;
  /**
   * The session closed itself: its episode ended or this was the agent's last turn, so the
   * trajectory has no close to send.
   */
  sessionClosed?: true;
};

export interface EnvDeps {
  sessions: SessionRegistry;
  sessionQueue: string;
  /** This worker's code and config fingerprint. */
  compatibility: Compatibility;
  store: TrajectoryStorage;
  logger: Logger;
}

function episodeFailure(err: unknown): unknown {
  if (!(err instanceof EpisodeError)) return err;
  return ApplicationFailure.create({ type: EPISODE_FAILURES[err.kind], message: err.message, nonRetryable: true });
}

/**
 * `work` with heartbeats (a dead worker is noticed in seconds; local activities have none, their
 * workflow task is their lease) and the env's per-turn time limit.
 */
async function withinTurnTimeout<T>(turnTimeoutMs: number, what: string, work: Promise<T>): Promise<T> {
  const context = Context.current();
  const heartbeat = context.info.isLocal ? undefined : setInterval(() => context.heartbeat(), HEARTBEAT_INTERVAL_MS);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          ApplicationFailure.create({
            type: ENV_TURN_TIMEOUT,
            message: `${what} took longer than ${turnTimeoutMs / 1000} s (env.turnTimeoutS)`,
            nonRetryable: true,
          }),
        ),
      turnTimeoutMs,
    );
  });
  try {
    return await Promise.race([work, timeout]);
  } catch (err) {
    throw episodeFailure(err);
  } finally {
    clearInterval(heartbeat);
    clearTimeout(timer);
  }
}

/** A model call of an agent's own workflow, as its trajectory counts and shows it. */
export interface AgentCall extends GenerateOutput {
  /** The call started a context of its own: the agent's history did not continue the stored turns. */
  newContext: boolean;
}

/** Enough of each call's answer for the trajectory's page; the turn files hold all of it. */
const AGENT_CALL_TEXT_CHARS = 1000;

/** Shared env queue: opening sessions, rewards and the trajectory/group records. */
export function createEnvActivities({ sessions, sessionQueue, compatibility, store, logger }: EnvDeps) {
  /** Opens an episode session (agent + environment) and replays the model's answers so far. */
  async function openSession(input: OpenSessionInput): Promise<OpenSessionOutput> {
    const startedAt = performance.now();
    refuseIfIncompatible('env', input.runId, input.compatibility, compatibility, logger);
    const turnTimeoutMs = input.env.turnTimeoutS * 1000;
    const open = async () => {
      const { episode, first } = await Episode.open({ env: input.env, agent: input.agent, seed: input.envSeed });
      const session: Session = { episode, turnTimeoutMs, maxTurns: input.agent.maxTurns, turns: [] };
      await sessions.open(input.sessionId, session);
      let next = first;
      for (const text of input.replayAnswers) {
        const outcome = episode.respond(text);
        session.turns.push(outcome);
        const result = await outcome;
        // Replayed answers never ended the episode (it would not be going on), so each has a next turn.
        next = result.next ?? next;
      }
      return next;
    };
    const next = await withinTurnTimeout(turnTimeoutMs * (1 + input.replayAnswers.length), `opening session ${input.sessionId}`, open());
    logger.debug({ sessionId: input.sessionId, replayed: input.replayAnswers.length }, 'environment session opened');
    return deliverable({ sessionQueue, next, activityMs: performance.now() - startedAt, isolation: environmentIsolation(input.env) });
  }

  /** The trajectory's reward (src/core/episode), for trajectories recorded before the workflow computed it. */
  async function computeReward(input: EpisodeCounts & { formatWeight: number }): Promise<number> {
    return episodeReward(input, input.formatWeight);
  }

  async function recordTrajectory(summary: TrajectorySummary): Promise<void> {
    await store.putTrajectory(summary);
  }

  async function recordGroup(summary: GroupSummary): Promise<void> {
    await store.putGroup(summary);
  }

  /** The model calls an agent's own workflow made (workflows/trajectory/agentWorkflow.ts): its stored turns, in order. */
  async function agentCalls(input: { runId: string; trajectoryId: string }): Promise<AgentCall[]> {
    const turns = await store.getTurns(input.runId, input.trajectoryId);
    return deliverable(
      turns.map((record) => ({
        ...turnOutput(record),
        text: record.text.slice(0, AGENT_CALL_TEXT_CHARS),
        newContext: record.startsContext === true && record.turn > 0,
      })),
    );
  }

  return { openSession, computeReward, recordTrajectory, recordGroup, agentCalls };
}

/** This worker's own session queue: turns and close of the sessions it holds. */
export function createSessionActivities({ sessions, logger }: Pick<EnvDeps, 'sessions' | 'logger'>) {
  /** Hands the model's answer to the session: the agent parses it and, if it is an action, the environment steps. */
  async function sessionTurn(input: SessionTurnInput): Promise<SessionTurnOutput> {
    const startedAt = performance.now();
    const session = sessions.get(input.sessionId);
    // A retry while the first attempt still runs awaits the same turn rather than acting twice.
    const recorded = session.turns[input.turn];
    if (!recorded && input.turn !== session.turns.length) {
      throw ApplicationFailure.create({
        type: SESSION_LOST,
        message: `session ${input.sessionId} is at turn ${session.turns.length}, asked for turn ${input.turn}`,
        nonRetryable: true,
      });
    }
    const outcome = recorded ?? session.episode.respond(input.text);
    session.turns[input.turn] = outcome;
    const result = await withinTurnTimeout(session.turnTimeoutMs, `turn ${input.turn} of session ${input.sessionId}`, outcome);
    const last = endsEpisode(result) || input.turn + 1 >= session.maxTurns;
    // The turn's outcome stands whatever the close does: a close that fails is logged, not retried.
    if (last)
      await sessions
        .close(input.sessionId)
        .catch((err: unknown) => logger.warn({ sessionId: input.sessionId, err: String(err) }, 'closing a finished session failed'));
    return deliverable({ ...result, activityMs: performance.now() - startedAt, ...(last ? { sessionClosed: true as const } : {}) });
  }

  async function closeSession(input: { sessionId: string }): Promise<void> {
    await sessions.close(input.sessionId);
  }

  return { sessionTurn, closeSession };
}

export type EnvActivities = ReturnType<typeof createEnvActivities>;
export type SessionActivities = ReturnType<typeof createSessionActivities>;
