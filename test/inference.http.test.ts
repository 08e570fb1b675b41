/**
 * The HTTP inference provider (src/inference/http/) against protocol fixtures: small node:http
 * servers that answer with JSON shaped like SGLang 0.5.23's and vLLM 0.32's APIs and record what
 * they were sent. They run no model; the real servers are exercised by the real-model tests.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import http, { type IncomingHttpHeaders } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { isAbortError } from '../src/inference/http/errors';
import { createHttpProvider, type HttpProviderOptions } from '../src/inference/http/httpProvider';
import { ServerPool } from '../src/inference/http/serverPool';
import { sglangBackend, SglangGenerateRequestSchema } from '../src/inference/http/sglang';
import { LOADING_LABEL, vllmBackend, VllmGenerateRequestSchema } from '../src/inference/http/vllm';
import { lineageOf, spansProblem } from '../src/inference/http/weightVersions';
import type { GenerateRequest, InferenceProvider } from '../src/inference/provider';
import { freePort } from '../src/ports';
import { vllmLoraSettings, vllmMaxLoraRank } from '../client/modelServers';
import { adaptersToUnload, MAX_LOADED_ADAPTERS } from '../src/inference/http/loraAdapters';

// ---------------------------------------------------------------------------------------------
// Protocol fixtures
// ---------------------------------------------------------------------------------------------

interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

/** `hang`: never answer; `reset`: destroy the connection; else a status with a JSON (or raw) body. */
type Reply = 'hang' | 'reset' | { status?: number; json?: unknown; text?: string };
type Handler = (request: RecordedRequest) => Reply | Promise<Reply>;

interface FixtureServer {
  url: string;
  requests: RecordedRequest[];
  /** `METHOD /path` of each request received, in order. */
  calls(): string[];
  /** The bodies of the requests to one path. */
  bodiesTo(url: string): unknown[];
  close(): Promise<void>;
}

const openFixtures: FixtureServer[] = [];
const openProviders: InferenceProvider[] = [];

afterEach(async () => {
  await Promise.all(openProviders.splice(0).map((provider) => provider.close()));
  await Promise.all(openFixtures.splice(0).map((fixture) => fixture.close()));
});

async function fixtureServer(handler: Handler, port = 0): Promise<FixtureServer> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const recorded = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: text ? JSON.parse(text) : undefined };
      requests.push(recorded);
      void Promise.resolve(handler(recorded)).then((reply) => {
        if (reply === 'hang') return;
        if (reply === 'reset') return req.socket.destroy();
        res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
        res.end(reply.text ?? (reply.json === undefined ? '' : JSON.stringify(reply.json)));
      });
    });
  });
  server.listen(port, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const fixture: FixtureServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    calls: () => requests.map((r) => `${r.method} ${r.url}`),
    bodiesTo: (url) => requests.filter((r) => r.url === url).map((r) => r.body),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  openFixtures.push(fixture);
  return fixture;
}

/** A base URL with nothing listening: connections are refused. */
async function deadServerUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}

/** SGLang /generate answer for `ids`, each token's logprob -(i+1)/10, spans given or one span of `version`. */
function sglangAnswer(rid: string, ids: number[], options: { version?: string; spans?: unknown; finish?: unknown } = {}) {
  const version = options.version ?? '0';
  return {
    text: '',
    output_ids: ids,
    meta_info: {
      id: rid,
      finish_reason: options.finish ?? { type: 'stop', matched: ids.at(-1) },
      prompt_tokens: 3,
      weight_version: version,
      num_retractions: 0,
      reasoning_tokens: 0,
      completion_tokens: ids.length,
      cached_tokens: 0,
      weight_versions: 'spans' in options ? options.spans : [{ version, start: 0, end: ids.length }],
      input_token_logprobs: [],
      output_token_logprobs: ids.map((id, i) => [-(i + 1) / 10, id, null]),
      output_token_logprobs_length: ids.length,
      e2e_latency: 0.01,
    },
  };
}

/** vLLM /inference/v1/generate answer (output_mode tokens, logprobs 0) for `ids`. */
function vllmAnswer(requestId: string, ids: number[], options: { spans?: unknown; finish?: string; model?: string } = {}) {
  return {
    request_id: `generate-tokens-${requestId}`,
    model: options.model ?? 'm',
    created: 0,
    usage: { prompt_tokens: 3, completion_tokens: ids.length, total_tokens: 3 + ids.length },
    prompt_logprobs: null,
    output_mode: 'tokens',
    choices: [
      {
        index: 0,
        finish_reason: options.finish ?? 'stop',
        stop_reason: ids.at(-1),
        token_ids: ids,
        routed_experts: null,
        sampling_mask: null,
        weight_versions: 'spans' in options ? options.spans : [{ version: '0', start: 0, end: ids.length }],
        logprobs: {
          content: ids.map((id, i) => ({ token_id: id, logprob: -(i + 1) / 10, rank: 1, top_logprobs: [{ token_id: id, logprob: -(i + 1) / 10, rank: 1 }] })),
        },
      },
    ],
  };
}

interface ModelServerFixture extends FixtureServer {
  /** The weight version label it reports (changed by its weight-update endpoints). */
  weightVersion: string;
  /** Its LoRA adapters, name to directory (changed by its adapter endpoints). */
  adapters: Map<string, string>;
  /** What its generate endpoint does: answer (default), or a reply of the test's choosing. */
  onGenerate: (request: RecordedRequest) => Reply | Promise<Reply>;
  /** What every endpoint does before the above (to simulate a dead, failing or slow server). */
  override?: (request: RecordedRequest) => Reply | Promise<Reply> | undefined;
}

const COMPLETION = [11, 12, 2];

/** `GET /v1/models` of a server with `adapters` (vLLM 0.32 and SGLang 0.5 list them alike). */
function modelList(adapters: Map<string, string>) {
  const base = { id: '/models/base', object: 'model', root: '/models/base', parent: null };
  return { object: 'list', data: [base, ...[...adapters].map(([id, root]) => ({ id, object: 'model', root, parent: '/models/base' }))] };
}

