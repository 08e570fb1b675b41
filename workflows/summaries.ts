/**
 * The one-line summaries the Web UI shows on each activity and timer of trajflow's workflows, in
 * place of a bare activity name: `generate turn 3 (v12)`, `env step 3: "right"`, `train step 7 ...`.
 * Built from workflow state only (what the workflow already holds when it schedules the call), so
 * replay rebuilds them unchanged. Pure: the unit test checks the strings.
 */
import type { TrajectoryStatus } from '../src/core/records';

/**
 * Temporal refuses a summary whose payload (the JSON string) is over 400 bytes; a cap in bytes of
 * UTF-8 well under it leaves room for the quotes and escapes.
 */
const SUMMARY_BYTES = 300;

const utf8 = new TextEncoder();

/**
 * `text` on one line (runs of whitespace become one space), cut in the middle with `…` to at most
 * `maxChars` characters: the start says what it is, the end is where an answer's action usually is.
 */
export function clipMiddle(text: string, maxChars: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  const chars = Array.from(line);
  if (chars.length <= maxChars) return line;
  const head = Math.ceil((maxChars - 1) / 2);
  const tail = maxChars - 1 - head;
  return `${chars.slice(0, head).join('')}…${tail > 0 ? chars.slice(-tail).join('') : ''}`;
}

/** A summary that Temporal accepts whatever text went into it: one line, at most SUMMARY_BYTES. */
export function summary(text: string): string {
  let line = clipMiddle(text, SUMMARY_BYTES);
  for (let max = SUMMARY_BYTES; utf8.encode(JSON.stringify(line)).length > SUMMARY_BYTES; max = Math.floor(max * 0.8)) line = clipMiddle(text, max);
  return line;
}

/** Characters of a model answer quoted in a summary. */
const ANSWER_CHARS = 80;

/** The policy a turn samples with: exactly `v`, or `v` or newer (turn-level weight sync). */
export interface TurnPolicy {
  minVersion: number;
  followLatest: boolean;
}

export const activitySummary = {
  generate: (turn: number, policy?: TurnPolicy) => summary(`generate turn ${turn}${policy ? ` (v${policy.minVersion}${policy.followLatest ? '+' : ''})` : ''}`),
  /** The answer is known here: the session turn is scheduled after `generate` returned it. */
  sessionTurn: (turn: number, answer: string) => summary(`session turn ${turn}: "${clipMiddle(answer, ANSWER_CHARS)}"`),
  openSession: (envSeed: number, replayedAnswers: number) =>
    summary(replayedAnswers > 0 ? `rebuild session: replay ${plural(replayedAnswers, 'answer')} (env seed ${envSeed})` : `open session (env seed ${envSeed})`),
  closeSession: (turns: number) => summary(`close session after ${plural(turns, 'turn')}`),
  computeReward: (envReturn: number, turns: number, invalidAnswers: number) =>
    summary(`reward: env return ${round(envReturn)}, ${plural(turns, 'turn')}, ${plural(invalidAnswers, 'unparseable answer')}`),
  recordTrajectory: (status: TrajectoryStatus, reward: number) => summary(`record trajectory: ${status}, reward ${round(reward)}`),
  recordGroup: (groupIndex: number, completed: number, failed: number, rewardMean: number) =>
    summary(
      `record group ${groupIndex}: ${plural(completed, 'trajectory', 'trajectories')}${failed > 0 ? ` (+${failed} failed)` : ''}, mean reward ${round(rewardMean)}`,
    ),
  preparePolicy: (formatWarmupSteps: number) =>
    summary(`prepare policy v0${formatWarmupSteps > 0 ? ` (${formatWarmupSteps} format warm-up steps)` : ''}, or resume from the last checkpoint`),
  trainStep: (step: number, baseVersion: number, groups: number) =>
    summary(`train step ${step}: ${plural(groups, 'group')}, v${baseVersion} -> v${baseVersion + 1}`),
  evaluate: (version: number, episodes: number) => summary(`evaluate v${version}: ${episodes} held-out episodes`),
  agentCalls: (agent: string) => summary(`read the model calls of ${agent}`),
};

export const timerSummary = {
  episodeDeadline: (seconds: number) => summary(`episode deadline: ${seconds} s (agent.episodeTimeoutS)`),
  askAgain: (after: string, what: string) => summary(`ask again in ${after} for a worker matching this run (${what})`),
};

/** `count` and its noun, singular or plural. */
export function plural(count: number, one: string, many = `${one}s`): string {
  return `${count} ${count === 1 ? one : many}`;
}

/** A number as the UI shows it: at most 3 decimals, no trailing zeros. */
export function round(value: number): string {
  return String(Math.round(value * 1000) / 1000);
}
