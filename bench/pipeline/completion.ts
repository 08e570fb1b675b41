/**
 * What the bench's model stand-ins answer: a completion whose length is drawn from the request's
 * sampling seed (uneven, between a quarter of maxTokens and maxTokens), as lowercase letters
 * ending with the chat template's stop token, or cut at maxTokens. The same seed gives the same
 * answer, as with the real engine, so a retried turn samples identically.
 */
import { createRng } from '../../src/core/random';
import type { FinishReason, SamplingParams } from '../../src/inference/provider';

export interface StandInCompletion {
  completionIds: number[];
  logprobs: number[];
  finishReason: FinishReason;
}

const LETTER_A = 'a'.charCodeAt(0);

export function standInCompletion({ seed, maxTokens, stopTokens }: Pick<SamplingParams, 'seed' | 'maxTokens' | 'stopTokens'>): StandInCompletion {
  const rng = createRng(seed);
  const shortest = Math.max(1, Math.ceil(maxTokens / 4));
  const length = shortest + Math.floor(rng() * (maxTokens - shortest + 1));
  const stops = length < maxTokens && stopTokens.length > 0;
  const letters = stops ? length - 1 : length;
  const completionIds = Array.from({ length: letters }, () => LETTER_A + Math.floor(rng() * 26));
  if (stops) completionIds.push(stopTokens[0]);
  return { completionIds, logprobs: completionIds.map(() => Math.log(1 / 26)), finishReason: stops ? 'stop' : 'length' };
}
