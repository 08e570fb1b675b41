/** The learning benchmark's judgement of a curve: first reached, and held or lost since. */
import type { EvaluationRecord } from '../activities/evaluation';
import { formatRun, heldOutMilestones, sampledMilestones, untrainedSteps, type LearningRun } from '../bench/learning';
import type { StepMetrics } from '../src/rl/stepMetrics';

const curve = (rates: number[]) => rates.map((successRate, step) => ({ step, successRate, elapsedS: 10 * (step + 1) }) as StepMetrics);
const evaluations = (rates: number[]) => rates.map((successRate, i) => ({ version: 5 * i, successRate, elapsedS: 50 * i }) as EvaluationRecord);

describe('sampled-success milestones', () => {
  test('first step at or above each level, with its time', () => {
    const [half, most] = sampledMilestones(curve([0.1, 0.5, 0.6, 0.85, 0.9, 0.9, 0.9, 0.9, 0.9]), [0.5, 0.8]);
    expect(half).toEqual({ level: 0.5, at: 1, elapsedS: 20, held: true, settledAt: 4, settledElapsedS: 50 });
    expect(most).toEqual({ level: 0.8, at: 3, elapsedS: 40, held: true, settledAt: 6, settledElapsedS: 70 }); // means 0.59, 0.75, 0.83, ...
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
    expect(seventy).toEqual({ level: 0.7, at: 10, elapsedS: 100, held: false, settledAt: 25, settledElapsedS: 250 });
    expect(all).toEqual({ level: 0.95, held: false });
    expect(heldOutMilestones(evaluations([0, 0.75, 0.9, 0.8]), [0.7])[0]).toEqual({
      level: 0.7,
      at: 5,
      elapsedS: 50,
      held: true,
      settledAt: 5,
      settledElapsedS: 50,
    });
  });
});

describe('where a level settled (reached, and held from there to the end)', () => {
  test('a run that touched the level, dipped and came back settles at the end of its first window that then never fell below', () => {
    // Steps 0-9; the 5-step means ending at steps 4..9: 0.92, 0.92, 0.928, 0.936, 0.952, 0.96.
    const [level] = sampledMilestones(curve([0.8, 0.96, 0.96, 0.92, 0.96, 0.8, 1, 1, 1, 1]), [0.95]);
    expect(level).toEqual({ level: 0.95, at: 1, elapsedS: 20, held: false, settledAt: 8, settledElapsedS: 90 });
  });

  test('a run that ends below the level has not settled; one held from the start settles at its first full window', () => {
    const [ended] = sampledMilestones(curve([1, 1, 1, 1, 1, 1, 0.5, 0.5]), [0.95]);
    expect(ended).toEqual({ level: 0.95, at: 0, elapsedS: 10, held: false });
    const [held] = sampledMilestones(curve([1, 1, 1, 1, 1, 1]), [0.95]);
    expect(held).toMatchObject({ held: true, settledAt: 4 });
  });

  test('held-out: the first evaluation after which none fell below', () => {
    const [seventy] = heldOutMilestones(evaluations([0.8, 0.2, 0.75, 0.9]), [0.7]);
    expect(seventy).toEqual({ level: 0.7, at: 0, elapsedS: 0, held: false, settledAt: 10, settledElapsedS: 100 });
  });

  test('held-out by the mean of 3 evaluations: single noisy dips do not lose the level, a lasting fall does', () => {
    const noisy = evaluations([0, 0.75, 0.62, 0.81, 0.78, 0.66, 0.75]);
    // Each evaluation: lost at 0.62 and 0.66, settled only at the last one.
    expect(heldOutMilestones(noisy, [0.7])[0]).toEqual({ level: 0.7, at: 5, elapsedS: 50, held: false, settledAt: 30, settledElapsedS: 300 });
    // Means of 3 from the first reaching one: 0.727, 0.737, 0.75, 0.73; settled at the end of the first window.
    expect(heldOutMilestones(noisy, [0.7], 3)[0]).toEqual({ level: 0.7, at: 5, elapsedS: 50, held: true, settledAt: 15, settledElapsedS: 150 });
    const [fell] = heldOutMilestones(evaluations([0.8, 0.8, 0.8, 0.75, 0.4, 0.5]), [0.7], 3);
    expect(fell).toEqual({ level: 0.7, at: 0, elapsedS: 0, held: false });
  });
});

test('a level first touched in the last steps holds only if the last 5-step window is at it', () => {
  expect(sampledMilestones(curve([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.96]), [0.95])[0]).toEqual({ level: 0.95, at: 6, elapsedS: 70, held: false });
  expect(sampledMilestones(curve([0.5, 0.96, 0.96, 0.96, 0.96, 0.96, 0.96]), [0.95])[0]).toMatchObject({ at: 1, held: true, settledAt: 5 });
});

describe('steps that trained no group', () => {
  /** Steps taking 4 groups each, of which `skipped[i]` were dropped by the filter. */
  const stepsSkipping = (skipped: number[], corrupt: number[] = []) =>
    skipped.map((groupsSkipped, step) => ({ step, groups: 4, groupsSkipped, groupsCorrupt: corrupt[step] ?? 0, elapsedS: 10 * (step + 1) }) as StepMetrics);

  test('counts every step whose groups were all dropped, and finds the step from which none trained to the end', () => {
    expect(untrainedSteps(stepsSkipping([0, 4, 2, 4, 4, 4]))).toEqual({ count: 4, from: 3, fromElapsedS: 40 });
    // A corrupt group is not trained either.
    expect(untrainedSteps(stepsSkipping([0, 3, 0], [0, 1, 0]))).toEqual({ count: 1 });
    // The last step trained: the run had not stopped changing.
    expect(untrainedSteps(stepsSkipping([4, 4, 0]))).toEqual({ count: 2 });
  });

  test('a run recorded before groupsCorrupt existed is read as having none', () => {
    const old = stepsSkipping([4, 1]).map(({ groupsCorrupt: _, ...rest }) => rest as StepMetrics);
    expect(untrainedSteps(old)).toEqual({ count: 1 });
  });

  test("each run's report says how many, and from when", () => {
    const run: LearningRun = {
      config: 'random.yaml',
      seed: 9,
      repeat: 1,
      runId: 'random-1',
      steps: 6,
      wallSeconds: 60,
      sampled: [],
      heldOut: [],
      heldOutMean: [],
      untrained: untrainedSteps(stepsSkipping([0, 4, 2, 4, 4, 4])),
    };
    expect(formatRun(run).split('\n').at(-1)).toBe('    steps that trained no group: 4 of 6, every one from step 3 (40 s) to the end');
    expect(
      formatRun({ ...run, untrained: { count: 0 } })
        .split('\n')
        .at(-1),
    ).toBe('    steps that trained no group: 0 of 6');
  });
});
