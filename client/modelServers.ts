/**
 * The model servers of a `--local` real-model run: each `inference.servers` URL on this machine's
 * loopback that does not answer yet gets a server started as a child process that stops with this
 * one: vLLM's CPU build (`backend: vllm`, from .venv-vllm, with its RL endpoints and the logprobs
 * of the sampling distribution), or trajflow's own model server (`backend: sglang`:
 * python/trajflow_py/model_server, the real model on torch + transformers behind SGLang's HTTP
 * API; SGLang itself needs CUDA). Servers on other hosts, and servers already running, are the
 * user's: they are only used. A run resumed by `trajflow train --local --run-id` gets them back the
 * same way; `trajflow model-servers -c CONFIG` starts them alone, beside plain workers.
 * A LoRA run's servers (`trainer.lora`) are started able to load its adapters at runtime.
 */
import type { RunConfig } from '../config/schema';
import { MAX_LOADED_ADAPTERS } from '../src/inference/http/loraAdapters';
import { PYTHON_BIN, PYTHON_SOURCES, VLLM_PYTHON_BIN } from '../src/paths';
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

/** What a server needs to know of a LoRA run's adapters before it starts. */
export interface LoraServing {
  /** The adapters' rank (`trainer.lora.rank`). */
  rank: number;
}

/** The ranks vLLM 0.32 accepts for --max-lora-rank (vllm/config/lora.py MaxLoRARanks). */
const VLLM_MAX_LORA_RANKS = [1, 8, 16, 32, 64, 128, 256, 320, 512];

/** The smallest --max-lora-rank vLLM accepts that fits adapters of rank `rank`. */
export function vllmMaxLoraRank(rank: number): number {
  const fitting = VLLM_MAX_LORA_RANKS.find((allowed) => allowed >= rank);
  if (fitting === undefined) throw new Error(`trainer.lora.rank ${rank} is above the largest LoRA rank vLLM serves (${VLLM_MAX_LORA_RANKS.at(-1)})`);
  return fitting;
}

/** The vLLM arguments and environment of a server that loads LoRA adapters at runtime (none without `lora`). */
export function vllmLoraSettings(lora: LoraServing | undefined): { args: string[]; env: Record<string, string> } {
  if (!lora) return { args: [], env: {} };
  return {
    args: ['--enable-lora', '--max-lora-rank', String(vllmMaxLoraRank(lora.rank)), '--max-loras', String(MAX_LOADED_ADAPTERS)],
    env: { VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'True' },
  };
}

