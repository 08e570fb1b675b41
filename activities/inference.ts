/**
 * Inference activities: the model call of one trajectory turn, on the task queue
 * `<prefix>-inference`, or as a local activity in the workflow worker (`inference.calls: local`).
 *
 * The workflow sends only the new messages; this activity rebuilds the prompt ids from the stored
 * turns (claim check), samples, and stores the turn before returning, keyed by trajectory + turn.
 * A retry after a crash finds the stored turn and returns it, so model work is never done twice.
 */
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { SamplingConfig } from '../config/schema';
import { HEARTBEAT_INTERVAL_MS } from '../src/core/liveness';
import { parseGroupOrTrajectoryId } from '../src/core/ids';
import { hashString } from '../src/core/random';
import type { Compatibility } from '../src/core/compatibility';
import type { TurnRecord } from '../src/core/records';
import { nextPromptIds } from '../src/core/sequence';
import type { ChatFormat } from '../src/chat/format';
import type { ChatMessage } from '../src/core/tokenizer';
import type { FinishReason, InferenceProvider } from '../src/inference/provider';
import type { TrajectoryStorage } from '../src/store/trajectoryStore';
import { refuseIfIncompatible } from './compatibility';
import { deliverable } from './payloadLimit';
import { ServedWeights, type PolicyRequirement } from './servedWeights';
import { tracer } from '../src/trace/recorder';

export interface GenerateInput {
  runId: string;
  runSeed: number;
  trajectoryId: string;
  turn: number;
  /** Messages to append before sampling: system + first observation at turn 0, then one per turn. */
  messages: ChatMessage[];
  /** The messages start a new context instead of continuing the conversation (always at turn 0). */
  freshContext?: boolean;
  sampling: SamplingConfig;
  /** In a training run: sample with this run's published weights, version minVersion or newer. */
  policy?: PolicyRequirement;
  /** The run's code and config; a worker that differs refuses the turn. */
  compatibility?: Compatibility;
  /** With `freshContext` after turn 0: why the turn does not continue the context (recorded with it). */
  segmentReason?: string;
}

export type { PolicyRequirement } from './servedWeights';

/** What the workflow needs to go on; the token arrays stay in the store. */
export interface GenerateOutput {
  text: string;
  finishReason: FinishReason;
  completionTokens: number;
  contextTokens: number;
  minPolicyVersion: number;
  maxPolicyVersion: number;
  /** Time this attempt spent in the activity (0 when it found the turn already stored). */
  activityMs?: number;
}

export interface InferenceDeps {
  provider: InferenceProvider;
  store: TrajectoryStorage;
  /** The run weights the provider serves, shared with the process's other sampling activities. */
  weights: ServedWeights;
  /** The served model's tokenizer and chat template. */
  chat: ChatFormat;
  maxContext: number;
  /** This worker's code and config fingerprint. */
  compatibility: Compatibility;
  logger: Logger;
}

/** A stored turn as the workflow sees it. */
export function turnOutput(record: TurnRecord): GenerateOutput {
  return {
    text: record.text,
    finishReason: record.finishReason,
    completionTokens: record.completionIds.length,
    contextTokens: record.contextTokens,
    minPolicyVersion: Math.min(...record.policyVersions),
    maxPolicyVersion: Math.max(...record.policyVersions),
  };
}

/**
 * Same (run seed, trajectory's place in its run, turn) gives the same sampling stream: a retry
 * resamples identically, and two runs of one config and seed sample alike whatever their run ids.
 */
export function samplingSeed(runSeed: number, trajectoryId: string, turn: number): number {
  const place = parseGroupOrTrajectoryId(trajectoryId);
  const key = place?.trajectoryIndex === undefined ? trajectoryId : `g${place.groupIndex}/t${place.trajectoryIndex}`;
  return hashString(`${runSeed}/${key}/${turn}`);
}

/** A turn as a sampling activity gets it: the stored record (sampled now or by an earlier attempt), or a full context. */
export type TurnResult = { kind: 'turn'; record: TurnRecord; sampledNow: boolean } | { kind: 'context full'; contextTokens: number };

/**
 * Turns of trajectories: each sampled once and stored before it is returned, keyed by trajectory +
 * turn, so a retried activity returns the stored turn instead of sampling again. Shared by
 * trajflow's own trajectories (`generate`) and agents' model calls (./agentModel).
 */
