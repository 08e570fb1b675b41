/**
 * `trajflow report`: a run's data (fixture files written here in the layout a training run
 * leaves) -> chart SVGs (well-formed, titled, with axis labels and legends), PNGs (valid
 * signature, CRCs, dimensions), index.html with links into the Temporal Web UI, and the
 * per-step utilization derived from trace spans.
 */
import { mkdtempSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inflateSync } from 'node:zlib';
import { niceTicks, wrapText, type ChartSpec } from '../src/report/charts';
import { unionLength } from '../src/report/data';
import { bucketWidthS, latencyHistogram, temporalLinks, timeBuckets, writeReport } from '../src/report/report';
import { sealRecord } from '../src/store/files';
import { runLayout } from '../src/store/runLayout';

const RUN = 'fixture-20260101T000000Z';
const T0 = 1_800_000_000_000_000; // epoch µs

async function writeFixture(dataDir: string): Promise<void> {
  const run = runLayout(dataDir, RUN);
  const lines = (records: unknown[]) => records.map((r) => JSON.stringify(r)).join('\n') + '\n';
  // What the stores write is sealed (src/store/files.ts); trace files are plain JSON lines.
  const sealedLines = (records: unknown[]) => Buffer.concat(records.map((r) => sealRecord(r)));
  await fs.mkdir(run.trainDir, { recursive: true });
  await fs.mkdir(run.traceDir, { recursive: true });
  const metrics = [0, 1, 2].map((step) => ({
    step,
    version: step + 1,
    groupIds: [`${RUN}.g0000${step}`],
    trajectories: 2,
    rewardMean: 0.2 + 0.3 * step,
    successRate: 0.1 + 0.4 * step,
    loss: 0.1,
    tokens: 100,
    stalenessHistogram: step === 0 ? { 0: 100 } : { 0: 40, 1: 60 },
    stalenessMax: step === 0 ? 0 : 1,
    wallMs: 500,
    trainerIdleFraction: 0.5 - 0.1 * step,
    engineBusyFraction: 0.2 + 0.1 * step,
    elapsedS: 10 + 5 * step,
  }));
  await fs.writeFile(run.metricsFile, sealedLines(metrics));
  await fs.writeFile(
    run.evaluationsFile,
    sealedLines([
      { version: 0, successRate: 0, elapsedS: 5 },
      { version: 2, successRate: 0.5, elapsedS: 15.5 },
    ]),
  );
  const events: unknown[] = [];
  const env: unknown[] = [];
  for (const step of [0, 1, 2]) {
    for (const t of [0, 1]) {
      const wf = `${RUN}.g0000${step}.t00${t}`;
      await fs.mkdir(run.trajectoryDir(wf), { recursive: true });
      await fs.writeFile(run.trajectorySummaryFile(wf), sealRecord({ trajectoryId: wf, status: 'ended', reward: 0.5, envReturn: 0.5, turns: 2 }));
      // Trajectory of 1000 ms: 2 generate calls of 200 ms, 2 env steps of 50 ms, reset 10 ms.
      const start = T0 + (5 + 5 * step) * 1e6 + t * 100_000;
      events.push({ ph: 'X', name: 'trajectory', cat: 'trajectory', ts: start, dur: 1_000_000, args: { wf, outcome: 'completed' } });
      events.push({ ph: 'X', name: 'generate', cat: 'activity', ts: start + 100_000, dur: 200_000, args: { wf, activity: 'generate', turn: 0 } });
      events.push({ ph: 'X', name: 'generate', cat: 'activity', ts: start + 400_000, dur: 200_000, args: { wf, activity: 'generate', turn: 1 } });
      env.push({ ph: 'X', name: 'env.reset', cat: 'activity', ts: start + 20_000, dur: 10_000, args: { wf, activity: 'openSession' } });
      env.push({ ph: 'X', name: 'env.step', cat: 'activity', ts: start + 310_000, dur: 50_000, args: { wf, activity: 'sessionTurn', turn: 0 } });
      env.push({ ph: 'X', name: 'env.step', cat: 'activity', ts: start + 610_000, dur: 50_000, args: { wf, activity: 'sessionTurn', turn: 1 } });
    }
  }
  const trainer = [0, 1, 2].map((step) => ({
    ph: 'X',
    name: 'train.step',
    cat: 'activity',
    ts: T0 + (10 + 5 * step) * 1e6 - 500_000,
    dur: 500_000,
    args: { step, activity: 'trainStep' },
  }));
  const header = (role: string, pid: number) => ({ trajflowTrace: 1, role, run: RUN, host: 'h', pid, stamp: 's', clock: 'epoch-us', file: 0 });
  await fs.writeFile(
    path.join(run.traceDir, 'workflows-h-1-s-0000.jsonl'),
    lines([header('workflows', 1), ...events.filter((e) => (e as { name: string }).name === 'trajectory')]),
  );
  await fs.writeFile(
    path.join(run.traceDir, 'inference-h-1-s-0000.jsonl'),
    lines([header('inference', 1), ...events.filter((e) => (e as { name: string }).name === 'generate')]),
  );
  await fs.writeFile(path.join(run.traceDir, 'env-h-1-s-0000.jsonl'), lines([header('env', 1), ...env]));
  await fs.writeFile(path.join(run.traceDir, 'trainer-h-2-s-0000.jsonl'), lines([header('trainer', 2), ...trainer]));
}

