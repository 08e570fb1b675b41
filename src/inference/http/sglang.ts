/**
 * SGLang's native HTTP API, token ids in and out.
 *
 * Shapes read from the SGLang 0.5.23 wheel: sglang/srt/entrypoints/http_server.py (routes),
 * sglang/api/v1/api_types.py (the JSON contract of /generate: SamplingParams rejects unknown
 * keys, GenerateMetaInfo, LogprobEntry = [logprob, token_id, text]), sglang/srt/managers/
 * io_struct.py (UpdateWeightFromDiskReqInput, AbortReq) and sglang/srt/utils/weight_versions.py.
 *
 * - The output ids keep the stop token: the scheduler sends `output_ids_through_stop` ("stop
 *   position is included"); `no_stop_trim` and `skip_special_tokens` only shape the text, and are
 *   sent so the text agrees.
 * - Logprobs are log_softmax(logits / temperature), before top-p (trajflow's definition).
 * - `meta_info.weight_versions` (spans, since 0.5.23) says which weights sampled which tokens;
 *   older 0.5.x servers give only `meta_info.weight_version`, taken for every token.
 * - /update_weights_from_disk takes a writer lock: requests in flight finish on the old weights,
 *   new ones wait for the new.
 * - LoRA (a server started with `--enable-lora`): /load_lora_adapter and /unload_lora_adapter
 *   answer `{success, error_message, loaded_adapters}` (io_struct.py LoRAUpdateOutput); a generate
 *   request names its adapter in `lora_path` (the adapter's name, despite the field's); the
 *   answer's versions are the base model's label.
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
  type WeightVersionSpan,
} from './weightVersions';

const tokenId = z.number().int().nonnegative();

/** The body trajflow sends to POST /generate; strict where the server is (sampling_params). */
export const SglangGenerateRequestSchema = z.strictObject({
  rid: z.string().min(1),
  input_ids: z.array(tokenId).min(1),
  /** The name of the LoRA adapter that samples the request (absent: the base model's weights, as loaded). */
  lora_path: z.string().min(1).optional(),
  sampling_params: z.strictObject({
    max_new_tokens: z.number().int().positive(),
    temperature: z.number().nonnegative(),
    top_p: z.number().gt(0).lte(1),
    sampling_seed: z.number().int(),
    stop_token_ids: z.array(tokenId),
    no_stop_trim: z.literal(true),
    skip_special_tokens: z.literal(false),
  }),
  return_logprob: z.literal(true),
  stream: z.literal(false),
});

export type SglangGenerateRequest = z.infer<typeof SglangGenerateRequestSchema>;

const FinishReasonSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('stop'), matched: z.union([z.number(), z.string(), z.array(z.number())]).nullish() }),
  z.object({ type: z.literal('length'), length: z.number().nullish() }),
  z.object({ type: z.literal('abort'), message: z.string().nullish() }),
]);

/** `[logprob, token_id, text]`; a null logprob is how orjson writes -inf, never right for a sampled token. */
const LogprobEntrySchema = z.tuple([z.number(), tokenId, z.string().nullish()], z.unknown());

/** The answer of a non-streaming POST /generate with return_logprob (fields trajflow reads). */
export const SglangGenerateResponseSchema = z
  .object({
    output_ids: z.array(tokenId),
    meta_info: z.object({
      id: z.string(),
      finish_reason: FinishReasonSchema,
      output_token_logprobs: z.array(LogprobEntrySchema),
      weight_version: z.string().nullish(),
      weight_versions: z.array(WeightVersionSpanSchema).optional(),
    }),
  })
  .superRefine((answer, ctx) => {
    const { output_ids: ids, meta_info: meta } = answer;
    if (meta.output_token_logprobs.length !== ids.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['meta_info', 'output_token_logprobs'],
        message: `${meta.output_token_logprobs.length} entries for ${ids.length} output ids`,
      });
    } else {
      meta.output_token_logprobs.forEach(([, id], i) => {
        if (id !== ids[i])
          ctx.addIssue({ code: 'custom', path: ['meta_info', 'output_token_logprobs', i, 1], message: `token ${id}, but output_ids[${i}] is ${ids[i]}` });
      });
    }
    const spans = versionSpans(answer);
    if (spans === undefined) {
      ctx.addIssue({ code: 'custom', path: ['meta_info', 'weight_version'], message: 'missing: the server reported no weight version' });
      return;
    }
    // Whether the labels are trajflow's depends on the request (an adapter's name the base): readGenerate checks them.
    const problem = spansProblem(spans, ids.length);
    if (problem) ctx.addIssue({ code: 'custom', path: versionsPath(answer), message: problem });
  });

type SglangGenerateResponse = z.infer<typeof SglangGenerateResponseSchema>;

/** The field an answer's versions came from, for error messages. */
function versionsPath({ meta_info }: Pick<SglangGenerateResponse, 'meta_info'>): string[] {
  return meta_info.weight_versions?.length ? ['meta_info', 'weight_versions'] : ['meta_info', 'weight_version'];
}

