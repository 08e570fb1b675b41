/**
 * The pure layer between the AI SDK and trajflow's turns (src/agentCalls): prompts read as items,
 * sampled text read as replies, and each call placed against the stored turns. The embedded model
 * of the integration test never calls a tool, so the tool-call paths are checked here.
 */
import type {
  LanguageModelV4CallOptions,
  LanguageModelV4FunctionTool,
  LanguageModelV4GenerateResult,
  LanguageModelV4Message,
  LanguageModelV4Prompt,
  LanguageModelV4ToolResultOutput,
} from '@ai-sdk/provider';
import { placeCall } from '../src/agentCalls/history';
import { callOptionsOf, chatCompletionChunksOf, chatCompletionOf, ChatCompletionRequestSchema, UnsupportedRequestError } from '../src/agentCalls/openai';
import { promptItemsOf, UnsupportedPromptError } from '../src/agentCalls/prompt';
import { contentOf, replyMessage, replyOfText, sameReply, type Reply } from '../src/agentCalls/reply';
import type { TurnRecord } from '../src/core/records';
import type { ChatMessage } from '../src/core/tokenizer';

const calculator: LanguageModelV4FunctionTool = {
  type: 'function',
  name: 'calculator',
  description: 'Evaluates an arithmetic expression',
  inputSchema: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
};
const tools: LanguageModelV4CallOptions['tools'] = [calculator];

const toolSection = [
  'Tools:',
  'calculator(expression: string) - Evaluates an arithmetic expression',
  'To call a tool, write <tool_call>{"name":"NAME","arguments":{"ARG":"VALUE"}}</tool_call>. When you know the answer, write it without a tool call.',
].join('\n');

const systemText = 'You are a careful calculator.';
const question = 'What is 12 * 34?';
const callText = (expression: string) => `<tool_call>{"name":"calculator","arguments":{"expression":"${expression}"}}</tool_call>`;

// Prompt messages as the AI SDK sends them.
const system = (): LanguageModelV4Message => ({ role: 'system', content: systemText });
const user = (...texts: string[]): LanguageModelV4Message => ({ role: 'user', content: texts.map((text) => ({ type: 'text', text })) });
/** The AI SDK echoes a tool call back with its input parsed into an object. */
const assistantCall = (toolCallId: string, expression: string, text = ''): LanguageModelV4Message => ({
  role: 'assistant',
  content: [...(text === '' ? [] : [{ type: 'text' as const, text }]), { type: 'tool-call', toolCallId, toolName: 'calculator', input: { expression } }],
});
const toolResult = (toolCallId: string, ...outputs: LanguageModelV4ToolResultOutput[]): LanguageModelV4Message => ({
  role: 'tool',
  content: outputs.map((output) => ({ type: 'tool-result', toolCallId, toolName: 'calculator', output })),
});
const textOutput = (value: string): LanguageModelV4ToolResultOutput => ({ type: 'text', value });

/** A stored turn: only messages, text, turn and startsContext matter to placeCall. */
function turnRecord(turn: number, messages: ChatMessage[], text: string, startsContext = turn === 0): TurnRecord {
  return {
    trajectoryId: 'traj-1',
    turn,
    messages,
    startsContext,
    promptDeltaIds: [1],
    completionIds: [2],
    logprobs: [-0.5],
    policyVersions: [0],
    finishReason: 'stop',
    text,
    contextTokens: 2,
  };
}

const items = (prompt: LanguageModelV4Prompt) => promptItemsOf(prompt, tools, 'hermes');

