/**
 * Scene -> PNG without a browser or native code: a small software rasterizer (anti-aliased lines
 * by distance to the segment, filled rects and discs, text in the 5x7 bitmap font of font.ts)
 * and a PNG encoder on node:zlib.
 */
import { deflateSync } from 'node:zlib';
import { CELL_HEIGHT, CELL_WIDTH, GLYPH_HEIGHT, GLYPH_WIDTH, glyphPixel } from './font';
import type { Scene, Shape } from './scene';

type Rgb = [number, number, number];

function parseColor(color: string): Rgb {
  const hex = color.replace('#', '');
  const full =
    hex.length === 3
      ? hex
          .split('')
          .map((c) => c + c)
          .join('')
      : hex;
  return [parseInt(full.slice(0, 2), 16), parseInt(full.slice(2, 4), 16), parseInt(full.slice(4, 6), 16)];
}

export class Bitmap {
  readonly data: Uint8Array;
  constructor(
    readonly width: number,
    readonly height: number,
    background: string,
  ) {
    this.data = new Uint8Array(width * height * 3);
    const [r, g, b] = parseColor(background);
    for (let i = 0; i < width * height; i++) this.data.set([r, g, b], i * 3);
  }

  /** Blends `rgb` into pixel (x, y) with coverage `alpha` in [0, 1]. */
  blend(x: number, y: number, rgb: Rgb, alpha: number): void {
    if (x < 0 || y < 0 || x >= this.width || y >= this.height || alpha <= 0) return;
    const i = (y * this.width + x) * 3;
    const a = Math.min(1, alpha);
    for (let c = 0; c < 3; c++) this.data[i + c] = Math.round(this.data[i + c] * (1 - a) + rgb[c] * a);
  }

  fillRect(x0: number, y0: number, x1: number, y1: number, rgb: Rgb): void {
    for (let y = Math.max(0, Math.round(y0)); y < Math.min(this.height, Math.round(y1)); y++) {
      for (let x = Math.max(0, Math.round(x0)); x < Math.min(this.width, Math.round(x1)); x++) this.blend(x, y, rgb, 1);
    }
  }

  segment(x1: number, y1: number, x2: number, y2: number, width: number, rgb: Rgb): void {
    const half = width / 2;
    const dx = x2 - x1;
    const dy = y2 - y1;
    const len2 = dx * dx + dy * dy;
    const minX = Math.floor(Math.min(x1, x2) - half - 1);
    const maxX = Math.ceil(Math.max(x1, x2) + half + 1);
    const minY = Math.floor(Math.min(y1, y2) - half - 1);
    const maxY = Math.ceil(Math.max(y1, y2) + half + 1);
    for (let y = Math.max(0, minY); y <= Math.min(this.height - 1, maxY); y++) {
      for (let x = Math.max(0, minX); x <= Math.min(this.width - 1, maxX); x++) {
        const px = x + 0.5;
        const py = y + 0.5;
        const t = len2 === 0 ? 0 : Math.max(0, Math.min(1, ((px - x1) * dx + (py - y1) * dy) / len2));
        const d = Math.hypot(px - (x1 + t * dx), py - (y1 + t * dy));
        this.blend(x, y, rgb, half + 0.5 - d);
      }
    }
  }

  disc(cx: number, cy: number, r: number, rgb: Rgb): void {
    for (let y = Math.floor(cy - r - 1); y <= Math.ceil(cy + r + 1); y++) {
      for (let x = Math.floor(cx - r - 1); x <= Math.ceil(cx + r + 1); x++) this.blend(x, y, rgb, r + 0.5 - Math.hypot(x + 0.5 - cx, y + 0.5 - cy));
    }
  }

