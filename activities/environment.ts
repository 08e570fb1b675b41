/**
 * Environment activities. Sessions live in this worker's memory, so a trajectory's steps must come
 * back to the same process: `envReset` runs on the shared env queue and answers with this worker's
 * own session queue, where `envStep` / `envClose` are routed (Temporal's worker-specific task
 * queue pattern). When the worker dies, its queue goes quiet and the trajectory rebuilds the
 * session elsewhere by replaying its recorded actions on a fresh, identically seeded environment.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { EnvConfig } from '../config/schema';
import type { GroupSummary, TrajectorySummary } from '../src/core/records';
import type { StepResult } from '../src/envs/environment';
import { AnyEnvironment, createEnvironment } from '../src/envs/registry';
import type { TrajectoryStore } from '../src/store/trajectoryStore';

/** Error type a workflow treats as "this session is gone, rebuild it". */
export const SESSION_LOST = 'SessionLost';

interface Session {
  env: AnyEnvironment;
  /** Results by step index, so a retried step returns its first result instead of stepping twice. */
  steps: StepResult<unknown>[];
}

/** The sessions one env worker process holds. */
export class SessionRegistry {
  private readonly sessions = new Map<string, Session>();

  open(sessionId: string, env: AnyEnvironment): Session {
    this.close(sessionId);
    const session = { env, steps: [] };
    this.sessions.set(sessionId, session);
    return session;
  }

  get(sessionId: string): Session {
    const session = this.sessions.get(sessionId);
    if (!session) throw ApplicationFailure.create({ type: SESSION_LOST, message: `no environment session ${sessionId} on this worker`, nonRetryable: true });
    return session;
  }

  close(sessionId: string): boolean {
    const session = this.sessions.get(sessionId);
    if (!session) return false;
    this.sessions.delete(sessionId);
    session.env.close();
    return true;
  }

  get size(): number {
    return this.sessions.size;
  }

  closeAll(): void {
    for (const id of [...this.sessions.keys()]) this.close(id);
  }
}

export interface EnvResetInput {
  sessionId: string;
  env: EnvConfig;
  envSeed: number;
  /** Actions already taken in this episode, replayed to rebuild a lost session. */
  replayActions: unknown[];
}

export interface EnvResetOutput {
  sessionQueue: string;
  observation: unknown;
}

export interface EnvStepInput {
  sessionId: string;
  stepIndex: number;
  action: unknown;
}

export interface EnvDeps {
  sessions: SessionRegistry;
  sessionQueue: string;
  store: TrajectoryStore;
  logger: Logger;
}

/** Shared env queue: opening sessions, rewards and the trajectory/group records. */
export function createEnvActivities({ sessions, sessionQueue, store, logger }: EnvDeps) {
  async function envReset(input: EnvResetInput): Promise<EnvResetOutput> {
    const env = createEnvironment(input.env, input.envSeed);
    const session = sessions.open(input.sessionId, env);
    let observation = env.reset();
    for (const action of input.replayActions) {
      const result = env.step(action);
      session.steps.push(result);
      observation = result.observation;
    }
    logger.debug({ sessionId: input.sessionId, replayed: input.replayActions.length }, 'environment session opened');
    return { sessionQueue, observation };
  }

  /**
   * The trajectory's reward: the environment's return (FrozenLake: 1 on reaching the goal), plus
   * `formatWeight` x the share of answers that parsed as an action.
   */
  async function computeReward(input: { envReturn: number; turns: number; invalidActions: number; formatWeight: number }): Promise<number> {
    const formatShare = input.turns > 0 ? (input.turns - input.invalidActions) / input.turns : 0;
    return input.envReturn + input.formatWeight * formatShare;
  }

  async function recordTrajectory(summary: TrajectorySummary): Promise<void> {
    await store.putTrajectory(summary);
  }

  async function recordGroup(summary: GroupSummary): Promise<void> {
    await store.putGroup(summary);
  }

  return { envReset, computeReward, recordTrajectory, recordGroup };
}

/** This worker's own session queue: steps and close of the sessions it holds. */
export function createSessionActivities({ sessions }: Pick<EnvDeps, 'sessions'>) {
  async function envStep(input: EnvStepInput): Promise<StepResult<unknown>> {
    const session = sessions.get(input.sessionId);
    const recorded = session.steps[input.stepIndex];
    if (recorded) return recorded;
    if (input.stepIndex !== session.steps.length) {
      throw ApplicationFailure.create({ type: SESSION_LOST, message: `session ${input.sessionId} is at step ${session.steps.length}, asked for step ${input.stepIndex}`, nonRetryable: true });
    }
    const result = session.env.step(input.action);
    session.steps.push(result);
    return result;
  }

  async function envClose(input: { sessionId: string }): Promise<void> {
    sessions.close(input.sessionId);
  }

  return { envStep, envClose };
}

export type EnvActivities = ReturnType<typeof createEnvActivities>;
export type SessionActivities = ReturnType<typeof createSessionActivities>;
