/** The learning benchmark's judgement of a curve: first reached, and held or lost since. */
import type { EvaluationRecord } from '../activities/evaluation';
import { heldOutMilestones, sampledMilestones } from '../bench/learning';
import type { StepMetrics } from '../src/rl/stepMetrics';

const curve = (rates: number[]) => rates.map((successRate, step) => ({ step, successRate, elapsedS: 10 * (step + 1) }) as StepMetrics);
const evaluations = (rates: number[]) => rates.map((successRate, i) => ({ version: 5 * i, successRate, elapsedS: 50 * i }) as EvaluationRecord);

describe('sampled-success milestones', () => {
  test('first step at or above each level, with its time', () => {
    const [half, most] = sampledMilestones(curve([0.1, 0.5, 0.6, 0.85, 0.9, 0.9, 0.9, 0.9, 0.9]), [0.5, 0.8]);
    expect(half).toEqual({ level: 0.5, at: 1, elapsedS: 20, held: true });
    expect(most).toEqual({ level: 0.8, at: 3, elapsedS: 40, held: true });
  });

  test('a single bad step inside a good 5-step window does not count as lost; a collapse does', () => {
    const [dip] = sampledMilestones(curve([0.96, 1, 1, 0.8, 1, 1, 1, 1]), [0.95]);
    expect(dip.held).toBe(true); // every 5-step mean >= 0.95 (the dip window averages 0.952)
    const [collapse] = sampledMilestones(curve([0.96, 1, 1, 1, 1, 0.5, 0.4, 0.3, 0.2, 0.1]), [0.95]);
    expect(collapse).toMatchObject({ at: 0, held: false });
  });

  test('never reached', () => {
    expect(sampledMilestones(curve([0.1, 0.2]), [0.5])).toEqual([{ level: 0.5, held: false }]);
  });
});

describe('held-out milestones', () => {
  test('first evaluated version at or above; lost if any later evaluation falls below', () => {
    const [seventy, all] = heldOutMilestones(evaluations([0, 0.4, 0.75, 0.8, 0.6, 0.9]), [0.7, 0.95]);
    expect(seventy).toEqual({ level: 0.7, at: 10, elapsedS: 100, held: false });
    expect(all).toEqual({ level: 0.95, held: false });
    expect(heldOutMilestones(evaluations([0, 0.75, 0.9, 0.8]), [0.7])[0]).toEqual({ level: 0.7, at: 5, elapsedS: 50, held: true });
  });
});
