/**
 * What the HTTP provider needs from one model server's API, one implementation per server kind
 * (./sglang.ts, ./vllm.ts). A backend only builds calls and reads answers; sending them, choosing
 * the server, retrying and timing are the provider's (./httpProvider.ts), so every backend gets
 * the same failover and cancellation behaviour.
 */
import type { GenerateRequest } from '../provider';
import type { HttpCall } from './serverCall';
import type { WeightsLabel } from './weightVersions';

/** The one server a backend operation is about. */
export interface ServerConnection {
  readonly url: string;
  /** Sends a call; resolves with the parsed JSON body (undefined when empty), or throws an ./errors error. */
  send(call: HttpCall, options: { timeoutMs: number }): Promise<unknown>;
}

/** Where an answer came from, for error messages. */
export interface AnswerSource {
  server: string;
  endpoint: string;
}

/** A generate answer in trajflow's terms. */
export interface SampledCompletion {
  completionIds: number[];
  logprobs: number[];
  /** `aborted`: the server cut the request short (it did not finish it). */
  finish: 'stop' | 'length' | 'aborted';
  /** Policy version that sampled the first token (the version that would have, with no tokens). */
  firstVersion: number;
  /** Policy version of each completion token. */
  tokenVersions: number[];
  /** The lineage of every label that sampled (see ./weightVersions.ts). */
  lineages: string[];
}

/**
 * A server serves trajflow's weights one of two ways, by the kind of checkpoint folder
 * (../../store/loraAdapter.ts): as its whole weights (`loadWeights`, `weightLabel`), or, for a LoRA
 * run, as runtime adapters beside its base model (`loadAdapter`, `unloadAdapter`; ./loraAdapters.ts
 * lists them), each named by its label, that generate requests name.
 */
export interface ServerBackend {
  readonly name: 'sglang' | 'vllm';
  /** The generate call of one attempt, under a request id the server will know it by, sampled by `adapter` if given. */
  generateCall(request: GenerateRequest, requestId: string, adapter?: WeightsLabel): HttpCall;
  /**
   * Validates a generate answer and maps it; throws MalformedResponseError naming the field. With
   * `adapter` (the request named it), every token is the adapter's version.
   */
  readGenerate(json: unknown, source: AnswerSource, adapter?: WeightsLabel): SampledCompletion;
  /** Asks the server to stop decoding a request this process no longer waits for. */
  abortCall(requestId: string): HttpCall;
  /**
   * Checks, once per server before its first weight load, that the server is set up as trajflow
   * needs it; throws an error naming what to change.
   */
  checkServer?(server: ServerConnection, timeoutMs: number): Promise<void>;
  /** The label of the weights the server holds, or undefined if it holds none trajflow labelled. */
  weightLabel(server: ServerConnection, timeoutMs: number): Promise<WeightsLabel | undefined>;
  /**
   * Makes the server serve the Hugging Face directory `checkpointDir` under `label` (requests in
   * flight finish or go on as the server does it; their answers record the labels). A load that
   * fails leaves the server serving nothing under a trajflow label it does not hold.
   */
  loadWeights(server: ServerConnection, checkpointDir: string, label: WeightsLabel, timeouts: { controlMs: number; loadMs: number }): Promise<void>;
  /** Loads the peft adapter directory `adapterDir` as a runtime LoRA adapter named `formatLabel(label)`; throws if the server refuses. */
  loadAdapter(server: ServerConnection, adapterDir: string, label: WeightsLabel, timeoutMs: number): Promise<void>;
  /** Unloads the adapter named `formatLabel(label)`; requests already running on it finish (SGLang waits for them, so it may take a request's time). */
  unloadAdapter(server: ServerConnection, label: WeightsLabel, timeoutMs: number): Promise<void>;
}
