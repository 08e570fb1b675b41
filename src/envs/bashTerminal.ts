/**
 * A bash terminal environment: the model runs shell commands (the `bash` tool) in a per-episode
 * scratch directory to reach a small file-system goal, then answers; a checker reads the directory
 * and scores 1 if the goal holds, else 0. What the answer says does not matter.
 *
 * Tasks come from a few seeded families (create a file, rename, move logs, count lines, delete
 * tmp files). Prompts are one short sentence: the model may have only ~1024 tokens of context.
 * A share of the tasks (by a hash of family and parameters) is held out for evaluation.
 *
 * Commands run in a `BashSandbox` (src/sandbox/bash.ts): its per-command timeout, output cap,
 * memory and scratch-directory limits and confinement apply; `isolation` says which confinement
 * (and which of the limits) this machine gives. Where the machine allows no namespaces the
 * environment refuses to run commands (at env worker start and at every reset) unless the config
 * sets `allowWeakIsolation: true`. A command that reaches a limit fails with a note
 * saying which, and the episode goes on. Checkers read the directory with node fs and never follow
 * a symlink: a link the model made counts as no file.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { isHeldOut } from '../core/heldOut';
import { createRng, type Rng } from '../core/random';
import {
  BashSandbox,
  isolationLevel,
  probeConfinement,
  refuseWeakIsolation,
  type BashResult,
  type BashSandboxOptions,
  type SandboxLimit,
} from '../sandbox/bash';
import { defineTool, type Tool } from '../tools/tool';
import type { EnvironmentRegistrar, InstancePool } from './definition';
import type { Task, TaskObservation } from './taskEnvironment';
import { ToolEnvironment } from './toolEnvironment';

export const BASH_FAMILIES = ['create', 'rename', 'logs', 'count', 'cleanup'] as const;
export type BashFamily = (typeof BASH_FAMILIES)[number];

/** Longest command the bash tool accepts; longer ones are a confused model, not a plan. */
export const MAX_COMMAND_CHARS = 500;

const positiveInt = z.number().int().positive();
const MIB = 2 ** 20;

export const BashTerminalOptionsSchema = z
  .strictObject({
    /** Task families to draw from (default all), each equally likely. */
    families: z
      .array(z.enum(BASH_FAMILIES))
      .min(1)
      .default([...BASH_FAMILIES]),
    /** A command running longer is killed with everything it started. */
    commandTimeoutMs: positiveInt.default(5000),
    /** Per stream: stdout and stderr are each cut after this many bytes. */
    maxOutputBytes: positiveInt.default(2000),
    /**
     * Memory of one command: all its processes together where the machine gives the sandbox a
     * memory cgroup, else each of its processes (address space, which runtimes that reserve much
     * more than they use, like the JVM, may not fit in). Enough for bash, coreutils and python3.
     */
    maxMemoryMiB: z.number().int().min(32).default(512),
    /**
     * Size of the scratch directory (a tmpfs: its files are memory, held while the episode lasts),
     * where the machine allows it; `isolation` says whether it does.
     */
    maxScratchMiB: positiveInt.default(256),
    /** Files, directories and links the scratch directory may hold; room for the task's own files. */
    maxScratchFiles: z.number().int().min(16).default(10_000),
    /** Processes (and threads) one episode's sandbox may have at once. */
    maxProcesses: z.number().int().min(16).default(512),
    /**
     * Run the model's commands even where this machine allows no namespaces: they then reach the
     * network and write outside their scratch directory wherever file permissions allow. Off: such
     * a machine refuses them, with the reason.
     */
    allowWeakIsolation: z.boolean().default(false),
    /**
     * Share of tasks (by a hash of family and parameters) reserved for evaluation: training never
     * draws them, evaluation draws only them. 0: both draw from all tasks.
     */
    heldOutShare: z.number().min(0).max(0.5).default(0.2),
    /** Limit for each tool call; default commandTimeoutMs + 2000. */
    toolTimeoutMs: positiveInt.optional(),
    /** Registered tools offered besides the environment's own `bash`. */
    tools: z.array(z.string()).default([]),
  })
  // The bash tool cannot stop a command early, so a tool limit at or under the command's would
  // abandon commands still running, and the next call could start while they still change files.
  .refine((o) => o.toolTimeoutMs === undefined || o.toolTimeoutMs > o.commandTimeoutMs, {
    path: ['toolTimeoutMs'],
    message: 'must be more than commandTimeoutMs, so a command times out (and says so) before its tool call does',
  })
  .refine((o) => !o.tools.includes('bash'), { path: ['tools'], message: 'the environment provides its own "bash" tool' });

