import { EnvConfigSchema, type AgentConfig, type EnvConfig } from '../config/schema';
import { Episode, EpisodeError, type TurnOutcome } from '../src/episode/episode';
import { ToolAgent } from '../src/agents/toolAgent';
import { createRng } from '../src/core/random';
import { ArithmeticEnvironment, ArithmeticOptionsSchema, generateTask, isHeldOutTask, type ArithmeticTaskSpec } from '../src/envs/arithmetic';
import { RewardError } from '../src/envs/taskEnvironment';
import { describeEnvironment, OptionsError, validateEnvConfig } from '../src/plugins/registry';
import { registerReward } from '../src/rewards/registry';
import { calculatorTool, evaluateExpression, formatNumber, MAX_NESTING } from '../src/tools/calculator';
import type { ToolCallFormat } from '../src/tools/parsers';
import { formatToolCall } from '../src/tools/render';
import { runToolCall } from '../src/tools/tool';

describe('evaluateExpression', () => {
  test.each([
    ['2 + 3 * 4', 14],
    ['(2 + 3) * 4', 20],
    ['10 - 4 - 3', 3],
    ['100 / 10 / 5', 2],
    ['2 * 3 - 8 / 4', 4],
    ['-3 * -(2 + 1)', 9],
    ['2 - -3', 5],
    ['-2 * 3 + 1', -5],
    [' 1.5 *4 ', 6],
    ['.5 + 1', 1.5],
    ['((7))', 7],
    ['7 / 2', 3.5],
  ])('%s = %d', (expression, value) => {
    expect(evaluateExpression(expression)).toBe(value);
  });

  test.each([
    ['1 / 0', 'division by zero at offset 2'],
    ['4 / (2 - 2)', 'division by zero at offset 2'],
    ['', 'empty expression'],
    ['   ', 'empty expression'],
    ['2 +', 'expected a number, found end of expression'],
    ['2 3', 'expected an operator at offset 2, found "3"'],
    ['(1 + 2', 'expected ")", found end of expression'],
    ['1 + 2)', 'expected an operator at offset 5, found ")"'],
    ['2 ** 3', 'expected a number at offset 3, found "*"'],
    ['1e5', 'expected an operator at offset 1, found "e"'],
    ['1.2.3', 'expected an operator at offset 3, found "."'],
    ['abc', 'expected a number at offset 0, found "a"'],
    ['2(3)', 'expected an operator at offset 1, found "("'],
    ['Math.exp(1)', 'expected a number at offset 0, found "M"'],
  ])('%j is refused: %s', (expression, message) => {
    expect(() => evaluateExpression(expression)).toThrow(new Error(message));
  });

  test(`nesting up to ${MAX_NESTING} levels is fine, deeper is refused`, () => {
    const parens = (n: number) => `${'('.repeat(n)}1${')'.repeat(n)}`;
    expect(evaluateExpression(parens(MAX_NESTING))).toBe(1);
    expect(() => evaluateExpression(parens(MAX_NESTING + 1))).toThrow(/^nested too deeply \(over 20 levels\) at offset 21$/);
    expect(evaluateExpression(`${'-'.repeat(MAX_NESTING)}1`)).toBe(1);
    expect(() => evaluateExpression(`${'-'.repeat(MAX_NESTING + 1)}1`)).toThrow(/^nested too deeply/);
  });

  test('a result beyond float range is an error, not Infinity', () => {
    const huge = `1${'0'.repeat(200)}`;
    expect(() => evaluateExpression(`${huge} * ${huge}`)).toThrow('result out of range');
  });
});

describe('formatNumber', () => {
  test.each([
    [14, '14'],
    [-35, '-35'],
    [-0, '0'],
    [2.5, '2.5'],
    [1 / 3, '0.333333'],
    [-2 / 3, '-0.666667'],
    [100 / 3, '33.333333'],
    [0.1 + 0.2, '0.3'],
    [0.1 * 30, '3'],
    [1 / 3e6, '0.000000333333'],
    [0.012345678, '0.0123457'],
  ])('%d -> %s', (value, text) => {
    expect(formatNumber(value)).toBe(text);
  });
});

