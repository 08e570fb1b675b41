/** The printed learning curve's milestones: when a run first reached the benchmark levels. */
import type { EvaluationRecord } from '../activities/evaluation';
import { formatMilestones } from '../client/learningCurve';
import type { StepMetrics } from '../src/rl/stepMetrics';

const step = (n: number, successRate: number, elapsedS: number) => ({ step: n, version: n + 1, successRate, elapsedS }) as StepMetrics;
const evaluation = (version: number, successRate: number, elapsedS: number) => ({ version, successRate, elapsedS }) as EvaluationRecord;

describe('formatMilestones', () => {
  it('names the first step at or above each sampled level and the first held-out version at 70%', () => {
    const curve = [step(0, 0.1, 40), step(1, 0.5, 44), step(2, 0.94, 48), step(3, 0.81, 52), step(4, 0.96, 56)];
    const evaluations = [evaluation(0, 0, 30), evaluation(5, 0.75, 60), evaluation(10, 0.9, 80)];
    expect(formatMilestones(curve, evaluations)).toEqual([
      '  sampled success first >= 50.0%: step 1 (44 s), >= 80.0%: step 2 (48 s), >= 95.0%: step 4 (56 s)',
      '  held-out success first >= 70.0%: version 5 (60 s); best 90.0% (version 10)',
    ]);
  });

  it('says when a level was not reached, and that no version was evaluated in a run without evaluations', () => {
    expect(formatMilestones([step(0, 0.6, 40)], [])).toEqual([
      '  sampled success first >= 50.0%: step 0 (40 s), >= 80.0%: not reached, >= 95.0%: not reached',
      '  held-out success: no version evaluated (eval.everySteps)',
    ]);
    expect(formatMilestones([step(0, 0.6, 40)], [evaluation(0, 0.5, 30)])[1]).toBe('  held-out success first >= 70.0%: not reached; best 50.0% (version 0)');
  });
});