export type BashTerminalOptions = z.input<typeof BashTerminalOptionsSchema>;

type Files = Record<string, string>;
type Params = Record<string, string | number | string[]>;

export interface BashTask extends Task {
  family: BashFamily;
  /** `family:parameters`; the held-out split hashes it, and equal ids are the same task. */
  id: string;
  params: Params;
  /** Starting files (name -> content), written into the scratch directory at reset. */
  files: Files;
}

/** Whether the task's goal holds in the directory. */
type Goal = (dir: ScratchDir) => Promise<boolean>;

/** One drawn task. `params` is what the prompt names: only they decide the held-out split. */
interface Draft {
  params: Params;
  prompt: string;
  files: Files;
  goal: Goal;
}

type Family = (rng: Rng) => Draft;

const NAMES = ['notes', 'data', 'todo', 'draft', 'report', 'list', 'memo', 'plan', 'ideas', 'story', 'music', 'photo', 'recipe', 'budget', 'diary', 'tasks'];
const WORDS = ['apple', 'river', 'stone', 'cloud', 'maple', 'tiger', 'lemon', 'piano', 'ocean', 'amber', 'cedar', 'delta', 'ember', 'frost', 'grape', 'honey'];
const DIRS = ['logs', 'old', 'archive', 'backup', 'store', 'keep', 'saved', 'box'];

function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)];
}

function intBetween(rng: Rng, low: number, high: number): number {
  return low + Math.floor(rng() * (high - low + 1));
}

/** `count` distinct items, in drawn order (partial Fisher-Yates). */
function sample<T>(rng: Rng, items: readonly T[], count: number): T[] {
  const pool = [...items];
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(rng() * (pool.length - i));
    [pool[i], pool[j]] = [pool[j], pool[i]];
  }
  return pool.slice(0, count);
}

/** A few words and a newline: file contents distinct enough to notice a mix-up. */
function textLine(rng: Rng): string {
  return `${sample(rng, WORDS, 3).join(' ')}\n`;
}

/** `count` .txt files named from NAMES (stems in `taken` excluded), each holding a line. */
function fillerFiles(rng: Rng, taken: readonly string[], count: number): Files {
  const stems = sample(
    rng,
    NAMES.filter((n) => !taken.includes(n)),
    count,
  );
  return Object.fromEntries(stems.map((stem) => [`${stem}.txt`, textLine(rng)]));
}

/** Every file in `files` is still at the top level, unchanged. */
async function allKept(dir: ScratchDir, files: Files): Promise<boolean> {
  for (const [name, content] of Object.entries(files)) if ((await dir.read(name)) !== content) return false;
  return true;
}