describe('calculator tool', () => {
  const run = (args: unknown) => runToolCall({ name: 'calculator', arguments: args }, [calculatorTool], { defaultTimeoutMs: 1000 });

  test('evaluates and formats', async () => {
    await expect(run({ expression: '37 * 4' })).resolves.toEqual({ ok: true, output: '148' });
    await expect(run({ expression: '10 / 4' })).resolves.toEqual({ ok: true, output: '2.5' });
  });

  test('arguments that break the schema are an error result naming the argument', async () => {
    await expect(run({ expr: '1 + 1' })).resolves.toEqual({
      ok: false,
      error: expect.stringMatching(/^invalid arguments for tool "calculator": expression: .*; \(arguments\): Unrecognized key: "expr"$/),
    });
    await expect(run({ expression: 5 })).resolves.toEqual({
      ok: false,
      error: expect.stringMatching(/^invalid arguments for tool "calculator": expression: /),
    });
    await expect(run({ expression: '1+'.repeat(100) + '1' })).resolves.toEqual({
      ok: false,
      error: expect.stringMatching(/^invalid arguments for tool "calculator": expression: Too big/),
    });
  });

  test('an expression it cannot evaluate is an error result with the reason', async () => {
    await expect(run({ expression: '1/0' })).resolves.toEqual({ ok: false, error: 'tool "calculator" failed: division by zero at offset 1' });
  });

  test('warm-up examples are random a-op-b calls that the tool evaluates', async () => {
    const expressions = Array.from({ length: 200 }, (_, seed) => calculatorTool.example!(createRng(seed)).expression);
    expect(calculatorTool.example!(createRng(3))).toEqual(calculatorTool.example!(createRng(3)));
    for (const expression of expressions) expect(expression).toMatch(/^\d{1,3} [-+*/] \d{1,3}$/);
    expect(new Set(expressions).size).toBeGreaterThan(190);
    expect(new Set(expressions.map((e) => e.split(' ')[1]))).toEqual(new Set(['+', '-', '*', '/']));
    for (const expression of expressions) await expect(run({ expression })).resolves.toMatchObject({ ok: true });
  });
});

describe('task generator', () => {
  const defaults: ArithmeticTaskSpec = { digits: 2, terms: 2, operators: ['+', '-', '*'] };

  test('a seed always gives the same task; seeds vary it', () => {
    expect(generateTask(42, defaults)).toEqual(generateTask(42, defaults));
    const tasks = Array.from({ length: 100 }, (_, seed) => generateTask(seed, defaults));
    expect(new Set(tasks.map((t) => t.expression)).size).toBeGreaterThan(90);
    for (const task of tasks) {
      expect(task.expression).toMatch(/^\d{2} [-+*] \d{2}$/);
      expect(task.prompt).toBe(`What is ${task.expression}?`);
    }
  });

  test.each<ArithmeticTaskSpec>([
    defaults,
    { digits: 1, terms: 3, operators: ['+', '-', '*', '/'] },
    { digits: 4, terms: 3, operators: ['*', '-'] },
    { digits: 3, terms: 3, operators: ['/'] },
    { digits: 2, terms: 3, operators: ['-', '/'] },
  ])('the reference is the exact integer value: %j', (spec) => {
    for (let seed = 0; seed < 300; seed++) {
      const task = generateTask(seed, spec);
      const operands = task.expression.split(' ').filter((_, i) => i % 2 === 0);
      expect(operands).toHaveLength(spec.terms);
      // Divisors may be shorter; every other operand has exactly `digits` digits.
      const ops = ['', ...task.expression.split(' ').filter((_, i) => i % 2 === 1)];
      operands.forEach((operand, i) => expect(ops[i] === '/' ? operand.length <= spec.digits : operand.length === spec.digits).toBe(true));
      expect(task.reference).toMatch(/^-?\d+$/);
      expect(task.reference).toBe(formatNumber(evaluateExpression(task.expression)));
    }
  });

  test('hand-built specs outside the limits are refused', () => {
    expect(() => generateTask(1, { ...defaults, digits: 5 })).toThrow('arithmetic: digits must be an integer from 1 to 4, got 5');
    expect(() => generateTask(1, { ...defaults, terms: 4 })).toThrow('arithmetic: terms must be 2 or 3, got 4');
    expect(() => generateTask(1, { ...defaults, operators: [] })).toThrow(/^arithmetic: operators must be a non-empty list/);
  });

  test('train and eval pools are disjoint, each on its side of the hash split', () => {
    const draw = (pool: 'train' | 'eval') => Array.from({ length: 300 }, (_, seed) => generateTask(seed, defaults, { share: 0.2, pool }).expression);
    const train = draw('train');
    const evaluation = draw('eval');
    expect(train.every((e) => !isHeldOutTask(e, 0.2))).toBe(true);
    expect(evaluation.every((e) => isHeldOutTask(e, 0.2))).toBe(true);
    const trainSet = new Set(train);
    expect(evaluation.filter((e) => trainSet.has(e))).toEqual([]);
    // Both sides still vary with the seed.
    expect(trainSet.size).toBeGreaterThan(250);
    expect(new Set(evaluation).size).toBeGreaterThan(200);
    // Roughly the asked share of all tasks is held out.
    const anyPool = Array.from({ length: 1000 }, (_, seed) => generateTask(seed, defaults).expression);
    const heldOut = anyPool.filter((e) => isHeldOutTask(e, 0.2)).length;
    expect(heldOut).toBeGreaterThan(140);
    expect(heldOut).toBeLessThan(260);
  });

  test('a pool with no task in reach is an error, not a hang', () => {
    // 1 + 1 .. 9 + 9: 81 tasks, none of them under a hash share this small.
    const tiny: ArithmeticTaskSpec = { digits: 1, terms: 2, operators: ['+'] };
    const share = 1e-9;
    expect(() => generateTask(0, tiny, { share, pool: 'eval' })).toThrow(/^arithmetic: no task in the eval pool \(held-out share 1e-9\) after 10000 draws/);
  });
});

