/**
 * Tracing: the recorder's rolling, bounded files and run routing; the Perfetto export's merge of
 * several processes; and a short real training run (rollouts on the dev server, the embedded
 * engine in its thread, the trainer) whose exported trace is checked: well-formed events, every
 * span closed and properly nested on its lane, non-negative durations, a named track group per
 * role, every RL stage's spans and the counters present.
 */
import { mkdtempSync, promises as fs, readdirSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createLogger, installTemporalLogging } from '../src/log';
import { MockActivityEnvironment } from '@temporalio/testing';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { calculatorTool } from '../src/tools/calculator';
import { runToolCall } from '../src/tools/tool';
import { buildChromeTrace, exportRunTrace, readRunTrace, type ChromeEvent, type ChromeTrace, type TraceSegment } from '../src/trace/perfetto';
import { runLayout } from '../src/store/runLayout';
import { Recorder, tracer, type TraceEvent } from '../src/trace/recorder';
import { traceActivities } from '../src/trace/activityInterceptor';
import { trainingWorkflow } from '../workflows/training';
import { traceSinks } from '../src/trace/sinks';
import { startWorkers } from '../workers/start';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../workers/workflowWorker';
import { awaitRunClosed } from '../client/runWorkflows';
import { testConfig, trainingStart, withClient } from './support/harness';

function tempDir(name: string): string {
  return mkdtempSync(path.join(process.env.TRAJFLOW_TEST_DATA_DIR ?? os.tmpdir(), `${name}-`));
}

function traceFiles(dataDir: string, run: string): string[] {
  const dir = runLayout(dataDir, run).traceDir;
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => path.join(dir, f));
}