const FAMILIES: Record<BashFamily, Family> = {
  create(rng) {
    const stem = pick(rng, NAMES);
    const name = `${stem}.txt`;
    const word = pick(rng, WORDS);
    return {
      params: { name, word },
      prompt: `Create file ${name} containing ${word}.`,
      files: fillerFiles(rng, [stem], 2),
      goal: async (dir) => (await dir.read(name))?.trim() === word,
    };
  },

  rename(rng) {
    const [fromStem, toStem] = sample(rng, NAMES, 2);
    const [from, to] = [`${fromStem}.txt`, `${toStem}.txt`];
    const files = { [from]: textLine(rng), ...fillerFiles(rng, [fromStem, toStem], 1) };
    return {
      params: { from, to },
      prompt: `Rename ${from} to ${to}.`,
      files,
      goal: async (dir) => (await dir.read(to)) === files[from] && !(await dir.exists(from)),
    };
  },

  logs(rng) {
    const folder = pick(rng, DIRS);
    const stems = sample(rng, NAMES, intBetween(rng, 2, 3));
    const logs: Files = Object.fromEntries(stems.map((stem) => [`${stem}.log`, textLine(rng)]));
    const others = fillerFiles(rng, stems, intBetween(rng, 1, 2));
    return {
      params: { dir: folder, logs: Object.keys(logs) },
      prompt: `Make directory ${folder} and move all .log files into it.`,
      files: { ...logs, ...others },
      goal: async (dir) => {
        if (!(await dir.isDirectory(folder))) return false;
        for (const [name, content] of Object.entries(logs)) {
          if ((await dir.read(`${folder}/${name}`)) !== content || (await dir.exists(name))) return false;
        }
        return allKept(dir, others);
      },
    };
  },

  count(rng) {
    const stem = pick(rng, NAMES);
    const file = `${stem}.txt`;
    const lines = intBetween(rng, 1, 12);
    const content = Array.from({ length: lines }, () => textLine(rng)).join('');
    return {
      params: { file, lines },
      prompt: `Write the number of lines of ${file} into count.txt.`,
      files: { [file]: content, ...fillerFiles(rng, [stem], 1) },
      goal: async (dir) => (await dir.read('count.txt'))?.trim() === String(lines),
    };
  },

  cleanup(rng) {
    const tmp = sample(rng, NAMES, intBetween(rng, 2, 3)).map((stem) => `tmp${pick(rng, ['', '_', '.'])}${stem}`);
    // Names with "tmp" elsewhere than at the start must survive: deleting *tmp* is wrong.
    const decoy = `${pick(rng, NAMES)}_tmp.txt`;
    const keep = { [decoy]: textLine(rng), ...fillerFiles(rng, [], 1) };
    const files = { ...Object.fromEntries(tmp.map((name) => [name, textLine(rng)])), ...keep };
    return {
      params: { tmp },
      prompt: 'Delete every file whose name starts with tmp.',
      files,
      goal: async (dir) => {
        const names = await dir.names();
        return names !== undefined && !names.some((name) => name.startsWith('tmp')) && (await allKept(dir, keep));
      },
    };
  },
};

/** Whether a task belongs to the held-out (evaluation-only) share: a fixed function of its id. */
export function isHeldOutTask(id: string, share: number): boolean {
  return isHeldOut(id, share);
}

/** Redraws before giving up: even a 0.5 share leaves ~0.5 odds per draw, so this never runs out. */
const MAX_DRAWS = 1000;

/**
 * The task for `seed` in `pool`: drafts are drawn from one stream until one lands on the pool's
 * side of the held-out split, so a seed always gives the same task.
 */
export function drawTask(families: readonly BashFamily[], seed: number, pool: InstancePool, heldOutShare: number): { task: BashTask; goal: Goal } {
  const rng = createRng(seed);
  for (let attempt = 0; attempt < MAX_DRAWS; attempt++) {
    const family = pick(rng, families);
    const { params, prompt, files, goal } = FAMILIES[family](rng);
    const id = `${family}:${JSON.stringify(params)}`;
    if (heldOutShare === 0 || isHeldOutTask(id, heldOutShare) === (pool === 'eval')) {
      return { task: { prompt, family, id, params, files }, goal };
    }
  }
  throw new Error(`no ${pool} task among ${MAX_DRAWS} draws (families ${families.join(', ')}, held-out share ${heldOutShare})`);
}

/** Largest file a checker reads; the goals need a few hundred bytes. */
const MAX_READ_BYTES = 64 * 1024;
/** What the model can do to a path that makes it unreadable; any other error is a checker failure. */
const UNREADABLE = new Set(['ENOENT', 'ENOTDIR', 'EACCES', 'EPERM', 'ELOOP']);

function unreadable(err: unknown): boolean {
  return UNREADABLE.has((err as NodeJS.ErrnoException).code ?? '');
}

/**
 * Read-only view of the scratch directory for checkers. Paths are relative with `/` separators
 * and no `..`. A symlink anywhere on a path, the root included, reads as nothing there: it could
 * point outside, and a goal is about the files the model made, not about what links lead to.
 */
export class ScratchDir {
  constructor(readonly root: string) {}

  /** The entry at `rel` (not followed), undefined when missing, unreadable or behind a symlink. */
  private async entry(rel: string): Promise<fs.Stats | undefined> {
    let current = this.root;
    let stat = await lstatOrUndefined(current);
    for (const part of rel.split('/')) {
      if (!stat?.isDirectory()) return undefined;
      current = path.join(current, part);
      stat = await lstatOrUndefined(current);
    }
    return stat;
  }

