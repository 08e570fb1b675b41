/**
 * How many new trajectories the rollout controller may start right now. Pure: the controller
 * workflow calls it, tests check the formula.
 *
 * Staleness bound by admission: with batch size B trajectories per train step, version v and
 * staleness budget eta, a trajectory is admitted only while
 *     admitted_total < (eta + v + 1) * B,
 * so the trajectories trained at step k were admitted under version >= k - eta, and nothing is
 * generated only to be thrown away. eta = 0 is synchronous on-policy training.
 *
 * When a step replaces the groups its filter drops (`trainer.filteredGroups: replace`), it takes
 * B or more trajectories, as many as it needs for B of them in passing groups. The bound is then
 *     admitted_total < L(v),
 * L(v) the fewest trajectories the steps before version v + eta + 1 can take, counted from what
 * the steps before v took and the outcomes of the groups finished since (one not finished yet
 * counted as passing: src/core/groupStats leastGroupsTaken). A dropped group lets admission run
 * on by one more, so the step waiting for a replacement can get it.
 */
export interface AdmissionState {
  maxConcurrency: number;
  inFlight: number;
  /** Trajectories ever admitted in this run. */
  admitted: number;
  training?: {
    maxStaleness: number;
    version: number;
    batchTrajectories: number;
    /** L(version), where steps replace the groups their filter drops; otherwise (eta + version + 1) x batch. */
    leastTakenTrajectories?: number;
    /** Episode-level sync waiting for in-flight episodes: nothing starts meanwhile. */
    syncPending: boolean;
  };
}

export function admissionAllowance({ maxConcurrency, inFlight, admitted, training }: AdmissionState): number {
  const concurrency = Math.max(0, maxConcurrency - inFlight);
  if (!training) return concurrency;
  if (training.syncPending) return 0;
  const bound = training.leastTakenTrajectories ?? (training.maxStaleness + training.version + 1) * training.batchTrajectories;
  return Math.max(0, Math.min(concurrency, bound - admitted));
}
