import { rmSync } from 'node:fs';
import { stopDevServer } from '../../src/temporal/devServer';

export default async function globalTeardown(): Promise<void> {
  const dataDir = process.env.TRAJFLOW_TEST_DATA_DIR;
  if (!dataDir) return;
  await stopDevServer(dataDir);
  if (!process.env.TRAJFLOW_KEEP_TEST_DATA) rmSync(dataDir, { recursive: true, force: true });
}
