/**
 * The run config: one YAML or JSON file validated here, so a typo fails before anything starts,
 * with the path of the offending field. Every default lives in this schema and nowhere else.
 */
import { z } from 'zod';

const positiveInt = z.number().int().positive();

/**
 * Where to connect. Unset settings come from Temporal's environment configuration
 * (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, profiles in its TOML
 * file), then the local dev server (127.0.0.1:7233, namespace default): resolved in one place,
 * src/temporal/connection.ts. Set here, they override the environment.
 */
export const TemporalConfigSchema = z.strictObject({
  /** The frontend's host:port (e.g. `127.0.0.1:7233`). */
  address: z.string().min(1).optional(),
  /** The Temporal namespace every run's workflows live in. */
  namespace: z.string().min(1).optional(),
  /** A profile of Temporal's client config file to use instead of TEMPORAL_PROFILE (else `default`). */
  profile: z.string().min(1).optional(),
  /** Every task queue name starts with this, so several deployments can share one cluster. */
  taskQueuePrefix: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/)
    .default('trajflow'),
});

export const ModelConfigSchema = z
  .strictObject({
    /** Embedded model: width of the residual stream. */
    dModel: positiveInt.default(64),
    /** Embedded model: transformer blocks. */
    nLayers: positiveInt.default(2),
    /** Embedded model: attention heads (dModel must divide by it). */
    nHeads: positiveInt.default(4),
    /** Embedded model: width of each block's feed-forward layer. */
    dFF: positiveInt.default(256),
    /** Most tokens of one context, prompt and completions together: a turn whose prompt reaches it ends the episode (`context full`), and a completion is cut to fit. For a real model, at most what its server was started with. */
    maxContext: positiveInt.max(8192).default(1024),
    /** Weights come from this seed unless a checkpoint file is named. */
    seed: z.number().int().nonnegative().default(0),
    /** Embedded model: start from this checkpoint file (as the trainer publishes them) instead of seeded weights. */
    checkpoint: z.string().optional(),
    /**
     * A Hugging Face model directory (config.json, safetensors weights, tokenizer.json and its chat
     * template), relative to the config file: a real model, served by `inference.backend` and
     * trained by the Python trainer worker. Unset: the embedded model above.
     */
    path: z.string().min(1).optional(),
  })
  .refine((m) => m.dModel % m.nHeads === 0, { message: 'dModel must be divisible by nHeads', path: ['nHeads'] });

/** Why `value` is not a model server's base URL, or undefined. */
export function serverUrlProblem(value: string): string | undefined {
  // `localhost:8000` parses as a URL of scheme `localhost:`, so the scheme is checked first.
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(value)) return `${JSON.stringify(value)} has no http:// or https://: write "http://${value}"`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${JSON.stringify(value)} is not a URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return `${JSON.stringify(value)}: a model server speaks http:// or https://, not ${url.protocol}//`;
  return undefined;
}

