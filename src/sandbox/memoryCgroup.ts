/**
 * Memory limits for sandbox commands through cgroup v2: each command runs in its own child cgroup
 * with `memory.max` and no swap, and `memory.oom.group` makes the kernel kill the whole command
 * (every process in it) when it goes over. This caps a command's processes together, page cache
 * and tmpfs pages included, which `ulimit -v` (the fallback, per process) cannot.
 *
 * The parent cgroup is `$TRAJFLOW_SANDBOX_CGROUP` when set (a directory in a cgroup2 file system
 * the worker may write, for an operator who delegated one), else the worker's own cgroup. cgroup v2
 * lets a cgroup give the memory controller to its children only when it holds no processes itself,
 * unless it is the root: so the worker's own cgroup works when the worker runs in the root cgroup
 * (a VM or container init), and otherwise an operator points the variable at an empty delegated
 * cgroup with `+memory` in its `cgroup.subtree_control`. `probeMemoryCgroup` checks by running a
 * process over a small limit and seeing the kernel kill it, so a machine where any step fails gets
 * the per-process fallback, and its reason.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const SANDBOX_CGROUP_ENV = 'TRAJFLOW_SANDBOX_CGROUP';

/** The parent of per-command cgroups, or why there is none. */
export type MemoryCgroupProbe = { parent: string; missing?: undefined } | { parent?: undefined; missing: string };

/** `trajflow-sandbox-<owner pid>-<n>`: the pid lets a later probe remove a dead owner's leftovers. */
const CGROUP_PREFIX = 'trajflow-sandbox-';
const CGROUP_PATTERN = /^trajflow-sandbox-(\d+)-\w+$/;

/** Runs the rest of its arguments inside cgroup "$0": moved there before anything is forked. */
const ENTER_CGROUP = 'echo $$ > "$0/cgroup.procs" && exec "$@"';

/** How long removal waits for a killed command's processes to leave its cgroup. */
const EMPTY_WAIT_MS = 2000;

const PROBE_LIMIT_BYTES = 16 * 2 ** 20;

let nextCgroup = 0;

/**
 * Finds a cgroup under which this process may make per-command cgroups with `memory.max`, and
 * proves the limit holds. Synchronous (once per process, tens of ms).
 */