function lines(file: string): Record<string, unknown>[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

/**
 * Checks a Chrome trace the way a viewer needs it, and returns its problems (none = valid):
 * well-formed events, complete spans with non-negative durations that nest properly on their
 * lane, and a name for every track group and lane used.
 */
function traceProblems(trace: ChromeTrace): string[] {
  const problems: string[] = [];
  if (!Array.isArray(trace.traceEvents)) return ['traceEvents is not an array'];
  const processNames = new Map<number, string>();
  const threadNames = new Set<string>();
  const lanes = new Map<string, ChromeEvent[]>();
  for (const [i, e] of trace.traceEvents.entries()) {
    const where = `event ${i} (${JSON.stringify(e).slice(0, 120)})`;
    if (!['X', 'C', 'i', 'M'].includes(e.ph)) problems.push(`${where}: phase ${e.ph} (only complete spans, counters, instants, metadata)`);
    if (typeof e.name !== 'string' || e.name.length === 0) problems.push(`${where}: no name`);
    if (!Number.isInteger(e.pid) || e.pid <= 0 || !Number.isInteger(e.tid) || e.tid < 0) problems.push(`${where}: bad pid/tid`);
    if (e.ph === 'M') {
      if (e.name === 'process_name') processNames.set(e.pid, String(e.args?.name));
      if (e.name === 'thread_name') threadNames.add(`${e.pid}/${e.tid}`);
      continue;
    }
    if (typeof e.ts !== 'number' || !Number.isFinite(e.ts) || e.ts <= 0) problems.push(`${where}: bad ts`);
    if (e.ph === 'X') {
      if (typeof e.dur !== 'number' || !Number.isFinite(e.dur) || e.dur < 0) problems.push(`${where}: duration ${e.dur}`);
      const key = `${e.pid}/${e.tid}`;
      lanes.set(key, [...(lanes.get(key) ?? []), e]);
    }
    if (e.ph === 'C' && (typeof e.args !== 'object' || !Object.values(e.args ?? {}).every((v) => typeof v === 'number' && Number.isFinite(v)))) {
      problems.push(`${where}: counter values must be finite numbers`);
    }
  }
  for (const e of trace.traceEvents) {
    if (e.ph !== 'M' && !processNames.has(e.pid)) problems.push(`pid ${e.pid} has no process_name`);
  }
  for (const [key, spans] of lanes) {
    if (!threadNames.has(key)) problems.push(`lane ${key} has no thread_name`);
    // Spans of one lane either follow each other or nest.
    const sorted = [...spans].sort((a, b) => a.ts! - b.ts! || b.dur! - a.dur!);
    const open: number[] = [];
    for (const span of sorted) {
      while (open.length > 0 && open[open.length - 1] <= span.ts!) open.pop();
      const end = span.ts! + span.dur!;
      if (open.length > 0 && end > open[open.length - 1]) problems.push(`lane ${key}: ${span.name} at ${span.ts} overlaps a span it is not nested in`);
      open.push(end);
    }
  }
  return [...new Set(problems)].slice(0, 20);
}

describe('trace recorder', () => {
  it('rolls files by size and keeps only the newest maxFiles of a series', async () => {
    const dataDir = tempDir('trace-rolling');
    const recorder = new Recorder();
    recorder.configure({ enabled: true, maxFileBytes: 4096, maxFiles: 3, flushIntervalMs: 60_000 });
    const scope = { dataDir, role: 'env', run: 'rolling' };
    for (let i = 0; i < 400; i++) {
      recorder.begin('env.step', { cat: 'activity', scope, parent: null, attrs: { turn: i, wf: `rolling.g00000.t${String(i % 8).padStart(3, '0')}` } }).end();
      if (i % 50 === 49) await recorder.flush();
    }
    await recorder.flush();
    recorder.setEnabled(false);

    const files = traceFiles(dataDir, 'rolling');
    expect(files).toHaveLength(3);
    const numbers = files.map((f) => Number(/-(\d{4})\.jsonl$/.exec(f)![1]));
    // The oldest files were deleted: the kept ones are the last three of the series.
    expect(numbers[0]).toBeGreaterThan(0);
    expect(numbers).toEqual([numbers[0], numbers[0] + 1, numbers[0] + 2]);
    for (const file of files) {
      expect(statSync(file).size).toBeLessThanOrEqual(4096);
      const [header, ...events] = lines(file);
      expect(header).toMatchObject({ trajflowTrace: 1, role: 'env', run: 'rolling', pid: process.pid, clock: 'epoch-us' });
      for (const event of events) {
        expect(event).toMatchObject({ ph: 'X', name: 'env.step', cat: 'activity' });
        expect(event.dur as number).toBeGreaterThanOrEqual(0);
      }
    }
    // The last event recorded is in the newest file.
    const last = lines(files[2]).pop()!;
    expect((last.args as Record<string, unknown>).turn).toBe(399);
  });

  it('gives events without a run to the runs active in the process, and nests children under their parent', async () => {
    const dataDir = tempDir('trace-routing');
    const recorder = new Recorder();
    recorder.configure({ enabled: true, flushIntervalMs: 60_000 });
    // No run active: a process-level event has nowhere to go.
    recorder.complete('decode', 1, 2, { cat: 'engine', role: 'inference' });
    await recorder.flush();
    expect(() => readdirSync(runLayout(dataDir, 'a').traceDir)).toThrow();

    const parent = recorder.begin('generate', { cat: 'activity', scope: { dataDir, role: 'inference', run: 'a' }, parent: null });
    const other = recorder.begin('generate', { cat: 'activity', scope: { dataDir, role: 'inference', run: 'b' }, parent: null });
    recorder.complete('decode', 10, 20, { cat: 'engine', role: 'inference', attrs: { batch: 2 } });
    recorder.span('weights.load', { to: 1 }, () => undefined, { parent: parent as never });
    recorder.counter('engine', { batch: 2 }, { role: 'inference' });
    parent.end();
    other.end();
    await recorder.flush();
    recorder.setEnabled(false);

    const a = traceFiles(dataDir, 'a').flatMap(lines);
    const b = traceFiles(dataDir, 'b').flatMap(lines);
    expect(a.filter((e) => e.name === 'decode')).toHaveLength(1);
    expect(b.filter((e) => e.name === 'decode')).toHaveLength(1);
    expect(b.filter((e) => e.name === 'engine' && e.ph === 'C')).toHaveLength(1);
    const generate = a.find((e) => e.name === 'generate')!;
    const load = a.find((e) => e.name === 'weights.load')!;
    expect(load.p).toBe(generate.id);
    expect(load.cat).toBe('activity');
    expect(b.some((e) => e.name === 'weights.load')).toBe(false);
  });

  it('records a span per activity (through the interceptor) and per tool call inside it', async () => {
    const dataDir = tempDir('trace-tools');
    tracer.configure({ enabled: true, flushIntervalMs: 60_000 });
    try {
      const env = new MockActivityEnvironment(
        { activityType: 'sessionTurn', attempt: 2, workflowExecution: { workflowId: 'tools.g00000.t001', runId: 'r' } },
        { interceptors: [traceActivities(dataDir, 'env')], logger: new DefaultLogger('ERROR') },
      );
      const results: unknown[] = (await env.run(async () => [
        await runToolCall({ name: 'calculator', arguments: { expression: '6 * 7' } }, [calculatorTool], { defaultTimeoutMs: 1000 }),
        await runToolCall({ name: 'nope', arguments: {} }, [calculatorTool], { defaultTimeoutMs: 1000 }),
      ])) as unknown[];
      expect(results[0]).toEqual({ ok: true, output: '42' });
      await expect(env.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
      await tracer.flush();
    } finally {
      tracer.setEnabled(false);
    }
    // The run comes from the workflow id; the role from the worker.
    const files = traceFiles(dataDir, 'tools');
    expect(files.map((f) => path.basename(f).split('-')[0])).toEqual(['env']);
    const events = files.flatMap(lines);
    const [step, failed] = events.filter((e) => e.name === 'env.step');
    expect(step.args).toMatchObject({ activity: 'sessionTurn', attempt: 2, wf: 'tools.g00000.t001' });
    expect((failed.args as Record<string, unknown>).error).toBe('Error');
    const tools = events.filter((e) => e.name === 'tool');
    expect(tools.map((t) => (t.args as Record<string, unknown>).tool)).toEqual(['calculator', 'nope']);
    expect(tools.every((t) => t.p === step.id && t.cat === 'activity')).toBe(true);
    expect((tools[1].args as Record<string, unknown>).ok).toBe(false);
  });
});

describe('perfetto export', () => {
  const header = (role: string, pid: number) => ({ trajflowTrace: 1, role, run: 'm', host: 'h', pid, stamp: 's', file: 0, clock: 'epoch-us' });
  const span = (name: string, cat: string, ts: number, dur: number, extra: Partial<TraceEvent> = {}): TraceEvent =>
    ({ ph: 'X', name, cat, ts, dur, ...extra }) as TraceEvent;

  it('merges processes on one clock, packs overlapping spans onto lanes and nests children', () => {
    const segments: TraceSegment[] = [
      {
        file: 'a',
        header: header('inference', 100),
        events: [
          span('generate', 'activity', 1_000, 500, { id: 1 }),
          span('generate', 'activity', 1_100, 300, { id: 2 }),
          span('sample', 'activity', 1_050, 100, { p: 1 }),
          span('sample', 'activity', 1_150, 100, { p: 2 }),
          span('decode', 'engine', 1_060, 10, { args: { batch: 2 } }),
          { ph: 'C', name: 'engine', ts: 1_060, args: { batch: 2 } },
        ],
      },
      { file: 'b', header: header('env', 200), events: [span('env.step', 'activity', 900, 50), span('env.step', 'activity', 1_600, 50)] },
      { file: 'c', header: header('workflows', 300), events: [span('trajectory', 'trajectory', 800, 1_000, { args: { wf: 'm.g00000.t000' } })] },
    ];
    const { trace, summary } = buildChromeTrace('m', segments);
    expect(traceProblems(trace)).toEqual([]);
    expect(summary.groups.map((g) => g.role)).toEqual(['workflows', 'inference', 'env']);
    const names = trace.traceEvents.filter((e) => e.name === 'process_name').map((e) => e.args!.name);
    expect(names).toEqual(['workflow worker (h pid 300)', 'inference engine (h pid 100)', 'env worker (h pid 200)']);
    const inference = summary.groups.find((g) => g.role === 'inference')!;
    // Two overlapping generate calls need two lanes; the decode steps one more.
    expect(inference.lanes).toBe(3);
    const samples = trace.traceEvents.filter((e) => e.name === 'sample');
    const generates = trace.traceEvents.filter((e) => e.name === 'generate');
    expect(samples.map((s) => s.tid).sort()).toEqual(generates.map((g) => g.tid).sort());
    const threadNames = trace.traceEvents.filter((e) => e.name === 'thread_name' && e.pid === inference.pid).map((e) => e.args!.name);
    expect(threadNames.sort()).toEqual(['activity 1', 'activity 2', 'engine']);
    // Events are in time order after the metadata.
    const ts = trace.traceEvents.filter((e) => e.ph !== 'M').map((e) => e.ts!);
    expect(ts).toEqual([...ts].sort((x, y) => x - y));
  });

  it('derives trajectory spans and the in-flight count from activity spans when no workflow worker traced', () => {
    const act = (wf: string, ts: number, dur: number) => span('env.step', 'activity', ts, dur, { args: { wf } });
    const segments: TraceSegment[] = [
      { file: 'a', header: header('env', 1), events: [act('m.g00000.t000', 100, 10), act('m.g00000.t000', 300, 10), act('m.g00000.t001', 200, 400)] },
    ];
    const { trace, summary } = buildChromeTrace('m', segments);
    expect(traceProblems(trace)).toEqual([]);
    expect(summary.derivedTrajectories).toBe(2);
    const trajectories = trace.traceEvents.filter((e) => e.name === 'trajectory');
    expect(trajectories.map((t) => [t.ts, t.dur])).toEqual([
      [100, 210],
      [200, 400],
    ]);
    const inFlight = trace.traceEvents.filter((e) => e.ph === 'C').map((e) => e.args!.in_flight);
    expect(inFlight).toEqual([1, 2, 1, 0]);
  });

  it('keeps only the asked window, with each counter starting from its last earlier value', () => {
    const segments: TraceSegment[] = [
      {
        file: 'a',
        header: header('inference', 1),
        events: [
          span('decode', 'engine', 1_000_000, 10),
          span('decode', 'engine', 3_000_000, 10),
          { ph: 'C', name: 'engine', ts: 1_000_000, args: { batch: 3 } },
        ],
      },
    ];
    const { trace } = buildChromeTrace('m', segments, { fromS: 1, toS: 3 });
    expect(trace.traceEvents.filter((e) => e.name === 'decode').map((e) => e.ts)).toEqual([3_000_000]);
    expect(trace.traceEvents.filter((e) => e.ph === 'C').map((e) => [e.ts, e.args!.batch])).toEqual([[2_000_000, 3]]);
  });
});

describe('workflow trace hooks', () => {
  // Temporal's own logs at warn, as the workers set them up (the replay worker logs its states).
  beforeAll(() => {
    const logger = createLogger('test');
    logger.level = 'warn';
    installTemporalLogging(logger);
  });

  it('keep the recorded histories replaying deterministically (interceptor bundled, sinks registered)', async () => {
    const dir = path.join(__dirname, 'histories');
    const histories = readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .map((f) => ({ workflowId: f.replace(/\.json$/, ''), history: historyFromJSON(JSON.parse(readFileSync(path.join(dir, f), 'utf8'))) }));
    expect(histories.length).toBeGreaterThan(0);
    const bundle = await bundleWorkflowCode({
      workflowsPath: require.resolve('../workflows'),
      workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES,
      logger: new DefaultLogger('WARN'),
    });
    const dataDir = tempDir('trace-replay');
    tracer.configure({ enabled: true });
    try {
      let replayed = 0;
      for await (const result of Worker.runReplayHistories({ workflowBundle: bundle, sinks: traceSinks(dataDir) }, histories)) {
        expect(result.error).toBeUndefined();
        replayed++;
      }
      expect(replayed).toBe(histories.length);
      await tracer.flush();
    } finally {
      tracer.setEnabled(false);
    }
    // Replay records nothing: every event was recorded when the workflow first ran.
    expect(readdirSync(dataDir)).toEqual([]);
  });
});

describe('trace of a short training run', () => {
  it('has every RL stage as spans on named tracks per role, with the counters', async () => {
    const config = testConfig('trace', {
      model: { dModel: 32, nHeads: 2, dFF: 64, maxContext: 512 },
      agent: { maxTurns: 3 },
      sampling: { maxTokens: 8, temperature: 1 },
      rollout: { groupSize: 4, maxConcurrency: 8 },
      // The untrained policy fails every episode alike, so every advantage is 0 and a step would take
      // no optimizer step; the KL penalty to version 0 (beta) gives the trainer a gradient all the same.
      trainer: { steps: 2, batchGroups: 2, maxStaleness: 1, weightSync: 'turn', formatWarmupSteps: 0, loss: { beta: 0.01 } },
      // Small files, so the run rolls over several.
      trace: { maxFileBytes: 8192 },
    });
    const runId = 'trace-run';
    const logger = createLogger('test');
    logger.level = 'warn';
    const workers = await startWorkers(config, ['workflows', 'inference', 'env', 'trainer'], logger);
    try {
      const result = await withClient(async (client) => {
        const handle = await client.workflow.start(trainingWorkflow, trainingStart(config, runId));
        const trained = await handle.result();
        // The controller and the groups can close after the training workflow; their spans are
        // written when they do, so the workers stay up until then.
        expect(await awaitRunClosed(client, runId, { logger })).toBe(0);
        return trained;
      });
      expect(result.steps).toBe(2);
    } finally {
      await workers.shutdown();
    }

    // The files: bounded, each starting with its header, from this one process.
    const files = traceFiles(config.dataDir, runId);
    for (const file of files) {
      expect(statSync(file).size).toBeLessThanOrEqual(8192);
      expect(lines(file)[0]).toMatchObject({ trajflowTrace: 1, run: runId, pid: process.pid });
    }
    const roles = files.map((f) => path.basename(f).split('-')[0]);
    expect([...new Set(roles)].sort()).toEqual(['env', 'inference', 'trainer', 'workflows']);
    // The busiest series (the engine's decode steps) rolled over to more files.
    expect(roles.filter((r) => r === 'inference').length).toBeGreaterThan(1);

    const out = path.join(config.dataDir, 'trace.json');
    const summary = await exportRunTrace(config.dataDir, runId, out);
    const trace = JSON.parse(await fs.readFile(out, 'utf8')) as ChromeTrace;
    expect(traceProblems(trace)).toEqual([]);
    expect(summary.unreadableLines).toBe(0);
    expect(summary.derivedTrajectories).toBe(0);

    // One named track group per role.
    const processNames = trace.traceEvents.filter((e) => e.name === 'process_name').map((e) => String(e.args!.name));
    for (const title of ['workflow worker', 'inference engine', 'env worker', 'trainer']) {
      expect(processNames.filter((name) => name.startsWith(`${title} (`))).toHaveLength(1);
    }

    const spans = trace.traceEvents.filter((e) => e.ph === 'X');
    const named = (name: string) => spans.filter((e) => e.name === name);
    const stages = [
      'training',
      'controller',
      'group',
      'trajectory',
      'queue wait',
      'generate',
      'sample',
      'weights.load',
      'weights.read',
      'weights.apply',
      'weights.swap',
      'prefill',
      'decode',
      'env.reset',
      'env.step',
      'record.trajectory',
      'record.group',
      'train.prepare',
      'train.step',
      'checkpoint.load',
      'batch.load',
      'forward/backward',
      'optimizer',
      'weights.publish',
      'checkpoint.write',
    ];
    expect(stages.filter((stage) => named(stage).length === 0)).toEqual([]);
    expect(named('trajectory')).toHaveLength(16);
    // A session closes itself on its last turn and the trajectory scores itself: no activity for
    // either, the reward is on the trajectory's span.
    expect(named('env.close')).toEqual([]);
    expect(named('reward')).toEqual([]);
    expect(named('trajectory').every((e) => typeof e.args?.reward === 'number' && Number.isInteger(e.args?.turns))).toBe(true);
    expect(named('group')).toHaveLength(4);
    expect(named('train.step')).toHaveLength(2);
    expect(named('queue wait')).toHaveLength(4);
    expect(named('generate').length).toBeGreaterThanOrEqual(16);
    // Every decode step carries its batch size.
    expect(named('decode').every((e) => Number.isInteger(e.args?.batch) && (e.args!.batch as number) >= 1)).toBe(true);
    expect(Math.max(...named('decode').map((e) => e.args!.batch as number))).toBeGreaterThan(1);
    // Children sit on their parent's lane, inside it.
    const enclosing = (child: ChromeEvent) =>
      spans
        .filter(
          (s) =>
            s.cat === 'activity' && s !== child && s.pid === child.pid && s.tid === child.tid && s.ts! <= child.ts! && child.ts! + child.dur! <= s.ts! + s.dur!,
        )
        .map((s) => s.name);
    for (const child of [...named('forward/backward'), ...named('optimizer'), ...named('batch.load')]) expect(enclosing(child)).toContain('train.step');
    for (const child of named('weights.publish')) expect(enclosing(child)).toEqual(expect.arrayContaining([expect.stringMatching(/^train\.(step|prepare)$/)]));
    for (const child of named('sample')) expect(enclosing(child)).toContain('generate');
    // Spans of each role sit in that role's group.
    const roleOf = new Map(trace.traceEvents.filter((e) => e.name === 'process_name').map((e) => [e.pid, String(e.args!.name)]));
    expect(new Set(named('decode').map((e) => roleOf.get(e.pid)!.split(' (')[0]))).toEqual(new Set(['inference engine']));
    expect(new Set(named('env.step').map((e) => roleOf.get(e.pid)!.split(' (')[0]))).toEqual(new Set(['env worker']));
    expect(new Set(named('trajectory').map((e) => roleOf.get(e.pid)!.split(' (')[0]))).toEqual(new Set(['workflow worker']));
    expect(new Set(named('optimizer').map((e) => roleOf.get(e.pid)!.split(' (')[0]))).toEqual(new Set(['trainer']));

    // Counters: in flight / admission blocked / version (controller), groups waiting (trainer
    // queue), engine batch occupancy, staleness.
    const counters = trace.traceEvents.filter((e) => e.ph === 'C');
    const keys = (name: string) => new Set(counters.filter((e) => e.name === name).flatMap((e) => Object.keys(e.args!)));
    expect(keys('rollout')).toEqual(new Set(['in_flight', 'admission_blocked', 'blocked_total', 'policy_version']));
    expect(keys('trainer queue')).toEqual(new Set(['groups_waiting']));
    expect(keys('engine')).toEqual(new Set(['batch', 'waiting', 'occupancy_pct']));
    expect(keys('staleness')).toEqual(new Set(['max', 'mean']));
    const inFlight = counters.filter((e) => e.name === 'rollout').map((e) => e.args!.in_flight as number);
    expect(Math.max(...inFlight)).toBe(8);
    expect(inFlight[inFlight.length - 1]).toBe(0);
    expect(counters.filter((e) => e.name === 'staleness').every((e) => (e.args!.max as number) <= 1)).toBe(true);

    // What a reader of the raw files sees agrees with the export.
    const raw = await readRunTrace(config.dataDir, runId);
    const rawSpans = raw.segments.flatMap((s) => s.events).filter((e) => e.ph === 'X').length;
    expect(summary.spans).toBe(rawSpans);
    if (process.env.TRAJFLOW_KEEP_TRACE) await fs.copyFile(out, process.env.TRAJFLOW_KEEP_TRACE);
    console.log(
      `trace of ${runId}: ${files.length} files, ${summary.spans} spans, ${summary.counters} counter values, ${(summary.bytes / 1024).toFixed(0)} KiB exported\n` +
        summary.groups.map((g) => `  ${g.name}: ${g.spans} spans on ${g.lanes} lanes, ${g.counters} counter values`).join('\n'),
    );
  });
});
