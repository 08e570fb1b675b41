/**
 * Reads a run config from YAML or JSON and validates it; errors name the file and field path.
 * Validation covers the registered environment's and agent's own options too, after loading the
 * modules the config names, so a typo fails before anything starts.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { describeIssues, fieldPath } from './core/issues';
import { loadPluginModules, resolveModulePaths } from './plugins/modules';
import { OptionsError, validateAgentConfig, validateEnvConfig } from './plugins/registry';
import { AgentConfigSchema, EnvConfigSchema, RunConfig, RunConfigSchema, trainingConfigIssues, type AgentConfig } from '../config/schema';
import { PROGRAM_AGENT, WORKFLOW_AGENT } from './core/agentCallContext';

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
  const modelPath = result.success && result.data.model.path !== undefined ? path.resolve(baseDir, result.data.model.path) : undefined;
  const modelProblem = modelPath === undefined ? undefined : modelDirectoryProblem(modelPath);
  if (modelProblem) problems.push(`model.path: ${modelProblem}`);
  const agentConfig = validAgent && withAgentPlaces(validAgent, baseDir, result.success ? result.data.inference.endpoint : undefined);
  // Held-out evaluation plays trajflow's own turn loop, which an agent that runs its own loop is not.
  if ((agentConfig?.name === PROGRAM_AGENT || agentConfig?.name === WORKFLOW_AGENT) && result.success && result.data.eval.everySteps > 0)
    problems.push(`eval.everySteps: held-out evaluation plays trajflow's own agents, not one that runs its own loop (agent ${agentConfig.name}): set 0`);
  if (agentConfig?.name === PROGRAM_AGENT && agentConfig.endpoint === undefined)
    problems.push(
      'agent.endpoint: an agent program needs the OpenAI-compatible endpoint: set inference.endpoint (its port), or agent.endpoint where it is elsewhere',
    );
  for (const key of ['workflows', 'activities'] as const) {
    const file = agentConfig?.[key];
    if (typeof file === 'string' && !existsSync(file)) problems.push(`agent.${key}: ${file} does not exist`);
  }
  // Read from the raw section: a missing file is named even when another problem fails the schema.
  const demonstrations = ((sections.trainer as { warmup?: { demonstrations?: unknown } } | undefined)?.warmup ?? {}).demonstrations;
  if (typeof demonstrations === 'string' && !existsSync(path.resolve(baseDir, demonstrations)))
    problems.push(`trainer.warmup.demonstrations: ${path.resolve(baseDir, demonstrations)} does not exist`);
  if (!result.success || problems.length > 0 || !validEnv || !agentConfig) throw new ConfigError(source, [...new Set(problems)]);
  const model = modelPath === undefined ? result.data.model : { ...result.data.model, path: modelPath };
  const { warmup } = result.data.trainer;
  const trainer = warmup
    ? { ...result.data.trainer, warmup: { ...warmup, demonstrations: path.resolve(baseDir, warmup.demonstrations) } }
    : result.data.trainer;
  return { ...result.data, modules: modulePaths, model, trainer, env: validEnv, agent: agentConfig };
}

/**
 * Where an agent that runs its own loop is: a workflow's modules, relative to the config file as
 * `modules` are; a program's directory (default: the config file's) and the endpoint it calls
 * (default: `inference.endpoint` on this host).
 */
function withAgentPlaces(agent: AgentConfig, baseDir: string, endpoint: RunConfig['inference']['endpoint']): AgentConfig {
  const resolved = (key: string) => (typeof agent[key] === 'string' ? { [key]: path.resolve(baseDir, agent[key]) } : {});
  if (agent.name === WORKFLOW_AGENT) return { ...agent, ...resolved('workflows'), ...resolved('activities') };
  if (agent.name !== PROGRAM_AGENT) return agent;
  const url = agent.endpoint ?? (endpoint && `http://${endpoint.host === '0.0.0.0' ? '127.0.0.1' : endpoint.host}:${endpoint.port}/v1`);
  return { ...agent, cwd: typeof agent.cwd === 'string' ? path.resolve(baseDir, agent.cwd) : baseDir, ...(url ? { endpoint: url } : {}) };
}

/** The files of a Hugging Face model directory that trajflow reads (the chat format), its trainer and its servers load. */
const MODEL_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];

/**
 * Why `dir` is not a model directory every process of a run can load, or undefined. Checked when
 * the config is read, as its modules are: every host that reads the config reads the model too.
 */
function modelDirectoryProblem(dir: string): string | undefined {
  if (!existsSync(dir)) return `${dir} does not exist`;
  if (!statSync(dir).isDirectory()) return `${dir} is not a directory (a Hugging Face model directory is)`;
  const missing = MODEL_FILES.find((file) => !existsSync(path.join(dir, file)));
  if (missing) return `${dir} has no ${missing}: not a Hugging Face model directory (${MODEL_FILES.join(', ')} and the weights)`;
  if (!readdirSync(dir).some((file) => file.endsWith('.safetensors'))) return `${dir} has no weights (*.safetensors)`;
  return undefined;
}

/**
 * Throws a ConfigError naming each setting a training run refuses (`trainingConfigIssues`) unless
 * there is none: `trajflow train` calls it, `trajflow run` (a rollout alone) does not.
 */
export function assertTrainingConfig(config: RunConfig, source = '<inline>'): void {
  const issues = trainingConfigIssues(config);
  if (issues.length > 0)
    throw new ConfigError(
      source,
      issues.map(({ path: where, message }) => `${fieldPath(where, '(top level)')}: ${message}`),
    );
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