/** Every tag opened is closed in order (a well-formedness check good enough for our own SVG). */
function assertWellFormed(xml: string): void {
  const body = xml.replace(/^<\?xml[^>]*\?>\s*/, '');
  const stack: string[] = [];
  for (const match of body.matchAll(/<(\/?)([a-zA-Z]+)([^>]*?)(\/?)>/g)) {
    const [, closing, name, attrs, selfClosing] = match;
    expect(attrs).not.toMatch(/[<&](?!amp;|lt;|gt;|quot;|apos;)/);
    if (selfClosing) continue;
    if (closing) expect(stack.pop()).toBe(name);
    else stack.push(name);
  }
  expect(stack).toEqual([]);
  expect(body.replace(/<[^>]*>/g, '')).not.toMatch(/[<>]|&(?!amp;|lt;|gt;|quot;|apos;)/);
}

/** PNG chunks, each CRC-checked; returns IHDR width and height and the inflated pixel data. */
function readPng(png: Buffer): { width: number; height: number; pixels: Buffer } {
  expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  let offset = 8;
  let width = 0;
  let height = 0;
  const idat: Buffer[] = [];
  while (offset < png.length) {
    const length = png.readUInt32BE(offset);
    const type = png.toString('ascii', offset + 4, offset + 8);
    const data = png.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      expect([data[8], data[9]]).toEqual([8, 2]);
    }
    if (type === 'IDAT') idat.push(data);
    offset += 12 + length;
    if (type === 'IEND') break;
  }
  expect(offset).toBe(png.length);
  const pixels = inflateSync(Buffer.concat(idat));
  expect(pixels.length).toBe(height * (width * 3 + 1));
  return { width, height, pixels };
}

