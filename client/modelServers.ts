/**
 * The model servers of a `--local` real-model run: each `inference.servers` URL on this machine's
 * loopback that does not answer yet gets trajflow's own model server (python/trajflow_py/
 * model_server: the real model on torch + transformers behind SGLang's HTTP API), started as a
 * child process that stops with this one. Servers on other hosts, and vLLM or SGLang servers
 * already running, are the user's: they are only used.
 */
import type { RunConfig } from '../config/schema';
import { PYTHON_BIN, PYTHON_SOURCES } from '../src/paths';
import type { RunLayout } from '../src/store/runLayout';
import { spawnLoggedProcess, stopWorker, type LoggedWorker } from './workerProcess';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
/** Loading torch, transformers and the weights takes a while on 2 cores. */
const START_TIMEOUT_MS = 180_000;

export interface LocalModelServers {
  servers: LoggedWorker[];
  stop(): Promise<void>;
}

async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(new URL('/health', url), { signal: AbortSignal.timeout(2_000) });
    return response.ok;
  } catch {
    return false;
  }
}

/** Starts one model server on `port` serving `modelDir`; resolves once it listens. */
export function spawnModelServer(modelDir: string, port: number, logFile: string, maxBatch: number): Promise<LoggedWorker> {
  return spawnLoggedProcess(
    {
      name: `model server :${port}`,
      command: PYTHON_BIN,
      args: ['-m', 'trajflow_py.model_server', '--model', modelDir, '--port', String(port), '--max-batch', String(maxBatch)],
      cwd: PYTHON_SOURCES,
      env: { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', PYTHONUNBUFFERED: '1' },
      readyLine: 'model server listening on',
    },
    logFile,
    { timeoutMs: START_TIMEOUT_MS, exitWithParent: true },
  );
}

export async function startLocalModelServers(config: RunConfig, layout: RunLayout): Promise<LocalModelServers> {
  const servers: LoggedWorker[] = [];
  const { backend, servers: urls, maxBatch } = config.inference;
  if (backend === 'embedded' || !config.model.path) return { servers, stop: async () => undefined };
  for (const url of urls) {
    const { hostname, port } = new URL(url);
    if (!LOOPBACK_HOSTS.has(hostname) || (await answers(url))) continue;
    if (backend !== 'sglang') {
      throw new Error(`inference.servers ${url} does not answer: start the vLLM server yourself (trajflow starts only its own SGLang-API server)`);
    }
    servers.push(await spawnModelServer(config.model.path, Number(port || 80), layout.modelServerLog(Number(port || 80)), maxBatch));
  }
  return { servers, stop: async () => void (await Promise.all(servers.map((server) => stopWorker(server)))) };
}
