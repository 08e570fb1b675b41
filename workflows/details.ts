/**
 * The markdown the Web UI shows as a workflow's details: the current details of the training
 * workflow, the rollout controller and a trajectory (its conversation so far, turn by turn), and
 * the static details each run, group and trajectory is started with (what it plays, how to find
 * its parts). Pure and built from workflow state only; the unit test checks the strings.
 *
 * Lines are list items, since markdown joins plain lines into one paragraph; text from the model
 * or the environment goes into fenced blocks, so no markdown in it is rendered.
 */
import type { EvaluationRecord } from '../activities/evaluation';
import type { TrainStepOutput } from '../activities/trainer';
import type { TrainerConfig } from '../config/schema';
import type { NextTurn } from '../src/agents/agent';
import type { TurnOutcome } from '../src/episode/episode';
import type { RolloutStatus } from './signals';
import { plural, round } from './summaries';
import type { TrainingStatus } from './trainingMessages';
import type { EpisodeSpec, GroupInput, TrajectoryInput } from './types';

type TrainerPlan = Pick<TrainerConfig, 'steps' | 'batchGroups' | 'maxStaleness' | 'weightSync'>;

const percent = (share: number) => `${Math.round(share * 100)}%`;
const list = (lines: (string | false | undefined)[]) =>
  lines.filter((line): line is string => typeof line === 'string' && line.length > 0).map((line) => `- ${line}`);

/** `text` as a fenced code block whose fence no run of backticks inside it can close. */
export function fenced(text: string): string {
  const fence = '`'.repeat(Math.max(3, longestBacktickRun(text) + 1));
  return `${fence}\n${text}\n${fence}`;
}

/** One line of `text` as inline code, delimited by more backticks than any run inside it. */
export function inlineCode(text: string): string {
  if (text.trim() === '') return '_(nothing)_';
  const ticks = '`'.repeat(longestBacktickRun(text) + 1);
  // A space keeps a backtick at either end from joining the delimiter (and is stripped on rendering).
  const pad = text.startsWith('`') || text.endsWith('`') ? ' ' : '';
  return `${ticks}${pad}${text}${pad}${ticks}`;
}