const serverUrl = z.string().superRefine((value, ctx) => {
  const problem = serverUrlProblem(value);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

export const InferenceConfigSchema = z.strictObject({
  /**
   * Who samples: `embedded` (the in-process engine of the embedded model), or model servers
   * speaking vLLM's or SGLang's token-in/token-out HTTP API, listed in `servers`.
   */
  backend: z.enum(['embedded', 'vllm', 'sglang']).default('embedded'),
  /** Base URLs of the model servers (`http://host:port`); each request goes to the least-loaded live one. */
  servers: z.array(serverUrl).default([]),
  /** Longest one generate request may take on a server before it is retried on another. */
  requestTimeoutS: z.number().positive().default(300),
  /** Most sequences decoded together in one batched forward pass (embedded engine). */
  maxBatch: positiveInt.max(256).default(32),
  /**
   * Where a trajectory's `generate` calls run. `inference-worker`: activities on the inference
   * queue, served by any inference worker. `local`: Temporal local activities in the workflow
   * worker running the trajectory, over the same provider, which needs the inference role in that
   * worker's process; a turn then costs no server round trip, and an episode whose turns all run
   * locally completes in one or a few workflow tasks. The turn is stored as soon as it is sampled
   * either way, but a local turn reaches the trajectory's history only when its workflow task
   * completes: a workflow worker that crashes before then has its trajectories resume from their
   * last completed workflow task, where the stored turns are handed back rather than sampled
   * again. Default `inference-worker`.
   */
  calls: z.enum(['inference-worker', 'local']).default('inference-worker'),
  /**
   * trajflow's OpenAI-compatible endpoint (`/v1/chat/completions`), served by each process with the
   * inference role, for agent programs (`agent.name: program`) in any language: a call names its
   * trajectory by its API key. Off when unset.
   */
  endpoint: z
    .strictObject({
      /** The port it listens on. */
      port: positiveInt.max(65535),
      /** The address it listens on. */
      host: z.string().min(1).default('127.0.0.1'),
    })
    .optional(),
});

export const SamplingConfigSchema = z.strictObject({
  /** Most tokens one model call samples (fewer where the context would overflow). */
  maxTokens: positiveInt.default(16),
  /** Softmax temperature of sampling; logprobs are recorded, and recomputed by the trainer, at this temperature. */
  temperature: z.number().positive().default(1),
  /** Nucleus sampling mass. A training run refuses < 1: the trainer scores tokens under the whole distribution at the temperature, not the renormalised nucleus they were drawn from. */
  topP: z.number().gt(0).lte(1).default(1),
});

/**
 * The environment, by registered name; its other fields are the environment's own options,
 * validated by its definition when the config is loaded (see src/plugins/registry.ts).
 */
export const EnvConfigSchema = z.looseObject({
  /** The registered environment (`frozenlake`, `arithmetic`, `bash`, `gymnasium`, or one a module registers). */
  name: z.string().min(1),
  /** Longest one turn of the environment (agent + environment step, tool calls included) may take. */
  turnTimeoutS: z.number().positive().default(60),
  /**
   * Where the episode session (agent + environment) lives. `env-worker`: in an env worker, its
   * turns routed to that worker's own queue, each an activity. `local`: in the workflow worker
   * running the trajectory, its turns Temporal local activities, which skip a server round trip per
   * turn (recorded as markers in the trajectory's history). For environments that are cheap and
   * need no isolation (FrozenLake, arithmetic); keep sandboxes (bash) on env workers. Default
   * `env-worker`.
   */
  sessions: z.enum(['env-worker', 'local']).optional(),
  /**
   * With `env-worker` sessions: how long a turn may wait to be taken by the env worker holding its
   * session before that worker counts as gone and the session is rebuilt on another (replaying the
   * recorded answers). A live worker takes a turn within milliseconds; raise it only for env
   * workers whose activity slots can all be busy at once.
   */
  sessionLostAfterS: z.number().positive().default(5),
});

/** The agent, by registered name; its other fields are the agent's own options. */
export const AgentConfigSchema = z.looseObject({
  /** The registered agent (`frozenlake`, `model`, `tool`, or one a module registers). */
  name: z.string().min(1).default('frozenlake'),
  /** Model calls per trajectory; an unparseable answer uses a turn too. */
  maxTurns: positiveInt.default(12),
  /**
   * What the model reads each turn. `full`: the whole conversation so far (one training sequence
   * per trajectory). `none`: the system prompt and the current observation only, a Markov policy
   * for environments whose observation is the whole state; each turn is then its own context and
   * its own training sequence, so prompts stay short however long the episode.
   */
  history: z.enum(['full', 'none']).default('full'),
  /** Longest a whole episode may take; a trajectory past it ends with status `timeout`. */
  episodeTimeoutS: z.number().positive().default(600),
  /**
   * Most bytes (UTF-8) of text one turn adds to the model's context: the observation's messages
   * (tool results, the system prompt of a fresh context). Longer ones are cut, each with a note to
   * the model saying how much it does not see: a turn's text travels through workflow history,
   * where a trajectory activity may return at most 1 MiB (activities/payloadLimit.ts). Default
   * DEFAULT_MAX_TURN_TEXT_BYTES.
   */
  maxTurnTextBytes: positiveInt
    .min(256)
    .max(512 * 1024)
    .optional(),
});

/** `agent.maxTurnTextBytes` when unset: 64 KiB, some 16k tokens of English. */
export const DEFAULT_MAX_TURN_TEXT_BYTES = 64 * 1024;

export const RewardConfigSchema = z.strictObject({
  /**
   * Weight of the format reward: the share of the trajectory's answers that parsed as an action,
   * added to the environment's return. 0 = the environment's return alone.
   */
  formatWeight: z.number().nonnegative().default(0),
  /**
   * Charged to the turn of an answer the agent could not read, which per-turn credit compares with
   * the other answers given in the same state (default: `formatWeight`, the format credit it
   * forwent). Where every move a state offers costs more than that (a hole below, the edge to the
   * right), an unreadable answer is the cheapest one there and can spread. As high as the
   * costliest move, it keeps answers readable but slows learning to read the holes (the runs are
   * in docs/learning.md).
   */
  unreadablePenalty: z.number().nonnegative().optional(),
});

/**
 * Each open group is a child workflow of the rollout controller, and in the worst case every slot
 * in flight sits in a different group (one straggler each); Temporal refuses more than 2,000
 * pending children per execution, so slots stay at half of that.
 */
const MAX_CONCURRENCY = 1000;

export const RolloutConfigSchema = z.strictObject({
  /** Prompts (distinct environment instances) in this run. */
  groups: positiveInt.default(8),
  /** Trajectories sampled per prompt (G). */
  groupSize: positiveInt.max(256).default(4),
  /** Trajectories in flight at once; a finished one frees its slot at once. */
  maxConcurrency: positiveInt.max(MAX_CONCURRENCY).default(32),
});

export const LossConfigSchema = z.strictObject({
  /** PPO clip range below 1 (ratio floor is 1 - epsilon). */
  epsilon: z.number().gt(0).lt(1).default(0.2),
  /** PPO clip range above 1 (ratio ceiling is 1 + epsilonHigh; > epsilon = "clip-higher"). */
  epsilonHigh: z.number().gt(0).default(0.28),
  /** KL-to-reference coefficient; 0 turns the reference policy off. */
  beta: z.number().nonnegative().default(0),
  /** Estimator of KL(policy || reference) for the penalty: k1 = -d (unbiased, noisy, can be negative), k3 = e^d - d - 1 (non-negative), d = log pi_ref - log pi. */
  kl: z.enum(['k1', 'k3']).default('k3'),
  /** `token-mean`: every trained token of the batch weighs the same. `sequence-mean-token-mean`: each sequence's token mean, then their mean, so every sequence weighs the same. */
  aggregation: z.enum(['token-mean', 'sequence-mean-token-mean']).default('token-mean'),
  /**
   * Truncated importance sampling on the behaviour ratio (off unless set), in both trainers. Each
   * trained token's policy-gradient term is weighted by min(pi_old / pi_behaviour, cap), a constant
   * of the step (no gradient through it): pi_old is the trainer's probability of the token before
   * the step's first update, pi_behaviour the sampler's. PPO's ratio and clip are then taken
   * against pi_old, so the clip bounds the step's own update and the weight alone answers for
   * where the tokens came from: an older version (`maxStaleness`) or a server whose numbers differ
   * from the trainer's. Without it the ratio is taken against pi_behaviour directly. The cap bounds
   * what a token the sampler drew far more rarely than the trainer would can weigh.
   */
  tis: z
    .strictObject({
      /** The most one token's behaviour weight may be (at least 1). */
      cap: z.number().gte(1).default(2),
    })
    .optional(),
  /**
   * c in loss -= c x the policy's entropy at each trained token (its whole next-token
   * distribution there, at the sampling temperature); 0 turns it off. Keeps a policy from becoming
   * deterministic, after which every group is all solved or all failed and there is nothing left
   * to compare. Embedded trainer only.
   */
  entropyBonus: z.number().nonnegative().default(0),
  /**
   * Where the entropy bonus is paid. `all`: every trained token. `answer-start`: the first token of
   * each answer only, where an agent that answers with its action chooses it; the tokens after it
   * that only spell the choice out stay as sharp as the policy makes them (on every token, a bonus
   * large enough to keep the choice open also spreads the letters that spell a move, and answers
   * stop parsing).
   */
  entropyBonusTokens: z.enum(['all', 'answer-start']).default('all'),
  /**
   * Coverage (off unless set): loss += weight x KL(reference || policy) over the whole next-token
   * distribution at each token it is paid on, the reference being the run's version 0 (as for
   * `beta`). `beta`'s penalty lets the policy give up a move it no longer samples at no cost; this
   * one grows without bound as the policy takes a move of the reference's away, so each keeps some
   * chance on every state, and a rare state (a dead end on a random map) still sees the move it
   * needs tried. Unlike the entropy bonus, it spreads the chance only over what the reference
   * writes, not over letters that begin no answer. Embedded trainer only.
   */
  coverage: z
    .strictObject({
      /** c in loss += c x the coverage at the tokens it is paid on. */
      weight: z.number().positive(),
      /**
       * Pull only on the tokens the policy gives less than `floor` x the reference's probability,
       * by weight x sum_v q(v) max(0, log(floor q(v)) - log p(v)): a floor under every answer, not
       * a pull of the whole distribution back to the reference's (which holds the moves into a
       * hole as high as the others). Unset: the whole KL.
       */
      floor: z.number().gt(0).max(1).optional(),
      /** Where it is paid: `all` trained tokens, or each answer's first (`answer-start`, where an agent that answers with its action chooses it). */
      tokens: z.enum(['all', 'answer-start']).default('answer-start'),
    })
    .optional(),
});

/**
 * Per-turn credit by anchor state (GiGPO): visits of the same observation across a group's
 * trajectories compare their discounted returns, and each turn's advantage adds `weight` x that
 * comparison to its episode's. Needs `agent.history: none` (one training sequence per turn).
 */
export const TurnCreditConfigSchema = z.strictObject({
  /** omega: the per-turn advantage's weight beside the episode-level one. */
  weight: z.number().nonnegative(),
  /**
   * gamma: a turn's return is gamma^(turns after it) x the environment's return, plus the rest of
   * the reward, minus the penalty of the turn's own action (`env` penalties, such as FrozenLake's
   * `holePenalty`, reach training only here).
   */
  discount: z.number().gt(0).lte(1).default(0.95),
  /**
   * Weight of each turn's own penalty measured against the train step's mean penalty per turn
   * (`costAdvantages`), added to its advantage. The comparison on a cell needs another visit of
   * that cell that moved otherwise, which a near-deterministic policy no longer makes; this term
   * needs none, so a penalised move is pushed down wherever it is made. 0: off.
   */
  costWeight: z.number().nonnegative().default(0),
  /**
   * The all-moves term (embedded trainer): on every turn whose state the environment priced
   * (`StepResult.actionPenalties`: FrozenLake's penalties), every well-formed answer, not only the
   * one given, gets its share of q(a) = softmax(-penalty(a) / temperature) over the turn's answers,
   * as a target for the whole answer, every token of it (`AnswerTargets`), at `weight`. The other terms can
   * only compare answers the policy still samples; this one keeps a move the policy has all but
   * dropped where the prices favour it, and leaves equally priced moves at even odds. It learns
   * from what the environment can say of a move without taking it: with `progressDistance: path`
   * the prices rank the moves as the shortest paths over the ice do. Unset: off.
   */
  allMoves: z
    .strictObject({
      /** The term's weight beside the policy-gradient loss. */
      weight: z.number().gt(0),
      /** tau in the target shares softmax(-penalty / tau): lower puts more of each state's share on its cheapest moves. */
      temperature: z.number().gt(0).default(0.05),
      /**
       * Whether the term also trains the turns of the groups `groupFilter` keeps out of the policy
       * gradient (all solved or all failed). Its targets come from the prices, not from a
       * comparison within the group, so those turns teach it as well as any: the failed maps hold
       * the mistakes, and past the crossover most maps are solved by every episode alike.
       */
      everyGroup: z.boolean().default(false),
    })
    .optional(),
});

/** Whether a train step credits turns one by one (any term of `trainer.turnCredit` on). */
export function usesTurnCredit({ turnCredit }: { turnCredit?: z.infer<typeof TurnCreditConfigSchema> }): boolean {
  return turnCredit !== undefined && (turnCredit.weight > 0 || turnCredit.costWeight > 0 || turnCredit.allMoves !== undefined);
}

/**
 * How the learning rate moves over a run's train steps (see src/core/learningRate.ts for the
 * formulas): a linear warm-up from learningRate / warmupSteps over the first `warmupSteps`, then
 * `constant`, or a `linear` or `cosine` decay that reaches minRatio x learningRate at the last step.
 */
export const LearningRateScheduleSchema = z.strictObject({
  /** Train steps of the linear warm-up; 0: none. */
  warmupSteps: z.number().int().nonnegative().default(0),
  /** The course after the warm-up. */
  decay: z.enum(['constant', 'linear', 'cosine']).default('constant'),
  /** The learning rate at the last step, as a share of learningRate (`linear` and `cosine`). */
  minRatio: z.number().min(0).max(1).default(0),
});

/**
 * Checkpoint retention: after each train step the trainer deletes the versions no one needs any
 * more, so a long run's disk use stays bounded. Kept whatever these say: version 0 (the KL
 * reference and where a fresh start begins), the newest `maxStaleness + 1` (resume and the
 * inference servers, which may still be loading them) and every version whose due evaluation
 * (`eval.everySteps`) has not written its result yet.
 */
export const CheckpointRetentionSchema = z.strictObject({
  /** The newest this many versions are kept. */
  keepLast: positiveInt.default(3),
  /** Every version that is a multiple of this is kept as well (a sparse history of the run; 1 = all); 0 = none. */
  keepEvery: z.number().int().nonnegative().default(0),
});

export const LoraSchema = z.strictObject({
  /** The adapter's rank r: each adapted matrix W gets W + (alpha / r) B A, with B [out, r] and A [r, in]. */
  rank: positiveInt.default(16),
  /** Scales the adapter's update by alpha / rank. */
  alpha: positiveInt.default(32),
  /** Names of the modules adapted (each module whose name ends with one of them), e.g. the attention and MLP projections of a Llama. */
  targetModules: z.array(z.string().min(1)).min(1).default(['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']),
  /**
   * Dropout on the adapter's input during the training passes (never when scoring): it perturbs the
   * importance ratio of the tokens it trains, so 0 keeps the ratio exact.
   */
  dropout: z.number().min(0).lt(1).default(0),
});

/**
 * The Python trainer over several processes and hosts (torch.distributed, started by torchrun): the
 * model sharded over every rank with FSDP2, each rank training its share of every batch. Rank 0
 * alone polls Temporal; every host runs `trajflow worker --role trainer` with the same config, and
 * each starts its `processes` ranks. All hosts mount `dataDir` at the same path (each rank writes
 * its slice of the optimizer state there).
 */
export const DistributedTrainerSchema = z
  .strictObject({
    /** Ranks on each host: one per GPU (NCCL), or a few on a CPU host (gloo). 1 with one host: a single process, no torchrun. */
    processes: positiveInt.default(1),
    /** Hosts the trainer spans; with more than 1, `rendezvous` names where they meet. */
    hosts: positiveInt.default(1),
    /** `host:port` of torchrun's c10d rendezvous (the port free on that host) when hosts > 1. */
    rendezvous: z.string().min(1).optional(),
    /** Times torchrun restarts every rank after one of them fails (a step in flight is retried from its base version). */
    maxRestarts: z.number().int().nonnegative().default(3),
  })
  .refine((d) => d.hosts === 1 || d.rendezvous !== undefined, {
    message: 'hosts > 1 needs rendezvous (host:port of the c10d rendezvous)',
    path: ['rendezvous'],
  });

export const TrainerConfigSchema = z.strictObject({
  /** How a group's rewards become each trajectory's advantage: `grpo` (r - mean) / (std + eps), `rloo` r minus the mean of the others, `drgrpo` r - mean. */
  advantage: z.enum(['grpo', 'rloo', 'drgrpo']).default('grpo'),
  turnCredit: TurnCreditConfigSchema.optional(),
  loss: LossConfigSchema.prefault({}),
  /**
   * `mixed-outcomes`: train only on groups where some episodes solved the task and some did not
   * (DAPO's dynamic-sampling filter); the others are recorded and counted, not trained. A group
   * that all failed has no success to compare with: all it could teach is to avoid penalties,
   * which a policy that has not found the goal yet learns by stalling; one that all succeeded has
   * only speed to compare. `none`: train on every group.
   */
  groupFilter: z.enum(['none', 'mixed-outcomes']).default('none'),
  /**
   * What a step does with the groups `groupFilter` drops. `skip`: it trains on the rest of its
   * `batchGroups` (fewer groups, or none). `replace`: it takes later groups in their place until
   * `batchGroups` of them pass, as DAPO's dynamic sampling does, so every step trains a full
   * batch; the rollout samples as many more groups as were dropped.
   */
  filteredGroups: z.enum(['skip', 'replace']).default('skip'),
  /**
   * With `filteredGroups: replace`, the most groups one step looks at: a step that finds fewer
   * than `batchGroups` passing among this many trains on those (a policy that never solves the
   * task would otherwise sample forever). Default: 4 x batchGroups.
   */
  maxGroupsPerStep: positiveInt.optional(),
  /** Adam's (the Python trainer: AdamW's) step size, before the schedule. */
  learningRate: z.number().positive().default(1e-3),
  /** The learning rate's course over the run (default: constant). */
  learningRateSchedule: LearningRateScheduleSchema.prefault({}),
  /** Gradients are rescaled so that their global L2 norm is at most this. */
  maxGradNorm: z.number().positive().default(1),
  /**
   * Adam's epsilon. Larger values damp the updates of parameters whose gradients are tiny (those
   * serving only already-certain tokens, such as the answer format), which Adam would otherwise
   * scale up to full-size noisy steps.
   */
  adamEpsilon: z.number().positive().default(1e-8),
  /** Optimizer steps per train batch (the batch is split into this many minibatches). */
  optimizerStepsPerBatch: positiveInt.default(1),
  /**
   * A trust region for each train step (embedded trainer): when the step's updates moved the policy
   * further than this KL from where the step started (measured on its first minibatch's trained
   * tokens), they are shortened into the bound (weights and Adam's state moved back along the
   * update), or undone where no shortening fits. Off when unset.
   */
  maxUpdateKl: z.number().positive().optional(),
  /** Groups per train step. */
  batchGroups: positiveInt.default(4),
  /** Train steps in the run; each publishes one new weights version. */
  steps: positiveInt.default(40),
  /**
   * eta: a trajectory is admitted only while admitted <= (eta + version + 1) * batch, so every
   * trained token comes from a policy at most eta versions old. 0 = synchronous on-policy.
   */
  maxStaleness: z.number().int().nonnegative().default(1),
  /**
   * `episode`: a weight sync waits for in-flight episodes and new episodes wait for the sync.
   * `turn`: engines switch between turns; a trajectory may span versions.
   */
  weightSync: z.enum(['episode', 'turn']).default('turn'),
  /** Supervised steps on generated answer-format examples (not solutions) before RL; 0 = off. */
  formatWarmupSteps: z.number().int().nonnegative().default(0),
  /**
   * Adam's step size during the warm-up (its own: the warm-up is supervised). High rates learn the
   * format fastest but may lose what an answer should depend on (the observation) again. 1e-2:
   * on the default model, 40 steps of 8 FrozenLake episodes then reach the loss floor of a uniform move.
   */
  formatWarmupLearningRate: z.number().positive().default(1e-2),
  /**
   * The Python trainer of a real model: supervised steps on demonstrations before RL, for a model
   * that never writes what the task needs (a tool call) and so gives RL nothing to reinforce.
   * Version 0 is then the model after these steps. Off when unset.
   */
  warmup: z
    .strictObject({
      /**
       * A JSON Lines file of demonstrations (relative to the config file): each line
       * `{"messages": [{"role": ..., "content": ...}, ...]}`, a conversation rendered with the
       * model's chat template; the model learns the assistant messages' tokens.
       */
      demonstrations: z.string().min(1),
      /** Optimizer steps (AdamW), each on `batchSize` demonstrations in file order, wrapping around. */
      steps: positiveInt.default(40),
      /** Demonstrations per step. */
      batchSize: positiveInt.default(8),
      /** AdamW's step size during the warm-up (its own: the warm-up is supervised). */
      learningRate: z.number().positive().default(5e-5),
    })
    .optional(),
  /**
   * How long a train step may go without a heartbeat before Temporal gives it to another trainer
   * (a trainer that died mid-step is noticed this late). The embedded trainer blocks its event
   * loop during a step's tensor work, so it needs minutes; the Python trainer heartbeats from a
   * thread every 5 s (python/trajflow_py/trainer/heartbeat.py), so a real-model run can set this low.
   */
  heartbeatTimeoutS: z.number().positive().default(120),
  /**
   * How long one train step may take from start to finish before Temporal gives it to another
   * trainer. A big model's step (a large batch, long sequences, a slow disk for its checkpoint)
   * may need more than the default.
   */
  stepTimeoutMinutes: z.number().positive().default(30),
  /** Which published versions stay on disk, and so how far the disk use of a long run grows. */
  checkpoints: CheckpointRetentionSchema.prefault({}),
  /**
   * Compute dtype of the Python trainer of a real model (`model.path`), and the dtype of the weights
   * it publishes: `float32`, or `bfloat16` (matmuls in bfloat16, faster on accelerators; logprobs
   * further from the server's). Parameters, gradients and AdamW's state stay float32 either way
   * (the master weights): a small update of a bfloat16 weight would round away.
   */
  precision: z.enum(['float32', 'bfloat16']).default('float32'),
  /**
   * Python trainer of a real model: the most tokens one forward pass feeds, several sequences
   * packed side by side (attention kept inside each); a longer sequence runs alone. 0: every
   * sequence alone. Bigger packs keep a GPU busier and need more activation memory; with
   * PyTorch's attention a pack attends over all of its tokens under a mask, which costs the
   * square of its length, so on CPUs packing does not pay (docs/benchmarks.md).
   */
  microBatchTokens: z.number().int().nonnegative().default(1024),
  /** Python trainer of a real model: recompute each layer's activations in the backward pass (less memory, about a third more compute). */
  activationCheckpointing: z.boolean().default(false),
  /** Python trainer of a real model: its processes (ranks) and hosts. */
  distributed: DistributedTrainerSchema.prefault({}),
  /**
   * Python trainer of a real model: train a LoRA adapter (peft) instead of every weight. Each
   * version publishes the adapter alone, which the servers load beside the base model
   * (`model.path`) as a runtime LoRA adapter: a weight sync moves megabytes, not the model.
   * Absent: full fine-tuning.
   */
  lora: LoraSchema.optional(),
});

export const EvalConfigSchema = z.strictObject({
  /** Evaluate version 0 and then every this many train steps (and the last one); 0 = never. */
  everySteps: z.number().int().nonnegative().default(0),
  /** Episodes per evaluation, on held-out environment instances (see env.heldOutShare). */
  episodes: positiveInt.default(32),
  /** Sampling temperature of evaluation; the default is greedy in all but exact ties. */
  temperature: z.number().positive().default(1e-3),
});

/**
 * Always-on tracing of every RL stage (src/trace): spans and counters appended by each worker
 * process to rolling JSONL files under <dataDir>/runs/<runId>/trace/; `trajflow trace <run>`
 * merges them into one Perfetto (Chrome trace-event) file.
 */
export const TraceConfigSchema = z.strictObject({
  /** Off: no trace files are written. */
  enabled: z.boolean().default(true),
  /** A trace file is closed and the next one started before it grows past this many bytes. */
  maxFileBytes: positiveInt.min(4096).default(16 * 1024 * 1024),
  /** Files kept per run, role and process; the oldest is deleted when one more starts. 0 = all. */
  maxFiles: z.number().int().nonnegative().default(64),
  /** How often buffered events are written out (and always at shutdown). */
  flushIntervalMs: positiveInt.default(1000),
});

/**
 * The workers' Prometheus endpoint (src/metrics/meter.ts): off unless `prometheusPort` is set.
 * Then `http://<host>:<prometheusPort>/metrics` serves trajflow's metrics and the Temporal SDK's,
 * from the SDK runtime's one exporter. One port per worker process.
 */
export const MetricsConfigSchema = z.strictObject({
  /** The port of the endpoint; unset: no endpoint. */
  prometheusPort: z.number().int().min(1).max(65535).optional(),
  /** The address it listens on (`0.0.0.0` for every interface). */
  host: z.string().min(1).default('127.0.0.1'),
});

/**
 * Settings of the embedded trainer that the Python trainer of a real model (`model.path`) lacks:
 * a config naming a real model is refused when it sets one. docs/config.md marks them from this list.
 */
export const EMBEDDED_TRAINER_ONLY: readonly { path: readonly string[]; isSet: (trainer: z.output<typeof TrainerConfigSchema>) => boolean }[] = [
  { path: ['trainer', 'loss', 'entropyBonus'], isSet: (trainer) => trainer.loss.entropyBonus > 0 },
  { path: ['trainer', 'loss', 'coverage'], isSet: (trainer) => trainer.loss.coverage !== undefined },
  { path: ['trainer', 'turnCredit', 'allMoves'], isSet: (trainer) => trainer.turnCredit?.allMoves !== undefined },
  { path: ['trainer', 'turnCredit', 'costWeight'], isSet: (trainer) => (trainer.turnCredit?.costWeight ?? 0) > 0 },
  { path: ['trainer', 'maxUpdateKl'], isSet: (trainer) => trainer.maxUpdateKl !== undefined },
  // A real model starts from its pretrained weights: the warm-up teaches the embedded model the answer format.
  { path: ['trainer', 'formatWarmupSteps'], isSet: (trainer) => trainer.formatWarmupSteps > 0 },
];

export const RunConfigSchema = z
  .strictObject({
    /**
     * Modules that register environments, agents, tools and rewards (each exports
     * `register(trajflow)`), as paths relative to the config file; CommonJS JavaScript.
     */
    modules: z.array(z.string().min(1)).default([]),
    run: z
      .strictObject({
        /** Run id prefix; the CLI appends a timestamp unless --run-id is given. */
        name: z
          .string()
          .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, _ . - only')
          .default('run'),
        /** Seeds the run: its environment instances and sampling streams (a retried turn samples the same tokens). */
        seed: z.number().int().nonnegative().default(0),
      })
      .prefault({}),
    /** Where runs, checkpoints and the dev server's database live (relative: to the working directory). Every host of a deployment mounts it at the same path. */
    dataDir: z.string().default('.trajflow'),
    temporal: TemporalConfigSchema.prefault({}),
    model: ModelConfigSchema.prefault({}),
    inference: InferenceConfigSchema.prefault({}),
    sampling: SamplingConfigSchema.prefault({}),
    env: EnvConfigSchema,
    agent: AgentConfigSchema.prefault({}),
    reward: RewardConfigSchema.prefault({}),
    rollout: RolloutConfigSchema.prefault({}),
    trainer: TrainerConfigSchema.prefault({}),
    eval: EvalConfigSchema.prefault({}),
    trace: TraceConfigSchema.prefault({}),
    metrics: MetricsConfigSchema.prefault({}),
  })
  .superRefine((config, ctx) => {
    const { backend, servers } = config.inference;
    if (backend === 'embedded' && config.model.path !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['inference', 'backend'],
        message: 'a real model (model.path) is served by vllm or sglang, not the embedded engine',
      });
    }
    if (backend !== 'embedded' && config.model.path === undefined) {
      ctx.addIssue({ code: 'custom', path: ['model', 'path'], message: `inference.backend ${backend} needs the model's Hugging Face directory` });
    }
    if (backend !== 'embedded' && servers.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['inference', 'servers'], message: `inference.backend ${backend} needs at least one server URL` });
    }
    if (config.model.path === undefined && config.trainer.lora !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'lora'],
        message: 'LoRA is for the Python trainer of a real model (model.path); the embedded trainer trains every weight',
      });
    }
    if (
      config.trainer.warmup !== undefined &&
      (config.model.path === undefined || config.trainer.lora !== undefined || config.trainer.distributed.processes > 1 || config.trainer.distributed.hosts > 1)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'warmup'],
        message:
          'is a warm-up of the Python trainer of a real model (model.path) training every weight in one process: remove trainer.lora and trainer.distributed, or the warm-up (the embedded model has trainer.formatWarmupSteps)',
      });
    }
    const { processes, hosts } = config.trainer.distributed;
    if (config.model.path === undefined && (processes > 1 || hosts > 1)) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'distributed'],
        message: 'the embedded trainer runs in one process; trainer.distributed is for the Python trainer of a real model (model.path)',
      });
    }
    for (const { path, isSet } of EMBEDDED_TRAINER_ONLY) {
      if (config.model.path !== undefined && isSet(config.trainer)) {
        ctx.addIssue({
          code: 'custom',
          path: [...path],
          message: 'is a setting of the embedded trainer; the Python trainer of a real model (model.path) has none: remove it',
        });
      }
    }
    const { warmupSteps } = config.trainer.learningRateSchedule;
    if (warmupSteps >= config.trainer.steps) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'learningRateSchedule', 'warmupSteps'],
        message: `must be below trainer.steps (${config.trainer.steps}): the run would end before its learning rate reached trainer.learningRate`,
      });
    }
    const { groupFilter, filteredGroups, maxGroupsPerStep, batchGroups } = config.trainer;
    if (filteredGroups === 'replace' && groupFilter === 'none') {
      ctx.addIssue({ code: 'custom', path: ['trainer', 'filteredGroups'], message: 'replace needs a trainer.groupFilter that drops groups (mixed-outcomes)' });
    }
    if (maxGroupsPerStep !== undefined && filteredGroups !== 'replace') {
      ctx.addIssue({ code: 'custom', path: ['trainer', 'maxGroupsPerStep'], message: 'applies only with trainer.filteredGroups: replace' });
    }
    if (maxGroupsPerStep !== undefined && maxGroupsPerStep < batchGroups) {
      ctx.addIssue({
        code: 'custom',
        path: ['trainer', 'maxGroupsPerStep'],
        message: `must be at least trainer.batchGroups (${batchGroups}): a step looks at its batch's groups before any replacement`,
      });
    }
    if (usesTurnCredit(config.trainer) && config.agent.history !== 'none') {
      ctx.addIssue({ code: 'custom', path: ['trainer', 'turnCredit'], message: 'per-turn credit needs agent.history: none (one training sequence per turn)' });
    }
    // A penalty no training step reads would be silently ignored: FrozenLake's are the built-in ones.
    for (const key of ['holePenalty', 'progressPenalty'] as const) {
      if (config.env.name === 'frozenlake' && Number(config.env[key] ?? 0) > 0 && !usesTurnCredit(config.trainer)) {
        ctx.addIssue({
          code: 'custom',
          path: ['env', key],
          message: `is charged to the move alone, which only per-turn credit reads: set trainer.turnCredit (with agent.history: none) or leave ${key} at 0`,
        });
      }
    }
  });