async function sglangFixture(options: { weightVersion?: string; port?: number } = {}): Promise<ModelServerFixture> {
  const state = { weightVersion: options.weightVersion ?? '0', adapters: new Map<string, string>() } as ModelServerFixture;
  state.onGenerate = (r) => ({ json: sglangAnswer((r.body as { rid: string }).rid, COMPLETION, { version: state.weightVersion }) });
  const loraAnswer = (success: boolean, error_message = '') => ({ json: { success, error_message, loaded_adapters: Object.fromEntries(state.adapters) } });
  const fixture = await fixtureServer((r) => {
    const overridden = state.override?.(r);
    if (overridden) return overridden;
    if (r.url === '/generate') {
      const adapter = (r.body as { lora_path?: string }).lora_path;
      if (adapter !== undefined && !state.adapters.has(adapter))
        return { status: 400, json: { error: { message: `The following requested LoRA adapters are not loaded: ${adapter}` } } };
      return state.onGenerate(r);
    }
    if (r.url === '/v1/models') return { json: modelList(state.adapters) };
    if (r.url === '/load_lora_adapter') {
      const { lora_name, lora_path } = r.body as { lora_name: string; lora_path: string };
      if (state.adapters.has(lora_name)) return loraAnswer(false, `LoRA adapter ${lora_name} is already loaded`);
      state.adapters.set(lora_name, lora_path);
      return loraAnswer(true);
    }
    if (r.url === '/unload_lora_adapter') return loraAnswer(state.adapters.delete((r.body as { lora_name: string }).lora_name));
    if (r.url === '/get_model_info') return { json: { model_path: '/m', weight_version: state.weightVersion, is_generation: true } };
    if (r.url === '/update_weights_from_disk') {
      state.weightVersion = (r.body as { weight_version: string }).weight_version;
      return { json: { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 } };
    }
    if (r.url === '/abort_request') return {};
    return { status: 404, json: { detail: 'Not Found' } };
  }, options.port);
  return Object.assign(state, fixture);
}

async function vllmFixture(options: { weightVersion?: string; logprobsMode?: string } = {}): Promise<ModelServerFixture & { logprobsMode: string }> {
  const state = {
    weightVersion: options.weightVersion ?? 'default',
    logprobsMode: options.logprobsMode ?? 'processed_logprobs',
    adapters: new Map<string, string>(),
  } as ModelServerFixture & { logprobsMode: string };
  state.onGenerate = (r) => {
    const { request_id: id, model } = r.body as { request_id: string; model?: string };
    // An adapter's answer names it, but its spans name the base model's label.
    return { json: vllmAnswer(id, COMPLETION, { spans: [{ version: state.weightVersion, start: 0, end: COMPLETION.length }], model }) };
  };
  const fixture = await fixtureServer((r) => {
    const overridden = state.override?.(r);
    if (overridden) return overridden;
    if (r.url === '/inference/v1/generate') {
      const model = (r.body as { model?: string }).model;
      if (model !== undefined && !state.adapters.has(model)) return { status: 404, json: { error: { message: `The model \`${model}\` does not exist.` } } };
      return state.onGenerate(r);
    }
    if (r.url === '/v1/models') return { json: modelList(state.adapters) };
    if (r.url === '/v1/load_lora_adapter') {
      const { lora_name, lora_path } = r.body as { lora_name: string; lora_path: string };
      if (state.adapters.has(lora_name)) return { status: 400, json: { error: { message: `The lora adapter '${lora_name}' has already been loaded.` } } };
      state.adapters.set(lora_name, lora_path);
      return { text: `Success: LoRA adapter '${lora_name}' added successfully.` };
    }
    if (r.url === '/v1/unload_lora_adapter') {
      const { lora_name } = r.body as { lora_name: string };
      if (!state.adapters.delete(lora_name)) return { status: 404, json: { error: { message: `The lora adapter '${lora_name}' cannot be found.` } } };
      return { text: `Success: LoRA adapter '${lora_name}' removed successfully.` };
    }
    if (r.url === '/weight_info') return { json: { weight_version: state.weightVersion } };
    if (r.url === '/server_info?config_format=json') return { json: { vllm_config: { model_config: { logprobs_mode: state.logprobsMode } }, vllm_env: {} } };
    if (r.url === '/pause?mode=keep') return { json: { status: 'paused' } };
    if (r.url === '/collective_rpc') return { json: { results: [null] } };
    if (r.url === '/reset_prefix_cache?reset_running_requests=true') return { json: { success: true } };
    if (r.url === '/update_weight_version') {
      state.weightVersion = (r.body as { new_version: string }).new_version;
      return { json: { success: true, new_version: state.weightVersion } };
    }
    if (r.url === '/resume') return { json: { status: 'resumed' } };
    if (r.url === '/inference/v1/abort_requests') return {};
    return { status: 404, json: { detail: 'Not Found' } };
  });
  return Object.assign(state, fixture);
}

function provider(options: Partial<HttpProviderOptions> & Pick<HttpProviderOptions, 'servers'>): InferenceProvider {
  const created = createHttpProvider({ backend: 'sglang', requestTimeoutS: 5, ...options });
  openProviders.push(created);
  return created;
}

function request(extra: Partial<GenerateRequest> = {}): GenerateRequest {
  return { promptIds: [1, 5, 7], sampling: { maxTokens: 8, temperature: 0.7, topP: 0.9, seed: 4242, stopTokens: [2] }, ...extra };
}

/** Resolves when `condition` holds (polled), so a test can act once a fixture got a request. */
async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A promise the test resolves by hand (a reply held back until then). */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** The calls of one vLLM weight sync (pause, label loading, reload, drop the KV cache, label, resume). */
const VLLM_SYNC = [
  'POST /pause?mode=keep',
  'POST /update_weight_version',
  'POST /collective_rpc',
  'POST /reset_prefix_cache?reset_running_requests=true',
  'POST /update_weight_version',
  'POST /resume',
];

const generates = (fixture: FixtureServer, path = '/generate') => fixture.requests.filter((r) => r.url === path);

// ---------------------------------------------------------------------------------------------
// Request bodies and answers, per backend
// ---------------------------------------------------------------------------------------------

const where = { server: 'http://sglang:30000', endpoint: '/generate' };

/** The lineage (run checkpoint folder) of checkpoints under /ckpt/, as labels carry it. */
const LINEAGE_A = lineageOf('/ckpt/v000001');
const label = (version: number, checkpoint = '/ckpt/v000001') => `${version}@${lineageOf(checkpoint)}`;

