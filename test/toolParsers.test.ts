import { z } from 'zod';
import { getToolCallParser, TOOL_CALL_FORMATS } from '../src/tools/parsers';
import { defineTool, runToolCall, toolJsonSchema, validateToolCall, type Tool } from '../src/tools/tool';

const hermes = getToolCallParser('hermes');
const qwenCoder = getToolCallParser('qwen3-coder');
const gemma = getToolCallParser('gemma4');
const json = getToolCallParser('json');

describe('parser registry', () => {
  test('an unknown format lists the known ones', () => {
    expect(() => getToolCallParser('llama')).toThrow(/unknown tool-call format "llama"; known formats: hermes, qwen3-coder, gemma4, json/);
    expect(TOOL_CALL_FORMATS).toEqual(['hermes', 'qwen3-coder', 'gemma4', 'json']);
  });
});

describe('hermes', () => {
  test('one call, with the text around it as content', () => {
    const r = hermes('Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "a.txt"}}\n</tool_call>');
    expect(r).toEqual({ calls: [{ name: 'read', arguments: { path: 'a.txt' } }], errors: [], content: 'Let me look.' });
  });

  test('several calls; string-encoded and missing arguments are accepted', () => {
    const r = hermes(
      '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> and <tool_call>{"name": "b", "arguments": "{\\"y\\": [2]}"}</tool_call><tool_call>{"name": "c"}</tool_call>',
    );
    expect(r.calls).toEqual([
      { name: 'a', arguments: { x: 1 } },
      { name: 'b', arguments: { y: [2] } },
      { name: 'c', arguments: {} },
    ]);
    expect(r.errors).toEqual([]);
    expect(r.content).toBe('and');
  });

  test('an unclosed call after a good one is an error, the good one is kept', () => {
    const r = hermes('<tool_call>{"name": "a", "arguments": {}}</tool_call> then <tool_call>{"name": "b", "argu');
    expect(r.calls).toEqual([{ name: 'a', arguments: {} }]);
    expect(r.errors).toEqual(['tool call 2: unclosed <tool_call> (no </tool_call>; truncated answer?)']);
    expect(r.content).toBe('then');
  });

  test('malformed JSON and wrong shapes are errors naming the problem', () => {
    const r = hermes(
      '<tool_call>{"name": "a", "arguments": {"x": 1,}}</tool_call><tool_call>["a"]</tool_call><tool_call>{"arguments": {}}</tool_call><tool_call>{"name": "a", "arguments": 3}</tool_call>',
    );
    expect(r.calls).toEqual([]);
    expect(r.errors).toHaveLength(4);
    expect(r.errors[0]).toMatch(/^tool call 1: invalid JSON: /);
    expect(r.errors[1]).toBe('tool call 2: expected an object with "name" and "arguments", got an array');
    expect(r.errors[2]).toBe('tool call 3: missing "name" (a non-empty string)');
    expect(r.errors[3]).toBe('tool call 4: "arguments" of a must be an object, got number');
  });

  test('a closing tag without an opening one is reported', () => {
    const r = hermes('{"name": "a"}</tool_call>');
    expect(r.calls).toEqual([]);
    expect(r.errors).toEqual(['</tool_call> at offset 13 has no matching <tool_call>']);
  });

  test('text with no call', () => {
    expect(hermes('  The answer is 42.  ')).toEqual({ calls: [], errors: [], content: 'The answer is 42.' });
  });
});

describe('qwen3-coder', () => {
  test('parameters are strings unless they read as JSON', () => {
    const r = qwenCoder(
      'Running it.\n<tool_call>\n<function=bash>\n<parameter=command>\necho "hi" && ls\n</parameter>\n<parameter=timeout>\n30\n</parameter>\n<parameter=env>\n{"A": "1"}\n</parameter>\n<parameter=note>\n[not json\n</parameter>\n</function>\n</tool_call>',
    );
    expect(r.errors).toEqual([]);
    expect(r.calls).toEqual([{ name: 'bash', arguments: { command: 'echo "hi" && ls', timeout: 30, env: { A: '1' }, note: '[not json' } }]);
    expect(r.content).toBe('Running it.');
  });

  test('multi-line values keep their inner newlines; several calls', () => {
    const r = qwenCoder(
      '<tool_call><function=write><parameter=text>\nline 1\nline 2\n</parameter></function></tool_call><tool_call><function=done></function></tool_call>',
    );
    expect(r.calls).toEqual([
      { name: 'write', arguments: { text: 'line 1\nline 2' } },
      { name: 'done', arguments: {} },
    ]);
  });

  test('partial calls are errors', () => {
    expect(qwenCoder('<tool_call><function=bash><parameter=command>ls').errors).toEqual([
      'tool call 1: unclosed <tool_call> (no </tool_call>; truncated answer?)',
    ]);
    expect(qwenCoder('<tool_call><function=bash><parameter=command>ls</function></tool_call>').errors).toEqual([
      'tool call 1: unclosed <parameter=command> in call to bash',
    ]);
    expect(qwenCoder('<tool_call><function=bash><parameter=command>ls</parameter></tool_call>').errors).toEqual([
      'tool call 1: unclosed <function=bash> (no </function>)',
    ]);
  });

  test('malformed calls are errors', () => {
    expect(qwenCoder('<tool_call>{"name": "bash"}</tool_call>').errors).toEqual(['tool call 1: expected <function=NAME> at the start of the call']);
    expect(qwenCoder('<tool_call><function=bash>stray<parameter=a>1</parameter></function></tool_call>').errors).toEqual([
      'tool call 1: unexpected text between parameters of bash',
    ]);
  });

  test('text with no call', () => {
    expect(qwenCoder('Done.')).toEqual({ calls: [], errors: [], content: 'Done.' });
  });
});