describe('options', () => {
  const env = (options: Record<string, unknown> = {}): EnvConfig => EnvConfigSchema.parse({ name: 'arithmetic', ...options });

  test('defaults and label', () => {
    expect(ArithmeticOptionsSchema.parse({})).toEqual({
      digits: 2,
      terms: 2,
      operators: ['+', '-', '*'],
      tools: ['calculator'],
      reward: { name: 'numeric_match' },
      instructions: 'Compute the answer. Use the calculator tool.',
      heldOutShare: 0.2,
    });
    expect(describeEnvironment(env())).toBe('arithmetic-2d-2t');
    expect(describeEnvironment(env({ digits: 3, terms: 3 }))).toBe('arithmetic-3d-3t');
  });

  test('a bad reward spec fails config loading, with its path', () => {
    expect(() => validateEnvConfig(env({ reward: { name: 'nope' } }))).toThrow(OptionsError);
    expect(() => validateEnvConfig(env({ reward: { name: 'nope' } }))).toThrow(/^env\.reward: unknown reward "nope"; known rewards: /);
    expect(() => validateEnvConfig(env({ reward: { name: 'numeric_match', options: { absTol: -1 } } }))).toThrow(
      /^env\.reward: invalid options for reward "numeric_match": options\.absTol: /,
    );
    expect(() => validateEnvConfig(env({ reward: 'numeric_match' }))).toThrow(/^env\.reward: invalid reward spec: /);
    expect(validateEnvConfig(env({ reward: { name: 'exact_match' } }))).toMatchObject({ reward: { name: 'exact_match' } });
  });

  test('other bad options name their path', () => {
    expect(() => validateEnvConfig(env({ digits: 5 }))).toThrow(/^env\.digits: /);
    expect(() => validateEnvConfig(env({ operators: ['^'] }))).toThrow(/^env\.operators\[0\]: /);
    expect(() => validateEnvConfig(env({ tools: ['calculator', 'calculator'] }))).toThrow('env.tools: tool names must be unique');
    expect(() => validateEnvConfig(env({ digit: 2 }))).toThrow(/^env: Unrecognized key: "digit"/);
  });
});

