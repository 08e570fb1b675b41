/** The environments, agents and tools every config can name. */
import { z } from 'zod';
import { FrozenLakeAgent } from '../agents/frozenlakeAgent';
import { ModelAgent } from '../agents/modelAgent';
import { ToolAgent } from '../agents/toolAgent';
import { ExternalAgent } from '../agents/externalAgent';
import { PROGRAM_AGENT, WORKFLOW_AGENT } from '../core/agentCallContext';
import { registerArithmetic } from '../envs/arithmetic';
import { registerBashTerminal } from '../envs/bashTerminal';
import { FrozenLake, PROGRESS_DISTANCES } from '../envs/frozenlake';
import { ToolEnvironment } from '../envs/toolEnvironment';
import { TOOL_CALL_FORMATS } from '../tools/parsers';
import type { PluginApi } from './types';

const positiveInt = z.number().int().positive();

export const FrozenLakeOptionsSchema = z.strictObject({
  /** The grid's side: 4x4 or 8x8. */
  size: z.union([z.literal(4), z.literal(8)]).default(4),
  /** `classic`: Gymnasium's map of that size; `random`: a solvable map generated from `mapSeed`. */
  map: z.enum(['classic', 'random']).default('classic'),
  /** As in Gymnasium: a move goes where it was meant with probability 1/3, else to either side. */
  slippery: z.boolean().default(false),
  /** Env steps before the episode is truncated. */
  maxSteps: positiveInt.default(12),
  /** Probability that a random-map cell is frozen (walkable). */
  pFrozen: z.number().gt(0).lt(1).default(0.8),
  /**
   * Random maps: share of map layouts (by a hash of the layout) reserved for evaluation. Training
   * never draws them; evaluation draws only them, so it measures maps the policy has never seen.
   */
  heldOutShare: z.number().min(0).max(0.5).default(0.2),
  /**
   * Penalty on the move into a hole, charged to that move alone by step-level credit; the return
   * stays Gymnasium's (1 at G, 0 otherwise).
   */
  holePenalty: z.number().min(0).default(0),
  /**
   * Penalty per step of distance to G a move fails to gain (0 towards G, once into the edge, twice
   * away), charged to that move alone by step-level credit: potential-based shaping as a cost.
   */
  progressPenalty: z.number().min(0).default(0),
  /**
   * The distance to G that progressPenalty reads: `manhattan`, or `path` (the fewest moves over
   * the ice, so a move onto a dead end pays for the walk back out).
   */
  progressDistance: z.enum(PROGRESS_DISTANCES).default('manhattan'),
  /**
   * Share of training episodes (by seed: a whole group) that start on a random frozen cell
   * instead of S: exploring starts. Evaluation always starts on S.
   */
  exploringStarts: z.number().min(0).max(1).default(0),
});

/** The options of an agent written as a workflow of its own (`agent.name: workflow`). */
const WorkflowAgentOptionsSchema = z.strictObject({
  /** The agent's workflow type: it takes the task's prompt (a string) and returns its answer (a string, or an object with `text`). */
  workflowType: z.string().min(1),
  /** The task queue its worker polls; default: the run's workflow queue's name + `-agents`. */
  taskQueue: z.string().min(1).optional(),
  /**
   * The module of the agent's workflows (relative to the config file), for trajflow to run them in
   * a worker of its own; leave it out when the team's own worker polls `taskQueue` (with trajflow's
   * agent plugin).
   */
  workflows: z.string().min(1).optional(),
  /** With `workflows`: a module whose exports are the agent's activities (its tools), relative to the config file. */
  activities: z.string().min(1).optional(),
  /** How the model writes tool calls (and the parser that reads them); the tools' signatures join the system prompt. */
  toolCallFormat: z.enum(TOOL_CALL_FORMATS as [string, ...string[]]).default('hermes'),
});

export type WorkflowAgentOptions = z.output<typeof WorkflowAgentOptionsSchema>;

/** The options of an agent program (`agent.name: program`), which calls trajflow's OpenAI-compatible endpoint. */
const ProgramAgentOptionsSchema = z.strictObject({
  /** The program and its arguments, e.g. `[node, agent.js]`; it gets the task in `TRAJFLOW_TASK` and prints its answer. */
  command: z.array(z.string().min(1)).min(1),
  /** Where it runs; default: the config file's directory. */
  cwd: z.string().min(1).optional(),
  /** The endpoint's base URL the program is given (`OPENAI_BASE_URL`); default: `inference.endpoint` on this host. */
  endpoint: z.url().optional(),
  /** How the model writes tool calls (and the parser that reads them); the tools' signatures join the system prompt. */
  toolCallFormat: z.enum(TOOL_CALL_FORMATS as [string, ...string[]]).default('hermes'),
});

export type ProgramAgentOptions = z.output<typeof ProgramAgentOptionsSchema>;

export function registerBuiltins(api: PluginApi): void {
  registerArithmetic(api);
  registerBashTerminal(api);
  api.registerEnvironment('frozenlake', {
    options: FrozenLakeOptionsSchema,
    create: (options, { seed, pool }) =>
      new FrozenLake({
        size: options.size,
        map: options.map,
        mapSeed: seed,
        pFrozen: options.pFrozen,
        // With no held-out share, evaluation draws from all maps, as training does.
        heldOut: options.heldOutShare > 0 ? { share: options.heldOutShare, pool: pool === 'eval' ? 'heldout' : 'train' } : undefined,
        slippery: options.slippery,
        seed,
        maxSteps: options.maxSteps,
        holePenalty: options.holePenalty,
        progressPenalty: options.progressPenalty,
        progressDistance: options.progressDistance,
        exploringStarts: pool === 'eval' ? 0 : options.exploringStarts,
      }),
    describe: (options) => `frozenlake-${options.size}x${options.size}-${options.map}${options.slippery ? '-slippery' : ''}`,
  });

  api.registerAgent('frozenlake', {
    options: z.strictObject({}),
    create: (_options, { history }) => new FrozenLakeAgent(history),
  });

  api.registerAgent('model', {
    options: z.strictObject({
      /** The system prompt's instructions. */
      instructions: z.string().default('Answer the question.'),
    }),
    create: (options, { history }) => new ModelAgent(options.instructions, history),
  });

  api.registerAgent('tool', {
    options: z.strictObject({
      /** The tool-call format the model writes (and the parser that reads it). */
      format: z.enum(TOOL_CALL_FORMATS as [string, ...string[]]).default('hermes'),
      /** Replaces the environment's own instructions at the top of the system prompt. */
      instructions: z.string().optional(),
    }),
    create: (options, { history, environment }) => {
      if (!(environment instanceof ToolEnvironment)) throw new Error('agent "tool" needs an environment with tools (a ToolEnvironment)');
      return new ToolAgent({
        tools: environment.tools,
        format: options.format as (typeof TOOL_CALL_FORMATS)[number],
        instructions: options.instructions ?? environment.instructions ?? 'Solve the task.',
        history,
      });
    },
  });

  // The literal, not the constant: docs/config.md finds a registration's option comments by its name.
  api.registerAgent('workflow' satisfies typeof WORKFLOW_AGENT, {
    options: WorkflowAgentOptionsSchema,
    create: (_options, { history, environment }) => new ExternalAgent(environment, history),
  });

  api.registerAgent('program' satisfies typeof PROGRAM_AGENT, {
    options: ProgramAgentOptionsSchema,
    create: (_options, { history, environment }) => new ExternalAgent(environment, history),
  });
}
