import type { EnvConfig } from '../../config/schema';

/** A short human label for the Web UI and logs, e.g. `frozenlake-4x4-classic`. Pure. */
export function describeEnv(config: EnvConfig): string {
  return `${config.name}-${config.size}x${config.size}-${config.map}${config.slippery ? '-slippery' : ''}`;
}
