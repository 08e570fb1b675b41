/**
 * A user-facing example (examples/) installed as its README tells a user to install it: the folder
 * copied into a fresh project outside the checkout, trajflow and the packages the README's install
 * line pins in its node_modules. `npm install /path/to/trajflow` links the checkout, so a link is
 * what this makes too; the pinned packages are linked from the checkout's own, which must be the
 * pinned versions, so nothing is downloaded. Shared by test/examples.test.ts and bench:agents.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../src/paths';

export interface ExampleProject {
  /** The project's folder. */
  project: string;
  /** The example's README.md. */
  readme: string;
  /** The README's pinned packages, `name@version`. */
  pins: string[];
}

/** The README's `npm install /path/to/trajflow name@version ...` line's pins. */
function readmePins(readme: string): string[] {
  return /npm install \/path\/to\/trajflow ((?:\S+@\S+ ?)+)/.exec(readme)?.[1].trim().split(' ') ?? [];
}

/** Copies examples/`folder` into a new project folder under `parent` and installs it. */
export function installExample(folder: string, parent: string): ExampleProject {
  const project = mkdtempSync(path.join(parent, `example-${folder}-`));
  cpSync(path.join(PROJECT_ROOT, 'examples', folder), project, { recursive: true });
  const readme = readFileSync(path.join(project, 'README.md'), 'utf8');
  const pins = readmePins(readme);
  mkdirSync(path.join(project, 'node_modules'));
  symlinkSync(PROJECT_ROOT, path.join(project, 'node_modules', 'trajflow'), 'dir');
  for (const pin of pins) {
    const name = pin.slice(0, pin.lastIndexOf('@'));
    const dir = path.join(PROJECT_ROOT, 'node_modules', name);
    const installed = `${name}@${(JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version: string }).version}`;
    if (installed !== pin) throw new Error(`examples/${folder}/README.md pins ${pin}, but the checkout's node_modules has ${installed}`);
    const link = path.join(project, 'node_modules', name);
    // A scoped package (@scope/name) lives in its scope's folder.
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(dir, link, 'dir');
  }
  return { project, readme, pins };
}