describe('gemma4', () => {
  test('strings, numbers, booleans, nesting', () => {
    const r = gemma(
      'Checking.<|tool_call>call:search{query:<|"|>weather, "Paris"<|"|>,limit:3,exact:false,filter:{tags:[<|"|>a<|"|>,<|"|>b<|"|>],min:-1.5},none:null}<tool_call|>',
    );
    expect(r.errors).toEqual([]);
    expect(r.calls).toEqual([
      { name: 'search', arguments: { query: 'weather, "Paris"', limit: 3, exact: false, filter: { tags: ['a', 'b'], min: -1.5 }, none: null } },
    ]);
    expect(r.content).toBe('Checking.');
  });

  test('several calls, whitespace and empty arguments tolerated', () => {
    const r = gemma('<|tool_call>call:a{ x : 1 , y : [ ] }<tool_call|>\n<|tool_call>call:b{}<tool_call|>');
    expect(r.calls).toEqual([
      { name: 'a', arguments: { x: 1, y: [] } },
      { name: 'b', arguments: {} },
    ]);
  });

  test('partial calls are errors', () => {
    expect(gemma('<|tool_call>call:a{x:1').errors).toEqual(['tool call 1: unclosed <|tool_call> (no <tool_call|>; truncated answer?)']);
    expect(gemma('<|tool_call>call:a{x:<|"|>abc}<tool_call|>').errors).toEqual(['tool call 1: unterminated <|"|> string at offset 14 (near "abc}")']);
    expect(gemma('<|tool_call>call:a{x:1<tool_call|>').errors).toEqual(['tool call 1: expected "," or "}" at offset 10 (end of call)']);
  });

  test('malformed calls are errors', () => {
    expect(gemma('<|tool_call>a{x:1}<tool_call|>').errors).toEqual(['tool call 1: expected "call:" at offset 0 (near "a{x:1}")']);
    expect(gemma('<|tool_call>call:a{x 1}<tool_call|>').errors[0]).toMatch(/^tool call 1: expected ":" at offset/);
    expect(gemma('<|tool_call>call:a{x:1} extra<tool_call|>').errors).toEqual([
      'tool call 1: unexpected text after the arguments of a at offset 12 (near "extra")',
    ]);
    expect(gemma('<|tool_call>call:{}<tool_call|>').errors).toEqual(['tool call 1: expected a tool name after "call:" at offset 5 (near "{}")']);
  });

  test('text with no call', () => {
    expect(gemma('No tools needed.')).toEqual({ calls: [], errors: [], content: 'No tools needed.' });
  });
});

describe('json', () => {
  test('the whole answer, one call or an array', () => {
    expect(json(' {"name": "a", "arguments": {"x": 1}} ')).toEqual({ calls: [{ name: 'a', arguments: { x: 1 } }], errors: [], content: '' });
    expect(json('[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"y": 2}}]').calls).toEqual([
      { name: 'a', arguments: {} },
      { name: 'b', arguments: { y: 2 } },
    ]);
  });

  test('fenced blocks, with the prose around them as content', () => {
    const r = json('I will call it.\n```json\n{"name": "a", "arguments": {}}\n```\nand\n```JSON\n[{"name": "b", "arguments": {}}]\n```');
    expect(r.calls).toEqual([
      { name: 'a', arguments: {} },
      { name: 'b', arguments: {} },
    ]);
    expect(r.errors).toEqual([]);
    expect(r.content).toBe('I will call it.\n\nand');
  });

  test('truncated answers are errors', () => {
    expect(json('{"name": "a", "argum').errors[0]).toMatch(/^answer: invalid JSON: /);
    expect(json('Here:\n```json\n{"name": "a"}').errors).toEqual(['json block 1: unclosed ```json fence (truncated answer?)']);
  });

  test('malformed JSON and wrong shapes are errors; good array items are kept', () => {
    expect(json('```json\n{name: "a"}\n```').errors[0]).toMatch(/^json block 1: invalid JSON: /);
    const r = json('[{"name": "a", "arguments": {}}, {"nom": "b"}, 3]');
    expect(r.calls).toEqual([{ name: 'a', arguments: {} }]);
    expect(r.errors).toEqual([
      'answer item 2: missing "name" (a non-empty string)',
      'answer item 3: expected an object with "name" and "arguments", got number',
    ]);
  });

  test('text with no call', () => {
    expect(json('The capital is Paris. {not a call}')).toEqual({ calls: [], errors: [], content: 'The capital is Paris. {not a call}' });
  });
});