describe('promptItemsOf', () => {
  test('tools join the system prompt as their section', () => {
    expect(items([system(), user(question)])).toEqual([
      { kind: 'message', message: { role: 'system', content: `${systemText}\n${toolSection}` } },
      { kind: 'message', message: { role: 'user', content: question } },
    ]);
  });

  test('without a system prompt the tool section is the system message', () => {
    expect(items([user(question)])).toEqual([
      { kind: 'message', message: { role: 'system', content: toolSection } },
      { kind: 'message', message: { role: 'user', content: question } },
    ]);
  });

  test('without tools the prompt is its messages, user text parts joined', () => {
    expect(promptItemsOf([user('What is ', '12 * 34?')], undefined, 'hermes')).toEqual([{ kind: 'message', message: { role: 'user', content: question } }]);
  });

  test('an assistant message with text and a tool call is one reply, its input kept', () => {
    expect(promptItemsOf([assistantCall('call_0_0', '12 * 34', 'Let me compute.')], [], 'hermes')).toEqual([
      { kind: 'reply', reply: { text: 'Let me compute.', calls: [{ id: 'call_0_0', name: 'calculator', input: { expression: '12 * 34' } }] } },
    ]);
  });

  test.each<[string, LanguageModelV4ToolResultOutput, string]>([
    ['text', { type: 'text', value: '408' }, '408'],
    ['json', { type: 'json', value: { result: 408 } }, '{"result":408}'],
    ['error-text', { type: 'error-text', value: 'division by zero' }, 'error: division by zero'],
    ['error-json', { type: 'error-json', value: { code: 3 } }, 'error: {"code":3}'],
    ['execution-denied with a reason', { type: 'execution-denied', reason: 'not allowed' }, 'denied: not allowed'],
    ['execution-denied', { type: 'execution-denied' }, 'denied'],
    [
      'content',
      {
        type: 'content',
        value: [
          { type: 'text', text: 'see ' },
          { type: 'file', mediaType: 'image/png', data: { type: 'data', data: 'AAAA' } },
        ],
      },
      'see [file]',
    ],
  ])('a tool result of type %s is a tool message', (_name, output, expected) => {
    expect(promptItemsOf([toolResult('call_0_0', output)], undefined, 'hermes')).toEqual([{ kind: 'message', message: { role: 'tool', content: expected } }]);
  });

  test('each result of a tool message is a message of its own', () => {
    expect(promptItemsOf([toolResult('call_0_0', textOutput('1'), textOutput('2'))], undefined, 'hermes')).toEqual([
      { kind: 'message', message: { role: 'tool', content: '1' } },
      { kind: 'message', message: { role: 'tool', content: '2' } },
    ]);
  });

  test('a file in a user message is refused, naming where', () => {
    const prompt: LanguageModelV4Prompt = [
      system(),
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Read this.' },
          { type: 'file', mediaType: 'text/plain', data: { type: 'text', text: 'hi' } },
        ],
      },
    ];
    expect(() => items(prompt)).toThrow(UnsupportedPromptError);
    expect(() => items(prompt)).toThrow('prompt[1] (user) part 1: file');
  });

  test('a provider tool is refused, naming where', () => {
    const withProviderTool: LanguageModelV4CallOptions['tools'] = [calculator, { type: 'provider', id: 'openai.web_search', name: 'web_search', args: {} }];
    const read = () => promptItemsOf([user(question)], withProviderTool, 'hermes');
    expect(read).toThrow(UnsupportedPromptError);
    expect(read).toThrow('tools[1] (web_search) is a provider tool');
  });
});

describe('replies (hermes)', () => {
  test('a tool call in the text is a call with an id of its turn, the text around it kept', () => {
    expect(replyOfText(`Let me compute.\n${callText('12 * 34')}\n`, 'hermes', 3)).toEqual({
      text: 'Let me compute.',
      calls: [{ id: 'call_3_0', name: 'calculator', input: { expression: '12 * 34' } }],
    });
  });

  test('a malformed call is no call: the whole text is the reply', () => {
    const text = 'Let me compute. <tool_call>{"name":"calculator","arguments":{"expression":</tool_call>';
    expect(replyOfText(text, 'hermes', 0)).toEqual({ text, calls: [] });
  });

  test('contentOf gives AI SDK parts: text only when there is some, input as JSON text', () => {
    expect(contentOf(replyOfText(callText('12 * 34'), 'hermes', 0))).toEqual([
      { type: 'tool-call', toolCallId: 'call_0_0', toolName: 'calculator', input: '{"expression":"12 * 34"}' },
    ]);
    expect(contentOf(replyOfText(`Sure. ${callText('1 + 1')}`, 'hermes', 2))).toEqual([
      { type: 'text', text: 'Sure.' },
      { type: 'tool-call', toolCallId: 'call_2_0', toolName: 'calculator', input: '{"expression":"1 + 1"}' },
    ]);
    expect(contentOf({ text: '408', calls: [] })).toEqual([{ type: 'text', text: '408' }]);
  });

  test('sameReply: an input object equals its JSON text in any key order; ids must match', () => {
    const asObject: Reply = { text: 'ok', calls: [{ id: 'call_0_0', name: 'f', input: { a: 1, b: [1, { c: 2, d: 3 }] } }] };
    const asJson: Reply = { text: ' ok ', calls: [{ id: 'call_0_0', name: 'f', input: '{"b":[1,{"d":3,"c":2}],"a":1}' }] };
    expect(sameReply(asObject, asJson)).toBe(true);
    expect(sameReply(asObject, { ...asJson, calls: [{ ...asJson.calls[0], id: 'call_1_0' }] })).toBe(false);
    expect(sameReply(asObject, { ...asJson, calls: [{ ...asJson.calls[0], input: '{"a":2,"b":[1,{"c":2,"d":3}]}' }] })).toBe(false);
    expect(sameReply(asObject, { ...asObject, text: 'other' })).toBe(false);
  });
});

