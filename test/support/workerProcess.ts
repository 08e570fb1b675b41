/** A run config written to a file, for worker processes started with `-c`. */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RunConfig } from '../../config/schema';

export function writeConfigFile(config: RunConfig): string {
  const file = path.join(config.dataDir, 'config.json');
  writeFileSync(file, JSON.stringify(config));
  return file;
}
