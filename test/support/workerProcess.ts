/** Worker processes for fault tests: the real CLI (compiled), so a SIGKILL kills a real worker. */
import { ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { RunConfig } from '../../config/schema';

const CLI = path.join(__dirname, '..', '..', 'bin', 'trajflow.js');

export function writeConfigFile(config: RunConfig): string {
  const file = path.join(config.dataDir, 'config.json');
  writeFileSync(file, JSON.stringify(config));
  return file;
}

/** Starts `trajflow worker --role <role>` and resolves once it polls its task queues. */
export function spawnWorker(role: string, configFile: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [CLI, 'worker', '--role', role, '-c', configFile], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TRAJFLOW_LOG_LEVEL: 'info' },
  });
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('workers polling')) resolve(child);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`worker ${role} exited with ${code} before polling:\n${output.slice(-3000)}`)));
  });
}

export function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}
