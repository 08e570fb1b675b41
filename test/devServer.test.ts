/**
 * The dev server launcher: a server runs with trajflow's task-processor tuning, and one found
 * running with other settings (an older build's, say) is restarted rather than silently reused,
 * keeping its history; a port another server holds is refused. Its own server (own port and data
 * directory), never the suite's.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { freePort } from '../src/ports';
import { runningDevServer, startDevServer, stopDevServer, TUNING_ARGS } from '../src/temporal/devServer';

/** The arguments a running process was started with. */
function commandLine(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}

describe('dev server launcher', () => {
  it('starts with the processor tuning and restarts a server started without it, history kept', async () => {
    const dataDir = mkdtempSync(path.join(process.env.TRAJFLOW_TEST_DATA_DIR ?? os.tmpdir(), 'launcher-'));
    const port = await freePort();
    try {
      const first = await startDevServer({ dataDir, port, headless: true });
      const args = commandLine(first.pid);
      expect(args.join(' ')).toContain(TUNING_ARGS.join(' '));
      // Asked again with the same settings, the running server is reused.
      expect((await startDevServer({ dataDir, port, headless: true })).pid).toBe(first.pid);

      // Something to find after the restart: a workflow started (and left waiting) on the server.
      const connection = await Connection.connect({ address: first.address });
      try {
        await new Client({ connection }).workflow.start('notRegisteredAnywhere', { taskQueue: 'launcher-test', workflowId: 'kept-across-restart' });
      } finally {
        await connection.close();
      }

      // A pid file as an older build wrote it: no record of the tuning.
      const pidFile = path.join(dataDir, 'temporal', 'temporal-server.json');
      const { tuning: _tuning, ...older } = JSON.parse(readFileSync(pidFile, 'utf8')) as Record<string, unknown>;
      writeFileSync(pidFile, JSON.stringify(older));

      const lines: string[] = [];
      const second = await startDevServer({ dataDir, port, headless: true, log: (line) => lines.push(line) });
      expect(second.pid).not.toBe(first.pid);
      expect(lines.join('\n')).toMatch(/started with other settings: restarting it/);
      expect(runningDevServer(dataDir)?.pid).toBe(second.pid);

      const again = await Connection.connect({ address: second.address });
      try {
        const description = await new Client({ connection: again }).workflow.getHandle('kept-across-restart').describe();
        expect(description.status.name).toBe('RUNNING');
      } finally {
        await again.close();
      }
    } finally {
      await stopDevServer(dataDir);
    }
  });

  it('refuses a port another server listens on, rather than taking that server for its own', async () => {
    const dataDir = mkdtempSync(path.join(process.env.TRAJFLOW_TEST_DATA_DIR ?? os.tmpdir(), 'launcher-taken-'));
    // The suite's own dev server, as another project's --local server left running would be.
    const port = Number(process.env.TRAJFLOW_TEST_TEMPORAL_ADDRESS!.split(':').pop());
    await expect(startDevServer({ dataDir, port, headless: true })).rejects.toThrow(
      `cannot start the dev server of ${dataDir} on 127.0.0.1:${port}: another process listens there`,
    );
    expect(runningDevServer(dataDir)).toBeUndefined();
  });
});
