/**
 * Prometheus: the registry's text exposition format; the endpoint that appends the Temporal SDK's
 * metrics; and real workers started with `metrics.prometheusPort` (an env worker on the test dev
 * server) scraped over HTTP: trajflow's metrics after an activity ran, and the SDK's `temporal_`
 * metrics from the Core runtime's exporter. Also the env busy tracker behind envBusyFraction.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createLogger } from '../src/log';
import { BusyTracker, busyFraction, type BusySnapshot } from '../src/metrics/busy';
import { MetricsRegistry, startMetricsServer } from '../src/metrics/prometheus';
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

async function get(url: string): Promise<{ status: number; type: string; body: string }> {
  const response = await fetch(url);
  return { status: response.status, type: response.headers.get('content-type') ?? '', body: await response.text() };
}

describe('prometheus', () => {
  test('registry exposition: HELP and TYPE per family, escaped labels, counters add up', async () => {
    const registry = new MetricsRegistry().counter('x_total', 'things\ndone').gauge('y', 'a gauge');
    registry.inc('x_total', { role: 'env', activity: 'a"b\\c' });
    registry.inc('x_total', { activity: 'a"b\\c', role: 'env' }, 2);
    registry.set('y', {}, 1.5);
    let collected = 0;
    registry.onCollect(() => registry.set('y', { k: 'v' }, ++collected));
    const text = await registry.expose();
    expect(text).toBe(
      [
        '# HELP x_total things\\ndone',
        '# TYPE x_total counter',
        'x_total{activity="a\\"b\\\\c",role="env"} 3',
        '# HELP y a gauge',
        '# TYPE y gauge',
        'y 1.5',
        'y{k="v"} 1',
        '',
      ].join('\n'),
    );
    expect(() => registry.inc('nope')).toThrow(/not defined/);
    expect(() => registry.gauge('x_total', '')).toThrow(/counter/);
  });

  test('endpoint serves /metrics with the exposition content type and appends the upstream (SDK) text', async () => {
    const upstream = http.createServer((_req, res) => res.end('# TYPE temporal_fake counter\ntemporal_fake 7\n'));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const registry = new MetricsRegistry().gauge('trajflow_up', 'up');
    registry.set('trajflow_up', {}, 1);
    const server = await startMetricsServer({ port: 0, registry, upstream: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/metrics` });
    try {
      const scraped = await get(server.url);
      expect(scraped.status).toBe(200);
      expect(scraped.type).toBe('text/plain; version=0.0.4; charset=utf-8');
      const samples = parseExposition(scraped.body);
      expect(samples.get('trajflow_up')).toEqual([{ labels: '', value: 1 }]);
      expect(samples.get('temporal_fake')).toEqual([{ labels: '', value: 7 }]);
      expect((await get(server.url.replace('/metrics', '/other'))).status).toBe(404);
    } finally {
      await server.close();
      upstream.close();
    }
    // An unreachable upstream leaves a comment, not a failed scrape.
    const lonely = await startMetricsServer({ port: 0, registry, upstream: 'http://127.0.0.1:9/metrics' });
    const text = (await get(lonely.url)).body;
    await lonely.close();
    expect(text).toMatch(/# temporal sdk metrics unavailable/);
    parseExposition(text);
  });

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
    const snap = (workerId: string, uptimeMs: number, busyMs: number): BusySnapshot => ({
      workerId,
      uptimeMs,
      busyMs,
      activityMs: 0,
      activities: 0,
      inFlight: 0,
      writtenAt: 0,
    });
    expect(busyFraction([snap('a', 100, 10)], [snap('a', 1100, 260), snap('b', 50, 40)], 1000)).toBeCloseTo(0.29);
    expect(busyFraction([], [], 1000)).toBeUndefined();
  });

  test('workers with metrics.prometheusPort serve trajflow and Temporal SDK metrics', async () => {
    const port = await freePort();
    let temporalPort = await freePort();
    while (temporalPort === port) temporalPort = await freePort();
    const config = testConfig('prometheus', {}, { metrics: { prometheusPort: port, temporalPrometheusPort: temporalPort } });
    const workers = await startWorkers(config, ['env'], createLogger('test'));
    try {
      expect(workers.metricsUrl).toBe(`http://127.0.0.1:${port}/metrics`);
      // The env worker's meter counts an activity run through its interceptor chain.
      const { meterActivities } = await import('../src/metrics/activityMetrics');
      const interceptors = meterActivities('env')({ info: { activityType: 'recordTrajectory' } } as never);
      await new MockActivityEnvironment().run(async () => interceptors.inbound!.execute!({ args: [{}], headers: {} } as never, async () => 'ok'));
      const samples = await eventually(async () => {
        const s = parseExposition((await get(workers.metricsUrl!)).body);
        // The SDK's exporter reports once its worker has polled.
        return [...s.keys()].some((k) => k.startsWith('temporal_')) ? s : undefined;
      });
      expect(samples.get('trajflow_trajectories_finished_total')?.[0].value).toBeGreaterThanOrEqual(1);
      expect(samples.get('trajflow_activities_total')).toContainEqual({ labels: '{activity="recordTrajectory",outcome="completed",role="env"}', value: 1 });
      expect(samples.get('trajflow_worker_uptime_seconds')?.[0].value).toBeGreaterThan(0);
      expect(samples.has('trajflow_worker_busy_seconds')).toBe(true);
      const temporal = [...samples.keys()].filter((k) => k.startsWith('temporal_'));
      expect(temporal.length).toBeGreaterThan(0);
    } finally {
      await workers.shutdown();
    }
  });
});
