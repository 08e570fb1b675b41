/**
 * The custom search attributes trajflow registers. The dev server allows few (Keyword 10, Int 3,
 * Double 3, Bool 3), so these are the ones a user filters trajectories by in the Web UI, e.g.
 * `TrajflowRun = "demo-1" AND TrajflowSolved = true` (episodes that solved the task), or
 * `TrajflowStatus = "ended"` (episodes that ran their course, solved or not).
 * Pure: imported by workflows, by the server launcher and by `trajflow cluster prepare`.
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

/** Each type as the Temporal CLI and Web UI name it. */
const TYPE_NAMES: Record<SearchAttributeType, string> = {
  [SearchAttributeType.TEXT]: 'Text',
  [SearchAttributeType.KEYWORD]: 'Keyword',
  [SearchAttributeType.INT]: 'Int',
  [SearchAttributeType.DOUBLE]: 'Double',
  [SearchAttributeType.BOOL]: 'Bool',
  [SearchAttributeType.DATETIME]: 'Datetime',
  [SearchAttributeType.KEYWORD_LIST]: 'KeywordList',
};

export function searchAttributeTypeName(type: SearchAttributeType): string {
  return TYPE_NAMES[type];
}

/** `--search-attribute NAME=Type` arguments for `temporal server start-dev`. */
export function searchAttributeCliArgs(): string[] {
  return Object.values(SEARCH_ATTRIBUTES).flatMap((key) => ['--search-attribute', `${key.name}=${TYPE_NAMES[key.type]}`]);
}