export function probeMemoryCgroup(bash: string): MemoryCgroupProbe {
  const parent = process.env[SANDBOX_CGROUP_ENV] || ownCgroupDir();
  if (!parent.startsWith('/')) return { missing: parent };
  const available = readOr(path.join(parent, 'cgroup.controllers'), '').trim().split(/\s+/);
  if (!available.includes('memory')) {
    // On a hybrid host the memory controller is in use by the cgroup v1 hierarchy instead.
    return { missing: `cgroup v2 offers no memory controller at ${parent} (controllers: ${available.join(' ') || 'none'})` };
  }
  try {
    const enabled = fs.readFileSync(path.join(parent, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
    if (!enabled.includes('memory')) fs.writeFileSync(path.join(parent, 'cgroup.subtree_control'), '+memory');
  } catch (err) {
    // EBUSY: the cgroup holds processes (the worker itself) and is not the root.
    return { missing: `cannot give the memory controller to children of ${parent} (${errorText(err)})` };
  }
  removeLeftovers(parent);
  const probe = path.join(parent, `${CGROUP_PREFIX}${process.pid}-probe`);
  try {
    makeCgroupSync(probe, PROBE_LIMIT_BYTES);
    // tail keeps a line it has not seen the end of: 4x the limit with no newline in it.
    spawnSync(bash, ['-c', ENTER_CGROUP, probe, bash, '-c', `head -c ${4 * PROBE_LIMIT_BYTES} /dev/zero | tail`], { stdio: 'ignore', timeout: 10_000 });
    if (!oomKills(readOr(path.join(probe, 'memory.events'), ''))) {
      return { missing: `a process over memory.max in ${probe} was not killed` };
    }
    return { parent };
  } catch (err) {
    return { missing: `cannot use a cgroup under ${parent}: ${errorText(err)}` };
  } finally {
    removeCgroupSync(probe);
  }
}

/** One command's cgroup: made before it starts, removed (with anything left in it) after. */
export class CommandCgroup {
  private constructor(readonly dir: string) {}

  static async create(parent: string, limitBytes: number): Promise<CommandCgroup> {
    const dir = path.join(parent, `${CGROUP_PREFIX}${process.pid}-${++nextCgroup}`);
    await fs.promises.mkdir(dir);
    try {
      await fs.promises.writeFile(path.join(dir, 'memory.max'), String(limitBytes));
      // Swap would let a command go over its memory on disk, and slowly; absent without swap support.
      await fs.promises.writeFile(path.join(dir, 'memory.swap.max'), '0').catch(ignoreMissing);
      await fs.promises.writeFile(path.join(dir, 'memory.oom.group'), '1');
    } catch (err) {
      await fs.promises.rmdir(dir).catch(() => undefined);
      throw err;
    }
    return new CommandCgroup(dir);
  }

  /** argv that runs `argv` inside this cgroup. */
  wrap(bash: string, argv: readonly string[]): string[] {
    return [bash, '-c', ENTER_CGROUP, this.dir, ...argv];
  }

  /** Whether the kernel killed the command for going over memory.max. */
  async overLimit(): Promise<boolean> {
    return oomKills(await fs.promises.readFile(path.join(this.dir, 'memory.events'), 'utf8').catch(() => ''));
  }

  /** Kills whatever is left in it (a process that left the process group too) and removes it. */
  async remove(): Promise<void> {
    await fs.promises.writeFile(path.join(this.dir, 'cgroup.kill'), '1').catch(() => undefined);
    const deadline = Date.now() + EMPTY_WAIT_MS;
    for (;;) {
      try {
        await fs.promises.rmdir(this.dir);
        return;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return;
        // EBUSY while killed processes are still exiting; a leftover is removed by a later probe.
        if (code !== 'EBUSY' || Date.now() > deadline) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** This process's cgroup v2 directory, or (not starting with /) why it has none. */
function ownCgroupDir(): string {
  const line = readOr('/proc/self/cgroup', '')
    .split('\n')
    .find((l) => l.startsWith('0::'));
  if (line === undefined) return 'not in a cgroup v2 hierarchy';
  const cgroupPath = line.slice(3);
  for (const entry of readOr('/proc/self/mountinfo', '').split('\n')) {
    const [mountFields, fsFields] = entry.split(' - ');
    if (!fsFields?.startsWith('cgroup2 ')) continue;
    const [, , , root, mountPoint] = mountFields.split(' ');
    const relative = path.posix.relative(root, cgroupPath);
    if (relative.startsWith('..')) continue;
    return path.join(unescapeMountPath(mountPoint), relative);
  }
  return 'no cgroup2 file system mounted';
}

/** Removes empty cgroups of dead owners (a crashed worker's); a populated one refuses rmdir. */
function removeLeftovers(parent: string): void {
  for (const name of readdirOr(parent)) {
    const owner = CGROUP_PATTERN.exec(name)?.[1];
    if (owner === undefined || isAlive(Number(owner))) continue;
    removeCgroupSync(path.join(parent, name));
  }
}

function makeCgroupSync(dir: string, limitBytes: number): void {
  fs.mkdirSync(dir);
  fs.writeFileSync(path.join(dir, 'memory.max'), String(limitBytes));
  try {
    fs.writeFileSync(path.join(dir, 'memory.swap.max'), '0');
  } catch (err) {
    ignoreMissing(err);
  }
  fs.writeFileSync(path.join(dir, 'memory.oom.group'), '1');
}

function removeCgroupSync(dir: string): void {
  try {
    fs.writeFileSync(path.join(dir, 'cgroup.kill'), '1');
  } catch {
    // gone, or a kernel before 5.14: the probe's process has exited anyway
  }
  try {
    fs.rmdirSync(dir);
  } catch {
    // gone, or still busy: a later probe retries
  }
}

function oomKills(events: string): boolean {
  const count = /^oom_kill (\d+)$/m.exec(events)?.[1];
  return count !== undefined && Number(count) > 0;
}

/** mountinfo writes space, tab, newline and backslash in paths as octal escapes. */
function unescapeMountPath(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

function ignoreMissing(err: unknown): void {
  if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
}

function readOr(file: string, fallback: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return fallback;
  }
}

function readdirOr(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

function errorText(err: unknown): string {
  return (err as NodeJS.ErrnoException).code ?? String(err);
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
