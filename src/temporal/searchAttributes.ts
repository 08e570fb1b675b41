/**
 * The custom search attributes trajflow registers. The dev server allows few (Keyword 10, Int 3,
 * Double 3, Bool 3), so these are the ones a user filters trajectories by in the Web UI, e.g.
 * `TrajflowRun = "demo-1" AND TrajflowSolved = true` (episodes that solved the task), or
 * `TrajflowStatus = "ended"` (episodes that ran their course, solved or not).
 * Pure: imported by workflows and by the server launcher.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const SEARCH_ATTRIBUTES = {
  run: defineSearchAttributeKey('TrajflowRun', SearchAttributeType.KEYWORD),
  kind: defineSearchAttributeKey('TrajflowKind', SearchAttributeType.KEYWORD),
  env: defineSearchAttributeKey('TrajflowEnv', SearchAttributeType.KEYWORD),
  group: defineSearchAttributeKey('TrajflowGroup', SearchAttributeType.KEYWORD),
  /** How the trajectory ended (`TrajectoryStatus`), `running` until then. */
  status: defineSearchAttributeKey('TrajflowStatus', SearchAttributeType.KEYWORD),
  /** Whether the episode solved its task (src/core/groupStats `solvedTask`); set when it ends. */
  solved: defineSearchAttributeKey('TrajflowSolved', SearchAttributeType.BOOL),
  reward: defineSearchAttributeKey('TrajflowReward', SearchAttributeType.DOUBLE),
  policyVersion: defineSearchAttributeKey('TrajflowPolicyVersion', SearchAttributeType.INT),
  turns: defineSearchAttributeKey('TrajflowTurns', SearchAttributeType.INT),
} as const;

const CLI_TYPE_NAMES: Record<string, string> = {
  [SearchAttributeType.KEYWORD]: 'Keyword',
  [SearchAttributeType.DOUBLE]: 'Double',
  [SearchAttributeType.INT]: 'Int',
  [SearchAttributeType.BOOL]: 'Bool',
};

/** `--search-attribute NAME=Type` arguments for `temporal server start-dev`. */
export function searchAttributeCliArgs(): string[] {
  return Object.values(SEARCH_ATTRIBUTES).flatMap((key) => ['--search-attribute', `${key.name}=${CLI_TYPE_NAMES[key.type]}`]);
}