describe('report', () => {
  test('pure helpers: ticks, wrapping, interval union, latency bins, Web UI links', () => {
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(3, 397, 8)).toEqual([0, 50, 100, 150, 200, 250, 300, 350, 400]);
    expect(wrapText('aaa bbb ccc', 70, 12)).toEqual(['aaa bbb', 'ccc']);
    expect(
      unionLength([
        [0, 10],
        [5, 15],
        [20, 30],
      ]),
    ).toBe(25);
    expect(
      unionLength(
        [
          [0, 10],
          [5, 15],
          [20, 30],
        ],
        8,
        22,
      ),
    ).toBe(9);
    expect([bucketWidthS(78.9), bucketWidthS(17), bucketWidthS(3), bucketWidthS(450)]).toEqual([10, 2, 1, 50]);
    expect(timeBuckets(25, 10)).toEqual([
      [0, 10],
      [10, 20],
      [20, 25],
    ]);
    expect(latencyHistogram([0.2, 0.3, 3, 700])).toEqual({
      categories: ['0-0.5', '0.5-1', '1-2', '2-5', '5-10', '10-20', '20-50', '50-100', '100-200', '200-500', '500-1s'],
      counts: [2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1],
    });
    const links = temporalLinks('my-run', { uiUrl: 'http://127.0.0.1:8233/' });
    expect(links.run).toBe('http://127.0.0.1:8233/namespaces/default/workflows/my-run');
    expect(decodeURIComponent(links.trajectories)).toBe(
      'http://127.0.0.1:8233/namespaces/default/workflows?query=TrajflowRun="my-run" AND TrajflowKind="trajectory"',
    );
  });

  test('renders SVG and PNG charts, utilization and an HTML page from a run folder', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'report-'));
    await writeFixture(dataDir);
    const report = await writeReport(dataDir, RUN);
    expect(report.outDir).toBe(runLayout(dataDir, RUN).reportDir);
    const names = (await fs.readdir(report.outDir)).sort();
    const charts = ['engine-busy', 'env-latency', 'reward-success', 'staleness', 'throughput', 'trainer-idle', 'trajectory-time'];
    expect(names).toEqual([...charts.flatMap((c) => [`${c}.png`, `${c}.svg`]), 'index.html', 'utilization.csv'].sort());

    const svg = (name: string) => fs.readFile(path.join(report.outDir, `${name}.svg`), 'utf8');
    for (const chart of charts) {
      const text = await svg(chart);
      expect(text).toMatch(/^<\?xml/);
      assertWellFormed(text);
      expect(text).not.toContain('no data for this chart');
      expect(text).not.toMatch(/NaN|undefined|Infinity/);
      const { width, height, pixels } = readPng(await fs.readFile(path.join(report.outDir, `${chart}.png`)));
      expect(width).toBe(1600);
      expect(height).toBeGreaterThanOrEqual(960);
      // Not blank: some dark (text, axes) pixels and some coloured (series) pixels.
      let dark = 0;
      let coloured = 0;
      for (let y = 0; y < height; y++) {
        for (let x = 0; x < width; x++) {
          const i = y * (width * 3 + 1) + 1 + x * 3;
          const [r, g, b] = [pixels[i], pixels[i + 1], pixels[i + 2]];
          if (r < 80 && g < 80 && b < 80) dark++;
          if (Math.max(r, g, b) - Math.min(r, g, b) > 80) coloured++;
        }
      }
      expect(dark).toBeGreaterThan(2000);
      expect(coloured).toBeGreaterThan(500);
    }
    const reward = await svg('reward-success');
    for (const label of [
      'Reward and success rate',
      'time since run start (s)',
      'reward / success rate (0-1)',
      'mean reward (sampled)',
      'success rate (sampled)',
      'held-out success (eval)',
    ])
      expect(reward).toContain(label);
    expect(await svg('engine-busy')).toContain('busy, % of wall time');
    expect(await svg('engine-busy')).toContain('env workers (any activity running), from trace');
    expect(await svg('trajectory-time')).toContain('waiting / other');
    expect(await svg('staleness')).toContain('staleness (policy versions behind the trained one)');
    expect(await svg('env-latency')).toContain('env.step spans (n=12)');

    // Per step: 2 trajectories of 1000 ms = 400 ms generation + 110 ms environment + 490 ms waiting.
    expect(report.utilization).toHaveLength(3);
    for (const u of report.utilization) {
      expect(u.timedTrajectories).toBe(2);
      expect(u.generationMs).toBeCloseTo(400);
      expect(u.environmentMs).toBeCloseTo(110);
      expect(u.waitingMs).toBeCloseTo(490);
      expect(u.envBusySource).toBe('trace');
    }
    // Step 1's interval is 10 s..15 s after T0: its two trajectories' env spans, 2 x 110 ms.
    expect(report.utilization[1].envBusyFraction).toBeCloseTo(0.22 / 5);

    const html = await fs.readFile(path.join(report.outDir, 'index.html'), 'utf8');
    expect(html).toContain(`href="http://127.0.0.1:8233/namespaces/default/workflows/${RUN}"`);
    expect(html).toContain(`workflows?query=${encodeURIComponent(`TrajflowRun="${RUN}" AND TrajflowKind="trajectory"`)}`);
    for (const chart of charts) expect(html).toContain(`<img src="${chart}.png"`);
    const csv = await fs.readFile(path.join(report.outDir, 'utilization.csv'), 'utf8');
    expect(csv.split('\n')[0]).toBe(
      'step,elapsedS,engineBusyFraction,envBusyFraction,envBusySource,trainerIdleFraction,timedTrajectories,generationMs,environmentMs,waitingMs',
    );
  });

  test('a rollout-only run (no train steps) is charted per bucket of wall time since its start', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'report-rollout-'));
    const run = 'rollout-20260101T000000Z';
    const layout = runLayout(dataDir, run);
    await fs.mkdir(layout.traceDir, { recursive: true });
    const lines = (records: unknown[]) => records.map((r) => JSON.stringify(r)).join('\n') + '\n';
    const header = (role: string) => ({ trajflowTrace: 1, role, run, host: 'h', pid: 1, stamp: 's', clock: 'epoch-us', file: 0 });
    const [workflows, inference, env]: unknown[][] = [[header('workflows')], [header('inference')], [header('env')]];
    // 6 trajectories of 2 s, one starting every 3 s: finished at 2, 5, ..., 17 s; t00n solved when n is even.
    for (let n = 0; n < 6; n++) {
      const wf = `${run}.g00000.t00${n}`;
      const start = T0 + n * 3e6;
      await fs.mkdir(layout.trajectoryDir(wf), { recursive: true });
      await fs.writeFile(
        layout.trajectorySummaryFile(wf),
        sealRecord({ trajectoryId: wf, status: 'terminated', reward: n % 2 ? 0 : 1, envReturn: n % 2 ? 0 : 1, turns: 1 }),
      );
      workflows.push({ ph: 'X', name: 'trajectory', cat: 'trajectory', ts: start, dur: 2e6, args: { wf, outcome: 'completed' } });
      inference.push({ ph: 'X', name: 'generate', cat: 'activity', ts: start + 100_000, dur: 1e6, args: { wf, activity: 'generate', turn: 0 } });
      inference.push({ ph: 'X', name: 'sample', cat: 'activity', ts: start + 100_000, dur: 1e6, args: { version: 0 } });
      inference.push({ ph: 'X', name: 'prefill', cat: 'engine', ts: start + 100_000, dur: 200_000, args: { tokens: 50 } });
      inference.push({ ph: 'X', name: 'decode', cat: 'engine', ts: start + 300_000, dur: 800_000, args: { batch: 1 } });
      env.push({ ph: 'X', name: 'env.step', cat: 'activity', ts: start + 1_200_000, dur: 100_000, args: { wf, activity: 'sessionTurn', turn: 0 } });
    }
    for (const [role, records] of [
      ['workflows', workflows],
      ['inference', inference],
      ['env', env],
    ] as const)
      await fs.writeFile(path.join(layout.traceDir, `${role}-h-1-s-0000.jsonl`), lines(records));

    const report = await writeReport(dataDir, run);
    const svg = (name: string) => fs.readFile(path.join(report.outDir, `${name}.svg`), 'utf8');
    for (const chart of report.charts) {
      const text = await svg(chart.name);
      assertWellFormed(text);
      expect(text).not.toContain('no data for this chart');
      expect(text).not.toMatch(/NaN|undefined|Infinity/);
      readPng(await fs.readFile(path.join(report.outDir, `${chart.name}.png`)));
    }
    // 17 s of finishes -> 2 s buckets; x is time since the run start, in seconds.
    const byName = new Map(report.charts.map((c) => [c.name, c]));
    for (const name of ['reward-success', 'throughput', 'engine-busy', 'trainer-idle'])
      expect(byName.get(name)!.xLabel).toBe('time since run start (s), 2 s buckets');
    expect(byName.get('trajectory-time')!.xLabel).toBe('trajectory finish time since run start (s), 2 s buckets');
    for (const name of ['reward-success', 'throughput', 'engine-busy', 'staleness', 'trajectory-time']) {
      const chart = byName.get(name)!;
      const values = chart.kind === 'line' ? chart.series.flatMap((s) => s.points) : chart.series.flatMap((s) => s.values);
      expect(values.length).toBeGreaterThan(0);
    }
    expect(await svg('engine-busy')).toContain('busy, % of wall time');
    expect(await svg('throughput')).toContain('trajectories / s');
    expect(await svg('trajectory-time')).toContain('mean ms per trajectory');
    expect(await svg('trainer-idle')).toContain('rollout run: no trainer, so no trainer idle time');
    expect(await svg('staleness')).toContain('policy version that sampled the turn');

    const reward = byName.get('reward-success') as Extract<ChartSpec, { kind: 'line' }>;
    // Bucket [4, 6) holds t001 (finished at 5 s, unsolved); [2, 4) holds t000 (2 s, solved).
    expect(reward.series[1].points).toContainEqual([3, 1]);
    expect(reward.series[1].points).toContainEqual([5, 0]);
    const busy = byName.get('engine-busy') as Extract<ChartSpec, { kind: 'line' }>;
    // [0, 2): t000's engine spans 0.1 s..1.1 s = 1 s of 2 s; env step 0.1 s of 2 s.
    expect(busy.series[0].points[0]).toEqual([1, 0.5]);
    expect(busy.series[1].points[0][1]).toBeCloseTo(0.05);
    const throughput = byName.get('throughput') as Extract<ChartSpec, { kind: 'line' }>;
    // Finished at 2, 5, 8, 11, 14 and 17 s; the last bucket is [16, 17].
    expect(throughput.series[0].points).toEqual([
      [1, 0],
      [3, 0.5],
      [5, 0.5],
      [7, 0],
      [9, 0.5],
      [11, 0.5],
      [13, 0],
      [15, 0.5],
      [16.5, 1],
    ]);
  });

  test('a run folder with only learning-curve.csv still renders, charts without data say so', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'report-csv-'));
    const run = runLayout(dataDir, 'csv-run');
    await fs.mkdir(run.dir, { recursive: true });
    await fs.writeFile(
      run.learningCurveFile,
      'step,version,elapsedS,successRate,heldOutSuccessRate,rewardMean\n,0,2,,0,\n0,1,5,0.25,,0.3\n1,2,9,0.5,0.75,0.6\n',
    );
    const report = await writeReport(dataDir, 'csv-run', path.join(dataDir, 'out'));
    const reward = await fs.readFile(path.join(dataDir, 'out', 'reward-success.svg'), 'utf8');
    expect(reward).not.toContain('no data for this chart');
    expect(await fs.readFile(path.join(dataDir, 'out', 'env-latency.svg'), 'utf8')).toContain('no data for this chart in this run');
    expect(report.utilization.map((u) => u.step)).toEqual([0, 1]);
    await expect(writeReport(dataDir, 'missing-run')).rejects.toThrow(/no run missing-run/);
  });
});
