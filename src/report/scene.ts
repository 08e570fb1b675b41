/**
 * A chart drawn as a flat list of shapes in logical pixels; svg.ts serializes it, raster.ts paints
 * it into a PNG. Text positions are the vertical middle of the line; `size` is the line height.
 */
export type Shape =
  | { kind: 'line'; x1: number; y1: number; x2: number; y2: number; color: string; width: number }
  | { kind: 'polyline'; points: [number, number][]; color: string; width: number }
  | { kind: 'rect'; x: number; y: number; w: number; h: number; fill?: string; stroke?: string }
  | { kind: 'circle'; cx: number; cy: number; r: number; fill: string }
  | { kind: 'text'; x: number; y: number; text: string; size: number; color: string; anchor: 'start' | 'middle' | 'end'; rotate?: boolean; bold?: boolean };

export interface Scene {
  width: number;
  height: number;
  background: string;
  title: string;
  shapes: Shape[];
}

/** Text width in logical pixels (the raster font's advance: 0.75 x size per character). */
export function textWidth(text: string, size: number): number {
  return text.length * size * 0.75;
}
