/**
 * trajflow's own Prometheus metrics: a small registry of counters and gauges, the text exposition
 * format (version 0.0.4), and an HTTP endpoint (`/metrics`) that also appends the Temporal SDK's
 * metrics, scraped from the Core runtime's own Prometheus exporter, so one target has both.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Labels = Record<string, string>;
type MetricType = 'counter' | 'gauge';

interface Family {
  name: string;
  help: string;
  type: MetricType;
  values: Map<string, { labels: Labels; value: number }>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function labelKey(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}="${escapeLabel(labels[k])}"`)
    .join(',');
}

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

export class MetricsRegistry {
  private readonly families = new Map<string, Family>();
  private readonly collectors = new Set<() => void | Promise<void>>();

  private define(name: string, help: string, type: MetricType): void {
    if (!NAME.test(name)) throw new Error(`invalid metric name ${JSON.stringify(name)}`);
    const existing = this.families.get(name);
    if (existing && existing.type !== type) throw new Error(`metric ${name} is a ${existing.type}, not a ${type}`);
    if (!existing) this.families.set(name, { name, help, type, values: new Map() });
  }

  counter(name: string, help: string): this {
    this.define(name, help, 'counter');
    return this;
  }

  gauge(name: string, help: string): this {
    this.define(name, help, 'gauge');
    return this;
  }

  private family(name: string): Family {
    const f = this.families.get(name);
    if (!f) throw new Error(`metric ${name} is not defined`);
    return f;
  }

  inc(name: string, labels: Labels = {}, by = 1): void {
    const f = this.family(name);
    const key = labelKey(labels);
    const current = f.values.get(key);
    if (current) current.value += by;
    else f.values.set(key, { labels: { ...labels }, value: by });
  }

  set(name: string, labels: Labels, value: number): void {
    this.family(name).values.set(labelKey(labels), { labels: { ...labels }, value });
  }

  /** Runs at every scrape before exposition (gauges read from elsewhere); returns its remover. */
  onCollect(fn: () => void | Promise<void>): () => void {
    this.collectors.add(fn);
    return () => this.collectors.delete(fn);
  }

  async expose(): Promise<string> {
    for (const collect of this.collectors) await Promise.resolve(collect()).catch(() => undefined);
    const lines: string[] = [];
    for (const f of this.families.values()) {
      lines.push(`# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${f.name} ${f.type}`);
      for (const { labels, value } of f.values.values()) {
        const key = labelKey(labels);
        lines.push(`${f.name}${key ? `{${key}}` : ''} ${formatValue(value)}`);
      }
    }
    return lines.join('\n') + '\n';
  }
}

/** The process's registry, with trajflow's metric families. */
export const metrics = new MetricsRegistry()
  .counter('trajflow_activities_total', 'Activity executions finished on this worker, by role, activity type and outcome')
  .counter('trajflow_activity_seconds_total', 'Time spent in activity executions, by role and activity type (seconds)')
  .gauge('trajflow_activities_in_flight', 'Activity executions running now, by role')
  .counter('trajflow_trajectories_finished_total', 'Trajectories recorded (recordTrajectory activities completed) on this worker')
  .counter('trajflow_turns_generated_total', 'Model turns generated (generate activities completed) on this worker')
  .counter('trajflow_train_steps_total', 'Train steps completed on this worker')
  .gauge('trajflow_worker_busy_seconds', 'Seconds with at least one activity running since the worker started, by role')
  .gauge('trajflow_worker_uptime_seconds', 'Seconds since the worker role started, by role')
  .gauge('trajflow_engine_busy_seconds', 'Seconds the inference engine spent in forward passes since it started')
  .gauge('trajflow_engine_uptime_seconds', 'Seconds since the inference engine started')
  .gauge('trajflow_engine_generated_tokens', 'Tokens the inference engine generated since it started')
  .gauge('trajflow_engine_decode_steps', 'Decode steps the inference engine ran since it started')
  .gauge('trajflow_engine_mean_batch_size', 'Mean sequences per decode step since the engine started')
  .gauge('trajflow_engine_running_sequences', 'Sequences the engine is decoding now')
  .gauge('trajflow_engine_waiting_sequences', 'Sequences waiting for a batch slot now')
  .gauge('trajflow_engine_policy_version', 'Policy version the engine serves now')
  .gauge('trajflow_train_step', 'Number of the last completed train step, by run')
  .gauge('trajflow_train_reward_mean', 'Mean reward of the last train step batch, by run')
  .gauge('trajflow_train_success_rate', 'Success rate of the last train step batch (0-1), by run')
  .gauge('trajflow_train_loss', 'Loss of the last train step, by run')
  .gauge('trajflow_train_tokens', 'Trained tokens in the last train step, by run')
  .gauge('trajflow_train_staleness_max', 'Largest staleness (policy versions) of a token in the last train step, by run')
  .gauge('trajflow_train_trainer_idle_fraction', 'Trainer idle fraction over the last train step interval, by run')
  .gauge('trajflow_train_engine_busy_fraction', 'Engine busy fraction over the last train step interval, by run')
  .gauge('trajflow_train_env_busy_fraction', 'Env worker busy fraction over the last train step interval, by run');

export interface MetricsServer {
  port: number;
  url: string;
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  port: number;
  host?: string;
  registry?: MetricsRegistry;
  /** The Temporal SDK's Prometheus endpoint, whose text is appended to each scrape. */
  upstream?: string;
}

async function scrapeUpstream(url: string): Promise<string> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    if (!response.ok) return `# temporal sdk metrics unavailable: HTTP ${response.status}\n`;
    const text = await response.text();
    return text.endsWith('\n') || text.length === 0 ? text : `${text}\n`;
  } catch (err) {
    return `# temporal sdk metrics unavailable: ${(err as Error).message.replace(/\n/g, ' ')}\n`;
  }
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const registry = options.registry ?? metrics;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (req.method !== 'GET' || (url.pathname !== '/metrics' && url.pathname !== '/')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found; metrics are at /metrics\n');
      return;
    }
    void (async () => {
      const own = await registry.expose();
      const sdk = options.upstream ? await scrapeUpstream(options.upstream) : '';
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(own + sdk);
    })().catch((err) => res.writeHead(500).end(String(err)));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '127.0.0.1', () => resolve());
  });
  server.unref();
  const { port, address } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return {
    port,
    url: `http://${host}:${port}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
