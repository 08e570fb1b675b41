/**
 * Chart specs (pure data) and their layout into scenes: a title, axes with ticks and unit labels,
 * light grid lines, a legend naming every series, and a note line for how the data was derived.
 */
import { textWidth, type Scene, type Shape } from './scene';

export const PALETTE = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9', '#000000'];

export interface LineSeries {
  name: string;
  points: [number, number][];
  color?: string;
  /** Draw a dot at each point (sparse series such as held-out evaluations). */
  markers?: boolean;
}

export interface LineChart {
  kind: 'line';
  /** File name stem: <name>.svg / <name>.png. */
  name: string;
  title: string;
  xLabel: string;
  yLabel: string;
  series: LineSeries[];
  yMin?: number;
  yMax?: number;
  /** Tick label formatting: plain numbers or percent (values are fractions). */
  yFormat?: 'number' | 'percent';
  note?: string;
  /** What the plot area says when there is nothing to draw (default: no data in this run). */
  empty?: string;
}

export interface BarChart {
  kind: 'bar';
  name: string;
  title: string;
  xLabel: string;
  yLabel: string;
  categories: string[];
  /** One value per category per series; stacked when `stacked`, else side by side. */
  series: { name: string; values: number[]; color?: string }[];
  stacked?: boolean;
  note?: string;
  empty?: string;
}

export type ChartSpec = LineChart | BarChart;

const WIDTH = 800;
const HEIGHT = 480;
const MARGIN = { left: 84, right: 40, top: 52, bottom: 100 };
const AXIS = '#333333';
const GRID = '#e3e3e3';
const TEXT = '#222222';
const SMALL = 12;
const TITLE = 16;

/** About `count` round tick values covering [min, max]. */
export function niceTicks(min: number, max: number, count = 6): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  if (max - min < 1e-12) {
    const pad = Math.abs(max) > 0 ? Math.abs(max) * 0.5 : 1;
    return niceTicks(min - pad, max + pad, count);
  }
  const raw = (max - min) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude;
  const ticks: number[] = [];
  for (let t = Math.floor(min / step) * step; t <= max + step * 1e-9; t += step) ticks.push(Number((Math.round(t / step) * step).toPrecision(12)));
  if (ticks[ticks.length - 1] < max - step * 1e-9) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
  return ticks;
}

