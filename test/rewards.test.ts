import { z } from 'zod';
import { extractLastNumber } from '../src/rewards/builtins';
import { getReward, knownRewards, registerReward, scoreReward, validateRewardSpec } from '../src/rewards/registry';

const input = (answer: string, reference?: string) => ({ task: { id: 't1' }, answer, reference });

describe('exact_match', () => {
  test('trims and ignores case by default', async () => {
    await expect(scoreReward({ name: 'exact_match' }, input('  Paris\n', 'paris'))).resolves.toEqual({ ok: true, value: 1 });
    await expect(scoreReward({ name: 'exact_match' }, input('Paris, France', 'paris'))).resolves.toEqual({ ok: true, value: 0 });
  });

  test('both normalizations can be turned off', async () => {
    const strict = { name: 'exact_match', options: { trim: false, ignoreCase: false } };
    await expect(scoreReward(strict, input('Paris', 'paris'))).resolves.toEqual({ ok: true, value: 0 });
    await expect(scoreReward(strict, input(' Paris', 'Paris'))).resolves.toEqual({ ok: true, value: 0 });
    await expect(scoreReward(strict, input('Paris', 'Paris'))).resolves.toEqual({ ok: true, value: 1 });
  });

  test('a missing reference is an error, not a 0', async () => {
    await expect(scoreReward({ name: 'exact_match' }, input('Paris'))).resolves.toEqual({
      ok: false,
      error: 'reward "exact_match" threw: exact_match needs input.reference (the expected answer) as a string',
    });
  });
});

describe('numeric_match', () => {
  test('extractLastNumber', () => {
    expect(extractLastNumber('First 3 apples, then 1,234.5 of them')).toBe(1234.5);
    expect(extractLastNumber('The answer is -7.')).toBe(-7);
    expect(extractLastNumber('from 3-4 people')).toBe(4);
    expect(extractLastNumber('about 3/4 of it')).toBe(0.75);
    expect(extractLastNumber('about 3 / 4', { fractions: false })).toBe(4);
    expect(extractLastNumber('1e-3')).toBe(0.001);
    expect(extractLastNumber('.5 or 0.25')).toBe(0.25);
    expect(extractLastNumber('lists 1,2,3')).toBe(3);
    expect(extractLastNumber('H2O is water')).toBeUndefined();
    expect(extractLastNumber('no numbers')).toBeUndefined();
    expect(extractLastNumber('1/0')).toBeUndefined();
  });

  test('compares the last number of the answer with the reference', async () => {
    await expect(scoreReward({ name: 'numeric_match' }, input('So 12 + 30 = 42.', '42'))).resolves.toEqual({ ok: true, value: 1 });
    await expect(scoreReward({ name: 'numeric_match' }, input('I think 42, no, 43', '42'))).resolves.toEqual({ ok: true, value: 0 });
    await expect(scoreReward({ name: 'numeric_match' }, input('It is 1,000,000', '1000000'))).resolves.toEqual({ ok: true, value: 1 });
    await expect(scoreReward({ name: 'numeric_match' }, input('0.75', '3/4'))).resolves.toEqual({ ok: true, value: 1 });
    await expect(scoreReward({ name: 'numeric_match' }, input('no idea', '3'))).resolves.toEqual({ ok: true, value: 0 });
  });

  test('absolute and relative tolerances', async () => {
    await expect(scoreReward({ name: 'numeric_match', options: { absTol: 0.01 } }, input('3.14', '3.14159'))).resolves.toEqual({ ok: true, value: 1 });
    await expect(scoreReward({ name: 'numeric_match', options: { absTol: 0.001 } }, input('3.14', '3.14159'))).resolves.toEqual({ ok: true, value: 0 });
    await expect(scoreReward({ name: 'numeric_match', options: { relTol: 0.01 } }, input('995', '1000'))).resolves.toEqual({ ok: true, value: 1 });
    await expect(scoreReward({ name: 'numeric_match', options: { relTol: 0.001 } }, input('995', '1000'))).resolves.toEqual({ ok: true, value: 0 });
    await expect(scoreReward({ name: 'numeric_match' }, input('0.30000000000000004', '0.3'))).resolves.toEqual({ ok: true, value: 1 });
  });

  test('a reference without a number and bad options are errors', async () => {
    await expect(scoreReward({ name: 'numeric_match' }, input('3', 'three'))).resolves.toMatchObject({
      ok: false,
      error: expect.stringMatching(/holds no number/),
    });
    await expect(scoreReward({ name: 'numeric_match', options: { absTol: -1 } }, input('3', '3'))).resolves.toMatchObject({
      ok: false,
      error: expect.stringMatching(/^invalid options for reward "numeric_match": options\.absTol: /),
    });
    await expect(scoreReward({ name: 'numeric_match', options: { tolerance: 1 } }, input('3', '3'))).resolves.toMatchObject({ ok: false });
  });
});

