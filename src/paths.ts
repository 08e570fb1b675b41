/** Where the project lives on disk, found from this file so it works from sources and from dist/. */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

function findProjectRoot(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json')) && !dir.split(path.sep).includes('dist')) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${start}`);
  }
}

export const PROJECT_ROOT = findProjectRoot(__dirname);

/**
 * The build a deployment names in `TRAJFLOW_BUILD_ID` (a git sha, an image tag), if any. Setting
 * it also turns on Temporal worker versioning (workers/deployment.ts).
 */
export function deployedBuildId(): string | undefined {
  return process.env.TRAJFLOW_BUILD_ID || undefined;
}

/** This code's build, for worker compatibility checks: the deployed build, else the package version. */
export function buildId(): string {
  const version = (JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  return deployedBuildId() ?? `trajflow@${version}`;
}

/** The Python environment set up by scripts/setup.sh (trainer worker, model server, model tools). */
export const PYTHON_ENV = path.join(PROJECT_ROOT, '.venv');
export const PYTHON_BIN = path.join(PYTHON_ENV, 'bin', 'python');
/** The vLLM CPU server's own Python environment (scripts/setup-vllm.sh). */
export const VLLM_PYTHON_BIN = path.join(PROJECT_ROOT, '.venv-vllm', 'bin', 'python');
/** Where the Python package `trajflow_py` lives (the working directory of `python -m trajflow_py...`). */
export const PYTHON_SOURCES = path.join(PROJECT_ROOT, 'python');
/** The real pretrained model scripts/setup.sh prepares: SmolLM2-135M-Instruct as a Hugging Face directory. */
export const SMOLLM2_DIR = path.join(PROJECT_ROOT, '.models', 'smollm2-135m-instruct');
