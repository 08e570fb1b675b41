/**
 * A turn's text held to agent.maxTurnTextBytes, with hand-made numbers. The note is
 * `\n[cut: the last C of T bytes are not shown (agent.maxTurnTextBytes)]`: 66 bytes plus the
 * digits of C and T.
 */
import { checkMessages, cutNote, cutText, fairShare, fitTurnText } from '../src/agents/turnText';
import type { ChatMessage } from '../src/core/tokenizer';
import { parseRunConfig } from '../src/runConfig';

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

describe('fairShare', () => {
  it('is unbounded when everything fits', () => {
    expect(fairShare([10, 20], 100)).toBe(Infinity);
    expect(fairShare([50, 50], 100)).toBe(Infinity);
  });

  it('lets short messages keep all their text and splits the rest equally among the long ones', () => {
    // 10 fits a third of 100; the two long ones share the remaining 90.
    expect(fairShare([200, 10, 300], 100)).toBe(45);
    expect(fairShare([60, 60], 100)).toBe(50);
    expect(fairShare([3_145_728], 65_536)).toBe(65_536);
  });
});

describe('cutText', () => {
  it('keeps the start and says how much of the whole is not shown', () => {
    expect(bytes(cutNote(1000, 1000))).toBe(74);
    // 297 - 74 = 223 bytes kept; the note for the 777 bytes cut is one digit shorter (73).
    const cut = cutText('x'.repeat(1000), 297);
    expect(cut).toBe(`${'x'.repeat(223)}\n[cut: the last 777 of 1000 bytes are not shown (agent.maxTurnTextBytes)]`);
    expect(bytes(cut)).toBe(296);
  });

  it('never splits a character', () => {
    // 'ü' is 2 bytes: 101 - 72 = 29 bytes would end inside the 15th; 14 characters are kept.
    expect(cutText('ü'.repeat(100), 101)).toBe(`${'ü'.repeat(14)}${cutNote(172, 200)}`);
  });

  it('keeps only the note when the share is smaller than the note', () => {
    expect(cutText('x'.repeat(1000), 10)).toBe(cutNote(1000, 1000));
  });
});

describe('fitTurnText', () => {
  it('leaves a turn within the budget as it is', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'abc' },
      { role: 'user', content: 'x'.repeat(97) },
    ];
    expect(fitTurnText(messages, 100)).toEqual(messages);
  });

  it('cuts a 3 MiB observation to the budget, the system prompt kept whole', () => {
    const [system, user] = fitTurnText(
      [
        { role: 'system', content: 'abc' },
        { role: 'user', content: 'x'.repeat(3 * 1024 * 1024) },
      ],
      300,
    );
    expect(system).toEqual({ role: 'system', content: 'abc' });
    // Share 297; the note for 3,145,728 of 3,145,728 bytes is 80 bytes, so 217 are kept.
    expect(user).toEqual({ role: 'user', content: `${'x'.repeat(217)}${cutNote(3_145_511, 3_145_728)}` });
    expect(bytes(user.content)).toBe(297);
  });

  it('gives each long tool result the same share', () => {
    const fitted = fitTurnText(
      [
        { role: 'tool', content: 'a'.repeat(50) },
        { role: 'tool', content: 'b'.repeat(1000) },
        { role: 'tool', content: 'c'.repeat(1000) },
      ],
      450,
    );
    // 50 fits; the other two share 400: 200 each, of which the note takes 74, then 73.
    expect(fitted.map((m) => bytes(m.content))).toEqual([50, 199, 199]);
    expect(fitted[1].content).toBe(`${'b'.repeat(126)}${cutNote(874, 1000)}`);
  });
});

describe('checkMessages', () => {
  it('accepts chat messages and names what is wrong with anything else', () => {
    expect(() => checkMessages([{ role: 'tool', content: '' }])).not.toThrow();
    expect(() => checkMessages('hello')).toThrow("the next turn's messages are not a list (string)");
    expect(() =>
      checkMessages([
        { role: 'user', content: 'ok' },
        { role: 'user', content: { text: 'hi' } },
      ]),
    ).toThrow('message 1: content is object, not text');
    expect(() => checkMessages([{ role: 'robot', content: 'hi' }])).toThrow('message 0: role "robot" is none of system, user, assistant, tool');
    expect(() => checkMessages([null])).toThrow('message 0: role undefined is none of');
  });
});

describe('agent.maxTurnTextBytes', () => {
  it('is an agent option every agent takes, within 256 bytes .. 512 KiB', () => {
    expect(parseRunConfig({ env: { name: 'frozenlake' }, agent: { maxTurnTextBytes: 4096 } }).agent.maxTurnTextBytes).toBe(4096);
    expect(parseRunConfig({ env: { name: 'arithmetic' }, agent: { name: 'tool', maxTurnTextBytes: 4096 } }).agent.maxTurnTextBytes).toBe(4096);
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, agent: { maxTurnTextBytes: 100 } })).toThrow(/agent\.maxTurnTextBytes/);
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, agent: { maxTurnTextBytes: 1024 * 1024 } })).toThrow(/agent\.maxTurnTextBytes/);
  });
});
