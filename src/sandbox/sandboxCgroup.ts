/**
 * Per-sandbox cgroups: one cgroup per sandbox caps what all of it uses together, its scratch
 * holder and every command, and a child cgroup per command caps and kills a command as a whole.
 *
 * - `memory`: a command's cgroup caps all its processes together, page cache and the scratch
 *   tmpfs pages it writes included (tmpfs pages are charged to the writer's cgroup, and stay
 *   charged to it after it ends), with no swap; the sandbox's cgroup caps the sum of everything
 *   its commands left in the scratch tmpfs plus the running command. Over a limit the kernel kills
 *   inside that cgroup only (cgroup v2 with `memory.oom.group` kills the whole command).
 * - `pids`: `pids.max` on the sandbox cgroup: a fork bomb fails to fork inside its own sandbox
 *   and leaves the machine's other processes and sandboxes their share.
 *
 * A controller is found in cgroup v2 (the parent is `$TRAJFLOW_SANDBOX_CGROUP` when set, a
 * delegated directory the worker may write, else the worker's own cgroup, usable when it may give
 * the controller to children: the root cgroup of a VM or container, or an empty delegated one)
 * or else in a cgroup v1 hierarchy (the worker's own cgroup there, where a root worker may make
 * children), and proven by running a process over a small limit before it is used. What is
 * missing, and why, goes into the sandbox's isolation description.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const SANDBOX_CGROUP_ENV = 'TRAJFLOW_SANDBOX_CGROUP';

export type Controller = 'memory' | 'pids';

/** Where one controller's sandbox cgroups are made. */
export interface CgroupPlace {
  parent: string;
  version: 1 | 2;
}

export interface CgroupProbe {
  memory?: CgroupPlace;
  pids?: CgroupPlace;
  /** Why a controller has no place, for the ones that have none. */
  missing: Partial<Record<Controller, string>>;
}

export interface SandboxCgroupLimits {
  /** All of the sandbox: its commands, its holder and its scratch files. */
  sandboxMemoryBytes: number;
  /** One command's processes and what it writes to the scratch tmpfs while it runs. */
  commandMemoryBytes: number;
  processes: number;
}

/** `trajflow-sandbox-<owner pid>-<n>`: the pid lets a later probe remove a dead owner's leftovers. */
const CGROUP_PREFIX = 'trajflow-sandbox-';
const CGROUP_PATTERN = /^trajflow-sandbox-(\d+)-\w+$/;

/** Moves itself into each cgroup directory before `--`, then runs the rest: before anything is forked. */
const ENTER_CGROUPS = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"';

/** How long removal waits for a killed command's processes to leave its cgroup. */
const EMPTY_WAIT_MS = 2000;

const PROBE_MEMORY_BYTES = 16 * 2 ** 20;
const PROBE_PROCESSES = 4;

let nextCgroup = 0;

/** Finds and proves a place for each controller. Synchronous (once per process, tens of ms). */
export function probeSandboxCgroups(bash: string): CgroupProbe {
  const probe: CgroupProbe = { missing: {} };
  for (const controller of ['memory', 'pids'] as const) {
    const place = findPlace(controller);
    if (typeof place === 'string') {
      probe.missing[controller] = place;
      continue;
    }
    const failure = proveLimit(bash, controller, place);
    if (failure === undefined) probe[controller] = place;
    else probe.missing[controller] = failure;
  }
  return probe;
}

/** cgroup v2 if it offers the controller, else its cgroup v1 hierarchy; a string says why neither. */
function findPlace(controller: Controller): CgroupPlace | string {
  const v2 = v2Parent(controller);
  if (typeof v2 !== 'string') return v2;
  const v1 = v1Parent(controller);
  if (typeof v1 !== 'string') return v1;
  return `${v2}; ${v1}`;
}