  /** Text whose line is centred on y (or, rotated, on x) with `unit` pixels per font pixel. */
  text(text: string, x: number, y: number, unit: number, anchor: 'start' | 'middle' | 'end', rotate: boolean, bold: boolean, rgb: Rgb): void {
    const width = text.length * CELL_WIDTH * unit;
    const start = anchor === 'start' ? 0 : anchor === 'middle' ? -width / 2 : -width;
    const top = -(GLYPH_HEIGHT * unit) / 2;
    for (const [i, char] of [...text].entries()) {
      for (let col = 0; col < GLYPH_WIDTH; col++) {
        for (let row = 0; row < GLYPH_HEIGHT; row++) {
          if (!glyphPixel(char, col, row)) continue;
          // (u, v): along the text and down the glyph, in pixels from the anchor point.
          const u = Math.round(start + (i * CELL_WIDTH + col) * unit);
          const v = Math.round(top + row * unit);
          const w = unit + (bold ? Math.max(1, Math.round(unit / 3)) : 0);
          if (rotate) this.fillRect(x + v, y - u - w, x + v + unit, y - u, rgb);
          else this.fillRect(x + u, y + v, x + u + w, y + v + unit, rgb);
        }
      }
    }
  }
}

function paint(bitmap: Bitmap, s: Shape, k: number): void {
  switch (s.kind) {
    case 'line':
      return bitmap.segment(s.x1 * k, s.y1 * k, s.x2 * k, s.y2 * k, s.width * k, parseColor(s.color));
    case 'polyline': {
      const rgb = parseColor(s.color);
      for (let i = 1; i < s.points.length; i++)
        bitmap.segment(s.points[i - 1][0] * k, s.points[i - 1][1] * k, s.points[i][0] * k, s.points[i][1] * k, s.width * k, rgb);
      if (s.points.length === 1) bitmap.disc(s.points[0][0] * k, s.points[0][1] * k, s.width * k, rgb);
      return;
    }
    case 'rect': {
      if (s.fill && s.fill !== 'none') bitmap.fillRect(s.x * k, s.y * k, (s.x + s.w) * k, (s.y + s.h) * k, parseColor(s.fill));
      if (s.stroke) {
        const rgb = parseColor(s.stroke);
        const [x0, y0, x1, y1] = [s.x * k, s.y * k, (s.x + s.w) * k, (s.y + s.h) * k];
        bitmap.segment(x0, y0, x1, y0, k, rgb);
        bitmap.segment(x1, y0, x1, y1, k, rgb);
        bitmap.segment(x1, y1, x0, y1, k, rgb);
        bitmap.segment(x0, y1, x0, y0, k, rgb);
      }
      return;
    }
    case 'circle':
      return bitmap.disc(s.cx * k, s.cy * k, s.r * k, parseColor(s.fill));
    case 'text': {
      const unit = Math.max(1, Math.round((s.size * k) / CELL_HEIGHT));
      return bitmap.text(s.text, Math.round(s.x * k), Math.round(s.y * k), unit, s.anchor, Boolean(s.rotate), Boolean(s.bold), parseColor(s.color));
    }
  }
}

/** Paints a scene at `scale` device pixels per logical pixel. */
export function rasterize(scene: Scene, scale = 2): Bitmap {
  const bitmap = new Bitmap(Math.round(scene.width * scale), Math.round(scene.height * scale), scene.background);
  for (const shape of scene.shapes) paint(bitmap, shape, scale);
  return bitmap;
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const out = Buffer.alloc(body.length + 8);
  out.writeUInt32BE(data.length, 0);
  body.copy(out, 4);
  out.writeUInt32BE(crc32(body), body.length + 4);
  return out;
}

/** 8-bit RGB PNG of a bitmap. */
export function encodePng(bitmap: Bitmap): Buffer {
  const { width, height, data } = bitmap;
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // bit depth 8, colour type RGB, deflate, no filter method, no interlace
  const raw = Buffer.alloc(height * (width * 3 + 1));
  for (let y = 0; y < height; y++) {
    raw[y * (width * 3 + 1)] = 0; // filter: none
    raw.set(data.subarray(y * width * 3, (y + 1) * width * 3), y * (width * 3 + 1) + 1);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw, { level: 6 })),
    chunk('IEND', new Uint8Array(0)),
  ]);
}

export function renderPng(scene: Scene, scale = 2): Buffer {
  return encodePng(rasterize(scene, scale));
}
