/**
 * Heavy-tailed latency for the bench's environment stand-in: a lognormal distribution given by
 * its median and its p99/p50 ratio, the two figures agentic environments (tool calls, sandboxes,
 * web requests) are usually described by.
 */
import type { Rng } from '../../src/core/random';

/** The standard normal's 99th percentile: p99/p50 of a lognormal is exp(sigma x this). */
const Z_99 = 2.326348;

/** The lognormal's sigma that gives `p99OverP50` (e.g. 20 gives sigma = ln(20) / 2.326 = 1.288). */
export function sigmaForTail(p99OverP50: number): number {
  if (!(p99OverP50 >= 1)) throw new Error(`p99/p50 must be >= 1, got ${p99OverP50}`);
  return Math.log(p99OverP50) / Z_99;
}

/** One draw, in ms: median x exp(sigma x a standard normal draw made by Box-Muller from `rng`). */
export function lognormalMs(medianMs: number, sigma: number, rng: Rng): number {
  const u1 = Math.max(rng(), Number.MIN_VALUE);
  const u2 = rng();
  const normal = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  return medianMs * Math.exp(sigma * normal);
}