function v2Parent(controller: Controller): CgroupPlace | string {
  const parent = process.env[SANDBOX_CGROUP_ENV] || ownV2Dir();
  if (!parent.startsWith('/')) return `cgroup v2: ${parent}`;
  const available = readOr(path.join(parent, 'cgroup.controllers'), '').trim().split(/\s+/);
  // On a hybrid host the controller is in use by a cgroup v1 hierarchy instead.
  if (!available.includes(controller)) return `cgroup v2 offers no ${controller} controller at ${parent}`;
  try {
    enableForChildren(parent, controller);
  } catch (err) {
    // EBUSY: the cgroup holds processes (the worker itself) and is not the root.
    return `cgroup v2: cannot give the ${controller} controller to children of ${parent} (${errorText(err)})`;
  }
  return { parent, version: 2 };
}

function v1Parent(controller: Controller): CgroupPlace | string {
  const line = readOr('/proc/self/cgroup', '')
    .split('\n')
    .map((l) => l.split(':'))
    .find(([id, controllers]) => id !== '0' && controllers?.split(',').includes(controller));
  if (!line) return `no cgroup v1 ${controller} hierarchy`;
  const cgroupPath = line.slice(2).join(':');
  for (const entry of readOr('/proc/self/mountinfo', '').split('\n')) {
    const [mountFields, fsFields] = entry.split(' - ');
    const [fsType, , superOptions] = fsFields?.split(' ') ?? [];
    if (fsType !== 'cgroup' || !superOptions?.split(',').includes(controller)) continue;
    const [, , , root, mountPoint] = mountFields.split(' ');
    const relative = path.posix.relative(root, cgroupPath);
    if (relative.startsWith('..')) continue;
    const parent = path.join(unescapeMountPath(mountPoint), relative);
    try {
      fs.accessSync(parent, fs.constants.W_OK);
    } catch (err) {
      return `cgroup v1 ${controller} hierarchy: ${parent} is not writable (${errorText(err)})`;
    }
    return { parent, version: 1 };
  }
  return `cgroup v1 ${controller} hierarchy not mounted`;
}

/** Runs a process over a small limit in a fresh cgroup: undefined when the kernel stopped it, else why not. */
function proveLimit(bash: string, controller: Controller, place: CgroupPlace): string | undefined {
  removeLeftovers(place.parent);
  const dir = path.join(place.parent, `${CGROUP_PREFIX}${process.pid}-probe`);
  try {
    fs.mkdirSync(dir);
    // tail keeps a line it has not seen the end of: 4x the limit with no newline in it.
    const overMemory = `head -c ${4 * PROBE_MEMORY_BYTES} /dev/zero | tail`;
    const overProcesses = `for i in $(seq ${2 * PROBE_PROCESSES}); do sleep 0.2 & done 2>/dev/null; wait`;
    if (controller === 'memory') writeMemoryLimitSync(dir, place.version, PROBE_MEMORY_BYTES);
    else fs.writeFileSync(path.join(dir, 'pids.max'), String(PROBE_PROCESSES));
    const command = controller === 'memory' ? overMemory : overProcesses;
    spawnSync(bash, ['-c', ENTER_CGROUPS, 'enter', dir, '--', bash, '-c', command], { stdio: 'ignore', timeout: 10_000 });
    const stopped = controller === 'memory' ? oomKills(readOr(memoryEventsFile(dir, place.version), '')) : pidsRefusals(dir) > 0;
    return stopped ? undefined : `a process over the ${controller} limit of ${dir} was not stopped`;
  } catch (err) {
    return `cannot use a ${controller} cgroup under ${place.parent}: ${errorText(err)}`;
  } finally {
    removeCgroupSync(dir, place.version);
  }
}

export interface CommandCgroup {
  argv: string[];
  /** Whether the kernel kills the whole command when it goes over memory (cgroup v2's memory.oom.group). */
  killsWhole: boolean;
  /** Whether the kernel killed a process of the command for going over memory. */
  overMemory(): Promise<boolean>;
  remove(): Promise<void>;
}

/**
 * One sandbox's cgroups, in each controller's hierarchy (one directory for both in cgroup v2):
 * the sandbox cgroup with the limits, `holder` for its scratch holder, and one child per command.
 */