export type RunConfig = z.infer<typeof RunConfigSchema>;

/**
 * What a training run refuses beyond the schema: settings a rollout alone may use, with which
 * training would learn nothing or learn from numbers it cannot reproduce. Each with the path of its field.
 */
export function trainingConfigIssues(config: RunConfig): { path: string[]; message: string }[] {
  const issues: { path: string[]; message: string }[] = [];
  // Per-turn credit compares visits of a state within one trajectory too, or prices the moves.
  if (config.rollout.groupSize === 1 && !usesTurnCredit(config.trainer)) {
    issues.push({
      path: ['rollout', 'groupSize'],
      message: `1 leaves the group-relative advantage (trainer.advantage ${config.trainer.advantage}) nothing to compare: every advantage is 0 and nothing trains; set 2 or more`,
    });
  }
  if (config.sampling.topP < 1) {
    issues.push({
      path: ['sampling', 'topP'],
      message: `${config.sampling.topP} draws tokens from the top-p nucleus, but the trainer scores them under the whole distribution at the sampling temperature, so its importance ratios would be wrong; set 1 to train (a rollout alone may keep it)`,
    });
  }
  return issues;
}
export type TemporalConfig = z.infer<typeof TemporalConfigSchema>;
export type MetricsConfig = z.infer<typeof MetricsConfigSchema>;
export type InferenceConfig = z.infer<typeof InferenceConfigSchema>;
export type EnvConfig = z.infer<typeof EnvConfigSchema>;
export type AgentConfig = z.infer<typeof AgentConfigSchema>;
export type SamplingConfig = z.infer<typeof SamplingConfigSchema>;
export type RewardConfig = z.infer<typeof RewardConfigSchema>;
export type ModelSettings = z.infer<typeof ModelConfigSchema>;
export type TrainerConfig = z.infer<typeof TrainerConfigSchema>;
export type LoraConfig = z.infer<typeof LoraSchema>;
export type EvalConfig = z.infer<typeof EvalConfigSchema>;
export type TraceConfig = z.infer<typeof TraceConfigSchema>;
