/**
 * Seeded randomness for everything that must replay exactly: environments, and workflows deriving
 * seeds from ids. Pure (no Math.random, no Node built-ins), so the Temporal workflow sandbox can
 * import it.
 */

/** A stream of uniform floats in [0, 1). */
export type Rng = () => number;

/**
 * mulberry32: a 32-bit state generator, tiny and fast, good enough for simulation and sampling
 * (not for cryptography). The same seed always yields the same stream; the seed is taken mod 2^32.
 */
export function createRng(seed: number): Rng {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 0x1_0000_0000;
  };
}

/** 32-bit FNV-1a of the UTF-8 bytes of `text`: turns ids (episode, run) into seeds. */
export function hashString(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash = Math.imul(hash ^ byte, 0x01000193);
  }
  return hash >>> 0;
}
