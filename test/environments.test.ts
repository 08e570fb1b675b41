/**
 * The environment building blocks of the public API, driven as the env worker drives them (an
 * Episode: agent + environment): a single-turn TaskEnvironment with ModelAgent, and the adapter for
 * Gymnasium-style environments.
 */
import { z } from 'zod';
import { ConversationalAgent, type ParsedAction } from '../src/agents/agent';
import { ModelAgent } from '../src/agents/modelAgent';
import type { ChatMessage } from '../src/core/tokenizer';
import { GymnasiumAdapter, type GymnasiumLike } from '../src/envs/gymnasium';
import { RewardError, TaskEnvironment } from '../src/envs/taskEnvironment';

describe('TaskEnvironment with ModelAgent', () => {
  const task = { prompt: 'Capital of France?', reference: 'Paris' };

  it('shows the task, scores the whole answer with a registered reward, and ends', async () => {
    const env = new TaskEnvironment(task, { name: 'exact_match' });
    const agent = new ModelAgent('Answer in one word.');
    const first = agent.begin(await env.reset());
    expect(first).toEqual({
      messages: [
        { role: 'system', content: 'Answer in one word.' },
        { role: 'user', content: 'Capital of France?' },
      ],
      freshContext: true,
    });
    const parsed = agent.respond(' paris ');
    expect(parsed).toEqual({ ok: true, action: 'paris' });
    const step = await env.step(parsed.ok ? parsed.action : '');
    expect(step).toMatchObject({ reward: 1, done: true, info: { outcome: 'correct' } });
    expect((await new TaskEnvironment(task, { name: 'exact_match' }).step('Lyon')).reward).toBe(0);
    expect(agent.respond('   ')).toEqual({ ok: false, error: 'empty answer' });
    expect(agent.messages.filter((m) => m.role === 'assistant')).toHaveLength(2);
  });

  it('scores with a function too, and a failing scorer raises RewardError instead of scoring 0', async () => {
    expect((await new TaskEnvironment(task, (t, answer) => (answer.length <= t.reference.length ? 0.5 : 0)).step('Paris')).reward).toBe(0.5);
    await expect(new TaskEnvironment(task, () => Number.NaN).step('Paris')).rejects.toThrow(RewardError);
    await expect(
      new TaskEnvironment(task, () => {
        throw new Error('judge unreachable');
      }).step('Paris'),
    ).rejects.toThrow(/reward function threw: judge unreachable/);
    await expect(new TaskEnvironment(task, { name: 'numeric_match' }).step('3')).rejects.toThrow(/holds no number/);
  });
});

/** A corridor: walk right from 0 to `length`; truncated after `limit` steps. Seeded start. */
class Corridor implements GymnasiumLike<number, 'left' | 'right'> {
  private position = 0;
  private steps = 0;
  closed = false;
  constructor(
    private readonly length: number,
    private readonly limit: number,
  ) {}
  reset(options?: { seed?: number }): [number, Record<string, unknown>] {
    this.position = (options?.seed ?? 0) % 2;
    this.steps = 0;
    return [this.position, {}];
  }
  async step(action: 'left' | 'right'): Promise<[number, number, boolean, boolean, Record<string, unknown>]> {
    this.position = Math.max(0, this.position + (action === 'right' ? 1 : -1));
    this.steps++;
    const terminated = this.position >= this.length;
    return [this.position, terminated ? 1 : 0, terminated, !terminated && this.steps >= this.limit, { steps: this.steps }];
  }
  close(): void {
    this.closed = true;
  }
}

class CorridorAgent extends ConversationalAgent<number, 'left' | 'right'> {
  systemPrompt(): string {
    return 'Reach the end: answer left or right.';
  }
  observationMessages(position: number): ChatMessage[] {
    return [{ role: 'user', content: `at ${position}` }];
  }
  parseResponse(text: string): ParsedAction<'left' | 'right'> {
    const move = z.enum(['left', 'right']).safeParse(text.trim());
    return move.success ? { ok: true, action: move.data } : { ok: false, error: 'say left or right' };
  }
}

describe('GymnasiumAdapter', () => {
  it('passes the seed to reset and maps terminated/truncated onto done and info', async () => {
    const corridor = new Corridor(3, 4);
    const env = new GymnasiumAdapter(corridor, 1);
    expect(await env.reset()).toBe(1);
    expect(await env.step('right')).toEqual({ observation: 2, reward: 0, done: false, info: { steps: 1, truncated: false, outcome: 'running' } });
    expect(await env.step('right')).toEqual({ observation: 3, reward: 1, done: true, info: { steps: 2, truncated: false, outcome: 'terminated' } });
    expect(await env.reset()).toBe(1);
    for (let i = 0; i < 3; i++) await env.step('left');
    expect(await env.step('left')).toMatchObject({ done: true, info: { truncated: true, outcome: 'truncated' } });
    await env.close();
    expect(corridor.closed).toBe(true);
  });

  it('plays with a conversational agent, including an answer that does not parse', async () => {
    const env = new GymnasiumAdapter(new Corridor(2, 10), 0);
    const agent = new CorridorAgent('full');
    agent.begin(await env.reset());
    const invalid = agent.respond('forward');
    expect(invalid).toEqual({ ok: false, error: 'say left or right' });
    expect(agent.afterInvalidResponse(0, 'say left or right').messages).toEqual([{ role: 'user', content: 'Invalid answer (say left or right).' }]);
    let done = false;
    while (!done) {
      const parsed = agent.respond('right');
      const step = await env.step(parsed.ok ? parsed.action : 'left');
      done = step.done;
      if (!done) expect(agent.afterStep(step.observation)).toEqual({ messages: [{ role: 'user', content: `at ${step.observation}` }], freshContext: false });
    }
    expect(agent.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user', 'assistant', 'user', 'assistant']);
  });

  it('without history, each turn is a fresh context of system prompt and observation', () => {
    const agent = new CorridorAgent('none');
    agent.begin(0);
    expect(agent.afterStep(1)).toEqual({
      messages: [
        { role: 'system', content: 'Reach the end: answer left or right.' },
        { role: 'user', content: 'at 1' },
      ],
      freshContext: true,
    });
    expect(agent.afterInvalidResponse(1, 'x').freshContext).toBe(true);
  });
});
