/**
 * An environment that hides a whole number and answers each guess with "Higher.", "Lower." or
 * "Right!", and an agent that reads the model's answer as a guess. `modules:` in guess.yaml loads
 * this file; trajflow calls its `register(trajflow)` once per process.
 */
const { z } = require('zod');
const { BaseEnvironment, ConversationalAgent } = require('trajflow');

class GuessNumber extends BaseEnvironment {
  constructor(secret) {
    super();
    this.secret = secret;
  }
  reset() {
    return 'Guess my number.';
  }
  step(guess) {
    const done = guess === this.secret;
    const observation = done ? 'Right!' : guess < this.secret ? 'Higher.' : 'Lower.';
    return { observation, reward: done ? 1 : 0, done, info: {} };
  }
}

class Guesser extends ConversationalAgent {
  systemPrompt() {
    return 'Answer with a number only.';
  }
  observationMessages(text) {
    return [{ role: 'user', content: text }];
  }
  parseResponse(text) {
    const n = Number(text.trim());
    return Number.isInteger(n) ? { ok: true, action: n } : { ok: false, error: 'not a whole number' };
  }
  // Optional: a well-formed answer (not a solution) for trainer.formatWarmupSteps.
  formatExample(_observation, rng) {
    return String(1 + Math.floor(rng() * 20));
  }
}

function register(trajflow) {
  trajflow.registerEnvironment('guess-number', {
    options: z.strictObject({ max: z.number().int().positive().default(20) }),
    // Same seed, same episode: a lost session is rebuilt by replaying the model's answers.
    create: (options, { seed }) => new GuessNumber(1 + (seed % options.max)),
  });
  trajflow.registerAgent('guesser', { options: z.strictObject({}), create: (_options, { history }) => new Guesser(history) });
}

module.exports = { register };