export class SandboxCgroup {
  private commands = 0;

  private constructor(
    /** The sandbox cgroup in each hierarchy, with its version. */
    private readonly places: readonly CgroupPlace[],
    private readonly commandMemoryBytes: number,
  ) {}

  static async create(probe: CgroupProbe, limits: SandboxCgroupLimits): Promise<SandboxCgroup | undefined> {
    const name = `${CGROUP_PREFIX}${process.pid}-${++nextCgroup}`;
    const made: CgroupPlace[] = [];
    try {
      for (const place of distinctPlaces(probe)) {
        const dir = path.join(place.parent, name);
        await fs.promises.mkdir(dir);
        made.push({ parent: dir, version: place.version });
        if (place === probe.memory) {
          writeMemoryLimitSync(dir, place.version, limits.sandboxMemoryBytes);
          // Children get memory.oom.group, so an OOM kill takes a whole command.
          if (place.version === 2) enableForChildren(dir, 'memory');
        }
        if (place === probe.pids) await fs.promises.writeFile(path.join(dir, 'pids.max'), String(limits.processes));
      }
    } catch (err) {
      for (const place of made) removeCgroupSync(place.parent, place.version);
      throw new Error(`cannot make the sandbox's cgroup ${name}: ${errorText(err)}`, { cause: err });
    }
    return made.length ? new SandboxCgroup(made, limits.commandMemoryBytes) : undefined;
  }

  /** argv that runs `argv` in the sandbox's holder cgroup. */
  async holder(bash: string, argv: readonly string[]): Promise<string[]> {
    return wrap(bash, await this.child('holder', undefined), argv);
  }

  /** A fresh cgroup for one command: its argv, whether it went over memory, and its removal. */
  async command(bash: string, argv: readonly string[]): Promise<CommandCgroup> {
    const places = await this.child(`command-${++this.commands}`, this.commandMemoryBytes);
    return {
      argv: wrap(bash, places, argv),
      // cgroup v1 kills only the largest process: the caller kills the rest on seeing it.
      killsWhole: places.every((p) => !p.memory || p.version === 2),
      overMemory: async () => {
        const memory = places.find((p) => p.memory);
        return memory !== undefined && oomKills(await fs.promises.readFile(memoryEventsFile(memory.parent, memory.version), 'utf8').catch(() => ''));
      },
      remove: () => removeAll(places),
    };
  }

  /** Kills what is left in any of its cgroups and removes them; after the holder is stopped. */
  async remove(): Promise<void> {
    for (const place of this.places) {
      const children = await fs.promises.readdir(place.parent, { withFileTypes: true }).catch(() => []);
      await removeAll(children.filter((e) => e.isDirectory()).map((e) => ({ parent: path.join(place.parent, e.name), version: place.version })));
    }
    await removeAll(this.places);
  }

  /** A child cgroup in each hierarchy; with memoryBytes, limited to it and killed as a whole over it. */
  private async child(name: string, memoryBytes: number | undefined): Promise<(CgroupPlace & { memory: boolean })[]> {
    const made: (CgroupPlace & { memory: boolean })[] = [];
    try {
      for (const place of this.places) {
        const dir = path.join(place.parent, name);
        await fs.promises.mkdir(dir);
        const memory = fs.existsSync(path.join(dir, place.version === 2 ? 'memory.max' : 'memory.limit_in_bytes'));
        made.push({ parent: dir, version: place.version, memory });
        if (memory && memoryBytes !== undefined) {
          writeMemoryLimitSync(dir, place.version, memoryBytes);
          if (place.version === 2) await fs.promises.writeFile(path.join(dir, 'memory.oom.group'), '1');
        }
      }
    } catch (err) {
      await removeAll(made);
      throw err;
    }
    return made;
  }
}

function distinctPlaces(probe: CgroupProbe): CgroupPlace[] {
  const places = [probe.memory, probe.pids].filter((p): p is CgroupPlace => p !== undefined);
  return places.length === 2 && places[0].parent === places[1].parent ? [places[0]] : places;
}

