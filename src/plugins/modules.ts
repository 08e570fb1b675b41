/**
 * Loads the plugin modules a config names. Each is a CommonJS module (JavaScript, or TypeScript
 * where the process can load it, as under jest) exporting `register(trajflow)`; it is loaded once
 * per process however often configs name it.
 */
import path from 'node:path';
import { pluginApi } from './registry';
import type { PluginApi } from './types';

const loaded = new Set<string>();

/** Resolves module paths against the directory of the config that names them. */
export function resolveModulePaths(modules: readonly string[], baseDir: string): string[] {
  return modules.map((m) => path.resolve(baseDir, m));
}

/** Requires each module (absolute paths) and calls its `register`; errors name the module. */
export function loadPluginModules(modules: readonly string[]): void {
  for (const file of modules) {
    if (loaded.has(file)) continue;
    let exports: { register?: unknown; default?: { register?: unknown } };
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      exports = require(file);
    } catch (err) {
      throw new Error(`cannot load module ${file}: ${(err as Error).message}`, { cause: err });
    }
    const register = (exports.register ?? exports.default?.register) as ((api: PluginApi) => void) | undefined;
    if (typeof register !== 'function') throw new Error(`module ${file} exports no register(trajflow) function`);
    try {
      register(pluginApi);
    } catch (err) {
      throw new Error(`module ${file}: register failed: ${(err as Error).message}`, { cause: err });
    }
    loaded.add(file);
  }
}
