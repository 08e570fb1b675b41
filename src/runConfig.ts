/**
 * Reads a run config from YAML or JSON and validates it; errors name the file and field path.
 * Validation covers the registered environment's and agent's own options too, after loading the
 * modules the config names, so a typo fails before anything starts.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { describeIssues } from './core/issues';
import { loadPluginModules, resolveModulePaths } from './plugins/modules';
import { OptionsError, validateAgentConfig, validateEnvConfig } from './plugins/registry';
import { AgentConfigSchema, EnvConfigSchema, RunConfig, RunConfigSchema } from '../config/schema';

export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`invalid config ${file}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Validates an already-parsed object; `source` names it in errors, and `baseDir` is where its
 * module paths start (the config file's directory).
 */
export function parseRunConfig(raw: unknown, source = '<inline>', baseDir = process.cwd()): RunConfig {
  const result = RunConfigSchema.safeParse(raw);
  const problems = result.success ? [] : describeIssues(result.error.issues);
  // The plugin sections are checked even when others are wrong, so one look lists every problem.
  const sections = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const check = <T>(where: string, fn: () => T): T | undefined => {
    try {
      return fn();
    } catch (err) {
      problems.push(...(err instanceof OptionsError ? err.problems : [`${where}: ${(err as Error).message}`]));
      return undefined;
    }
  };
  const modules = RunConfigSchema.shape.modules.safeParse(sections.modules);
  const modulePaths = modules.success ? resolveModulePaths(modules.data, baseDir) : [];
  const loaded = modules.success && check('modules', () => (loadPluginModules(modulePaths), true)) === true;
  const env = EnvConfigSchema.safeParse(sections.env);
  const agent = AgentConfigSchema.safeParse(sections.agent ?? {});
  const validEnv = loaded && env.success ? check('env.name', () => validateEnvConfig(env.data)) : undefined;
  const validAgent = loaded && agent.success ? check('agent.name', () => validateAgentConfig(agent.data)) : undefined;
  if (!result.success || problems.length > 0 || !validEnv || !validAgent) throw new ConfigError(source, [...new Set(problems)]);
  const model = result.data.model.path === undefined ? result.data.model : { ...result.data.model, path: path.resolve(baseDir, result.data.model.path) };
  return { ...result.data, modules: modulePaths, model, env: validEnv, agent: validAgent };
}

export function loadRunConfig(file: string): RunConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, [`cannot read file: ${(err as Error).message}`]);
  }
  let raw: unknown;
  try {
    raw = path.extname(file) === '.json' ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new ConfigError(file, [`not valid ${path.extname(file) === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message}`]);
  }
  return parseRunConfig(raw ?? {}, file, path.dirname(path.resolve(file)));
}
