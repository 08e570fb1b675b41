/** Scene -> standalone SVG document. */
import type { Scene, Shape } from './scene';

export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] as string);
}

const n = (x: number) => String(Math.round(x * 100) / 100);

function shapeSvg(s: Shape): string {
  switch (s.kind) {
    case 'line':
      return `<line x1="${n(s.x1)}" y1="${n(s.y1)}" x2="${n(s.x2)}" y2="${n(s.y2)}" stroke="${s.color}" stroke-width="${n(s.width)}"/>`;
    case 'polyline':
      return `<polyline points="${s.points.map(([x, y]) => `${n(x)},${n(y)}`).join(' ')}" fill="none" stroke="${s.color}" stroke-width="${n(s.width)}" stroke-linejoin="round"/>`;
    case 'rect':
      return `<rect x="${n(s.x)}" y="${n(s.y)}" width="${n(s.w)}" height="${n(s.h)}" fill="${s.fill ?? 'none'}"${s.stroke ? ` stroke="${s.stroke}"` : ''}/>`;
    case 'circle':
      return `<circle cx="${n(s.cx)}" cy="${n(s.cy)}" r="${n(s.r)}" fill="${s.fill}"/>`;
    case 'text': {
      const anchor = s.anchor === 'start' ? 'start' : s.anchor === 'end' ? 'end' : 'middle';
      const rotate = s.rotate ? ` transform="rotate(-90 ${n(s.x)} ${n(s.y)})"` : '';
      // 0.75em advance, like the raster font; monospace keeps widths close to textWidth().
      return `<text x="${n(s.x)}" y="${n(s.y)}" font-size="${n(s.size * 1.15)}" fill="${s.color}" text-anchor="${anchor}" dominant-baseline="central"${s.bold ? ' font-weight="bold"' : ''}${rotate}>${escapeXml(s.text)}</text>`;
    }
  }
}

export function renderSvg(scene: Scene): string {
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${scene.width}" height="${scene.height}" viewBox="0 0 ${scene.width} ${scene.height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace">`,
    `<title>${escapeXml(scene.title)}</title>`,
    `<rect x="0" y="0" width="${scene.width}" height="${scene.height}" fill="${scene.background}"/>`,
    ...scene.shapes.map(shapeSvg),
    `</svg>`,
    '',
  ].join('\n');
}
