/**
 * OpenAI's Chat Completions API (`POST /v1/chat/completions`) as a model call of trajflow's: the
 * request validated (the fields trajflow reads) and turned into the AI SDK's call options, which
 * trajflow serves as for AI SDK agents (activities/agentModel.ts); the answer turned back into a
 * chat completion, or its stream of chunks. Agents in any language reach trajflow this way.
 */
import type { JSONSchema7, LanguageModelV4CallOptions, LanguageModelV4GenerateResult, LanguageModelV4Prompt } from '@ai-sdk/provider';
import { z } from 'zod';

const TextParts = z.array(z.looseObject({ type: z.string(), text: z.string().optional() }));
const Content = z.union([z.string(), TextParts]);

const ToolCall = z.looseObject({
  id: z.string().min(1),
  type: z.literal('function').default('function'),
  function: z.looseObject({ name: z.string().min(1), arguments: z.string() }),
});

const Message = z.discriminatedUnion('role', [
  z.looseObject({ role: z.enum(['system', 'developer']), content: Content }),
  z.looseObject({ role: z.literal('user'), content: Content }),
  z.looseObject({ role: z.literal('assistant'), content: Content.nullish(), tool_calls: z.array(ToolCall).optional() }),
  z.looseObject({ role: z.literal('tool'), tool_call_id: z.string().min(1), content: Content }),
]);

export const ChatCompletionRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(Message).min(1),
  tools: z
    .array(
      z.looseObject({
        type: z.literal('function'),
        function: z.looseObject({ name: z.string().min(1), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() }),
      }),
    )
    .optional(),
  stream: z.boolean().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  seed: z.number().int().nullish(),
  n: z.literal(1, { message: 'trajflow samples one choice per call (n: 1)' }).nullish(),
});

export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;

/** A request trajflow cannot serve as asked, with where in it. */
export class UnsupportedRequestError extends Error {
  override name = 'UnsupportedRequestError';
}

/** The request as the AI SDK's call options (its prompt, tools and the settings the run overrides, kept for its warnings). */
export function callOptionsOf(request: ChatCompletionRequest): LanguageModelV4CallOptions {
  const toolNames = new Map<string, string>();
  const prompt: LanguageModelV4Prompt = request.messages.map((message, index) => {
    const where = `messages[${index}]`;
    switch (message.role) {
      case 'system':
      case 'developer':
        return { role: 'system', content: textOf(message.content, where) };
      case 'user':
        return { role: 'user', content: [{ type: 'text', text: textOf(message.content, where) }] };
      case 'assistant': {
        const text = message.content == null ? '' : textOf(message.content, where);
        const calls = (message.tool_calls ?? []).map((call) => {
          toolNames.set(call.id, call.function.name);
          return { type: 'tool-call' as const, toolCallId: call.id, toolName: call.function.name, input: call.function.arguments };
        });
        return { role: 'assistant', content: [...(text === '' ? [] : [{ type: 'text' as const, text }]), ...calls] };
      }
      case 'tool': {
        const toolName = toolNames.get(message.tool_call_id);
        if (toolName === undefined) throw new UnsupportedRequestError(`${where}: tool_call_id ${message.tool_call_id} answers no earlier assistant tool call`);
        return {
          role: 'tool',
          content: [{ type: 'tool-result', toolCallId: message.tool_call_id, toolName, output: { type: 'text', value: textOf(message.content, where) } }],
        };
      }
    }
  });
  return {
    prompt,
    tools: request.tools?.map((tool) => ({
      type: 'function' as const,
      name: tool.function.name,
      description: tool.function.description,
      inputSchema: (tool.function.parameters ?? { type: 'object', properties: {} }) as JSONSchema7,
    })),
    maxOutputTokens: request.max_completion_tokens ?? request.max_tokens ?? undefined,
    temperature: request.temperature ?? undefined,
    topP: request.top_p ?? undefined,
    seed: request.seed ?? undefined,
  };
}

function textOf(content: z.infer<typeof Content>, where: string): string {
  if (typeof content === 'string') return content;
  return content
    .map((part, index) => {
      if (part.type !== 'text' || part.text === undefined)
        throw new UnsupportedRequestError(`${where}.content[${index}]: ${part.type}; trajflow's models read text only`);
      return part.text;
    })
    .join('');
}

interface Answer {
  content: string | null;
  toolCalls: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  finishReason: 'stop' | 'length' | 'tool_calls';
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

function answerOf(result: LanguageModelV4GenerateResult): Answer {
  const text = result.content.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('');
  const toolCalls = result.content.flatMap((part) =>
    part.type === 'tool-call' ? [{ id: part.toolCallId, type: 'function' as const, function: { name: part.toolName, arguments: part.input } }] : [],
  );
  const finishReason = toolCalls.length > 0 ? 'tool_calls' : result.finishReason.unified === 'length' ? 'length' : 'stop';
  const prompt = result.usage.inputTokens.total ?? 0;
  const completion = result.usage.outputTokens.total ?? 0;
  return {
    content: text === '' && toolCalls.length > 0 ? null : text,
    toolCalls,
    finishReason,
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
  };
}

/** The answer as a chat completion. */
export function chatCompletionOf(result: LanguageModelV4GenerateResult, id: string, model: string, created: number) {
  const answer = answerOf(result);
  return {
    id,
    object: 'chat.completion' as const,
    created,
    model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant' as const, content: answer.content, ...(answer.toolCalls.length > 0 ? { tool_calls: answer.toolCalls } : {}) },
        finish_reason: answer.finishReason,
        logprobs: null,
      },
    ],
    usage: answer.usage,
  };
}

/** The answer as the chunks of a streamed chat completion: the role, the text, each tool call, the finish (and the usage if asked). */
export function chatCompletionChunksOf(result: LanguageModelV4GenerateResult, id: string, model: string, created: number, includeUsage: boolean) {
  const answer = answerOf(result);
  const chunk = (delta: Record<string, unknown>, finishReason: Answer['finishReason'] | null = null) => ({
    id,
    object: 'chat.completion.chunk' as const,
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
  });
  return [
    chunk({ role: 'assistant', content: '' }),
    ...(answer.content ? [chunk({ content: answer.content })] : []),
    ...answer.toolCalls.map((call, index) => chunk({ tool_calls: [{ index, ...call }] })),
    chunk({}, answer.finishReason),
    ...(includeUsage ? [{ id, object: 'chat.completion.chunk' as const, created, model, choices: [], usage: answer.usage }] : []),
  ];
}
