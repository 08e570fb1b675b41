/**
 * The held-out rule: which environment instances are kept for evaluation and never trained on. An
 * instance is held out when the hash of its identity (a map layout, a task's expression or id)
 * falls in the first `share` of the hash range: a fixed function of the instance alone, so every
 * process, run and seed agrees on the split without sharing a list, and two seeds that draw the
 * same instance put it on the same side. Pure.
 */
import { hashString } from './random';

export function isHeldOut(instanceKey: string, share: number): boolean {
  return hashString(instanceKey) / 2 ** 32 < share;
}