describe('ToolAgent with the calculator', () => {
  const formats: ToolCallFormat[] = ['hermes', 'json', 'qwen3-coder', 'gemma4'];
  const envConfig = (options: Record<string, unknown> = {}): EnvConfig => EnvConfigSchema.parse({ name: 'arithmetic', ...options });
  const agentConfig = (format: ToolCallFormat): AgentConfig => ({ name: 'tool', maxTurns: 6, history: 'full', episodeTimeoutS: 600, format });

  async function open(format: ToolCallFormat, seed = 5, env = envConfig()) {
    const { episode, first } = await Episode.open({ env, agent: agentConfig(format), seed });
    const environment = episode.environment as ArithmeticEnvironment;
    const call = (name: string, args: unknown) => episode.respond(formatToolCall(format, { name, arguments: args }));
    return { episode, first, task: environment.task, call };
  }

  const toolMessages = (outcome: TurnOutcome) => {
    if (outcome.kind !== 'stepped' || outcome.done) throw new Error(`expected a tool turn, got ${JSON.stringify(outcome)}`);
    return outcome.next!.messages;
  };

  test.each(formats)('%s: call, read the result, answer right: reward 1', async (format) => {
    const { episode, first, task, call } = await open(format);
    expect(first.messages[0].role).toBe('system');
    expect(first.messages[0].content).toContain('Compute the answer. Use the calculator tool.');
    expect(first.messages[0].content).toContain('calculator(expression: string) - ');
    expect(first.messages[1]).toEqual({ role: 'user', content: task.prompt });

    const called = await call('calculator', { expression: task.expression });
    expect(called).toMatchObject({ kind: 'stepped', reward: 0, done: false, info: { toolCalls: 1, toolErrors: 0 } });
    expect(toolMessages(called)).toEqual([{ role: 'tool', content: task.reference }]);

    await expect(episode.respond(task.reference)).resolves.toMatchObject({ kind: 'stepped', reward: 1, done: true, info: { outcome: 'correct' } });
    expect(episode.agent.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant']);
    await episode.close();
  });

  test.each(formats)('%s: a wrong answer gets reward 0', async (format) => {
    const { episode, task } = await open(format, 11);
    const wrong = String(Number(task.reference) + 1);
    await expect(episode.respond(`The answer is ${wrong}`)).resolves.toMatchObject({ kind: 'stepped', reward: 0, done: true, info: { outcome: 'incorrect' } });
    await episode.close();
  });

  test.each<[ToolCallFormat, string, RegExp]>([
    ['hermes', '<tool_call>{"name": "calculator", "arguments": {</tool_call>', /^tool call 1: invalid JSON: /],
    ['hermes', '<tool_call>{"name": "calculator", "arguments": {"expression": "1+2"}}', /^tool call 1: unclosed <tool_call>/],
    ['json', '{"name": "calculator", "arguments": ', /^answer: invalid JSON: /],
    ['gemma4', '<|tool_call>call:calculator{expression:<|"|>1+2}<tool_call|>', /^tool call 1: unterminated <\|"\|> string/],
  ])('%s: a malformed call %j is an invalid turn with the error shown', async (format, text, error) => {
    const { episode, task, call } = await open(format);
    const outcome = await episode.respond(text);
    if (outcome.kind !== 'invalid') throw new Error(`expected an invalid turn, got ${JSON.stringify(outcome)}`);
    expect(outcome.error).toMatch(error);
    expect(outcome.next.messages).toEqual([{ role: 'user', content: `Could not read your tool call: ${outcome.error}` }]);
    // The episode goes on: a good call afterwards still works.
    expect(toolMessages(await call('calculator', { expression: task.expression }))).toEqual([{ role: 'tool', content: task.reference }]);
    await episode.close();
  });

  test.each(formats)('%s: unknown tools, bad arguments and failed evaluations are error results', async (format) => {
    const { episode, task, call } = await open(format);

    const unknown = await call('search', { query: 'x' });
    expect(unknown).toMatchObject({ info: { toolCalls: 1, toolErrors: 1 } });
    expect(toolMessages(unknown)).toEqual([{ role: 'tool', content: 'error: unknown tool "search"; known tools: calculator' }]);

    const [badArgs] = toolMessages(await call('calculator', { expression: 42 }));
    expect(badArgs.role).toBe('tool');
    expect(badArgs.content).toMatch(/^error: invalid arguments for tool "calculator": expression: /);

    expect(toolMessages(await call('calculator', { expression: '7 / (3 - 3)' }))).toEqual([
      { role: 'tool', content: 'error: tool "calculator" failed: division by zero at offset 2' },
    ]);

    await expect(episode.respond(task.reference)).resolves.toMatchObject({ reward: 1, done: true });
    await episode.close();
  });

  test('evaluation episodes draw held-out tasks, training ones never do', async () => {
    for (let seed = 0; seed < 20; seed++) {
      const { episode: evalEpisode } = await Episode.open({ env: envConfig(), agent: agentConfig('hermes'), seed, pool: 'eval' });
      const { episode: trainEpisode } = await Episode.open({ env: envConfig(), agent: agentConfig('hermes'), seed, pool: 'train' });
      expect(isHeldOutTask((evalEpisode.environment as ArithmeticEnvironment).task.expression, 0.2)).toBe(true);
      expect(isHeldOutTask((trainEpisode.environment as ArithmeticEnvironment).task.expression, 0.2)).toBe(false);
      await evalEpisode.close();
      await trainEpisode.close();
    }
  });

  describe('a reward that throws', () => {
    const name = 'test_arithmetic_throws';
    beforeAll(() =>
      registerReward(name, () => {
        throw new Error('boom');
      }),
    );

    test('the step rejects with RewardError, not a reward of 0', async () => {
      const options = ArithmeticOptionsSchema.parse({ reward: { name } });
      const environment = new ArithmeticEnvironment(options, { seed: 3, pool: 'train', tools: [calculatorTool] });
      const agent = new ToolAgent({ tools: environment.tools, format: 'hermes', instructions: options.instructions });
      agent.begin(await environment.reset());
      const parsed = agent.respond(environment.task.reference);
      if (!parsed.ok) throw new Error(parsed.error);
      const step = environment.step(parsed.action);
      await expect(step).rejects.toThrow(RewardError);
      await expect(step).rejects.toThrow(`reward "${name}" threw: boom`);
    });

    test('an episode fails with kind "reward"', async () => {
      const { episode, task } = await open('json', 3, envConfig({ reward: { name } }));
      const failure = episode.respond(task.reference);
      await expect(failure).rejects.toThrow(EpisodeError);
      await expect(failure).rejects.toMatchObject({ kind: 'reward', message: expect.stringContaining(`reward "${name}" threw: boom`) });
      await episode.close();
    });
  });
});
