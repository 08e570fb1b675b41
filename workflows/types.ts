/** Inputs and signals shared by trajflow's workflows; everything here is small JSON. */
import type { AgentConfig, EnvConfig, EvalConfig, InferenceConfig, RewardConfig, SamplingConfig, TrainerConfig } from '../config/schema';
import type { Compatibility } from '../src/core/compatibility';

export interface TaskQueues {
  workflows: string;
  inference: string;
  env: string;
  trainer: string;
}

/** Everything a trajectory needs to know, identical for the G members of a group but the index. */
export interface EpisodeSpec {
  runId: string;
  runSeed: number;
  env: EnvConfig;
  /** The environment's label for the Web UI. */
  envLabel: string;
  agent: AgentConfig;
  sampling: SamplingConfig;
  reward: RewardConfig;
  taskQueues: TaskQueues;
  /** Where `generate` runs (config `inference.calls`); absent in runs started before it existed. */
  inferenceCalls?: InferenceConfig['calls'];
  /** The code and config the run started with; workers that differ refuse its tasks. */
  compatibility: Compatibility;
}

export interface TrajectoryInput extends EpisodeSpec {
  groupId: string;
  trajectoryId: string;
  /** Seeds the environment instance (map and slips): the group's "prompt". */
  envSeed: number;
  /** In a training run: the policy version current when this trajectory was admitted. */
  minPolicyVersion?: number;
  /** In a training run: `turn` lets each turn use the newest published weights. */
  weightSync?: 'episode' | 'turn';
}

export interface GroupInput extends EpisodeSpec {
  groupId: string;
  groupIndex: number;
  groupSize: number;
  envSeed: number;
  /** Workflow id of the rollout controller that hands out trajectory slots. */
  controllerId: string;
  /** Slots granted at start; more arrive by the `admit` signal. */
  initialAdmits: number;
  /** Policy version of the initial slots (training runs only). */
  policyVersion?: number;
  weightSync?: 'episode' | 'turn';
}

export interface RolloutInput extends EpisodeSpec {
  groups: number;
  groupSize: number;
  maxConcurrency: number;
  /** Present when a training workflow consumes the groups. */
  training?: RolloutTraining;
  /** First group index (a resumed training run continues where the data stopped). */
  firstGroupIndex?: number;
}

export interface RolloutTraining {
  trainerWorkflowId: string;
  /** Trajectories per train step (batchGroups x groupSize). */
  batchTrajectories: number;
  maxStaleness: number;
  weightSync: 'episode' | 'turn';
  /** Policy version published when the controller starts. */
  initialVersion: number;
  /** Present when steps replace the groups their filter drops (`trainer.filteredGroups: replace`). */
  replacement?: GroupReplacement;
}

export interface GroupReplacement {
  /** How the trainer picks each step's groups (src/core/groupStats nextBatchIndices). */
  rule: Pick<TrainerConfig, 'groupFilter' | 'filteredGroups' | 'maxGroupsPerStep' | 'batchGroups'>;
  /** Groups the steps before `initialVersion` took, from group 0; the trainer sends the count with each version. */
  takenGroups: number;
  /** The version the run's last step publishes: no step takes groups after it. */
  finalVersion: number;
}

export interface TrainingInput extends EpisodeSpec {
  groupSize: number;
  maxConcurrency: number;
  trainer: TrainerConfig;
  /** Held-out evaluation of published versions; absent or everySteps 0 = none. */
  eval?: EvalConfig;
  /**
   * Who evaluates: the trainer queue (the embedded model, on an engine of the trainer's own) or
   * the inference queue (a real model, through its inference servers).
   */
  evaluationQueue: string;
}

/** The shared episode fields of a larger input, without its own extras. */
export function episodeSpec(input: EpisodeSpec): EpisodeSpec {
  const { runId, runSeed, env, envLabel, agent, sampling, reward, taskQueues, inferenceCalls, compatibility } = input;
  return { runId, runSeed, env, envLabel, agent, sampling, reward, taskQueues, inferenceCalls, compatibility };
}