describe('format', () => {
  test('1 when the pattern is found, else 0', async () => {
    const spec = { name: 'format', options: { pattern: '^Action: (left|right)$', flags: 'i' } };
    await expect(scoreReward(spec, input('action: LEFT'))).resolves.toEqual({ ok: true, value: 1 });
    await expect(scoreReward(spec, input('I go left'))).resolves.toEqual({ ok: true, value: 0 });
  });

  test('an invalid pattern or a missing one is a spec error', async () => {
    const bad = await scoreReward({ name: 'format', options: { pattern: '(' } }, input('x'));
    expect(bad).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^invalid options for reward "format": options\.pattern: Invalid regular expression/),
    });
    await expect(scoreReward({ name: 'format' }, input('x'))).resolves.toMatchObject({
      ok: false,
      error: expect.stringMatching(/invalid options for reward "format"/),
    });
  });
});

describe('weighted', () => {
  test('sums weight × value and reports each part', async () => {
    const spec = {
      name: 'weighted',
      parts: [
        { name: 'numeric_match', weight: 1 },
        { name: 'format', weight: 0.2, options: { pattern: 'Answer: ' } },
      ],
    };
    await expect(scoreReward(spec, input('Answer: 42', '42'))).resolves.toEqual({
      ok: true,
      value: 1.2,
      parts: [
        { name: 'numeric_match', weight: 1, value: 1 },
        { name: 'format', weight: 0.2, value: 1 },
      ],
    });
    await expect(scoreReward(spec, input('42', '42'))).resolves.toMatchObject({ ok: true, value: 1 });
  });

  test('a failing part fails the whole score', async () => {
    const spec = {
      name: 'weighted',
      parts: [
        { name: 'format', weight: 1, options: { pattern: 'x' } },
        { name: 'exact_match', weight: 1 },
      ],
    };
    await expect(scoreReward(spec, input('x'))).resolves.toEqual({
      ok: false,
      error: 'weighted part 2 (exact_match): reward "exact_match" threw: exact_match needs input.reference (the expected answer) as a string',
    });
  });

  test('spec errors: unknown part, nesting, empty parts, missing weight', () => {
    expect(validateRewardSpec({ name: 'weighted', parts: [{ name: 'nope', weight: 1 }] })).toEqual({
      ok: false,
      error: `weighted part 1 (nope): unknown reward "nope"; known rewards: ${knownRewards().join(', ')}`,
    });
    expect(validateRewardSpec({ name: 'weighted', parts: [{ name: 'weighted', weight: 1 }] })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/cannot be nested/),
    });
    expect(validateRewardSpec({ name: 'weighted', parts: [] })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^invalid weighted reward spec: parts: /),
    });
    expect(validateRewardSpec({ name: 'weighted', parts: [{ name: 'format' }] })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/parts\[0\]\.weight: /),
    });
  });
});

describe('registry', () => {
  test('unknown names list the known rewards', async () => {
    expect(() => getReward('bleu')).toThrow(/^unknown reward "bleu"; known rewards: exact_match, numeric_match, format, .*weighted$/);
    await expect(scoreReward({ name: 'bleu' }, input('x'))).resolves.toMatchObject({ ok: false, error: expect.stringMatching(/^unknown reward "bleu"/) });
    await expect(scoreReward('exact_match', input('x'))).resolves.toMatchObject({ ok: false, error: expect.stringMatching(/^invalid reward spec: /) });
  });

  test('custom rewards, sync and async, with and without options', async () => {
    registerReward('length', (i) => i.answer.length);
    registerReward('contains', async (i, { word }) => (i.answer.includes(word) ? 1 : 0), z.strictObject({ word: z.string() }));
    await expect(scoreReward({ name: 'length' }, input('abcd'))).resolves.toEqual({ ok: true, value: 4 });
    await expect(scoreReward({ name: 'contains', options: { word: 'cd' } }, input('abcd'))).resolves.toEqual({ ok: true, value: 1 });
    await expect(scoreReward({ name: 'length', options: { x: 1 } }, input('abcd'))).resolves.toMatchObject({
      ok: false,
      error: expect.stringMatching(/^invalid options for reward "length": options: /),
    });
    expect(() => registerReward('length', () => 0)).toThrow(/taken/);
    expect(() => registerReward('weighted', () => 0)).toThrow(/taken/);
  });

  test('a reward that throws, sync or async, is an error, never a silent 0', async () => {
    registerReward('sync_throw', () => {
      throw new Error('judge crashed');
    });
    registerReward('async_throw', async () => {
      await new Promise((r) => setTimeout(r, 5));
      throw new Error('judge timed out');
    });
    registerReward('not_a_number', () => NaN);
    await expect(scoreReward({ name: 'sync_throw' }, input('x'))).resolves.toEqual({ ok: false, error: 'reward "sync_throw" threw: judge crashed' });
    await expect(scoreReward({ name: 'async_throw' }, input('x'))).resolves.toEqual({ ok: false, error: 'reward "async_throw" threw: judge timed out' });
    await expect(scoreReward({ name: 'not_a_number' }, input('x'))).resolves.toEqual({
      ok: false,
      error: 'reward "not_a_number" returned NaN, not a finite number',
    });
    await expect(
      scoreReward(
        {
          name: 'weighted',
          parts: [
            { name: 'length', weight: 1 },
            { name: 'async_throw', weight: 0 },
          ],
        },
        input('x'),
      ),
    ).resolves.toEqual({ ok: false, error: 'weighted part 2 (async_throw): reward "async_throw" threw: judge timed out' });
  });
});
