/**
 * Starts one real Temporal dev server (the project's own launcher, SQLite under a temp folder) for
 * the whole suite, and bundles the workflow code once so test workers start fast.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startDevServer, stopDevServer } from '../../src/temporal/devServer';
import { freePort } from '../../src/ports';

export default async function globalSetup(): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-test-'));
  const port = await freePort();
  const server = await startDevServer({ dataDir, port, headless: true });
  const bundlePath = path.join(dataDir, 'workflow-bundle.js');
  try {
    const bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows') });
    writeFileSync(bundlePath, bundle.code);
  } catch (err) {
    await stopDevServer(dataDir);
    throw err;
  }
  process.env.TRAJFLOW_TEST_DATA_DIR = dataDir;
  process.env.TRAJFLOW_TEST_TEMPORAL_ADDRESS = server.address;
  process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE = bundlePath;
}