describe('SGLang backend', () => {
  it('builds a /generate body of token ids with the sampling, seed and kept stop tokens', () => {
    const call = sglangBackend.generateCall(request(), 'trajflow-abc');
    expect(call).toMatchObject({ method: 'POST', endpoint: '/generate' });
    expect(SglangGenerateRequestSchema.parse(call.body)).toEqual({
      rid: 'trajflow-abc',
      input_ids: [1, 5, 7],
      sampling_params: {
        max_new_tokens: 8,
        temperature: 0.7,
        top_p: 0.9,
        sampling_seed: 4242,
        stop_token_ids: [2],
        no_stop_trim: true,
        skip_special_tokens: false,
      },
      return_logprob: true,
      stream: false,
    });
  });

  it('has a request schema as strict as the server about sampling keys', () => {
    const body = sglangBackend.generateCall(request(), 'trajflow-abc').body as { sampling_params: object };
    const withExtra = { ...body, sampling_params: { ...body.sampling_params, seed: 1 } };
    expect(SglangGenerateRequestSchema.safeParse(withExtra).success).toBe(false);
  });

  it('reads ids, logprobs, the finish reason and the version of each token', () => {
    const spans = [
      { version: `3@${LINEAGE_A}`, start: 0, end: 2 },
      { version: `4@${LINEAGE_A}`, start: 2, end: 3 },
    ];
    const read = sglangBackend.readGenerate(sglangAnswer('r', [11, 12, 13], { version: '4', spans, finish: { type: 'length', length: 3 } }), where);
    expect(read).toEqual({
      completionIds: [11, 12, 13],
      logprobs: [-0.1, -0.2, -0.3],
      finish: 'length',
      firstVersion: 3,
      tokenVersions: [3, 3, 4],
      lineages: [LINEAGE_A],
    });
    expect(sglangBackend.readGenerate(sglangAnswer('r', [11, 2]), where).finish).toBe('stop');
    expect(sglangBackend.readGenerate(sglangAnswer('r', [11], { finish: { type: 'abort', message: 'Abort before prefill' } }), where).finish).toBe('aborted');
  });

  it('takes the one weight_version of an older server for every token', () => {
    const answer = sglangAnswer('r', [11, 12], { version: '7' });
    delete (answer.meta_info as { weight_versions?: unknown }).weight_versions;
    expect(sglangBackend.readGenerate(answer, where)).toMatchObject({ firstVersion: 7, tokenVersions: [7, 7] });
  });

  it('names the server, the endpoint and the field of a malformed answer', () => {
    const answer = sglangAnswer('r', [11, 12]);
    answer.meta_info.output_token_logprobs[1] = [null as unknown as number, 12, null];
    expect(() => sglangBackend.readGenerate(answer, where)).toThrow(
      /^http:\/\/sglang:30000 \/generate sent an unexpected response: meta_info\.output_token_logprobs\[1\]\[0\]: .*expected number/,
    );
    const mismatched = sglangAnswer('r', [11, 12]);
    mismatched.meta_info.output_token_logprobs[0][1] = 99;
    expect(() => sglangBackend.readGenerate(mismatched, where)).toThrow('meta_info.output_token_logprobs[0][1]: token 99, but output_ids[0] is 11');
    expect(() => sglangBackend.readGenerate({ output_ids: [1, 'x'], meta_info: {} }, where)).toThrow('output_ids[1]');
  });

  it('refuses a version that is not a trajflow policy version, and a missing one', () => {
    expect(() => sglangBackend.readGenerate(sglangAnswer('r', [11], { version: 'default' }), where)).toThrow(
      'meta_info.weight_versions: weight version "default" is not a trajflow policy version',
    );
    const unversioned = sglangAnswer('r', [11]);
    delete (unversioned.meta_info as { weight_versions?: unknown }).weight_versions;
    delete (unversioned.meta_info as { weight_version?: unknown }).weight_version;
    expect(() => sglangBackend.readGenerate(unversioned, where)).toThrow('meta_info.weight_version: missing');
  });

  it('refuses a finish reason it does not know', () => {
    expect(() => sglangBackend.readGenerate(sglangAnswer('r', [11], { finish: { type: 'cancelled' } }), where)).toThrow('meta_info.finish_reason.type');
  });
});

describe('vLLM backend', () => {
  const vllmWhere = { server: 'http://vllm:8000', endpoint: '/inference/v1/generate' };

  it('builds a token-in/token-out body with the sampling, the seed and the sampled-token logprob', () => {
    const call = vllmBackend.generateCall(request(), 'trajflow-abc');
    expect(call).toMatchObject({ method: 'POST', endpoint: '/inference/v1/generate', headers: { 'X-Request-Id': 'trajflow-abc' } });
    expect(VllmGenerateRequestSchema.parse(call.body)).toEqual({
      request_id: 'trajflow-abc',
      token_ids: [1, 5, 7],
      sampling_params: { n: 1, max_tokens: 8, temperature: 0.7, top_p: 0.9, seed: 4242, stop_token_ids: [2], logprobs: 0, detokenize: false },
      stream: false,
    });
  });

  it('aborts by the id the engine runs the request under', () => {
    expect(vllmBackend.abortCall('trajflow-abc')).toEqual({
      method: 'POST',
      endpoint: '/inference/v1/abort_requests',
      body: { request_ids: ['generate-tokens-trajflow-abc'] },
    });
  });

  it('reads ids, logprobs, finish reasons and per-token versions from weight_versions spans', () => {
    const spans = [
      { version: '5', start: 0, end: 1 },
      { version: `6@${LINEAGE_A}`, start: 1, end: 3 },
    ];
    expect(vllmBackend.readGenerate(vllmAnswer('x', [4, 5, 6], { spans, finish: 'length' }), vllmWhere)).toEqual({
      completionIds: [4, 5, 6],
      logprobs: [-0.1, -0.2, -0.3],
      finish: 'length',
      firstVersion: 5,
      tokenVersions: [5, 6, 6],
      // A plain number names no lineage.
      lineages: ['', LINEAGE_A],
    });
    const one = [{ version: '2', start: 0, end: 1 }];
    expect(vllmBackend.readGenerate(vllmAnswer('x', [2], { spans: one }), vllmWhere).finish).toBe('stop');
    expect(vllmBackend.readGenerate(vllmAnswer('x', [2], { spans: one, finish: 'abort' }), vllmWhere).finish).toBe('aborted');
  });

  it('refuses answers without versions, with mismatched logprobs, or with placeholders', () => {
    expect(() => vllmBackend.readGenerate(vllmAnswer('x', [4], { spans: null }), vllmWhere)).toThrow(
      'http://vllm:8000 /inference/v1/generate sent an unexpected response: choices[0].weight_versions: missing',
    );
    const mismatched = vllmAnswer('x', [4, 5]);
    mismatched.choices[0].logprobs.content[1].token_id = 9;
    expect(() => vllmBackend.readGenerate(mismatched, vllmWhere)).toThrow('choices[0].logprobs.content[1].token_id: token 9, but token_ids[1] is 5');
    const placeholder = vllmAnswer('x', [4]);
    placeholder.choices[0].logprobs.content[0].logprob = -9999;
    expect(() => vllmBackend.readGenerate(placeholder, vllmWhere)).toThrow("choices[0].logprobs.content[0].logprob: -9999 is vLLM's placeholder");
    expect(() => vllmBackend.readGenerate(vllmAnswer('x', [4], { finish: 'repetition' }), vllmWhere)).toThrow('choices[0].finish_reason');
  });
});