  async exists(rel: string): Promise<boolean> {
    return (await this.entry(rel)) !== undefined;
  }

  async isDirectory(rel: string): Promise<boolean> {
    return (await this.entry(rel))?.isDirectory() ?? false;
  }

  /** A regular file's text; undefined when it is missing, not a regular file, or too big. */
  async read(rel: string): Promise<string | undefined> {
    if (!(await this.entry(rel))?.isFile()) return undefined;
    let handle: fs.promises.FileHandle;
    try {
      // Again at open: O_NOFOLLOW refuses a file swapped for a symlink since the lstat, O_NONBLOCK
      // a swapped-in FIFO (only possible where a leftover process outlives its command).
      const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
      handle = await fs.promises.open(path.join(this.root, rel), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      if (unreadable(err)) return undefined;
      throw err;
    }
    try {
      if (!(await handle.stat()).isFile()) return undefined;
      const buffer = Buffer.alloc(MAX_READ_BYTES + 1);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return bytesRead > MAX_READ_BYTES ? undefined : buffer.subarray(0, bytesRead).toString('utf8');
    } finally {
      await handle.close();
    }
  }

  /** Names at the top level, or undefined when the root is not a real directory. */
  async names(): Promise<string[] | undefined> {
    if (!(await lstatOrUndefined(this.root))?.isDirectory()) return undefined;
    try {
      return await fs.promises.readdir(this.root);
    } catch (err) {
      if (unreadable(err)) return undefined;
      throw err;
    }
  }
}

async function lstatOrUndefined(file: string): Promise<fs.Stats | undefined> {
  try {
    return await fs.promises.lstat(file);
  } catch (err) {
    if (unreadable(err)) return undefined;
    throw err;
  }
}

/**
 * The episode's sandbox. It exists apart from the environment because the bash tool, which the
 * environment is built with, must be bound to it before the environment exists.
 */
class Terminal {
  private sandbox?: Promise<BashSandbox>;
  private closing?: Promise<void>;

  constructor(private readonly options: BashSandboxOptions) {}

  /** A fresh sandbox holding `files` (the previous one, if any, closed first). */
  open(files: Files): Promise<BashSandbox> {
    if (this.closing) return Promise.reject(new Error('bash terminal is closed'));
    const previous = this.sandbox;
    // Setup is part of the promise close() waits for, so close never races a reset's writes.
    this.sandbox = (async () => {
      await release(previous);
      return BashSandbox.create({ ...this.options, files });
    })();
    return this.sandbox;
  }

  current(): Promise<BashSandbox> {
    return this.sandbox ?? Promise.reject(new Error('no episode: reset() has not run'));
  }

  /** Kills running commands and removes the directory; every call waits for the same removal. */
  close(): Promise<void> {
    this.closing ??= release(this.sandbox);
    return this.closing;
  }
}

/** Closes the sandbox if it was made; one whose creation or setup failed left nothing behind. */
async function release(sandbox: Promise<BashSandbox> | undefined): Promise<void> {
  const made = await sandbox?.catch(() => undefined);
  await made?.close();
}

/** The limits a command runs under, as the environment's options give them. */
export type CommandLimits = Pick<z.output<typeof BashTerminalOptionsSchema>, 'commandTimeoutMs' | 'maxMemoryMiB' | 'maxScratchMiB' | 'maxScratchFiles'>;

/** What the model reads when a command reaches a limit. */
function limitNote(limit: SandboxLimit, limits: CommandLimits): string {
  switch (limit) {
    case 'memory':
      return `(memory limit ${limits.maxMemoryMiB} MiB exceeded)`;
    case 'disk':
      return `(disk limit ${limits.maxScratchMiB} MiB for the scratch directory reached: writes fail until files are deleted)`;
    case 'files':
      return `(file count limit ${limits.maxScratchFiles} reached: new files fail until some are deleted)`;
  }
}

/** What the model reads back: exit status, then the (capped) output, then any limit reached. */
export function formatBashResult(result: BashResult, limits: CommandLimits): string {
  const lines = [result.timedOut ? `exit ${result.exitCode} (killed: ran over ${limits.commandTimeoutMs} ms)` : `exit ${result.exitCode}`];
  if (result.stdout) lines.push(result.stdout.trimEnd());
  if (result.stderr) lines.push(`stderr: ${result.stderr.trimEnd()}`);
  if (result.truncated) lines.push('(output cut)');
  for (const limit of result.limitsReached) lines.push(limitNote(limit, limits));
  return lines.join('\n');
}

/**
 * Format warm-up calls: they only look around or touch x.txt, which no task names, so none solves
 * a task.
 */
export const EXAMPLE_COMMANDS = ['ls', 'ls -l', 'pwd', 'echo hi', 'echo hi > x.txt', 'cat x.txt', 'wc -l x.txt'];

const bashInput = z.strictObject({ command: z.string().min(1).max(MAX_COMMAND_CHARS) });

function bashTool(terminal: Terminal, limits: CommandLimits): Tool<typeof bashInput> {
  return defineTool({
    name: 'bash',
    description: 'Run a shell command in the task directory.',
    input: bashInput,
    run: async ({ command }) => formatBashResult(await (await terminal.current()).run(command), limits),
    example: (rng) => ({ command: pick(rng, EXAMPLE_COMMANDS) }),
  });
}

const INSTRUCTIONS = 'You are in a bash shell. Run commands with the bash tool. When the task is done, reply done.';

export interface BashTerminalContext {
  seed: number;
  pool?: InstancePool;
  /** Offered besides `bash`. */
  tools?: readonly Tool[];
}

export class BashTerminalEnvironment extends ToolEnvironment<BashTask> {
  private readonly terminal: Terminal;