function wrap(bash: string, places: readonly CgroupPlace[], argv: readonly string[]): string[] {
  return [bash, '-c', ENTER_CGROUPS, 'enter', ...places.map((p) => p.parent), '--', ...argv];
}

function enableForChildren(dir: string, controller: Controller): void {
  const enabled = fs.readFileSync(path.join(dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
  if (!enabled.includes(controller)) fs.writeFileSync(path.join(dir, 'cgroup.subtree_control'), `+${controller}`);
}

/** The limit, with no swap on top (files absent without swap accounting). */
function writeMemoryLimitSync(dir: string, version: 1 | 2, bytes: number): void {
  if (version === 2) {
    fs.writeFileSync(path.join(dir, 'memory.max'), String(bytes));
    writeIfPresent(path.join(dir, 'memory.swap.max'), '0');
  } else {
    fs.writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(bytes));
    writeIfPresent(path.join(dir, 'memory.memsw.limit_in_bytes'), String(bytes));
  }
}

function memoryEventsFile(dir: string, version: 1 | 2): string {
  return path.join(dir, version === 2 ? 'memory.events' : 'memory.oom_control');
}

/** `oom_kill N` in memory.events (v2) or memory.oom_control (v1). */
function oomKills(events: string): boolean {
  const count = /^oom_kill (\d+)$/m.exec(events)?.[1];
  return count !== undefined && Number(count) > 0;
}

/** Forks refused for pids.max (`max N` in pids.events, both versions). */
function pidsRefusals(dir: string): number {
  return Number(/^max (\d+)$/m.exec(readOr(path.join(dir, 'pids.events'), ''))?.[1] ?? 0);
}

/** Children first; each emptied by killing what is in it (v2's cgroup.kill, or each listed process). */
async function removeAll(places: readonly CgroupPlace[]): Promise<void> {
  for (const place of [...places].reverse()) {
    const deadline = Date.now() + EMPTY_WAIT_MS;
    for (;;) {
      killMembers(place);
      try {
        await fs.promises.rmdir(place.parent);
        break;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // EBUSY while killed processes are still exiting; a leftover is removed by a later probe.
        if (code !== 'EBUSY' || Date.now() > deadline) break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

function killMembers({ parent, version }: CgroupPlace): void {
  if (version === 2 && writeIfPresent(path.join(parent, 'cgroup.kill'), '1')) return;
  for (const pid of readOr(path.join(parent, 'cgroup.procs'), '').split('\n').filter(Boolean)) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // exited meanwhile
    }
  }
}

function removeCgroupSync(dir: string, version: 1 | 2): void {
  for (const child of readdirOr(dir)) {
    if (fs.statSync(path.join(dir, child), { throwIfNoEntry: false })?.isDirectory()) removeCgroupSync(path.join(dir, child), version);
  }
  killMembers({ parent: dir, version });
  try {
    fs.rmdirSync(dir);
  } catch {
    // gone, or still busy: a later probe retries
  }
}

/** Removes cgroups of dead owners (a crashed worker's); a populated one refuses rmdir. */
function removeLeftovers(parent: string): void {
  for (const name of readdirOr(parent)) {
    const owner = CGROUP_PATTERN.exec(name)?.[1];
    if (owner === undefined || isAlive(Number(owner))) continue;
    removeCgroupSync(path.join(parent, name), fs.existsSync(path.join(parent, name, 'cgroup.controllers')) ? 2 : 1);
  }
}

/** This process's cgroup v2 directory, or (not starting with /) why it has none. */
function ownV2Dir(): string {
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

/** mountinfo writes space, tab, newline and backslash in paths as octal escapes. */
function unescapeMountPath(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** Whether it wrote; false when the file does not exist (a feature this kernel lacks). */
function writeIfPresent(file: string, content: string): boolean {
  try {
    fs.writeFileSync(file, content);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    return false;
  }
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