describe('weight version spans', () => {
  it('must label every output token once, in order', () => {
    expect(spansProblem([{ version: '1', start: 0, end: 3 }], 3)).toBeUndefined();
    expect(spansProblem([{ version: '1', start: 0, end: 0 }], 0)).toBeUndefined();
    expect(
      spansProblem(
        [
          { version: '1', start: 0, end: 2 },
          { version: '2', start: 3, end: 4 },
        ],
        4,
      ),
    ).toBe('span 1 starts at token 3, expected 2');
    expect(spansProblem([{ version: '1', start: 0, end: 2 }], 3)).toBe('spans end at token 2, but there are 3 output tokens');
    expect(spansProblem([], 1)).toBe('no weight version spans');
  });
});

// ---------------------------------------------------------------------------------------------
// The server pool on its own (a hand-driven clock)
// ---------------------------------------------------------------------------------------------

describe('ServerPool', () => {
  it('picks the live server with the fewest requests in flight, spreading ties', () => {
    const pool = new ServerPool(['a', 'b', 'c'], {}, () => 0);
    const [a, b, c] = pool.servers;
    a.inFlight = 2;
    b.inFlight = 1;
    c.inFlight = 1;
    expect(pool.pickLeastLoaded()).toBe(b);
    let now = 10;
    const ticking = new ServerPool(['a', 'b'], {}, () => now++);
    expect([ticking.pickLeastLoaded(), ticking.pickLeastLoaded(), ticking.pickLeastLoaded()].map((s) => s?.url)).toEqual(['a', 'b', 'a']);
  });

  it('backs a failing server off 1 s, doubling to 30 s, and revives it on an answer', () => {
    let now = 0;
    const pool = new ServerPool(['a', 'b'], {}, () => now);
    const [a, b] = pool.servers;
    const backoffs = Array.from({ length: 7 }, () => pool.markDown(a, new Error('refused')));
    expect(backoffs).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    expect(pool.pickLeastLoaded()).toBe(b);
    pool.markDown(b, new Error('reset'));
    expect(pool.pickLeastLoaded()).toBeUndefined();
    expect(pool.msUntilNextLive()).toBe(1_000);
    expect(pool.describe()).toBe('a (refused); b (reset)');
    now = 1_000;
    expect(pool.pickLeastLoaded()).toBe(b);
    pool.markUp(a);
    expect(pool.isLive(a)).toBe(true);
    expect(pool.markDown(a, new Error('again'))).toBe(1_000);
  });

  it('forgets the version a server held once it goes down (it may come back restarted)', () => {
    const pool = new ServerPool(['a'], {}, () => 0);
    pool.servers[0].knownWeights = { version: 4, lineage: 'run-a' };
    pool.markDown(pool.servers[0], new Error('gone'));
    expect(pool.servers[0].knownWeights).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// The provider against protocol fixtures
// ---------------------------------------------------------------------------------------------

describe('HTTP provider: choosing servers and failing over', () => {
  it('sends each request to the live server with the fewest requests in flight', async () => {
    const [a, b] = [await sglangFixture(), await sglangFixture()];
    const held = deferred<Reply>();
    a.onGenerate = async (r) => (await held.promise, { json: sglangAnswer((r.body as { rid: string }).rid, [21]) });
    const p = provider({ servers: [a.url, b.url] });

    const first = p.generate(request());
    await until(() => generates(a).length === 1);
    const second = await p.generate(request());
    expect(second.completionIds).toEqual(COMPLETION);
    expect(generates(b)).toHaveLength(1);
    expect((await p.stats()).running).toBe(1);

    held.resolve({});
    expect((await first).completionIds).toEqual([21]);
    expect(generates(a)).toHaveLength(1);
  });

  it('maps an answer to token ids, logprobs and versions (per token only when they differ)', async () => {
    const a = await sglangFixture({ weightVersion: '3' });
    const p = provider({ servers: [a.url] });
    expect(await p.generate(request())).toEqual({
      completionIds: COMPLETION,
      logprobs: [-0.1, -0.2, -0.3],
      finishReason: 'stop',
      policyVersion: 3,
      queueMs: expect.any(Number),
      decodeMs: expect.any(Number),
    });
    const spans = [
      { version: '3', start: 0, end: 1 },
      { version: '4', start: 1, end: 3 },
    ];
    a.onGenerate = (r) => ({ json: sglangAnswer((r.body as { rid: string }).rid, COMPLETION, { version: '4', spans }) });
    expect(await p.generate(request())).toMatchObject({ policyVersion: 3, tokenPolicyVersions: [3, 4, 4] });
  });

  it('fails over to another server when the connection is refused, and keeps away from the dead one', async () => {
    const dead = await deadServerUrl();
    const b = await sglangFixture();
    const p = provider({ servers: [dead, b.url] });
    expect((await p.generate(request())).completionIds).toEqual(COMPLETION);
    expect((await p.generate(request())).completionIds).toEqual(COMPLETION);
    expect(generates(b)).toHaveLength(2);
  });

  it('retries a reset connection and a 5xx elsewhere, under a fresh request id each time', async () => {
    const [a, b, c] = [await sglangFixture(), await sglangFixture(), await sglangFixture()];
    a.onGenerate = () => 'reset';
    b.onGenerate = () => ({ status: 503, json: { error: { message: 'overloaded' } } });
    const p = provider({ servers: [a.url, b.url, c.url] });
    expect((await p.generate(request())).completionIds).toEqual(COMPLETION);
    const rids = [a, b, c].map((f) => (generates(f)[0].body as { rid: string }).rid);
    expect(new Set(rids).size).toBe(3);
    for (const rid of rids) expect(rid).toMatch(/^trajflow-[0-9a-f-]{36}$/);
  });

  it('retries on another server when one takes longer than requestTimeoutS', async () => {
    const [a, b] = [await sglangFixture(), await sglangFixture()];
    a.onGenerate = () => 'hang';
    const p = provider({ servers: [a.url, b.url], requestTimeoutS: 0.3 });
    const started = performance.now();
    const result = await p.generate(request());
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    expect(result.completionIds).toEqual(COMPLETION);
    expect(generates(a)).toHaveLength(1);
    expect(generates(b)).toHaveLength(1);
    expect(result.queueMs).toBeGreaterThanOrEqual(290);
  });

  it('fails at once with the server message on a 4xx (the request is at fault)', async () => {
    const [a, b] = [await sglangFixture(), await sglangFixture()];
    a.onGenerate = () => ({ status: 400, json: { error: { message: 'input_ids is longer than the context' } } });
    const p = provider({ servers: [a.url, b.url] });
    await expect(p.generate(request())).rejects.toThrow(`${a.url} /generate refused the request (HTTP 400): input_ids is longer than the context`);
    expect(generates(b)).toHaveLength(0);
  });

  it('fails at once on a malformed answer, naming the server, the endpoint and the field', async () => {
    const [a, b] = [await sglangFixture(), await sglangFixture()];
    a.onGenerate = (r) => ({ json: { ...sglangAnswer((r.body as { rid: string }).rid, [1]), output_ids: [1, 'two'] } });
    const p = provider({ servers: [a.url, b.url] });
    await expect(p.generate(request())).rejects.toThrow(`${a.url} /generate sent an unexpected response: output_ids[1]`);
    expect(generates(b)).toHaveLength(0);
  });

  it('keeps retrying with backoff while every server is down, then fails naming them after 2 x requestTimeoutS', async () => {
    const [a, b] = [await sglangFixture(), await sglangFixture()];
    a.onGenerate = b.onGenerate = () => ({ status: 503, json: { error: { message: 'engine dead' } } });
    const p = provider({ servers: [a.url, b.url], requestTimeoutS: 0.5, backoff: { initialBackoffMs: 50 } });
    const started = performance.now();
    const failure = p.generate(request());
    await expect(failure).rejects.toThrow(/^no sglang server answered the generate request in 1\.\d s; last errors: /);
    await expect(failure).rejects.toThrow(`${a.url} (${a.url} /generate: HTTP 503: engine dead)`);
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
    expect(generates(a).length + generates(b).length).toBeGreaterThan(4);
  });

  it('waits for a server that comes back before the deadline', async () => {
    const port = await freePort();
    const p = provider({ servers: [`http://127.0.0.1:${port}`], requestTimeoutS: 3, backoff: { initialBackoffMs: 100 } });
    const pending = p.generate(request());
    await new Promise((resolve) => setTimeout(resolve, 250));
    const revived = await sglangFixture({ port });
    expect((await pending).completionIds).toEqual(COMPLETION);
    expect(generates(revived)).toHaveLength(1);
  });

  it('retries a request the server aborted by itself on another server', async () => {
    const [a, b] = [await sglangFixture(), await sglangFixture()];
    a.onGenerate = (r) => ({ json: sglangAnswer((r.body as { rid: string }).rid, [], { finish: { type: 'abort', message: 'Abort in waiting queue' } }) });
    const p = provider({ servers: [a.url, b.url] });
    expect((await p.generate(request())).completionIds).toEqual(COMPLETION);
    expect(generates(b)).toHaveLength(1);
  });
});

describe('HTTP provider: cancellation', () => {
  it('aborts the fetch, tells SGLang to stop the request, and rejects with an AbortError', async () => {
    const a = await sglangFixture();
    a.onGenerate = () => 'hang';
    const p = provider({ servers: [a.url] });
    const controller = new AbortController();
    const pending = p.generate(request({ signal: controller.signal }));
    await until(() => generates(a).length === 1);
    controller.abort(new Error('activity cancelled'));
    const error = await pending.catch((e: unknown) => e);
    expect(isAbortError(error)).toBe(true);
    expect((error as Error).message).toContain('activity cancelled');
    expect(a.bodiesTo('/abort_request')).toEqual([{ rid: (generates(a)[0].body as { rid: string }).rid }]);
  });

  it('tells vLLM to abort by its engine request id', async () => {
    const a = await vllmFixture({ weightVersion: '0' });
    a.onGenerate = () => 'hang';
    const p = provider({ backend: 'vllm', servers: [a.url] });
    const controller = new AbortController();
    const pending = p.generate(request({ signal: controller.signal }));
    await until(() => generates(a, '/inference/v1/generate').length === 1);
    controller.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    const sent = generates(a, '/inference/v1/generate')[0];
    const id = (sent.body as { request_id: string }).request_id;
    expect(sent.headers['x-request-id']).toBe(id);
    expect(a.bodiesTo('/inference/v1/abort_requests')).toEqual([{ request_ids: [`generate-tokens-${id}`] }]);
  });

  it('rejects an already-aborted request without sending it', async () => {
    const a = await sglangFixture();
    const p = provider({ servers: [a.url] });
    await expect(p.generate(request({ signal: AbortSignal.abort() }))).rejects.toMatchObject({ name: 'AbortError' });
    expect(a.requests).toHaveLength(0);
  });

  it('close() aborts requests in flight (telling the server) and refuses new ones', async () => {
    const a = await sglangFixture();
    a.onGenerate = () => 'hang';
    const p = createHttpProvider({ backend: 'sglang', servers: [a.url], requestTimeoutS: 30 });
    const pending = p.generate(request());
    await until(() => generates(a).length === 1);
    await p.close();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(a.bodiesTo('/abort_request')).toHaveLength(1);
    await expect(p.generate(request())).rejects.toThrow('closed');
  });
});

describe('HTTP provider: weights', () => {
  it('SGLang: loads the directory labelled with its version and lineage; later, skips a server another worker of the run brought further', async () => {
    // A server's label may be another run's: the first sync of each server always loads.
    const [fresh, labelled] = [await sglangFixture({ weightVersion: 'default' }), await sglangFixture({ weightVersion: label(9) })];
    const p = provider({ servers: [fresh.url, labelled.url] });
    await expect(p.loadWeights('/ckpt/v000003', 3)).resolves.toBe(3);
    for (const server of [fresh, labelled]) {
      expect(server.calls()).toEqual(['POST /update_weights_from_disk']);
      expect(server.bodiesTo('/update_weights_from_disk')).toEqual([
        { model_path: '/ckpt/v000003', weight_version: label(3), abort_all_requests: false, flush_cache: true },
      ]);
    }

    await p.loadWeights('/ckpt/v000003', 3);
    expect(fresh.calls()).toHaveLength(1);
    expect((await p.stats()).policyVersion).toBe(3);
    expect((await p.generate(request())).policyVersion).toBe(3);

    // Another inference worker of the run has loaded version 5 there: it is kept.
    fresh.weightVersion = label(5);
    labelled.weightVersion = label(5);
    await p.loadWeights('/ckpt/v000004', 4);
    expect(fresh.calls().slice(-1)).toEqual(['GET /get_model_info']);
    expect(fresh.bodiesTo('/update_weights_from_disk')).toHaveLength(1);
  });

  it.each(['sglang', 'vllm'] as const)('%s: a worker that outlives a run loads the next run at its version 0, whatever the old numbers', async (backend) => {
    const server = backend === 'sglang' ? await sglangFixture() : await vllmFixture();
    const loads = () => server.bodiesTo(backend === 'sglang' ? '/update_weights_from_disk' : '/collective_rpc').length;
    const p = provider({ backend, servers: [server.url] });
    await p.loadWeights('/data/runs/a/checkpoints/v000040', 40);
    expect((await p.generate(request())).policyVersion).toBe(40);
    // Run B's version 0: a lower number, another run's checkpoint.
    await expect(p.loadWeights('/data/runs/b/checkpoints/v000000', 0)).resolves.toBe(0);
    expect(loads()).toBe(2);
    expect(server.weightVersion).toBe(label(0, '/data/runs/b/checkpoints/v000000'));
    expect((await p.generate(request())).policyVersion).toBe(0);
    // The same number of the other run is another checkpoint too.
    await p.loadWeights('/data/runs/a/checkpoints/v000000', 0);
    expect(loads()).toBe(3);
  });

  it('never returns tokens another run loaded onto a shared server: it syncs the server again and resamples', async () => {
    const a = await sglangFixture();
    const p = provider({ servers: [a.url], backoff: { initialBackoffMs: 10 } });
    await p.loadWeights('/data/runs/a/checkpoints/v000002', 2);
    // Another process (run b) loads its weights there behind this provider's back.
    a.weightVersion = label(7, '/data/runs/b/checkpoints/v000007');
    const result = await p.generate(request());
    expect(result.policyVersion).toBe(2);
    expect(a.calls()).toEqual(['POST /update_weights_from_disk', 'POST /generate', 'POST /update_weights_from_disk', 'POST /generate']);
    expect(a.bodiesTo('/update_weights_from_disk')[1]).toMatchObject({ weight_version: label(2, '/data/runs/a/checkpoints/v000002') });
  });

  it('vLLM: pauses keeping requests, labels it loading, reloads from disk, drops old KV, labels the version, resumes', async () => {
    const a = await vllmFixture();
    const p = provider({ backend: 'vllm', servers: [a.url] });
    await expect(p.loadWeights('/ckpt/v000002', 2)).resolves.toBe(2);
    // Once per server first: it reports the logprobs of the sampling distribution.
    expect(a.calls()).toEqual(['GET /server_info?config_format=json', ...VLLM_SYNC]);
    expect(a.bodiesTo('/collective_rpc')).toEqual([{ method: 'reload_weights', kwargs: { weights_path: '/ckpt/v000002' } }]);
    expect(a.bodiesTo('/update_weight_version')).toEqual([{ new_version: LOADING_LABEL }, { new_version: label(2) }]);
    expect((await p.generate(request())).policyVersion).toBe(2);
  });

  it("vLLM: refuses a server that reports the raw logits' logprobs, naming the flag", async () => {
    const a = await vllmFixture({ logprobsMode: 'raw_logprobs' });
    const p = provider({ backend: 'vllm', servers: [a.url] });
    await expect(p.loadWeights('/ckpt/v000001', 1)).rejects.toThrow(/logprobs_mode "raw_logprobs".*--logprobs-mode processed_logprobs/);
    expect(a.calls()).toEqual(['GET /server_info?config_format=json']);
  });

  it.each([
    ['fails', { status: 500, json: { error: { message: 'no config.json in /nowhere' } } }],
    ['times out', 'hang'],
  ] as const)('vLLM: a reload that %s leaves the server paused and unlabelled, and the next request loads again', async (how, reply) => {
    const a = await vllmFixture();
    let failing = true;
    a.override = (r) => (failing && r.url === '/collective_rpc' ? reply : undefined);
    const p = provider({ backend: 'vllm', servers: [a.url], requestTimeoutS: 2, weightLoadTimeoutS: 0.3, backoff: { initialBackoffMs: 10 } });
    // A server that answered with an error is reported; one that did not answer is left to load
    // before its next request.
    const load = p.loadWeights('/ckpt/v000001', 1);
    await (how === 'fails' ? expect(load).rejects.toThrow('no config.json in /nowhere') : expect(load).resolves.toBe(1));
    // Never resumed: it holds weights trajflow does not know, under a label nothing trusts.
    expect(a.calls()).not.toContain('POST /resume');
    expect(a.weightVersion).toBe(LOADING_LABEL);

    failing = false;
    expect((await p.generate(request())).policyVersion).toBe(1);
    expect(a.calls().slice(-7)).toEqual([...VLLM_SYNC, 'POST /inference/v1/generate']);
  });

  it('processes syncing one server take turns: their pause/reload/resume never interleave', async () => {
    const a = await vllmFixture();
    const reloads: { promise: Promise<void>; resolve: (value: void) => void }[] = [];
    a.override = (r) => {
      if (r.url !== '/collective_rpc') return undefined;
      const held = deferred<void>();
      reloads.push(held);
      return held.promise.then(() => ({ json: { results: [null] } }));
    };
    const lockDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-sync-lock-'));
    // Two providers stand for two inference processes: they share nothing but the lock folder.
    const [p, q] = [0, 1].map(() => provider({ backend: 'vllm', servers: [a.url], syncLockDir: lockDir }));
    const first = p.loadWeights('/data/runs/a/checkpoints/v000001', 1);
    await until(() => reloads.length === 1);
    const second = q.loadWeights('/data/runs/b/checkpoints/v000003', 3);
    // q waits for p's lock: no second pause while p's reload is under way.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(a.calls().filter((call) => call === 'POST /pause?mode=keep')).toHaveLength(1);
    reloads[0].resolve();
    await first;
    await until(() => reloads.length === 2);
    reloads[1].resolve();
    await second;
    const check = 'GET /server_info?config_format=json';
    expect(a.calls()).toEqual([check, ...VLLM_SYNC, check, ...VLLM_SYNC]);
    expect(a.weightVersion).toBe(label(3, '/data/runs/b/checkpoints/v000003'));
  });

  it('SGLang: a load the server refuses is an error with its message', async () => {
    const a = await sglangFixture({ weightVersion: '0' });
    a.override = (r) =>
      r.url === '/update_weights_from_disk'
        ? { status: 400, json: { success: false, message: 'Failed to get weights iterator: /bad', num_paused_requests: 0 } }
        : undefined;
    const p = provider({ servers: [a.url] });
    await expect(p.loadWeights('/bad', 1)).rejects.toThrow('Failed to get weights iterator: /bad');
    expect((await p.stats()).policyVersion).toBe(-1);
  });

  it('skips a server that is down, and brings it to the version before its next request', async () => {
    const a = await sglangFixture({ weightVersion: '0' });
    a.override = () => 'reset';
    const p = provider({ servers: [a.url], backoff: { initialBackoffMs: 50 } });
    await expect(p.loadWeights('/ckpt/v000004', 4)).resolves.toBe(4);
    expect(a.calls()).toEqual(['POST /update_weights_from_disk']);

    a.override = undefined;
    const result = await p.generate(request());
    expect(a.calls()).toEqual(['POST /update_weights_from_disk', 'POST /update_weights_from_disk', 'POST /generate']);
    expect(result.policyVersion).toBe(4);
  });

  it('loads again on a server that went down and came back on older weights', async () => {
    const [a, b] = [await sglangFixture({ weightVersion: '0' }), await sglangFixture({ weightVersion: '0' })];
    const p = provider({ servers: [a.url, b.url], backoff: { initialBackoffMs: 20 } });
    await p.loadWeights('/ckpt/v000001', 1);
    // a restarts: its next answer is a reset, then it serves its initial weights again.
    a.weightVersion = '0';
    let resets = 1;
    a.override = () => (resets-- > 0 ? 'reset' : undefined);
    expect((await p.generate(request())).policyVersion).toBe(1); // a resets; b answers
    await new Promise((resolve) => setTimeout(resolve, 40)); // a's backoff passes
    expect((await p.generate(request())).policyVersion).toBe(1); // a, picked least recently
    expect(a.calls()).toEqual(['POST /update_weights_from_disk', 'POST /generate', 'POST /update_weights_from_disk', 'POST /generate']);
  });
});

describe('HTTP provider: stats', () => {
  it("reports this process's view: tokens, busy time, requests at once, the version loaded", async () => {
    const a = await sglangFixture({ weightVersion: '0' });
    const p = provider({ servers: [a.url] });
    expect(await p.stats()).toMatchObject({ policyVersion: -1, generatedTokens: 0, running: 0, waiting: 0, busyMs: 0 });
    await Promise.all([p.generate(request()), p.generate(request())]);
    await p.loadWeights('/ckpt/v000001', 1);
    const stats = await p.stats();
    expect(stats).toMatchObject({ policyVersion: 1, generatedTokens: 2 * COMPLETION.length, running: 0, waiting: 0, maxBatchSize: 2 });
    expect(stats.busyMs).toBeGreaterThan(0);
    expect(stats.uptimeMs).toBeGreaterThanOrEqual(stats.busyMs);
  });
});

// ---------------------------------------------------------------------------------------------
// LoRA: adapter checkpoints loaded beside the base model
// ---------------------------------------------------------------------------------------------

/** A run's checkpoint folder of peft adapters (what makes one: adapter_config.json). */
function adapterRun(): { dir: (version: number) => string; label: (version: number) => string } {
  const root = mkdtempSync(path.join(os.tmpdir(), 'trajflow-lora-ckpt-'));
  const dir = (version: number) => {
    const folder = path.join(root, 'checkpoints', `v${String(version).padStart(6, '0')}`);
    mkdirSync(folder, { recursive: true });
    writeFileSync(path.join(folder, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 8 }));
    return folder;
  };
  return { dir, label: (version: number) => `${version}@${lineageOf(dir(version))}` };
}

const ADAPTER = { version: 3, lineage: LINEAGE_A };

describe('LoRA: requests and answers', () => {
  const vllmWhere = { server: 'http://vllm:8000', endpoint: '/inference/v1/generate' };

  it('vLLM names the adapter in `model`; SGLang in `lora_path`; without one, neither', () => {
    const vllm = VllmGenerateRequestSchema.parse(vllmBackend.generateCall(request(), 'r', ADAPTER).body);
    expect(vllm.model).toBe(`3@${LINEAGE_A}`);
    expect(VllmGenerateRequestSchema.parse(vllmBackend.generateCall(request(), 'r').body)).not.toHaveProperty('model');
    const sglang = SglangGenerateRequestSchema.parse(sglangBackend.generateCall(request(), 'r', ADAPTER).body);
    expect(sglang.lora_path).toBe(`3@${LINEAGE_A}`);
    expect(SglangGenerateRequestSchema.parse(sglangBackend.generateCall(request(), 'r').body)).not.toHaveProperty('lora_path');
  });

  it("records every token of an adapter's answer under the adapter's version, whatever base label the spans carry", () => {
    const spans = [{ version: 'default', start: 0, end: 3 }];
    const answer = vllmAnswer('x', [4, 5, 6], { spans, model: `3@${LINEAGE_A}` });
    expect(vllmBackend.readGenerate(answer, vllmWhere, ADAPTER)).toMatchObject({ firstVersion: 3, tokenVersions: [3, 3, 3], lineages: [LINEAGE_A] });
    // Without an adapter, the base model's label is not a trajflow version.
    expect(() => vllmBackend.readGenerate(answer, vllmWhere)).toThrow('choices[0].weight_versions: weight version "default" is not a trajflow policy version');
    const sglang = sglangAnswer('r', [11, 12], { version: '0' });
    expect(sglangBackend.readGenerate(sglang, where, ADAPTER)).toMatchObject({ firstVersion: 3, tokenVersions: [3, 3], lineages: [LINEAGE_A] });
  });

  it("still checks an adapter answer's spans cover its tokens, and that vLLM ran the adapter named", () => {
    const short = vllmAnswer('x', [4, 5], { spans: [{ version: 'default', start: 0, end: 1 }], model: `3@${LINEAGE_A}` });
    expect(() => vllmBackend.readGenerate(short, vllmWhere, ADAPTER)).toThrow('spans end at token 1, but there are 2 output tokens');
    const other = vllmAnswer('x', [4], { spans: [{ version: 'default', start: 0, end: 1 }], model: '/models/base' });
    expect(() => vllmBackend.readGenerate(other, vllmWhere, ADAPTER)).toThrow(`model: "/models/base", but the request named adapter "3@${LINEAGE_A}"`);
  });
});

describe('LoRA: which adapters make room', () => {
  const v = (version: number, lineage = 'a') => ({ version, lineage });
  const unused = () => false;

  it('unloads nothing while there is room, then the oldest, other runs first, never one in use', () => {
    expect(adaptersToUnload([v(1), v(2), v(3)], v(4), unused, 4)).toEqual([]);
    expect(adaptersToUnload([v(2), v(1), v(3), v(4)], v(5), unused, 4)).toEqual([v(1)]);
    expect(adaptersToUnload([v(7), v(9, 'b'), v(8), v(6)], v(10), unused, 4)).toEqual([v(9, 'b')]);
    expect(adaptersToUnload([v(1), v(2), v(3), v(4)], v(5), (adapter) => adapter.version === 1, 4)).toEqual([v(2)]);
    // The incoming adapter itself is not counted twice.
    expect(adaptersToUnload([v(1), v(2), v(3), v(4)], v(4), unused, 4)).toEqual([]);
  });
});

describe('HTTP provider: LoRA', () => {
  it('vLLM: loads an adapter folder as a runtime adapter (no reload), and requests name it', async () => {
    const a = await vllmFixture({ weightVersion: '0' });
    const run = adapterRun();
    const p = provider({ backend: 'vllm', servers: [a.url] });
    await expect(p.loadWeights(run.dir(1), 1)).resolves.toBe(1);
    expect(a.calls()).toEqual(['GET /server_info?config_format=json', 'GET /weight_info', 'GET /v1/models', 'POST /v1/load_lora_adapter']);
    expect(a.bodiesTo('/v1/load_lora_adapter')).toEqual([{ lora_name: run.label(1), lora_path: run.dir(1) }]);
    const result = await p.generate(request());
    expect(result).toMatchObject({ policyVersion: 1, completionIds: COMPLETION });
    expect(result.tokenPolicyVersions).toBeUndefined();
    expect((generates(a, '/inference/v1/generate')[0].body as { model: string }).model).toBe(run.label(1));
    // The next version: listed, loaded beside; nothing paused or reloaded, ever.
    await p.loadWeights(run.dir(2), 2);
    expect((await p.generate(request())).policyVersion).toBe(2);
    expect([...a.adapters.keys()]).toEqual([run.label(1), run.label(2)]);
    expect(a.calls().filter((call) => /pause|collective_rpc|update_weight_version/.test(call))).toEqual([]);
  });

  it('SGLang: loads through /load_lora_adapter and names the adapter in lora_path', async () => {
    const a = await sglangFixture({ weightVersion: '0' });
    const run = adapterRun();
    const p = provider({ servers: [a.url] });
    await p.loadWeights(run.dir(4), 4);
    expect(a.calls()).toEqual(['GET /get_model_info', 'GET /v1/models', 'POST /load_lora_adapter']);
    expect(a.bodiesTo('/load_lora_adapter')).toEqual([{ lora_name: run.label(4), lora_path: run.dir(4) }]);
    expect((await p.generate(request())).policyVersion).toBe(4);
    expect((generates(a)[0].body as { lora_path: string }).lora_path).toBe(run.label(4));
  });

  it.each([400, 200])('SGLang: an adapter load the server refuses (HTTP %d) is an error with its message', async (status) => {
    const a = await sglangFixture({ weightVersion: '0' });
    a.override = (r) =>
      r.url === '/load_lora_adapter'
        ? { status, json: { success: false, error_message: 'rank 64 exceeds --max-lora-rank 16', loaded_adapters: {} } }
        : undefined;
    const p = provider({ servers: [a.url] });
    await expect(p.loadWeights(adapterRun().dir(1), 1)).rejects.toThrow('rank 64 exceeds --max-lora-rank 16');
  });

  it(`keeps at most ${MAX_LOADED_ADAPTERS} adapters: unloads the oldest, but not one a request is using`, async () => {
    const a = await vllmFixture({ weightVersion: '0' });
    const run = adapterRun();
    const p = provider({ backend: 'vllm', servers: [a.url] });
    await p.loadWeights(run.dir(1), 1);
    const held = deferred<void>();
    a.onGenerate = (r) => held.promise.then(() => ({ json: vllmAnswer((r.body as { request_id: string }).request_id, COMPLETION, { model: run.label(1) }) }));
    const onVersion1 = p.generate(request());
    await until(() => generates(a, '/inference/v1/generate').length === 1);
    for (let version = 2; version <= 5; version++) await p.loadWeights(run.dir(version), version);
    // Version 1 is in use: version 2, the oldest free one, made room for 5.
    expect(a.bodiesTo('/v1/unload_lora_adapter')).toEqual([{ lora_name: run.label(2) }]);
    expect([...a.adapters.keys()]).toEqual([1, 3, 4, 5].map(run.label));
    held.resolve();
    expect((await onVersion1).policyVersion).toBe(1);
    await p.loadWeights(run.dir(6), 6);
    expect(a.bodiesTo('/v1/unload_lora_adapter')).toEqual([{ lora_name: run.label(2) }, { lora_name: run.label(1) }]);
  });

  it("uses a newer adapter another worker of the run loaded, once it has synced the server; first replaces one under the target's name", async () => {
    const a = await vllmFixture({ weightVersion: '0' });
    const run = adapterRun();
    // Left from before (a data directory cleared and the run id used again): replaced on the first sync.
    a.adapters.set(run.label(1), '/stale');
    const p = provider({ backend: 'vllm', servers: [a.url] });
    await p.loadWeights(run.dir(1), 1);
    expect(a.calls().filter((call) => call.includes('lora_adapter'))).toEqual(['POST /v1/unload_lora_adapter', 'POST /v1/load_lora_adapter']);
    expect(a.adapters.get(run.label(1))).toBe(run.dir(1));
    // Another inference worker of the run loaded version 3.
    a.adapters.set(run.label(3), run.dir(3));
    await p.loadWeights(run.dir(2), 2);
    expect(a.bodiesTo('/v1/load_lora_adapter')).toHaveLength(1);
    expect((await p.generate(request())).policyVersion).toBe(3);
  });

  it('syncs again and resamples when the adapter it named was unloaded behind its back', async () => {
    const a = await vllmFixture({ weightVersion: '0' });
    const run = adapterRun();
    const p = provider({ backend: 'vllm', servers: [a.url], backoff: { initialBackoffMs: 10 } });
    await p.loadWeights(run.dir(2), 2);
    a.adapters.clear();
    expect((await p.generate(request())).policyVersion).toBe(2);
    expect(a.bodiesTo('/v1/load_lora_adapter')).toHaveLength(2);
  });

  it("refuses a server whose weights are a full fine-tuning run's, not the base model", async () => {
    const a = await vllmFixture({ weightVersion: label(5) });
    const p = provider({ backend: 'vllm', servers: [a.url] });
    await expect(p.loadWeights(adapterRun().dir(1), 1)).rejects.toThrow(
      /serves a full fine-tuning run's weights \(version 5 of lineage [0-9a-f]{16}\).*restart the server/,
    );
    expect(a.bodiesTo('/v1/load_lora_adapter')).toHaveLength(0);
  });
});

describe('local servers of a LoRA run', () => {
  it("start vLLM with runtime LoRA updates and a --max-lora-rank vLLM accepts, fitting the run's rank", () => {
    expect([1, 8, 9, 16, 33, 300, 512].map(vllmMaxLoraRank)).toEqual([1, 8, 16, 16, 64, 320, 512]);
    expect(() => vllmMaxLoraRank(513)).toThrow('trainer.lora.rank 513 is above the largest LoRA rank vLLM serves (512)');
    expect(vllmLoraSettings({ rank: 12 })).toEqual({
      args: ['--enable-lora', '--max-lora-rank', '16', '--max-loras', String(MAX_LOADED_ADAPTERS)],
      env: { VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'True' },
    });
    expect(vllmLoraSettings(undefined)).toEqual({ args: [], env: {} });
  });
});