describe('placeCall: the AI SDK loop of a tool-using agent', () => {
  const systemMessage: ChatMessage = { role: 'system', content: `${systemText}\n${toolSection}` };
  const userMessage: ChatMessage = { role: 'user', content: question };
  const toolMessage: ChatMessage = { role: 'tool', content: '408' };
  const call0 = turnRecord(0, [systemMessage, userMessage], callText('12 * 34'));
  const call1Prompt = [system(), user(question), assistantCall('call_0_0', '12 * 34'), toolResult('call_0_0', textOutput('408'))];
  const place = (prompt: LanguageModelV4Prompt, stored: TurnRecord[]) => placeCall(items(prompt), stored, 'hermes');

  test('the first call starts a segment at turn 0', () => {
    expect(place([system(), user(question)], [])).toEqual({
      kind: 'new segment',
      turn: 0,
      messages: [systemMessage, userMessage],
      reason: 'first call',
    });
  });

  test('the call after a tool call continues with the tool result only', () => {
    expect(place(call1Prompt, [call0])).toEqual({ kind: 'continues', turn: 1, messages: [toolMessage] });
  });

  test('a retry of a stored call repeats its turn', () => {
    const call1 = turnRecord(1, [toolMessage], 'The answer is 408.');
    expect(place(call1Prompt, [call0, call1])).toEqual({ kind: 'repeats', turn: 1, messages: [toolMessage] });
  });

  test('a history whose tool call has other arguments starts a new segment, naming the reply', () => {
    const edited = [system(), user(question), assistantCall('call_0_0', '12 * 35'), toolResult('call_0_0', textOutput('420'))];
    const placed = place(edited, [call0]);
    expect(placed).toMatchObject({ kind: 'new segment', turn: 1, reason: 'prompt item 2 is not the reply turn 0 sampled' });
    expect(placed.messages).toEqual([systemMessage, userMessage, { role: 'assistant', content: callText('12 * 35') }, { role: 'tool', content: '420' }]);
  });

  test('a history without the first user message starts a new segment', () => {
    const cut = [system(), assistantCall('call_0_0', '12 * 34'), toolResult('call_0_0', textOutput('408'))];
    expect(place(cut, [call0])).toMatchObject({ kind: 'new segment', turn: 1, reason: 'prompt item 1 differs from message 1 of turn 0' });
  });

  test('the call after a new segment continues that segment, its rendered reply matched', () => {
    // Turn 1 started a context from a history without the user message; its messages hold the
    // reply of turn 0 rendered as text, as the new segment's messages are.
    const cut = [system(), assistantCall('call_0_0', '12 * 34'), toolResult('call_0_0', textOutput('408'))];
    const segment = place(cut, [call0]);
    expect(segment.kind).toBe('new segment');
    expect(segment.messages[1]).toEqual(
      replyMessage({ text: '', calls: [{ id: 'call_0_0', name: 'calculator', input: { expression: '12 * 34' } }] }, 'hermes'),
    );
    const call1 = turnRecord(1, segment.messages, callText('408 + 1'), true);
    const next = [...cut, assistantCall('call_1_0', '408 + 1'), toolResult('call_1_0', textOutput('409'))];
    expect(place(next, [call0, call1])).toEqual({ kind: 'continues', turn: 2, messages: [{ role: 'tool', content: '409' }] });
  });

  test('a program started again from the beginning gets its earlier answers back, even from an earlier context', () => {
    const cut = [system(), assistantCall('call_0_0', '12 * 34'), toolResult('call_0_0', textOutput('408'))];
    const call1 = turnRecord(1, place(cut, [call0]).messages, 'The answer is 408.', true);
    expect(place([system(), user(question)], [call0, call1])).toEqual({ kind: 'repeats', turn: 0, messages: [systemMessage, userMessage] });
    // Continuing the earlier context would fork the trajectory: a new segment instead.
    expect(place(call1Prompt, [call0, call1])).toMatchObject({ kind: 'new segment', turn: 2 });
  });
});

