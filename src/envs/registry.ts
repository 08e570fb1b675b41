/** Environments by config name; each instance is seeded so a replay of its actions reproduces it. */
import type { EnvConfig } from '../../config/schema';
import type { Environment } from './environment';
import { FrozenLake } from './frozenlake';

export type AnyEnvironment = Environment<unknown, unknown>;

export function createEnvironment(config: EnvConfig, seed: number): AnyEnvironment {
  switch (config.name) {
    case 'frozenlake':
      return new FrozenLake({
        size: config.size,
        map: config.map,
        mapSeed: seed,
        pFrozen: config.pFrozen,
        slippery: config.slippery,
        seed,
        maxSteps: config.maxSteps,
      }) as AnyEnvironment;
  }
}
