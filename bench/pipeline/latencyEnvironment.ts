/**
 * BENCH-ONLY STAND-IN for an agentic environment (never used by rollouts or tests other than the
 * bench's own smoke test), registered in this process's plugin registry like a user's plugin:
 *
 *   - every step really waits (a timer, no CPU) a lognormal time with the configured median and
 *     p99/p50 ratio, as tool calls, sandboxes and web requests do: mostly quick, sometimes very slow;
 *   - the episode lasts 1..maxSteps steps, drawn from the prompt's seed and the model's first
 *     answer, so the trajectories of one group differ in length;
 *   - the last step pays a reward in [0, 1) drawn from the seed and the answers, so the rewards of
 *     a group differ (GRPO advantages are not all zero).
 *
 * Everything is a function of the seed and the answers, so a rebuilt session replays the same
 * episode, as the plugin contract asks. Its agent takes any answer as the action.
 */
import { z } from 'zod';
import { ConversationalAgent, type ParsedAction } from '../../src/agents/agent';
import { createRng, hashString } from '../../src/core/random';
import type { ChatMessage } from '../../src/core/tokenizer';
import { BaseEnvironment, type StepResult } from '../../src/envs/environment';
import { pluginApi } from '../../src/plugins/registry';
import { lognormalMs, sigmaForTail } from './lognormal';

export const LATENCY_ENV = 'bench-heavy-tail';
export const ANY_ANSWER_AGENT = 'bench-any-answer';

const LatencyEnvOptions = z.strictObject({
  medianMs: z.number().nonnegative().default(40),
  p99OverP50: z.number().min(1).default(20),
  maxSteps: z.number().int().positive().default(8),
});
type LatencyEnvOptions = z.output<typeof LatencyEnvOptions>;

class HeavyTailLatencyEnvironment extends BaseEnvironment<string, string> {
  private steps = 0;
  private length = 0;
  private readonly sigma: number;

  constructor(
    private readonly options: LatencyEnvOptions,
    private readonly seed: number,
  ) {
    super();
    this.sigma = sigmaForTail(options.p99OverP50);
  }

  reset(): string {
    return `task ${this.seed % 1000}: step 0`;
  }

  async step(answer: string): Promise<StepResult<string>> {
    const rng = createRng(hashString(`${this.seed}/${this.steps}/${answer}`));
    await new Promise((resolve) => setTimeout(resolve, lognormalMs(this.options.medianMs, this.sigma, rng)));
    if (this.steps === 0) this.length = 1 + Math.floor(rng() * this.options.maxSteps);
    this.steps++;
    const done = this.steps >= this.length;
    return { observation: `step ${this.steps}`, reward: done ? Math.round(rng() * 100) / 100 : 0, done, info: { outcome: done ? 'finished' : 'stepped' } };
  }
}

class AnyAnswerAgent extends ConversationalAgent<string, string> {
  systemPrompt(): string {
    return 'Act.';
  }
  observationMessages(observation: string): ChatMessage[] {
    return [{ role: 'user', content: observation }];
  }
  parseResponse(text: string): ParsedAction<string> {
    return { ok: true, action: text };
  }
}

let registered = false;

/** Registers the stand-in environment and agent in this process (once). */
export function registerLatencyEnvironment(): void {
  if (registered) return;
  registered = true;
  pluginApi.registerEnvironment(LATENCY_ENV, {
    options: LatencyEnvOptions,
    create: (options, { seed }) => new HeavyTailLatencyEnvironment(options, seed),
    describe: (options) => `${LATENCY_ENV}-p50-${options.medianMs}ms-x${options.p99OverP50}`,
  });
  pluginApi.registerAgent(ANY_ANSWER_AGENT, { options: z.strictObject({}), create: (_options, { history }) => new AnyAnswerAgent(history) });
}
