/** The run summary and the learning curve as tables for the terminal. */
import type { RunSummary } from '../client/runRollout';
import type { TrainingSummary } from '../client/runTraining';
import { curveRows, formatMilestones, percent } from '../client/learningCurve';

export function formatCurve(summary: TrainingSummary): string {
  const lines = [`training ${summary.result.runId}: ${summary.result.steps} steps, version ${summary.result.version}, ${summary.wallSeconds.toFixed(1)} s`];
  lines.push('  step  elapsed  success  held-out  reward   loss      kl        staleness<=  trainer idle  engine busy');
  for (const m of curveRows(summary.curve, summary.evaluations)) {
    const fixed = (x: number | undefined, digits: number, width: number) => (x === undefined ? '' : x.toFixed(digits)).padStart(width);
    lines.push(
      [
        (m.step === undefined ? '-' : String(m.step)).padStart(6),
        `${fixed(m.elapsedS, 0, 6)}s`,
        percent(m.successRate).padStart(7),
        percent(m.heldOutSuccessRate).padStart(9),
        fixed(m.rewardMean, 3, 7),
        fixed(m.loss, 5, 8),
        fixed(m.approxKl, 5, 8),
        fixed(m.stalenessMax, 0, 11),
        percent(m.trainerIdleFraction).padStart(13),
        percent(m.engineBusyFraction).padStart(12),
      ].join('  '),
    );
  }
  lines.push(...formatMilestones(summary.curve, summary.evaluations));
  return lines.join('\n');
}

export function formatSummary(s: RunSummary): string {
  return [
    `run ${s.runId}`,
    `  groups              ${s.groups}`,
    `  trajectories        ${s.trajectories} (${s.failedTrajectories} failed)`,
    `  mean reward         ${s.meanReward.toFixed(3)} (success rate ${(100 * s.successRate).toFixed(1)}%)`,
    `  mean turns          ${s.meanTurns.toFixed(2)}`,
    `  wall time           ${s.wallSeconds.toFixed(1)} s`,
    `  trajectories/s      ${s.trajectoriesPerSecond.toFixed(2)}`,
    `  engine busy         ${s.engineBusyFraction === undefined ? 'not measured (no engine published its counters)' : `${percent(s.engineBusyFraction)} of engine time`}`,
  ].join('\n');
}
