/** Reads a run config from YAML or JSON and validates it; errors name the file and field path. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { z } from 'zod';
import { RunConfig, RunConfigSchema } from './schema';

export class ConfigError extends Error {
  constructor(readonly file: string, readonly problems: string[]) {
    super(`invalid config ${file}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const where = issue.path.length ? issue.path.join('.') : '(top level)';
  return `${where}: ${issue.message}`;
}

/** Validates an already-parsed object; `source` names it in errors. */
export function parseRunConfig(raw: unknown, source = '<inline>'): RunConfig {
  const result = RunConfigSchema.safeParse(raw);
  if (!result.success) throw new ConfigError(source, result.error.issues.map(describeIssue));
  return result.data;
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
  return parseRunConfig(raw ?? {}, file);
}
