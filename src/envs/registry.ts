/** Environments by config name; each instance is seeded so a replay of its actions reproduces it. */
import type { EnvConfig } from '../../config/schema';
import type { Environment } from './environment';
import { FrozenLake } from './frozenlake';

export type AnyEnvironment = Environment<unknown, unknown>;

/** Training instances, or evaluation instances drawn only from the environment's held-out pool. */
export type InstancePool = 'train' | 'eval';

export function createEnvironment(config: EnvConfig, seed: number, pool: InstancePool = 'train'): AnyEnvironment {
  switch (config.name) {
    case 'frozenlake':
      return new FrozenLake({
        size: config.size,
        map: config.map,
        mapSeed: seed,
        pFrozen: config.pFrozen,
        // With no held-out share, evaluation draws from all maps, as training does.
        heldOut: config.heldOutShare > 0 ? { share: config.heldOutShare, pool: pool === 'eval' ? 'heldout' : 'train' } : undefined,
        slippery: config.slippery,
        seed,
        maxSteps: config.maxSteps,
      }) as AnyEnvironment;
  }
}