const echo = defineTool({
  name: 'echo',
  description: 'Repeats text.',
  input: z.object({ text: z.string(), times: z.number().int().positive().default(1), opts: z.object({ upper: z.boolean() }).optional() }),
  run: ({ text, times, opts }) => (opts?.upper ? text.toUpperCase() : text).repeat(times),
});
const hang = defineTool({
  name: 'hang',
  description: 'Never answers unless aborted.',
  input: z.object({}),
  timeoutMs: 50,
  run: (_args, { signal }) => new Promise<string>((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
});
const boom = defineTool({
  name: 'boom',
  description: 'Throws.',
  input: z.object({}),
  run: () => {
    throw new Error('disk on fire');
  },
});
const tools: Tool[] = [echo, hang, boom];

describe('validateToolCall', () => {
  test('valid arguments are parsed by the schema (defaults applied)', () => {
    const v = validateToolCall({ name: 'echo', arguments: { text: 'hi' } }, tools);
    expect(v).toEqual({ ok: true, tool: echo, args: { text: 'hi', times: 1 } });
  });

  test('an unknown tool lists the known ones', () => {
    expect(validateToolCall({ name: 'rm', arguments: {} }, tools)).toEqual({
      ok: false,
      error: 'unknown tool "rm"; known tools: echo, hang, boom',
    });
  });

  test('bad arguments name each failing path', () => {
    const v = validateToolCall({ name: 'echo', arguments: { times: 0, opts: { upper: 'yes' } } }, tools);
    expect(v.ok).toBe(false);
    if (v.ok) return;
    expect(v.error).toMatch(/^invalid arguments for tool "echo": /);
    expect(v.error).toMatch(/text: /);
    expect(v.error).toMatch(/times: /);
    expect(v.error).toMatch(/opts\.upper: /);
    expect(validateToolCall({ name: 'echo', arguments: 'hi' }, tools)).toMatchObject({ ok: false, error: expect.stringMatching(/\(arguments\): /) });
  });

  test('toolJsonSchema describes the arguments', () => {
    const schema = toolJsonSchema(echo);
    expect(schema).toMatchObject({ name: 'echo', description: 'Repeats text.', parameters: { type: 'object', required: ['text'] } });
  });
});

describe('runToolCall', () => {
  const options = { defaultTimeoutMs: 1000 };

  test('returns the output', async () => {
    await expect(runToolCall({ name: 'echo', arguments: { text: 'ab', times: 2, opts: { upper: true } } }, tools, options)).resolves.toEqual({
      ok: true,
      output: 'ABAB',
    });
  });

  test('validation errors become error results', async () => {
    await expect(runToolCall({ name: 'nope', arguments: {} }, tools, options)).resolves.toMatchObject({ ok: false });
  });

  test('a hanging tool times out and its signal is aborted', async () => {
    let aborted = false;
    const watched = defineTool({
      ...hang,
      run: (_args, { signal }) => {
        signal.addEventListener('abort', () => (aborted = true));
        return new Promise<string>(() => {});
      },
    });
    const started = Date.now();
    await expect(runToolCall({ name: 'hang', arguments: {} }, [watched], options)).resolves.toEqual({
      ok: false,
      error: 'tool "hang" timed out after 50 ms',
    });
    expect(Date.now() - started).toBeLessThan(900);
    expect(aborted).toBe(true);
  });

  test('the default timeout applies to tools without their own', async () => {
    const slow = defineTool({ ...echo, run: () => new Promise<string>(() => {}) });
    await expect(runToolCall({ name: 'echo', arguments: { text: 'x' } }, [slow], { defaultTimeoutMs: 30 })).resolves.toEqual({
      ok: false,
      error: 'tool "echo" timed out after 30 ms',
    });
  });

  test('thrown errors, sync or async, become error results', async () => {
    await expect(runToolCall({ name: 'boom', arguments: {} }, tools, options)).resolves.toEqual({ ok: false, error: 'tool "boom" failed: disk on fire' });
    const asyncBoom = defineTool({ ...boom, run: async () => Promise.reject(new Error('later')) });
    await expect(runToolCall({ name: 'boom', arguments: {} }, [asyncBoom], options)).resolves.toEqual({ ok: false, error: 'tool "boom" failed: later' });
  });

  test("the caller's signal cancels the call", async () => {
    const controller = new AbortController();
    const pending = runToolCall({ name: 'hang', arguments: {} }, [{ ...hang, timeoutMs: 5000 }], { ...options, signal: controller.signal });
    controller.abort();
    await expect(pending).resolves.toEqual({ ok: false, error: 'tool "hang" was cancelled' });
  });
});