  constructor(options: BashTerminalOptions, { seed, pool = 'train', tools = [] }: BashTerminalContext) {
    const parsed = BashTerminalOptionsSchema.parse(options);
    const { task, goal } = drawTask(parsed.families, seed, pool, parsed.heldOutShare);
    const terminal = new Terminal({
      commandTimeoutMs: parsed.commandTimeoutMs,
      maxOutputBytes: parsed.maxOutputBytes,
      maxMemoryBytes: parsed.maxMemoryMiB * MIB,
      maxScratchBytes: parsed.maxScratchMiB * MIB,
      maxScratchFiles: parsed.maxScratchFiles,
      maxProcesses: parsed.maxProcesses,
      allowWeakIsolation: parsed.allowWeakIsolation,
    });
    super({
      task,
      tools: [bashTool(terminal, parsed), ...tools],
      // The checker's verdict on the directory; the answer's text is not read. Scoring through the
      // base class makes a checker that throws a RewardError, never a silent 0.
      scorer: async () => ((await goal(new ScratchDir((await terminal.current()).hostDir))) ? 1 : 0),
      instructions: INSTRUCTIONS,
      toolTimeoutMs: parsed.toolTimeoutMs ?? parsed.commandTimeoutMs + 2000,
    });
    this.terminal = terminal;
  }

  /** The confinement commands get on this machine, one line per guarantee (or missing one). */
  get isolation(): string[] {
    return probeConfinement().description;
  }

  override async reset(): Promise<TaskObservation> {
    await this.terminal.open(this.task.files);
    return super.reset();
  }

  /** Safe before reset, after a failed reset, and more than once. */
  override close(): Promise<void> {
    return this.terminal.close();
  }
}

/**
 * The confinement level this machine gives the environment's commands, one line; throws (naming
 * `allowWeakIsolation`) where it gives no namespaces and the options do not accept that.
 */
export function bashIsolation(options: Pick<z.output<typeof BashTerminalOptionsSchema>, 'allowWeakIsolation'>): string {
  const confinement = probeConfinement();
  refuseWeakIsolation(confinement, options.allowWeakIsolation);
  return isolationLevel(confinement);
}

/** Registers environment `bash` (options: BashTerminalOptionsSchema). */
export function registerBashTerminal(api: EnvironmentRegistrar): void {
  api.registerEnvironment('bash', {
    options: BashTerminalOptionsSchema,
    create: (options, { seed, pool, tools }) => new BashTerminalEnvironment(options, { seed, pool, tools: tools(options.tools) }),
    describe: (options) => (BASH_FAMILIES.every((f) => options.families.includes(f)) ? 'bash-files' : `bash-files-${options.families.join('+')}`),
    isolation: bashIsolation,
  });
}
