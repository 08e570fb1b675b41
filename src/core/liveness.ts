/**
 * How a trajectory notices that a worker running its activity has died. Pure: activities heartbeat
 * at the interval, workflows set the timeouts.
 *
 * A running `generate`, session opening or turn heartbeats every HEARTBEAT_INTERVAL_MS; one silent
 * for ACTIVITY_HEARTBEAT_TIMEOUT is retried elsewhere. The SDK sends heartbeats at most every 80%
 * of the timeout, so the timeout must leave room for a slow round trip after that.
 */
export const HEARTBEAT_INTERVAL_MS = 2_000;
export const ACTIVITY_HEARTBEAT_TIMEOUT = '10 seconds';
