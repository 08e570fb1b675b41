/** Visibility queries for runs' workflows, found by their `TrajflowRun` and `TrajflowKind` search attributes. */
import { SEARCH_ATTRIBUTES } from '../src/temporal/searchAttributes';

/** Visibility query for the workflows not closed yet, of any run. */
export const OPEN_WORKFLOWS_QUERY = "ExecutionStatus = 'Running'";

/** Visibility query for the workflows of `runId` not closed yet. */
export function openWorkflowsQuery(runId: string): string {
  return `${SEARCH_ATTRIBUTES.run.name} = '${runId}' AND ${OPEN_WORKFLOWS_QUERY}`;
}

/** Visibility query for the open workflows a run is made of at its top: training workflows, rollout controllers. */
export const OPEN_RUN_WORKFLOWS_QUERY = `${SEARCH_ATTRIBUTES.kind.name} IN ('training', 'rollout') AND ${OPEN_WORKFLOWS_QUERY}`;