export function createTurnSampler({ provider, store, weights, chat, maxContext, compatibility, logger }: InferenceDeps) {
  return async function turnOf(input: GenerateInput): Promise<TurnResult> {
    const { runId, trajectoryId, turn } = input;
    const log = logger.child({ runId, trajectoryId, turn });
    refuseIfIncompatible('inference', runId, input.compatibility, compatibility, log);
    const stored = await store.getTurn(runId, trajectoryId, turn);
    if (stored) {
      log.info('turn already stored by an earlier attempt; returning it');
      return { kind: 'turn', record: stored, sampledNow: false };
    }
    const { policy } = input;
    if (!policy) return sampleTurn(input, log);
    // From loading the run's weights until its tokens are sampled, no other run's request swaps them.
    return weights.with(policy, () => sampleTurn(input, log));
  };

  /** Samples the turn with the weights the provider holds and stores it. */
  async function sampleTurn(input: GenerateInput, log: Logger): Promise<TurnResult> {
    const { runId, trajectoryId, turn } = input;
    const freshContext = turn === 0 || input.freshContext === true;
    // A fresh context needs nothing stored: its prompt is this turn's messages alone.
    const previous = freshContext ? [] : await store.getTurns(runId, trajectoryId, turn);
    const promptDeltaIds = freshContext
      ? chat.renderConversationStart(input.messages)
      : chat.renderContinuation(previous[turn - 1].completionIds, input.messages);
    const promptIds = nextPromptIds(previous, promptDeltaIds, freshContext);
    if (promptIds.length >= maxContext) {
      log.info({ contextTokens: promptIds.length, maxContext }, 'context full before sampling');
      return { kind: 'context full', contextTokens: promptIds.length };
    }

    // Heartbeats let Temporal notice a dead inference worker in seconds instead of at the
    // start-to-close timeout, so the turn is retried elsewhere promptly. A local activity has no
    // heartbeats: it dies with the workflow worker, whose workflow task then times out.
    const heartbeat = Context.current().info.isLocal ? undefined : setInterval(() => Context.current().heartbeat(), HEARTBEAT_INTERVAL_MS);
    try {
      const result = await tracer.span('sample', { promptTokens: promptIds.length }, async (span) => {
        const sampled = await provider.generate({
          promptIds,
          sampling: {
            maxTokens: Math.min(input.sampling.maxTokens, maxContext - promptIds.length),
            temperature: input.sampling.temperature,
            topP: input.sampling.topP,
            seed: samplingSeed(input.runSeed, trajectoryId, turn),
            stopTokens: chat.stopTokens,
          },
          // A cancelled activity (its trajectory was cancelled or timed out) stops its request.
          signal: Context.current().cancellationSignal,
        });
        span.set({ tokens: sampled.completionIds.length, queueMs: Math.round(sampled.queueMs), version: sampled.policyVersion });
        return sampled;
      });
      const record = await store.putTurnOnce(runId, {
        trajectoryId,
        turn,
        messages: input.messages,
        ...(freshContext && turn > 0 ? { startsContext: true } : {}),
        ...(input.segmentReason === undefined ? {} : { segmentReason: input.segmentReason }),
        promptDeltaIds,
        completionIds: result.completionIds,
        logprobs: result.logprobs,
        policyVersions: result.tokenPolicyVersions ?? result.completionIds.map(() => result.policyVersion),
        finishReason: result.finishReason,
        text: chat.decode(result.completionIds),
        contextTokens: promptIds.length,
      });
      log.debug({ completionTokens: record.completionIds.length, queueMs: result.queueMs, decodeMs: result.decodeMs }, 'generated');
      return { kind: 'turn', record, sampledNow: true };
    } finally {
      clearInterval(heartbeat);
    }
  }
}

export function createInferenceActivities(deps: InferenceDeps) {
  const turnOf = createTurnSampler(deps);
  async function generate(input: GenerateInput): Promise<GenerateOutput> {
    const startedAt = performance.now();
    const result = await turnOf(input);
    if (result.kind === 'context full') {
      return { text: '', finishReason: 'context', completionTokens: 0, contextTokens: result.contextTokens, minPolicyVersion: -1, maxPolicyVersion: -1 };
    }
    const output = turnOutput(result.record);
    return deliverable(result.sampledNow ? { ...output, activityMs: performance.now() - startedAt } : output);
  }
  return { generate };
}

export type InferenceActivities = ReturnType<typeof createInferenceActivities>;
