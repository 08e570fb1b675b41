/** Which of the Temporal runtime's log lines trajflow's logger shows, and at what level. */
import { levelOfTemporalLine } from '../src/log';

const SLOW_TASK = '[TMPRL1104] 01a2:4:1 Workflow task duration exceeded 5 seconds.';

test("a trajectory's long workflow task is debug; any other workflow's still warns", () => {
  // A trajectory holds its task open while local sessions and model calls run.
  expect(levelOfTemporalLine('WARN', SLOW_TASK, { workflowType: 'trajectoryWorkflow' })).toBe('debug');
  expect(levelOfTemporalLine('WARN', SLOW_TASK, { workflowType: 'trainingWorkflow' })).toBe('warn');
  expect(levelOfTemporalLine('WARN', SLOW_TASK)).toBe('warn');
  expect(levelOfTemporalLine('WARN', 'Failed to poll for task', { workflowType: 'trajectoryWorkflow' })).toBe('warn');
});

test('role-specific workers do not report the half they do not register', () => {
  expect(levelOfTemporalLine('WARN', 'No workflows registered, not polling for workflow tasks')).toBeUndefined();
  expect(levelOfTemporalLine('WARN', 'No activities registered, not polling for activity tasks')).toBeUndefined();
  expect(levelOfTemporalLine('ERROR', 'Worker failed')).toBe('error');
});
