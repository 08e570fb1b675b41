/**
 * Pages of a web app as a real browser renders them: Debian's headless Chromium (scripts/setup.sh
 * installs it) loads a URL, lets the single-page app fetch and render, and gives back the DOM and,
 * when asked, a screenshot. Asynchronous on purpose: a worker in this process may have to answer
 * what the page asks (the Web UI queries a workflow for its current details).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const BROWSER = 'chromium';

/** Fails with what to do when Chromium is missing: a browser test must not pass without a browser. */
export async function requireChromium(): Promise<string> {
  try {
    return (await run(BROWSER, ['--version'])).stdout.trim();
  } catch (err) {
    throw new Error(`${BROWSER} is not installed; scripts/setup.sh installs it (apt-get install chromium): ${String(err)}`, { cause: err });
  }
}

export interface RenderOptions {
  /** Where to save a PNG of the first window-full. */
  screenshot?: string;
  windowSize?: [number, number];
  /** Browser time the page gets to fetch and render before the DOM is taken. */
  budgetMs?: number;
}

/** The DOM of `url` once rendered (and its screenshot saved, if asked). */
export async function renderPage(url: string, { screenshot, windowSize = [1400, 1000], budgetMs = 8000 }: RenderOptions = {}): Promise<string> {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'chromium-profile-'));
  try {
    const args = [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      `--user-data-dir=${profile}`,
      `--virtual-time-budget=${budgetMs}`,
      `--window-size=${windowSize.join(',')}`,
      ...(screenshot ? [`--screenshot=${screenshot}`] : []),
      '--dump-dom',
      url,
    ];
    const { stdout } = await run(BROWSER, args, { timeout: 60_000, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

/** The text a person reads on a rendered page: no scripts or styles, tags gone, entities decoded. */
export function visibleText(dom: string): string {
  const entities: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", nbsp: ' ' };
  return dom
    .replace(/<(script|style)\b[\s\S]*?<\/\1>/g, ' ')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&(amp|lt|gt|quot|#39|nbsp);/g, (_, name: string) => entities[name])
    .replace(/\s+/g, ' ');
}

/** The `src` of the iframe with id `id`, resolved against `base`. */
export function iframeSource(dom: string, id: string, base: string): URL | undefined {
  const tag = dom.match(new RegExp(`<iframe\\b[^>]*\\bid="${id}"[^>]*>`))?.[0];
  const src = tag?.match(/\bsrc="([^"]*)"/)?.[1];
  return src === undefined ? undefined : new URL(src.replace(/&amp;/g, '&'), base);
}