function longestBacktickRun(text: string): number {
  return Math.max(0, ...Array.from(text.matchAll(/`+/g), (m) => m[0].length));
}

/** `text` cut in the middle to at most `maxChars` characters, line breaks kept, saying how much is left out. */
export function clipBlock(text: string, maxChars: number): string {
  const chars = Array.from(text.trim());
  if (chars.length <= maxChars) return chars.join('');
  const head = Math.ceil(maxChars / 2);
  const tail = maxChars - head;
  return `${chars.slice(0, head).join('')}\n[… ${chars.length - maxChars} characters not shown …]\n${chars.slice(chars.length - tail).join('')}`;
}

// ---- training workflow ----------------------------------------------------------------------

export interface TrainingView {
  status: TrainingStatus;
  trainer: TrainerPlan;
  /** What the workflow is doing now, in words ("training step 3 on 2 groups"). */
  now: string;
}

export function trainingDetails({ status, trainer, now }: TrainingView): string {
  const state = status.stopping ? ' (stopping)' : status.paused ? ' (paused)' : '';
  return [
    `**training: step ${status.step} of ${status.steps}, policy v${status.version}${state}**: ${now}`,
    '',
    ...list([
      `queue: ${plural(status.queueDepth, 'group')} waiting (a step trains ${trainer.batchGroups}); ${plural(status.groupsConsumed, 'group')} trained`,
      status.lastMetrics && lastStepLine(status.lastMetrics, trainer),
      status.lastEvaluation && evaluationLine(status.lastEvaluation),
    ]),
  ].join('\n');
}

function lastStepLine(m: TrainStepOutput['metrics'], trainer: TrainerPlan): string {
  return (
    `last step (${m.step}): reward ${round(m.rewardMean)} ± ${round(m.rewardStd)}, success ${percent(m.successRate)}, loss ${round(m.loss)}, ` +
    `staleness max ${m.stalenessMax} (bound ${trainer.maxStaleness}, ${trainer.weightSync} sync), ${round(m.wallMs / 1000)} s`
  );
}

function evaluationLine(e: EvaluationRecord): string {
  return `evaluation of v${e.version}: ${e.solved} of ${e.episodes} solved (${percent(e.successRate)}), mean return ${round(e.meanReturn)}, valid answers ${percent(e.validAnswerShare)}`;
}

// ---- rollout controller ---------------------------------------------------------------------

export interface RolloutView {
  status: RolloutStatus;
  /** Present in a training run: the staleness bound and weight sync the controller admits by. */
  training?: { maxStaleness: number; weightSync: 'episode' | 'turn' };
}

export function rolloutDetails({ status: s, training }: RolloutView): string {
  const done = s.trajectoriesFinished;
  const policy = training
    ? `policy: new trajectories sample v${s.policyVersion}` +
      (s.pendingPolicyVersion === undefined ? '' : ` (v${s.pendingPolicyVersion} waits for the episodes in flight)`) +
      `; staleness bound ${training.maxStaleness}, ${training.weightSync} sync; admission held back ${plural(s.admissionBlocked, 'time')}`
    : `policy: v${s.policyVersion} (no training)`;
  return [
    `**rollout: ${s.groupsStarted} of ${s.groupsTotal} groups started, ${s.groupsFinished} finished; ${plural(s.trajectoriesInFlight, 'trajectory', 'trajectories')} in flight**`,
    '',
    ...list([
      `trajectories: ${done} finished` +
        (s.trajectoriesFailed > 0 ? ` (${s.trajectoriesFailed} failed)` : '') +
        (done > 0 ? `, success ${percent(s.successes / done)}, mean reward ${round(s.rewardSum / done)}, mean turns ${round(s.turnsSum / done)}` : ''),
      policy,
    ]),
  ].join('\n');
}

// ---- trajectory: the conversation -----------------------------------------------------------

/** Characters of one turn's observation and of its answer that the details show. */
export const SHOWN_OBSERVATION_CHARS = 600;
export const SHOWN_ANSWER_CHARS = 300;

/** One turn as the UI shows it: already cut to size, so the details stay bounded. */
export interface TurnView {
  turn: number;
  /** What the model was shown (its system prompt left out). */
  shown: string;
  answer?: { text: string; tokens: number; version: number };
  /** What the agent and the environment made of the answer. */
  outcome?: string;
}

/** The messages a turn shows the model, as text: the system prompt left out, tool results marked. */
export function shownText(next: NextTurn): string {
  const text = next.messages
    .filter((m) => m.role !== 'system')
    .map((m) => (m.role === 'user' ? m.content : `[${m.role}] ${m.content}`))
    .join('\n\n');
  return clipBlock(text, SHOWN_OBSERVATION_CHARS);
}

export function outcomeText(outcome: TurnOutcome): string {
  if (outcome.kind === 'invalid') return `not an action: ${outcome.error}`;
  const { info } = outcome;
  const ending = !outcome.done ? '' : typeof info.outcome === 'string' ? `, episode over: ${info.outcome}` : ', episode over';
  const truncated = info.truncated ? ', step limit reached' : '';
  return `env reward ${round(outcome.reward)}${outcome.penalty ? `, penalty ${round(outcome.penalty)}` : ''}${ending}${truncated}`;
}

export interface ConversationView {
  /** The trajectory's state in a line: what it waits for, or how it ended. */
  headline: string;
  /** The last turns, oldest first. */
  turns: TurnView[];
  /** Where every turn is stored in full. */
  storedAt: string;
  /** How the environment's code is confined (a sandbox's isolation level), when it says. */
  isolation?: string;
}

export function conversationDetails({ headline, turns, storedAt, isolation }: ConversationView): string {
  const earlier = turns.length > 0 ? turns[0].turn : 0;
  const note = earlier > 0 ? `turns 0 to ${earlier - 1} are not shown here; ` : '';
  const confined = isolation === undefined ? [] : ['', `_environment isolation: ${isolation}_`];
  return [`**${headline}**`, '', `_${note}every turn is stored in full under \`${storedAt}\`_`, ...confined, ...turns.flatMap(turnMarkdown)].join('\n');
}

/** A turn: what the model was shown (a block), then its answer and what came of it, on one line when the answer is. */
function turnMarkdown({ turn, shown, answer, outcome }: TurnView): string[] {
  const opening = ['', `**turn ${turn}**: the model was shown`, fenced(shown)];
  if (!answer) return opening;
  const then = outcome ? [`→ ${outcome}`] : [];
  const said = `answered (v${answer.version}, ${plural(answer.tokens, 'token')})`;
  if (answer.text.includes('\n')) return [...opening, said, fenced(answer.text), ...then];
  return [...opening, [`${said}: ${inlineCode(answer.text)}`, ...then].join(' ')];
}

// ---- static details: what each run, group and trajectory is ---------------------------------

export interface RunPlan {
  groups: number;
  groupSize: number;
  maxConcurrency: number;
  trainer?: TrainerPlan;
}

/** Static details of a training run, its rollout controller, or a plain rollout. */
export function runDetails(spec: EpisodeSpec, plan: RunPlan): string {
  const { trainer } = plan;
  return list([
    `environment: ${spec.envLabel}; agent ${spec.agent.name}, at most ${plural(spec.agent.maxTurns, 'turn')}, history ${spec.agent.history}`,
    `sampling: temperature ${spec.sampling.temperature}, at most ${plural(spec.sampling.maxTokens, 'token')} per answer; seed ${spec.runSeed}`,
    `data: ${plural(plan.groups, 'group')} of ${plan.groupSize} trajectories, at most ${plan.maxConcurrency} in flight`,
    trainer &&
      `training: ${plural(trainer.steps, 'step')} of ${plural(trainer.batchGroups, 'group')}; staleness bound ${trainer.maxStaleness}, ${trainer.weightSync} sync`,
    `its trajectories: \`TrajflowRun = "${spec.runId}" AND TrajflowKind = "trajectory"\``,
  ]).join('\n');
}

export function groupDetails(input: GroupInput): string {
  return list([
    `${input.groupSize} trajectories of one ${input.envLabel} prompt (env seed ${input.envSeed}), scored against each other`,
    input.policyVersion !== undefined && `its first slots sample policy v${input.policyVersion} (${input.weightSync ?? 'turn'} sync)`,
    `its trajectories: \`TrajflowGroup = "${input.groupId}" AND TrajflowKind = "trajectory"\``,
  ]).join('\n');
}

export function trajectoryDetails(input: TrajectoryInput): string {
  const policy =
    input.minPolicyVersion === undefined ? undefined : `policy v${input.minPolicyVersion}${input.weightSync === 'turn' ? ' or newer (turn sync)' : ''}`;
  return list([
    `one episode of ${input.envLabel} (env seed ${input.envSeed}), agent ${input.agent.name}, at most ${plural(input.agent.maxTurns, 'turn')} and ${input.agent.episodeTimeoutS} s`,
    `sampling: ${policy ? `${policy}, ` : ''}temperature ${input.sampling.temperature}, at most ${plural(input.sampling.maxTokens, 'token')} per answer`,
    `its turns, token for token: \`${storedTurnsOf(input)}\` under the data directory`,
  ]).join('\n');
}

/** Where a trajectory's turns are stored, relative to the data directory (as src/store/runLayout names it). */
export function storedTurnsOf(input: Pick<TrajectoryInput, 'runId' | 'trajectoryId'>): string {
  return `runs/${input.runId}/trajectories/${input.trajectoryId}/`;
}
