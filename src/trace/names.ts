/**
 * Names shared by the recorder, the workflow-side trace hooks and the exporter. No Node imports:
 * the workflow sandbox imports this file.
 */

/** Worker roles, in the order their track groups appear in the exported trace. */
export const TRACE_ROLES = ['workflows', 'inference', 'env', 'trainer'] as const;

/** Track group titles per role. */
export const ROLE_TITLES: Readonly<Record<string, string>> = {
  workflows: 'workflow worker',
  inference: 'inference engine',
  env: 'env worker',
  trainer: 'trainer',
  process: 'process',
};

/** Span names of the RL stages, by activity type (other activities keep their type as name). */
export const ACTIVITY_STAGES: Readonly<Record<string, string>> = {
  generate: 'generate',
  openSession: 'env.reset',
  sessionTurn: 'env.step',
  closeSession: 'env.close',
  computeReward: 'reward',
  recordTrajectory: 'record.trajectory',
  recordGroup: 'record.group',
  preparePolicy: 'train.prepare',
  trainStep: 'train.step',
  evaluate: 'eval',
};

/** Span names (and lane groups) of workflow executions, by workflow type. */
export const WORKFLOW_KINDS: Readonly<Record<string, string>> = {
  trajectoryWorkflow: 'trajectory',
  groupWorkflow: 'group',
  rolloutWorkflow: 'controller',
  trainingWorkflow: 'training',
};

/** The `runId` field of an activity or workflow input (or of a summary passed as one), if any. */
export function runIdOfInput(input: unknown): string | undefined {
  if (typeof input !== 'object' || input === null) return undefined;
  const runId = (input as { runId?: unknown }).runId;
  return typeof runId === 'string' && runId.length > 0 ? runId : undefined;
}
