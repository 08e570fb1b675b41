/**
 * A plugin module defined only for tests, loaded by path from a config's `modules:` like a user's
 * would be: a custom environment and agent, and environments, a reward and a tool that misbehave
 * on purpose for the bad-input tests.
 */
import { z } from 'zod';
import { ConversationalAgent, type ParsedAction } from '../../../src/agents/agent';
import type { ChatMessage } from '../../../src/core/tokenizer';
import { createRng } from '../../../src/core/random';
import { BaseEnvironment, type StepResult } from '../../../src/envs/environment';
import { scoreAnswer } from '../../../src/envs/taskEnvironment';
import type { PluginApi } from '../../../src/plugins/registry';
import { runToolCall, type Tool } from '../../../src/tools/tool';

const WORDS = ['amber', 'birch', 'cedar', 'delta', 'ember'];

/** Asks the model to say a seeded word; reward 1 if the answer contains it. */
class SayTheWord extends BaseEnvironment<string, string> {
  readonly word: string;
  constructor(seed: number) {
    super();
    this.word = WORDS[Math.floor(createRng(seed)() * WORDS.length)];
  }
  reset(): string {
    return this.word;
  }
  step(answer: string): StepResult<string> {
    return { observation: this.word, reward: answer.includes(this.word) ? 1 : 0, done: true, info: { outcome: 'answered' } };
  }
}

/** Takes any answer, even an empty one, as its action. */
class VerbatimAgent extends ConversationalAgent<unknown, string> {
  systemPrompt(): string {
    return 'Say the word.';
  }
  observationMessages(observation: unknown): ChatMessage[] {
    return [{ role: 'user', content: String(observation) }];
  }
  parseResponse(text: string): ParsedAction<string> {
    return { ok: true, action: text };
  }
}

const hangingTool: Tool = {
  name: 'test-hangs',
  description: 'Never returns.',
  input: z.strictObject({}),
  timeoutMs: 300,
  run: () => new Promise<string>(() => undefined),
};

/** A 3 MiB text, over Temporal's 2 MiB limit on one payload. */
export const HUGE_TEXT = '0123456789abcdef'.repeat(3 * 65536);

const faultyOptions = z.strictObject({
  /**
   * Where it fails: `reset` or `step` throw, `slow-step` sleeps, `reward` scores with a throwing
   * reward, `tool` calls a hanging tool, `penalty` charges a negative penalty, `price` prices an
   * action below 0, `huge-observation` observes HUGE_TEXT from reset on, `huge-info` and
   * `bigint-info` return a step info of HUGE_TEXT and of a BigInt (which JSON cannot write).
   */
  fault: z.enum(['reset', 'step', 'slow-step', 'reward', 'tool', 'penalty', 'price', 'huge-observation', 'huge-info', 'bigint-info']),
  /** The step (0-based) at which a step fault strikes; earlier steps succeed. */
  atStep: z.number().int().nonnegative().default(0),
  slowStepMs: z.number().int().nonnegative().default(3000),
  maxSteps: z.number().int().positive().default(3),
});

/** An environment that misbehaves as configured, after `atStep` good steps. */
class FaultyEnvironment extends BaseEnvironment<string, string> {
  private steps = 0;
  constructor(private readonly options: z.output<typeof faultyOptions>) {
    super();
  }
  reset(): string {
    if (this.options.fault === 'reset') throw new Error('the map file is missing');
    return this.options.fault === 'huge-observation' ? HUGE_TEXT : 'go';
  }
  async step(answer: string): Promise<StepResult<string>> {
    const step = this.steps++;
    const done = this.steps >= this.options.maxSteps;
    const result = (observation: string, reward = 0): StepResult<string> => ({ observation, reward, done, info: { outcome: 'stepped', truncated: done } });
    if (step < this.options.atStep) return result(`step ${step} ok`);
    switch (this.options.fault) {
      case 'step':
        throw new Error(`the simulator crashed at step ${step}`);
      case 'slow-step':
        await new Promise((resolve) => setTimeout(resolve, this.options.slowStepMs));
        return result('slow');
      case 'reward':
        return result('scored', await scoreAnswer({ name: 'test-throws' }, { prompt: 'go' }, answer));
      case 'penalty':
        return { ...result('charged'), penalty: -1 };
      case 'price':
        return { ...result('priced'), actionPenalties: [0, -1] };
      case 'huge-observation':
        return result(HUGE_TEXT);
      case 'huge-info':
        return { ...result('dumped'), info: { outcome: 'stepped', dump: HUGE_TEXT } };
      case 'bigint-info':
        return { ...result('counted'), info: { outcome: 'stepped', count: BigInt(step) } };
      case 'tool': {
        const outcome = await runToolCall({ name: 'test-hangs', arguments: {} }, [hangingTool], { defaultTimeoutMs: 10_000 });
        return result(outcome.ok ? outcome.output : outcome.error);
      }
      default:
        return result('ok');
    }
  }
}

const longTalkOptions = z.strictObject({
  /** Characters per observation. */
  observationChars: z.number().int().positive().default(1500),
  /** Steps before the episode is truncated. */
  steps: z.number().int().positive().default(24),
});

/** Long observations for many steps: a trajectory of tens of thousands of tokens. */
class LongTalk extends BaseEnvironment<string, string> {
  private step_ = 0;
  constructor(private readonly options: z.output<typeof longTalkOptions>) {
    super();
  }
  private observation(): string {
    const line = `Step ${this.step_}: the quick brown fox jumps over the lazy dog. `;
    return line.repeat(Math.ceil(this.options.observationChars / line.length)).slice(0, this.options.observationChars);
  }
  reset(): string {
    return this.observation();
  }
  step(): StepResult<string> {
    this.step_++;
    const done = this.step_ >= this.options.steps;
    return { observation: this.observation(), reward: 0, done, info: { outcome: 'talked', truncated: done } };
  }
}

export function register(trajflow: PluginApi): void {
  trajflow.registerEnvironment('long-talk', { options: longTalkOptions, create: (options) => new LongTalk(options) });
  trajflow.registerEnvironment('say-the-word', {
    options: z.strictObject({}),
    create: (_options, { seed }) => new SayTheWord(seed),
    describe: () => 'say-the-word (test plugin)',
  });
  trajflow.registerAgent('verbatim', {
    options: z.strictObject({}),
    create: (_options, { history }) => new VerbatimAgent(history),
  });
  trajflow.registerEnvironment('faulty', { options: faultyOptions, create: (options) => new FaultyEnvironment(options) });
  trajflow.registerReward('test-throws', () => {
    throw new Error('the grading service is down');
  });
  trajflow.registerTool(hangingTool);
}
