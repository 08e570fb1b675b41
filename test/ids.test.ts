import { groupIdOf, isTrajectoryId, parseGroupOrTrajectoryId, rolloutIdOf, runIdOfWorkflowId, sessionIdOf, trajectoryIdOf } from '../src/core/ids';

describe('workflow ids', () => {
  it('makes ids that parse back to their parts', () => {
    const group = groupIdOf('run.1', 12);
    const trajectory = trajectoryIdOf(group, 3);
    expect(group).toBe('run.1.g00012');
    expect(trajectory).toBe('run.1.g00012.t003');
    expect(parseGroupOrTrajectoryId(group)).toEqual({ runId: 'run.1', groupIndex: 12 });
    expect(parseGroupOrTrajectoryId(trajectory)).toEqual({ runId: 'run.1', groupIndex: 12, trajectoryIndex: 3 });
    expect(parseGroupOrTrajectoryId(groupIdOf('r', 123456))).toEqual({ runId: 'r', groupIndex: 123456 });
    expect(sessionIdOf(trajectory, 2)).toBe('run.1.g00012.t003.s2');
  });

  it('tells trajectories from other workflows', () => {
    expect(isTrajectoryId('r.g00000.t000')).toBe(true);
    expect(isTrajectoryId('r.g00000')).toBe(false);
    expect(isTrajectoryId('r.rollout')).toBe(false);
    expect(isTrajectoryId('r.g00000.t000.s1')).toBe(false);
  });

  it('finds the run of every workflow id', () => {
    expect(runIdOfWorkflowId(trajectoryIdOf(groupIdOf('frozenlake-20260101T000000Z', 12), 3))).toBe('frozenlake-20260101T000000Z');
    expect(runIdOfWorkflowId('r.1.g00000')).toBe('r.1');
    expect(runIdOfWorkflowId(rolloutIdOf('train-x'))).toBe('train-x');
    expect(runIdOfWorkflowId('train-x')).toBe('train-x');
  });
});