/** The spans of an answer: its own, or (older servers) its one version over all its tokens. */
function versionSpans({ output_ids, meta_info }: SglangGenerateResponse): WeightVersionSpan[] | undefined {
  if (meta_info.weight_versions?.length) return meta_info.weight_versions;
  if (typeof meta_info.weight_version !== 'string') return undefined;
  return [{ version: meta_info.weight_version, start: 0, end: output_ids.length }];
}

const ModelInfoSchema = z.looseObject({ weight_version: z.string().nullish() });

const UpdateWeightsAnswerSchema = z.looseObject({ success: z.boolean(), message: z.string().default('') });

const LoraUpdateAnswerSchema = z.looseObject({ success: z.boolean(), error_message: z.string().nullish() });

export const sglangBackend: ServerBackend = {
  name: 'sglang',

  generateCall(request: GenerateRequest, requestId: string, adapter?: WeightsLabel): HttpCall {
    const { sampling } = request;
    const body: SglangGenerateRequest = {
      rid: requestId,
      input_ids: [...request.promptIds],
      ...(adapter ? { lora_path: formatLabel(adapter) } : {}),
      sampling_params: {
        max_new_tokens: sampling.maxTokens,
        temperature: sampling.temperature,
        top_p: sampling.topP,
        sampling_seed: sampling.seed,
        stop_token_ids: [...sampling.stopTokens],
        no_stop_trim: true,
        skip_special_tokens: false,
      },
      return_logprob: true,
      stream: false,
    };
    return { method: 'POST', endpoint: '/generate', body };
  },

  readGenerate(json: unknown, { server, endpoint }: AnswerSource, adapter?: WeightsLabel): SampledCompletion {
    const answer = parseAnswer(SglangGenerateResponseSchema, json, server, endpoint);
    const spans = versionSpans(answer) ?? [];
    const problem = adapter ? undefined : spanLabelsProblem(spans);
    if (problem) throw new MalformedResponseError(server, endpoint, `${versionsPath(answer).join('.')}: ${problem}`);
    const versions = adapter ? adapterTokenVersions(adapter, answer.output_ids.length) : tokenVersions(spans);
    const type = answer.meta_info.finish_reason.type;
    return {
      completionIds: answer.output_ids,
      logprobs: answer.meta_info.output_token_logprobs.map(([logprob]) => logprob),
      finish: type === 'abort' ? 'aborted' : type,
      firstVersion: versions.first,
      tokenVersions: versions.perToken,
      lineages: versions.lineages,
    };
  },

  abortCall(requestId: string): HttpCall {
    return { method: 'POST', endpoint: '/abort_request', body: { rid: requestId } };
  },

  async weightLabel(server: ServerConnection, timeoutMs: number): Promise<WeightsLabel | undefined> {
    // /get_model_info: deprecated in 0.5.23 in favour of /model_info (it logs a warning) but
    // present across 0.5.x; read once per weight sync.
    const endpoint = '/get_model_info';
    const info = parseAnswer(ModelInfoSchema, await server.send({ method: 'GET', endpoint }, { timeoutMs }), server.url, endpoint);
    return parseLabel(info.weight_version);
  },

  async loadWeights(server: ServerConnection, checkpointDir: string, label: WeightsLabel, { loadMs }): Promise<void> {
    const endpoint = '/update_weights_from_disk';
    // Requests in flight finish first (the server's writer lock), so none is aborted; the KV and
    // prefix caches of the old weights are flushed. A failed load answers 400 with the message.
    const body = { model_path: checkpointDir, weight_version: formatLabel(label), abort_all_requests: false, flush_cache: true };
    const answer = parseAnswer(UpdateWeightsAnswerSchema, await server.send({ method: 'POST', endpoint, body }, { timeoutMs: loadMs }), server.url, endpoint);
    if (!answer.success) throw new Error(`${server.url} ${endpoint} did not load ${checkpointDir}: ${answer.message || 'success: false'}`);
  },

  async loadAdapter(server: ServerConnection, adapterDir: string, label: WeightsLabel, timeoutMs: number): Promise<void> {
    const endpoint = '/load_lora_adapter';
    const body = { lora_name: formatLabel(label), lora_path: adapterDir };
    const answer = parseAnswer(LoraUpdateAnswerSchema, await server.send({ method: 'POST', endpoint, body }, { timeoutMs }), server.url, endpoint);
    if (!answer.success) throw new Error(`${server.url} ${endpoint} did not load adapter ${adapterDir}: ${answer.error_message || 'success: false'}`);
  },

  async unloadAdapter(server: ServerConnection, label: WeightsLabel, timeoutMs: number): Promise<void> {
    const endpoint = '/unload_lora_adapter';
    const body = { lora_name: formatLabel(label) };
    const answer = parseAnswer(LoraUpdateAnswerSchema, await server.send({ method: 'POST', endpoint, body }, { timeoutMs }), server.url, endpoint);
    if (!answer.success) throw new Error(`${server.url} ${endpoint} did not unload ${body.lora_name}: ${answer.error_message || 'success: false'}`);
  },
};