/** Starts one model server on `port` serving `modelDir` (and, with `lora`, its runtime adapters); resolves once it listens. */
export function spawnModelServer(modelDir: string, port: number, logFile: string, maxBatch: number, lora?: LoraServing): Promise<LoggedWorker> {
  const loraArgs = lora ? ['--enable-lora', '--max-loras', String(MAX_LOADED_ADAPTERS)] : [];
  return spawnLoggedProcess(
    {
      name: `model server :${port}`,
      command: PYTHON_BIN,
      args: ['-m', 'trajflow_py.model_server', '--model', modelDir, '--port', String(port), '--max-batch', String(maxBatch), ...loraArgs],
      cwd: PYTHON_SOURCES,
      env: { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', PYTHONUNBUFFERED: '1' },
      readyLine: 'model server listening on',
    },
    logFile,
    { timeoutMs: START_TIMEOUT_MS, exitWithParent: true },
  );
}

/**
 * Starts vLLM's CPU server on `port` serving `modelDir`, under trajflow's supervisor (vLLM does
 * not watch its parent); resolves once it serves, its weights labelled version 0.
 *   - `--logprobs-mode processed_logprobs`: logprobs of the distribution tokens were sampled from
 *     (after temperature and top-p), which the PPO ratio needs; vLLM's default is the raw logits'.
 *   - `VLLM_SERVER_DEV_MODE=1`: the RL endpoints (pause, resume, reload weights, version labels).
 *   - `--enable-scale-out`: the token-in/token-out `/inference/v1/generate` endpoint.
 *   - `--enforce-eager`: no torch.compile, so the server starts in a fraction of the time on a few CPU cores.
 *   - `--no-enable-chunked-prefill`: on CPU, vLLM 0.32 crashes its engine when a seeded request's
 *     prompt is split across steps (it rewinds the request's random generator, which a CPU
 *     generator cannot do: "CPU Generator does not use offset"); so prompts are prefilled whole,
 *     within a token budget of several full contexts.
 *   - with `lora`: `--enable-lora` and room for the adapters trajflow keeps loaded, and
 *     VLLM_ALLOW_RUNTIME_LORA_UPDATING (the load and unload endpoints).
 */
export async function spawnVllmServer(modelDir: string, port: number, logFile: string, maxContext: number, lora?: LoraServing): Promise<LoggedWorker> {
  const loraSettings = vllmLoraSettings(lora);
  const server = await spawnLoggedProcess(
    {
      name: `vLLM server :${port}`,
      command: PYTHON_BIN,
      args: [
        '-m',
        'trajflow_py.supervise',
        '--',
        VLLM_PYTHON_BIN,
        '-m',
        'vllm.entrypoints.openai.api_server',
        '--model',
        modelDir,
        '--host',
        '127.0.0.1',
        '--port',
        String(port),
        '--logprobs-mode',
        'processed_logprobs',
        '--dtype',
        'float32',
        '--max-model-len',
        String(maxContext),
        '--enable-scale-out',
        '--enforce-eager',
        '--no-enable-chunked-prefill',
        '--max-num-batched-tokens',
        String(4 * maxContext),
        ...loraSettings.args,
      ],
      cwd: PYTHON_SOURCES,
      env: { VLLM_SERVER_DEV_MODE: '1', HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', VLLM_CPU_KVCACHE_SPACE: '1', ...loraSettings.env },
      readyLine: 'Application startup complete.',
    },
    logFile,
    { timeoutMs: START_TIMEOUT_MS, exitWithParent: true },
  );
  const labelled = await fetch(new URL('/update_weight_version', `http://127.0.0.1:${port}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ new_version: '0' }),
  });
  if (!labelled.ok) throw new Error(`vLLM server :${port} refused to label its weights version 0: ${labelled.status} ${await labelled.text()}`);
  return server;
}

/** The parts of a config that say which model servers a `--local` run starts and how. */
export type ModelServerSettings = Pick<RunConfig, 'inference' | 'model' | 'trainer'>;

/** The config's `inference.servers` that a `--local` run starts on this machine: model servers of a real model on loopback. */
function localServerUrls(config: ModelServerSettings): string[] {
  if (config.inference.backend === 'embedded' || !config.model.path) return [];
  return config.inference.servers.filter((url) => LOOPBACK_HOSTS.has(new URL(url).hostname));
}

function portOf(url: string): number {
  const { port, protocol } = new URL(url);
  return Number(port || (protocol === 'https:' ? 443 : 80));
}

/**
 * Starts the config's local model servers that do not answer yet (see the top of this file), each
 * logging to `logFileOf(port)`; resolves once they serve.
 */
export async function startLocalModelServers(config: ModelServerSettings, logFileOf: (port: number) => string): Promise<LocalModelServers> {
  const servers: LoggedWorker[] = [];
  const modelDir = config.model.path!;
  const lora = config.trainer.lora;
  for (const url of localServerUrls(config)) {
    if (await answers(url)) continue;
    const port = portOf(url);
    const log = logFileOf(port);
    servers.push(
      config.inference.backend === 'vllm'
        ? await spawnVllmServer(modelDir, port, log, config.model.maxContext, lora)
        : await spawnModelServer(modelDir, port, log, config.inference.maxBatch, lora),
    );
  }
  return { servers, stop: async () => void (await Promise.all(servers.map((server) => stopWorker(server)))) };
}

/**
 * The config's local model servers that do not answer: those a `--local` run had started and a
 * plain `trajflow worker` does not start (`trajflow model-servers` does).
 */
export async function silentLocalModelServers(config: ModelServerSettings): Promise<string[]> {
  const silent: string[] = [];
  for (const url of localServerUrls(config)) if (!(await answers(url))) silent.push(url);
  return silent;
}
