/**
 * Workflow ids of a run, made and read back here alone. A run's root workflow is `<run>` itself;
 * its rollout controller `<run>.rollout` (training runs); group k `<run>.gNNNNN`; trajectory i of
 * a group `<run>.gNNNNN.tNNN`; an environment session of a trajectory `<trajectory>.sN` (N counts
 * rebuilds). Pure string code: workflows import it.
 */

const GROUP_DIGITS = 5;
const TRAJECTORY_DIGITS = 3;
const GROUP_OR_TRAJECTORY = /^(.+)\.g(\d{5,})(?:\.t(\d{3,}))?$/;
const ROLLOUT_SUFFIX = '.rollout';

export function groupIdOf(runId: string, groupIndex: number): string {
  return `${runId}.g${String(groupIndex).padStart(GROUP_DIGITS, '0')}`;
}

export function trajectoryIdOf(groupId: string, index: number): string {
  return `${groupId}.t${String(index).padStart(TRAJECTORY_DIGITS, '0')}`;
}

/** The rollout controller of a training run. */
export function rolloutIdOf(runId: string): string {
  return `${runId}${ROLLOUT_SUFFIX}`;
}

/** The environment session of a trajectory after `rebuilds` lost sessions. */
export function sessionIdOf(trajectoryId: string, rebuilds: number): string {
  return `${trajectoryId}.s${rebuilds}`;
}

/** Run, group index and (for a trajectory) index within the group, or undefined for other ids. */
export function parseGroupOrTrajectoryId(workflowId: string): { runId: string; groupIndex: number; trajectoryIndex?: number } | undefined {
  const match = GROUP_OR_TRAJECTORY.exec(workflowId);
  if (!match) return undefined;
  return { runId: match[1], groupIndex: Number(match[2]), ...(match[3] === undefined ? {} : { trajectoryIndex: Number(match[3]) }) };
}

export function isTrajectoryId(workflowId: string): boolean {
  return parseGroupOrTrajectoryId(workflowId)?.trajectoryIndex !== undefined;
}

/** The run a trajflow workflow id belongs to (any id above; an unknown id is taken as a run id). */
export function runIdOfWorkflowId(workflowId: string): string {
  const parsed = parseGroupOrTrajectoryId(workflowId);
  if (parsed) return parsed.runId;
  return workflowId.endsWith(ROLLOUT_SUFFIX) ? workflowId.slice(0, -ROLLOUT_SUFFIX.length) : workflowId;
}