export function formatTick(value: number, format: 'number' | 'percent' = 'number'): string {
  if (format === 'percent') return `${Number((value * 100).toFixed(1))}%`;
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${Number((value / 1e6).toFixed(2))}M`;
  if (abs >= 1e4) return `${Number((value / 1e3).toFixed(1))}k`;
  return String(Number(value.toFixed(abs >= 100 ? 0 : abs >= 1 ? 2 : 3)));
}

function text(x: number, y: number, value: string, options: Partial<Extract<Shape, { kind: 'text' }>> = {}): Shape {
  return { kind: 'text', x, y, text: value, size: SMALL, color: TEXT, anchor: 'middle', ...options };
}

interface Frame {
  shapes: Shape[];
  plot: { x: number; y: number; w: number; h: number };
}

/** Title, axis labels, note and plot area of every chart. */
function frame(spec: ChartSpec): Frame {
  const plot = { x: MARGIN.left, y: MARGIN.top, w: WIDTH - MARGIN.left - MARGIN.right, h: HEIGHT - MARGIN.top - MARGIN.bottom };
  const shapes: Shape[] = [
    text(WIDTH / 2, 22, spec.title, { size: TITLE, bold: true }),
    text(plot.x + plot.w / 2, plot.y + plot.h + 40, spec.xLabel),
    text(18, plot.y + plot.h / 2, spec.yLabel, { rotate: true }),
  ];
  return { shapes, plot };
}

/** Splits text into lines of at most `width` logical pixels at spaces. */
export function wrapText(value: string, width: number, size = SMALL): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of value.split(' ')) {
    const next = line ? `${line} ${word}` : word;
    if (line && textWidth(next, size) > width) {
      lines.push(line);
      line = word;
    } else line = next;
  }
  if (line) lines.push(line);
  return lines;
}

/** Legend rows and note lines under the x-axis label; sets the scene's height to fit them. */
function finish(scene: Scene, plot: Frame['plot'], entries: { name: string; color: string; marker?: boolean }[], note?: string): Scene {
  let y = plot.y + plot.h + 64;
  const rows: (typeof entries)[] = [[]];
  let rowWidth = 0;
  for (const e of entries) {
    const w = 28 + textWidth(e.name, SMALL) + 20;
    if (rowWidth + w > WIDTH - 40 && rows[rows.length - 1].length > 0) {
      rows.push([]);
      rowWidth = 0;
    }
    rows[rows.length - 1].push(e);
    rowWidth += w;
  }
  for (const row of rows) {
    scene.shapes.push(...legend(row, y));
    y += 20;
  }
  for (const line of note ? wrapText(note, WIDTH - 2 * 24) : []) {
    scene.shapes.push(text(24, y + 4, line, { anchor: 'start', color: '#666666' }));
    y += 18;
  }
  scene.height = Math.max(HEIGHT, y + 8);
  return scene;
}

/** The legend: one swatch and name per series, in a row under the x-axis label. */
function legend(entries: { name: string; color: string; marker?: boolean }[], y: number): Shape[] {
  const shapes: Shape[] = [];
  const widths = entries.map((e) => 28 + textWidth(e.name, SMALL) + 20);
  let x = (WIDTH - widths.reduce((a, b) => a + b, 0)) / 2;
  for (const [i, e] of entries.entries()) {
    shapes.push(e.marker ? { kind: 'circle', cx: x + 10, cy: y, r: 4, fill: e.color } : { kind: 'rect', x, y: y - 3, w: 20, h: 6, fill: e.color });
    shapes.push(text(x + 28, y, e.name, { anchor: 'start' }));
    x += widths[i];
  }
  return shapes;
}

function yAxis(shapes: Shape[], plot: Frame['plot'], ticks: number[], format: 'number' | 'percent'): (v: number) => number {
  const lo = ticks[0];
  const hi = ticks[ticks.length - 1];
  const toY = (v: number) => plot.y + plot.h - ((v - lo) / (hi - lo || 1)) * plot.h;
  for (const t of ticks) {
    const y = toY(t);
    shapes.push({ kind: 'line', x1: plot.x, y1: y, x2: plot.x + plot.w, y2: y, color: GRID, width: 1 });
    shapes.push({ kind: 'line', x1: plot.x - 5, y1: y, x2: plot.x, y2: y, color: AXIS, width: 1 });
    shapes.push(text(plot.x - 8, y, formatTick(t, format), { anchor: 'end' }));
  }
  return toY;
}

function axesLines(plot: Frame['plot']): Shape[] {
  return [
    { kind: 'line', x1: plot.x, y1: plot.y + plot.h, x2: plot.x + plot.w, y2: plot.y + plot.h, color: AXIS, width: 1.5 },
    { kind: 'line', x1: plot.x, y1: plot.y, x2: plot.x, y2: plot.y + plot.h, color: AXIS, width: 1.5 },
  ];
}

function noData(scene: Scene, plot: Frame['plot'], message = 'no data for this chart in this run'): Scene {
  scene.shapes.push(text(plot.x + plot.w / 2, plot.y + plot.h / 2, message, { color: '#888888' }));
  return scene;
}

function lineScene(spec: LineChart): Scene {
  const { shapes, plot } = frame(spec);
  const scene: Scene = { width: WIDTH, height: HEIGHT, background: '#ffffff', title: spec.title, shapes };
  const series = spec.series.map((s, i) => ({
    ...s,
    color: s.color ?? PALETTE[i % PALETTE.length],
    points: s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)),
  }));
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) {
    shapes.push(...axesLines(plot));
    return finish(noData(scene, plot, spec.empty), plot, [], spec.note);
  }
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  const xTicks = niceTicks(Math.min(...xs), Math.max(...xs), 8);
  const yTicks = niceTicks(spec.yMin ?? Math.min(...ys), spec.yMax ?? Math.max(...ys), 6);
  const toY = yAxis(shapes, plot, yTicks, spec.yFormat ?? 'number');
  const [xlo, xhi] = [xTicks[0], xTicks[xTicks.length - 1]];
  const toX = (v: number) => plot.x + ((v - xlo) / (xhi - xlo || 1)) * plot.w;
  for (const t of xTicks) {
    const x = toX(t);
    shapes.push({ kind: 'line', x1: x, y1: plot.y, x2: x, y2: plot.y + plot.h, color: GRID, width: 1 });
    shapes.push({ kind: 'line', x1: x, y1: plot.y + plot.h, x2: x, y2: plot.y + plot.h + 5, color: AXIS, width: 1 });
    shapes.push(text(x, plot.y + plot.h + 18, formatTick(t)));
  }
  shapes.push(...axesLines(plot));
  for (const s of series) {
    const points = s.points.map(([x, y]) => [toX(x), toY(y)] as [number, number]);
    if (!s.markers || points.length > 1) shapes.push({ kind: 'polyline', points, color: s.color, width: 2 });
    if (s.markers) for (const [cx, cy] of points) shapes.push({ kind: 'circle', cx, cy, r: 4, fill: s.color });
  }
  return finish(
    scene,
    plot,
    series.map((s) => ({ name: s.name, color: s.color, marker: s.markers })),
    spec.note,
  );
}

function barScene(spec: BarChart): Scene {
  const { shapes, plot } = frame(spec);
  const scene: Scene = { width: WIDTH, height: HEIGHT, background: '#ffffff', title: spec.title, shapes };
  const series = spec.series.map((s, i) => ({ ...s, color: s.color ?? PALETTE[i % PALETTE.length] }));
  const n = spec.categories.length;
  if (n === 0 || series.every((s) => s.values.every((v) => !v))) {
    shapes.push(...axesLines(plot));
    return finish(noData(scene, plot, spec.empty), plot, [], spec.note);
  }
  const tops = spec.categories.map((_, i) =>
    spec.stacked ? series.reduce((a, s) => a + (s.values[i] ?? 0), 0) : Math.max(...series.map((s) => s.values[i] ?? 0)),
  );
  const toY = yAxis(shapes, plot, niceTicks(0, Math.max(...tops), 6), 'number');
  const slot = plot.w / n;
  const barWidth = slot * 0.8;
  // Label at most ~16 categories, evenly spaced.
  const every = Math.ceil(n / 16);
  for (const [i, category] of spec.categories.entries()) {
    const x0 = plot.x + i * slot + (slot - barWidth) / 2;
    let base = 0;
    for (const [j, s] of series.entries()) {
      const v = s.values[i] ?? 0;
      if (spec.stacked) {
        shapes.push({ kind: 'rect', x: x0, y: toY(base + v), w: barWidth, h: toY(base) - toY(base + v), fill: s.color });
        base += v;
      } else {
        const w = barWidth / series.length;
        shapes.push({ kind: 'rect', x: x0 + j * w, y: toY(v), w, h: toY(0) - toY(v), fill: s.color });
      }
    }
    if (i % every === 0) {
      const x = plot.x + (i + 0.5) * slot;
      shapes.push({ kind: 'line', x1: x, y1: plot.y + plot.h, x2: x, y2: plot.y + plot.h + 5, color: AXIS, width: 1 });
      shapes.push(text(x, plot.y + plot.h + 18, category));
    }
  }
  shapes.push(...axesLines(plot));
  return finish(
    scene,
    plot,
    series.map((s) => ({ name: s.name, color: s.color })),
    spec.note,
  );
}

export function chartScene(spec: ChartSpec): Scene {
  return spec.kind === 'line' ? lineScene(spec) : barScene(spec);
}
