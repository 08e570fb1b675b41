/**
 * The AI SDK's model activities (`invokeModel`, `invokeModelStreaming` of `@temporalio/ai-sdk`),
 * served on the inference queue for agent workflows that trajflow runs as trajectories. trajflow's
 * workflow interceptor in the agent's worker routes them here with the run's context
 * (src/core/agentCallContext.ts); the agent's code is unchanged.
 *
 * Each call: the prompt and tools become prompt items (src/agentCalls/prompt), are placed against
 * the trajectory's stored turns (src/agentCalls/history: the next turn, a retry of the last, or a
 * new segment), sampled and stored as a turn exactly as a trajflow agent's turn is (the shared
 * turn sampler), and answered as the AI SDK's content parts. A retried activity finds its turn
 * stored and answers from it: no model call is made twice.
 */
import type { LanguageModelV4CallOptions, LanguageModelV4FinishReason, LanguageModelV4GenerateResult } from '@ai-sdk/provider';
import { ApplicationFailure } from '@temporalio/common';
import { placeCall } from '../src/agentCalls/history';
import { promptItemsOf, UnsupportedPromptError } from '../src/agentCalls/prompt';
import { contentOf, replyOfText } from '../src/agentCalls/reply';
import { MODEL_CALL_LIMIT, type AgentCallContext } from '../src/core/agentCallContext';
import type { TurnRecord } from '../src/core/records';
import { TOOL_CALL_FORMATS, type ToolCallFormat } from '../src/tools/parsers';
import type { TrajectoryStorage } from '../src/store/trajectoryStore';
import type { GenerateInput, TurnResult } from './inference';

/** The AI SDK activity's argument, with the context trajflow's interceptor adds. */
export interface AgentModelCall {
  modelId: string;
  options: LanguageModelV4CallOptions;
  trajflow?: AgentCallContext;
}

/** Failure types an agent's workflow may catch; neither is retried. */
export const AGENT_CALL_FAILURES = {
  /** The trajectory made `agent.maxTurns` model calls already. */
  callLimit: MODEL_CALL_LIMIT,
  /** The call cannot be served: no trajflow context, an unsupported prompt part or tool. */
  unsupported: 'UnsupportedModelCall',
} as const;

export interface AgentModelDeps {
  store: TrajectoryStorage;
  turnOf: (input: GenerateInput) => Promise<TurnResult>;
}

export function createAgentModelActivities({ store, turnOf }: AgentModelDeps) {
  async function invokeModel(call: AgentModelCall): Promise<LanguageModelV4GenerateResult> {
    const context = contextOf(call);
    const format = context.toolCallFormat as ToolCallFormat;
    const items = refuseUnsupported(() => promptItemsOf(call.options.prompt, call.options.tools, format));
    const stored = await store.getTurns(context.runId, context.trajectoryId);
    const place = placeCall(items, stored, format);
    if (place.kind !== 'repeats' && place.turn >= context.maxCalls) {
      throw ApplicationFailure.create({
        type: AGENT_CALL_FAILURES.callLimit,
        nonRetryable: true,
        message: `trajectory ${context.trajectoryId} made its ${context.maxCalls} model calls (agent.maxTurns)`,
      });
    }
    const result = await turnOf({
      runId: context.runId,
      runSeed: context.runSeed,
      trajectoryId: context.trajectoryId,
      turn: place.turn,
      messages: place.messages,
      ...(place.kind === 'new segment' && place.turn > 0 ? { freshContext: true, segmentReason: place.reason } : {}),
      sampling: { ...context.sampling, maxTokens: Math.min(context.sampling.maxTokens, call.options.maxOutputTokens ?? Infinity) },
      policy: context.policy,
      compatibility: context.compatibility,
    });
    if (result.kind === 'context full') {
      return answer([], { unified: 'length', raw: 'context' }, result.contextTokens, 0, call, []);
    }
    const { record } = result;
    // Two calls of one trajectory at once would both take the next turn; the one that lost the
    // race must not answer with the other's turn. Its retry places it again (a new segment).
    if (!sameMessages(record, place.messages))
      throw ApplicationFailure.retryable(`turn ${place.turn} of ${context.trajectoryId} was taken by another model call of the trajectory`);
    const reply = replyOfText(record.text, format, record.turn);
    const finishReason: LanguageModelV4FinishReason =
      reply.calls.length > 0
        ? { unified: 'tool-calls', raw: record.finishReason }
        : { unified: record.finishReason === 'length' ? 'length' : 'stop', raw: record.finishReason };
    return answer(contentOf(reply), finishReason, record.contextTokens, record.completionIds.length, call, ignoredSettings(call.options), record);
  }

  return {
    invokeModel,
    /** Answers whole: the AI SDK's workflow side replays the content as a stream either way. */
    invokeModelStreaming: (call: AgentModelCall) => invokeModel(call),
  };
}

export type AgentModelActivities = ReturnType<typeof createAgentModelActivities>;

function contextOf(call: AgentModelCall): AgentCallContext {
  const context = call.trajflow;
  if (!context) {
    throw ApplicationFailure.create({
      type: AGENT_CALL_FAILURES.unsupported,
      nonRetryable: true,
      message:
        "a model call reached trajflow's inference queue without its run context: only workflows a trajflow run starts, in a worker with trajflow's agent plugin, call models here",
    });
  }
  if (!(TOOL_CALL_FORMATS as readonly string[]).includes(context.toolCallFormat)) {
    throw ApplicationFailure.create({
      type: AGENT_CALL_FAILURES.unsupported,
      nonRetryable: true,
      message: `unknown tool-call format ${JSON.stringify(context.toolCallFormat)}`,
    });
  }
  return context;
}

function refuseUnsupported<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof UnsupportedPromptError)
      throw ApplicationFailure.create({ type: AGENT_CALL_FAILURES.unsupported, nonRetryable: true, message: err.message });
    throw err;
  }
}

function sameMessages(record: TurnRecord, messages: readonly { role: string; content: string }[]): boolean {
  return record.messages.length === messages.length && record.messages.every((m, i) => m.role === messages[i].role && m.content === messages[i].content);
}

/** Settings the agent's code asked for that the run's own sampling replaces. */
function ignoredSettings(options: LanguageModelV4CallOptions): string[] {
  const asked = { temperature: options.temperature, topP: options.topP, topK: options.topK, seed: options.seed, stopSequences: options.stopSequences };
  return Object.entries(asked)
    .filter(([, value]) => value !== undefined)
    .map(([name]) => name);
}

function answer(
  content: LanguageModelV4GenerateResult['content'],
  finishReason: LanguageModelV4FinishReason,
  inputTokens: number,
  outputTokens: number,
  call: AgentModelCall,
  ignored: string[],
  record?: TurnRecord,
): LanguageModelV4GenerateResult {
  return {
    content,
    finishReason,
    usage: {
      inputTokens: { total: inputTokens, noCache: inputTokens, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: outputTokens, text: outputTokens, reasoning: undefined },
    },
    warnings: ignored.map((setting) => ({ type: 'unsupported', feature: setting, details: "trajflow samples with the run's sampling settings" })),
    response: { modelId: call.modelId },
    ...(record
      ? {
          providerMetadata: {
            trajflow: {
              trajectoryId: call.trajflow!.trajectoryId,
              turn: record.turn,
              newSegment: record.startsContext === true,
              policyVersion: Math.max(...record.policyVersions, -1),
            },
          },
        }
      : {}),
  };
}
