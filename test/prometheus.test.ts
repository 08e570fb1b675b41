/**
 * Prometheus: real workers started with `metrics.prometheusPort` (an env worker on the test dev
 * server) scraped over HTTP: trajflow's counters, gauges and duration histogram after activities
 * ran, beside the SDK's `temporal_` metrics, all from the runtime's one exporter. Also the env busy
 * tracker behind envBusyFraction.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { createLogger } from '../src/log';
import { BusyTracker, busyFraction, type BusySnapshot } from '../src/metrics/busy';
import { freePort } from '../src/ports';
import { startWorkers } from '../workers/start';
import { eventually, testConfig } from './support/harness';

/** Checks every line of an exposition: HELP/TYPE comments or `name{labels} value`. */
function parseExposition(text: string): Map<string, { labels: string; value: number }[]> {
  const samples = new Map<string, { labels: string; value: number }[]>();
  const typed = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) typed.add(type[1]);
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|NaN|\+Inf|-Inf)( \d+)?$/.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const list = samples.get(m[1]) ?? [];
    list.push({ labels: m[2] ?? '', value: Number(m[3]) });
    samples.set(m[1], list);
  }
  return samples;
}

describe('prometheus', () => {
  test('busy tracker: overlapping activities count once; fraction between snapshots', async () => {
    const tracker = new BusyTracker();
    const a = tracker.begin();
    const b = tracker.begin();
    await new Promise((r) => setTimeout(r, 30));
    a();
    a();
    await new Promise((r) => setTimeout(r, 20));
    b();
    const s = tracker.stats();
    expect(s.activities).toBe(2);
    expect(s.inFlight).toBe(0);
    expect(s.busyMs).toBeGreaterThanOrEqual(45);
    expect(s.activityMs).toBeGreaterThan(s.busyMs);
    expect(tracker.mostInFlight).toBe(2);
    tracker.begin()();
    expect(tracker.mostInFlight).toBe(2);
    const snap = (workerId: string, uptimeMs: number, busyMs: number): BusySnapshot => ({
      workerId,
      uptimeMs,
      busyMs,
      activityMs: 0,
      activities: 0,
      inFlight: 0,
      writtenAt: 0,
    });
    // a: 250 ms busy of 1000; b, new since: 40 of its 50.
    expect(busyFraction([snap('a', 100, 10)], [snap('a', 1100, 260), snap('b', 50, 40)])).toBeCloseTo(290 / 1050);
    expect(busyFraction([], [])).toBeUndefined();
  });

  test('workers with metrics.prometheusPort serve trajflow and Temporal SDK metrics from one endpoint', async () => {
    const port = await freePort();
    const config = testConfig('prometheus', {}, { metrics: { prometheusPort: port } });
    const workers = await startWorkers(config, ['env'], createLogger('test'));
    try {
      expect(workers.metricsUrl).toBe(`http://127.0.0.1:${port}/metrics`);
      // The env worker's meter counts activities run through its interceptor chain: two that
      // complete (20 ms and 0 ms) and one that fails.
      const { meterActivities } = await import('../src/metrics/activityMetrics');
      const interceptors = (type: string) => meterActivities('env')({ info: { activityType: type } } as never);
      const env = new MockActivityEnvironment();
      const slow = async () => new Promise((resolve) => setTimeout(() => resolve('ok'), 20));
      await env.run(async () => interceptors('recordTrajectory').inbound!.execute!({ args: [{}], headers: {} } as never, slow));
      await env.run(async () => interceptors('recordTrajectory').inbound!.execute!({ args: [{}], headers: {} } as never, async () => 'ok'));
      await expect(
        env.run(async () =>
          interceptors('envStep').inbound!.execute!({ args: [{}], headers: {} } as never, async () => {
            throw new Error('boom');
          }),
        ),
      ).rejects.toThrow('boom');
      const samples = await eventually(async () => {
        const response = await fetch(workers.metricsUrl!);
        const s = parseExposition(await response.text());
        // The SDK's own metrics appear once its worker has polled; the busy gauges once sampled.
        return [...s.keys()].some((k) => k.startsWith('temporal_')) && s.has('trajflow_worker_busy_seconds') ? s : undefined;
      });
      expect(samples.get('trajflow_trajectories_finished_total')).toEqual([{ labels: '', value: 2 }]);
      expect(samples.get('trajflow_activities_total')).toContainEqual({ labels: '{activity="recordTrajectory",outcome="completed",role="env"}', value: 2 });
      expect(samples.get('trajflow_activities_total')).toContainEqual({ labels: '{activity="envStep",outcome="failed",role="env"}', value: 1 });
      expect(samples.get('trajflow_activities_in_flight')).toContainEqual({ labels: '{role="env"}', value: 0 });
      // The duration histogram: both recordTrajectory runs under 1 s, the 20 ms one above 10 ms.
      const bucket = (le: string) =>
        samples.get('trajflow_activity_duration_seconds_bucket')!.find((b) => b.labels === `{activity="recordTrajectory",role="env",le="${le}"}`)?.value;
      expect(bucket('0.01')).toBe(1);
      expect(bucket('1')).toBe(2);
      expect(bucket('+Inf')).toBe(2);
      expect(samples.get('trajflow_activity_duration_seconds_sum')!.find((b) => b.labels.includes('recordTrajectory'))!.value).toBeGreaterThanOrEqual(0.02);
      expect(samples.get('trajflow_worker_uptime_seconds')?.[0].value).toBeGreaterThan(0);
      expect([...samples.keys()].filter((k) => k.startsWith('temporal_')).length).toBeGreaterThan(0);
    } finally {
      await workers.shutdown();
    }
  });
});
