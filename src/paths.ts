/** Where the project lives on disk, found from this file so it works from sources and from dist/. */
import { existsSync } from 'node:fs';
import path from 'node:path';

function findProjectRoot(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json')) && !dir.split(path.sep).includes('dist')) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${start}`);
  }
}

export const PROJECT_ROOT = findProjectRoot(__dirname);