describe("OpenAI's chat completions as model calls", () => {
  const request = ChatCompletionRequestSchema.parse({
    model: 'm',
    messages: [
      { role: 'system', content: systemText },
      { role: 'user', content: [{ type: 'text', text: question }] },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_0_0', type: 'function', function: { name: 'calculator', arguments: '{"expression":"12 * 34"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_0_0', content: '408' },
    ],
    tools: [{ type: 'function', function: { name: 'calculator', description: calculator.description, parameters: calculator.inputSchema } }],
    max_completion_tokens: 7,
    temperature: 0.2,
  });

  test('a request becomes the AI SDK call a tool-using agent makes, and is placed as one', () => {
    const options = callOptionsOf(request);
    expect(options).toMatchObject({ maxOutputTokens: 7, temperature: 0.2, tools: [calculator] });
    const call0 = turnRecord(
      0,
      [
        { role: 'system', content: `${systemText}\n${toolSection}` },
        { role: 'user', content: question },
      ],
      callText('12 * 34'),
    );
    expect(placeCall(promptItemsOf(options.prompt, options.tools, 'hermes'), [call0], 'hermes')).toEqual({
      kind: 'continues',
      turn: 1,
      messages: [{ role: 'tool', content: '408' }],
    });
  });

  test('a tool result answering no call, and an image, are refused by where they are', () => {
    const orphan = ChatCompletionRequestSchema.parse({ model: 'm', messages: [{ role: 'tool', tool_call_id: 'x', content: '1' }] });
    expect(() => callOptionsOf(orphan)).toThrow('messages[0]: tool_call_id x answers no earlier assistant tool call');
    const image = ChatCompletionRequestSchema.parse({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'u' } }] }] });
    expect(() => callOptionsOf(image)).toThrow(UnsupportedRequestError);
  });

  test('an answer with a tool call is a completion with tool_calls, and its stream says the same', () => {
    const result: LanguageModelV4GenerateResult = {
      content: contentOf(replyOfText(callText('12 * 34'), 'hermes', 0)),
      finishReason: { unified: 'tool-calls', raw: 'stop' },
      usage: {
        inputTokens: { total: 30, noCache: 30, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 12, text: 12, reasoning: undefined },
      },
      warnings: [],
    };
    const toolCalls = [{ id: 'call_0_0', type: 'function', function: { name: 'calculator', arguments: '{"expression":"12 * 34"}' } }];
    expect(chatCompletionOf(result, 'id', 'm', 1)).toMatchObject({
      choices: [{ message: { role: 'assistant', content: null, tool_calls: toolCalls }, finish_reason: 'tool_calls' }],
      usage: { prompt_tokens: 30, completion_tokens: 12, total_tokens: 42 },
    });
    const chunks = chatCompletionChunksOf(result, 'id', 'm', 1, true);
    expect(chunks.map((chunk) => chunk.choices[0]?.delta)).toEqual([
      { role: 'assistant', content: '' },
      { tool_calls: [{ index: 0, ...toolCalls[0] }] },
      {},
      undefined,
    ]);
    expect(chunks[2].choices[0].finish_reason).toBe('tool_calls');
    expect(chunks[3]).toMatchObject({ choices: [], usage: { total_tokens: 42 } });
  });
});
