import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EnvConfigSchema } from '../config/schema';
import { Episode } from '../src/episode/episode';
import {
  BASH_FAMILIES,
  BashTerminalEnvironment,
  BashTerminalOptionsSchema,
  EXAMPLE_COMMANDS,
  MAX_COMMAND_CHARS,
  isHeldOutTask,
  type BashFamily,
  type BashTask,
  type BashTerminalOptions,
} from '../src/envs/bashTerminal';
import type { ToolResultRecord } from '../src/envs/taskEnvironment';
import { createRng } from '../src/core/random';
import { describeEnvironment, environmentIsolation, type InstancePool } from '../src/plugins/registry';
import { isolationLevel, probeConfinement } from '../src/sandbox/bash';
import { formatToolCall } from '../src/tools/render';

const confinement = probeConfinement();
const SANDBOX_PREFIX = `trajflow-sandbox-${process.pid}-`;

/** This process's sandbox directories still on disk. */
function sandboxDirs(): string[] {
  return fs.readdirSync(os.tmpdir()).filter((name) => name.startsWith(SANDBOX_PREFIX));
}

const opened: BashTerminalEnvironment[] = [];
function makeEnv(options: BashTerminalOptions = {}, seed = 1, pool: InstancePool = 'train'): BashTerminalEnvironment {
  const env = new BashTerminalEnvironment(options, { seed, pool });
  opened.push(env);
  return env;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((env) => env.close()));
  expect(sandboxDirs()).toEqual([]);
});

/** Runs the commands as bash tool calls, at most 4 per step (the environment's per-turn limit). */
async function bash(env: BashTerminalEnvironment, ...commands: string[]): Promise<ToolResultRecord[]> {
  const results: ToolResultRecord[] = [];
  for (let i = 0; i < commands.length; i += 4) {
    const toolCalls = commands.slice(i, i + 4).map((command) => ({ name: 'bash', arguments: { command } }));
    const step = await env.step({ toolCalls });
    expect(step).toMatchObject({ done: false, reward: 0 });
    if (step.observation.kind !== 'tool_results') throw new Error(`expected tool results, got ${step.observation.kind}`);
    results.push(...step.observation.results);
  }
  return results;
}

async function finalReward(env: BashTerminalEnvironment): Promise<number> {
  const step = await env.step({ answer: 'done' });
  expect(step.done).toBe(true);
  return step.reward;
}

async function scratchDir(env: BashTerminalEnvironment): Promise<string> {
  const [pwd] = await bash(env, 'pwd');
  return pwd.content.split('\n')[1];
}

type Params = BashTask['params'];

const SOLUTIONS: Record<BashFamily, (p: Params) => string> = {
  create: (p) => `echo ${p.word} > ${p.name}`,
  rename: (p) => `mv ${p.from} ${p.to}`,
  logs: (p) => `mkdir ${p.dir} && mv *.log ${p.dir}/`,
  count: (p) => `wc -l < ${p.file} > count.txt`,
  cleanup: () => 'rm tmp*',
};

/** Plausible mistakes, each leaving the goal unmet. */
const WRONG: Record<BashFamily, (p: Params) => string> = {
  create: (p) => `echo ${p.word}s > ${p.name}`,
  rename: (p) => `cp ${p.from} ${p.to}`,
  logs: (p) => `mkdir ${p.dir} && mv *.* ${p.dir}/`,
  count: (p) => `wc -l ${p.file} > count.txt`,
  cleanup: () => 'rm *tmp*',
};

describe.each(BASH_FAMILIES)('family %s', (family) => {
  const seeds = [0, 1, 2];

  test.each(seeds)('seed %i: the scripted solution scores 1', async (seed) => {
    const env = makeEnv({ families: [family] }, seed);
    expect(env.task.family).toBe(family);
    await expect(env.reset()).resolves.toEqual({ kind: 'task', prompt: env.task.prompt });
    const [result] = await bash(env, SOLUTIONS[family](env.task.params));
    expect(result).toMatchObject({ name: 'bash', ok: true });
    expect(result.content).toMatch(/^exit 0/);
    const step = await env.step({ answer: 'done' });
    expect(step).toMatchObject({ reward: 1, done: true, info: { outcome: 'correct' }, observation: { kind: 'done', reward: 1 } });
  });

  test.each(seeds)('seed %i: doing nothing, or a near miss, scores 0', async (seed) => {
    const idle = makeEnv({ families: [family] }, seed);
    await idle.reset();
    await expect(finalReward(idle)).resolves.toBe(0);

    const wrong = makeEnv({ families: [family] }, seed);
    await wrong.reset();
    await bash(wrong, WRONG[family](wrong.task.params));
    await expect(finalReward(wrong)).resolves.toBe(0);
  });

  test('format warm-up commands do not solve the task', async () => {
    const env = makeEnv({ families: [family] }, 0);
    await env.reset();
    const results = await bash(env, ...EXAMPLE_COMMANDS);
    expect(results.every((r) => r.ok)).toBe(true);
    await expect(finalReward(env)).resolves.toBe(0);
  });

  test('prompts stay one short line', () => {
    for (let seed = 0; seed < 50; seed++) {
      const { prompt } = makeEnv({ families: [family] }, seed).task;
      expect(prompt.length).toBeLessThanOrEqual(70);
      expect(prompt).not.toContain('\n');
    }
  });
});

test('the bash tool: exit status, output, example arguments, command length limit', async () => {
  const env = makeEnv();
  await env.reset();
  const [ok, failed, tooLong] = await bash(env, 'echo out; echo err >&2', 'exit 3', 'x'.repeat(MAX_COMMAND_CHARS + 1));
  expect(ok).toEqual({ name: 'bash', ok: true, content: 'exit 0\nout\nstderr: err' });
  expect(failed).toEqual({ name: 'bash', ok: true, content: 'exit 3' });
  expect(tooLong.ok).toBe(false);
  expect(tooLong.content).toMatch(/command/);

  const tool = env.tools.find((t) => t.name === 'bash')!;
  const rng = createRng(7);
  for (let i = 0; i < 20; i++) {
    const args = tool.example!(rng);
    expect(tool.input.safeParse(args).success).toBe(true);
    expect(EXAMPLE_COMMANDS).toContain((args as { command: string }).command);
  }
});

test('reset writes the task files, which commands may change; a second reset starts over', async () => {
  const env = makeEnv({}, 5);
  await env.reset();
  const names = Object.keys(env.task.files).sort();
  const [listing, ...contents] = await bash(env, 'ls -A', ...names.map((name) => `cat ${name}`));
  expect(listing.content).toBe(['exit 0', ...names].join('\n'));
  expect(contents.map((r) => r.content)).toEqual(names.map((name) => `exit 0\n${env.task.files[name].trimEnd()}`));

  // Commands run as the directory's owner, so the task's files are theirs to edit.
  const first = await scratchDir(env);
  const [edit] = await bash(env, 'for f in *; do echo more >> "$f" || exit 1; done; touch new.txt');
  expect(edit.content).toBe('exit 0');

  await env.reset();
  expect(fs.existsSync(first)).toBe(false);
  const [again] = await bash(env, 'ls -A');
  expect(again.content).toBe(['exit 0', ...names].join('\n'));
});

test('isolation is the sandbox confinement of this machine', async () => {
  const env = makeEnv();
  console.log(`bash environment isolation on this machine:\n  ${env.isolation.join('\n  ')}`);
  expect(env.isolation).toEqual(confinement.description);
  expect(env.isolation.length).toBeGreaterThan(0);
});

test('the isolation level shown at worker start and in trajectory details: refused without namespaces unless accepted', () => {
  const level = environmentIsolation(EnvConfigSchema.parse({ name: 'bash' }));
  console.log(`bash environment isolation level on this machine: ${level}`);
  expect(BashTerminalOptionsSchema.parse({}).allowWeakIsolation).toBe(false);
  expect(() => BashTerminalOptionsSchema.parse({ allowWeakIsolation: 'yes' })).toThrow(/allowWeakIsolation/);
  if (confinement.namespaces) {
    expect(level).toBe(isolationLevel(confinement));
  } else {
    expect(() => environmentIsolation(EnvConfigSchema.parse({ name: 'bash' }))).toThrow(/allowWeakIsolation: true/);
    expect(environmentIsolation(EnvConfigSchema.parse({ name: 'bash', allowWeakIsolation: true }))).toMatch(/^WEAK/);
  }
});

const confinedTest = confinement.readOnlyOutside ? test : test.skip;
if (!confinement.readOnlyOutside) {
  console.warn(`SKIPPED bash environment confinement test: this machine allows no mount namespace (${confinement.description.join('; ')})`);
}
confinedTest('commands cannot write outside the scratch directory', async () => {
  const env = makeEnv();
  await env.reset();
  const dir = await scratchDir(env);
  const marker = `trajflow-escape-${process.pid}-${Date.now()}`;
  const targets = [path.join(os.tmpdir(), marker), path.join(path.dirname(dir), `${marker}-up`)];
  try {
    const [absolute, upward] = await bash(env, `echo x > ${targets[0]}`, `cd .. && touch ${marker}-up`);
    for (const result of [absolute, upward]) {
      expect(result.content).not.toMatch(/^exit 0/);
      expect(result.content).toMatch(/Read-only file system|Permission denied/);
    }
    expect(targets.filter((t) => fs.existsSync(t))).toEqual([]);
  } finally {
    for (const target of targets) fs.rmSync(target, { force: true });
  }
});

test('checkers do not follow symlinks', async () => {
  const outside = path.join(os.tmpdir(), `trajflow-symlink-target-${process.pid}-${Date.now()}`);
  try {
    const linked = makeEnv({ families: ['create'] }, 3);
    await linked.reset();
    const { name, word } = linked.task.params;
    fs.writeFileSync(outside, `${word}\n`);
    await bash(linked, `ln -s ${outside} ${name}`, `cat ${name}`);
    await expect(finalReward(linked)).resolves.toBe(0);

    const inside = makeEnv({ families: ['create'] }, 3);
    await inside.reset();
    await bash(inside, `echo ${word} > real && ln -s real ${name}`);
    await expect(finalReward(inside)).resolves.toBe(0);

    const folder = makeEnv({ families: ['logs'] }, 3);
    await folder.reset();
    await bash(folder, `mkdir real && mv *.log real/ && ln -s real ${folder.task.params.dir}`);
    await expect(finalReward(folder)).resolves.toBe(0);
  } finally {
    fs.rmSync(outside, { force: true });
  }
});

test('a command over its timeout is killed and says so', async () => {
  const env = makeEnv({ commandTimeoutMs: 500 });
  await env.reset();
  const started = Date.now();
  const [slow] = await bash(env, 'sleep 30');
  expect(Date.now() - started).toBeLessThan(3000);
  expect(slow).toEqual({ name: 'bash', ok: true, content: 'exit 137 (killed: ran over 500 ms)' });
  const [next] = await bash(env, 'echo still here');
  expect(next.content).toBe('exit 0\nstill here');
});

test('output is capped', async () => {
  const env = makeEnv({ maxOutputBytes: 100 });
  await env.reset();
  const [result] = await bash(env, "head -c 5000 /dev/zero | tr '\\0' a");
  expect(result.content).toBe(`exit 0\n${'a'.repeat(100)}\n(output cut)`);
});

test('a command over the memory limit is stopped with a note; the episode goes on, and so does another', async () => {
  const env = makeEnv({ families: ['create'], maxMemoryMiB: 64 }, 2);
  const other = makeEnv({ families: ['create'] }, 3);
  await Promise.all([env.reset(), other.reset()]);
  const [[bomb, after], [neighbour]] = await Promise.all([
    bash(env, `python3 -c 'b = bytearray(128 * 2**20); print("allocated")'`, 'echo still here'),
    bash(other, `python3 -c 'b = bytearray(128 * 2**20); print("allocated")'`),
  ]);
  expect(bomb.content).toMatch(/^exit [1-9]/);
  expect(bomb.content).not.toContain('allocated');
  expect(bomb.content.split('\n').at(-1)).toBe('(memory limit 64 MiB exceeded)');
  expect(after.content).toBe('exit 0\nstill here');
  expect(neighbour.content).toBe('exit 0\nallocated');
  await bash(env, SOLUTIONS.create(env.task.params));
  await expect(finalReward(env)).resolves.toBe(1);
});

const quotaTest = confinement.scratchQuota ? test : test.skip;
if (!confinement.scratchQuota) {
  console.warn(`SKIPPED bash environment scratch quota test: this machine gives the scratch dir no quota (${confinement.description.join('; ')})`);
}
quotaTest('filling the scratch directory, in bytes or files, is stopped with a note; the episode goes on', async () => {
  const env = makeEnv({ families: ['create'], maxScratchMiB: 1, maxScratchFiles: 16 }, 2);
  await env.reset();
  const [disk, files, cleaned] = await bash(
    env,
    'head -c 2000000 /dev/zero > big',
    'rm big; for i in $(seq 40); do : > f$i || exit 1; done',
    'rm f*; ls | wc -l',
  );
  expect(disk.content).toMatch(/^exit 1\n.*No space left on device/);
  expect(disk.content.split('\n').at(-1)).toBe('(disk limit 1 MiB for the scratch directory reached: writes fail until files are deleted)');
  expect(files.content).toMatch(/^exit 1\n.*No space left on device/);
  expect(files.content.split('\n').at(-1)).toBe('(file count limit 16 reached: new files fail until some are deleted)');
  // The task's files are still there, and room is back.
  expect(cleaned.content).toBe(`exit 0\n${Object.keys(env.task.files).length}`);
  await bash(env, SOLUTIONS.create(env.task.params));
  await expect(finalReward(env)).resolves.toBe(1);
});

describe('close', () => {
  test('removes the directory, stops commands, and can be called again', async () => {
    const env = makeEnv();
    await env.reset();
    const dir = await scratchDir(env);
    expect(fs.existsSync(dir)).toBe(true);
    await env.close();
    expect(fs.existsSync(dir)).toBe(false);
    await env.close();
    const [late] = await bash(env, 'ls');
    expect(late).toMatchObject({ ok: false, content: expect.stringMatching(/closed/) });
    await expect(env.reset()).rejects.toThrow(/closed/);
  });

  test('before any reset, twice', async () => {
    const env = makeEnv();
    await Promise.all([env.close(), env.close()]);
    await expect(env.reset()).rejects.toThrow(/closed/);
    expect(sandboxDirs()).toEqual([]);
  });

  test('while reset is still setting up', async () => {
    const env = makeEnv();
    const resetting = env.reset();
    await env.close();
    await resetting;
    expect(sandboxDirs()).toEqual([]);
  });
});

describe('seeds and pools', () => {
  const SEEDS = Array.from({ length: 300 }, (_, i) => i);
  const idsFor = (pool: InstancePool, options: BashTerminalOptions = {}) => SEEDS.map((seed) => makeEnv(options, seed, pool).task.id);

  test('the same seed gives the same task; seeds cover every family', () => {
    for (const seed of [0, 1, 42, 2 ** 31]) {
      expect(makeEnv({}, seed).task).toEqual(makeEnv({}, seed).task);
    }
    const tasks = SEEDS.slice(0, 100).map((seed) => makeEnv({}, seed).task);
    expect(new Set(tasks.map((t) => t.family))).toEqual(new Set(BASH_FAMILIES));
    expect(new Set(tasks.map((t) => t.id)).size).toBeGreaterThan(80);
  });

  test('training never draws a held-out task and evaluation draws only them', () => {
    const train = idsFor('train');
    const evaluation = idsFor('eval');
    expect(train.filter((id) => evaluation.includes(id))).toEqual([]);
    expect(train.every((id) => !isHeldOutTask(id, 0.2))).toBe(true);
    expect(evaluation.every((id) => isHeldOutTask(id, 0.2))).toBe(true);
    expect(new Set(evaluation).size).toBeGreaterThan(100);
  });

  test('the held-out share follows the option; 0 means no split', () => {
    const drawn = SEEDS.map((seed) => makeEnv({ heldOutShare: 0 }, seed).task.id);
    const heldOut = drawn.filter((id) => isHeldOutTask(id, 0.2)).length / drawn.length;
    expect(heldOut).toBeGreaterThan(0.1);
    expect(heldOut).toBeLessThan(0.3);
    expect(idsFor('eval', { heldOutShare: 0 })).toEqual(drawn);
    expect(idsFor('eval', { heldOutShare: 0.5 }).every((id) => isHeldOutTask(id, 0.5))).toBe(true);
  });
});

test('options: defaults, and limits that would break the tool are refused', () => {
  expect(BashTerminalOptionsSchema.parse({})).toEqual({
    families: [...BASH_FAMILIES],
    commandTimeoutMs: 5000,
    maxOutputBytes: 2000,
    maxMemoryMiB: 512,
    maxScratchMiB: 256,
    maxScratchFiles: 10_000,
    maxProcesses: 512,
    allowWeakIsolation: false,
    heldOutShare: 0.2,
    tools: [],
  });
  // Too little for bash itself, or for the task's own files.
  expect(BashTerminalOptionsSchema.safeParse({ maxMemoryMiB: 16 }).success).toBe(false);
  expect(BashTerminalOptionsSchema.safeParse({ maxScratchFiles: 8 }).success).toBe(false);
  expect(BashTerminalOptionsSchema.safeParse({ maxScratchMiB: 0 }).success).toBe(false);
  expect(BashTerminalOptionsSchema.safeParse({ commandTimeoutMs: 5000, toolTimeoutMs: 5000 }).success).toBe(false);
  expect(BashTerminalOptionsSchema.safeParse({ commandTimeoutMs: 5000, toolTimeoutMs: 5001 }).success).toBe(true);
  expect(BashTerminalOptionsSchema.safeParse({ tools: ['bash'] }).success).toBe(false);
  expect(BashTerminalOptionsSchema.safeParse({ families: [] }).success).toBe(false);
  expect(BashTerminalOptionsSchema.safeParse({ heldOutShare: 0.6 }).success).toBe(false);
  expect(BashTerminalOptionsSchema.safeParse({ shell: 'zsh' }).success).toBe(false);
});

test('an episode through the registry with the tool agent', async () => {
  expect(describeEnvironment(EnvConfigSchema.parse({ name: 'bash' }))).toBe('bash-files');
  expect(describeEnvironment(EnvConfigSchema.parse({ name: 'bash', families: ['count'] }))).toBe('bash-files-count');

  const { episode, first } = await Episode.open({
    env: EnvConfigSchema.parse({ name: 'bash', families: ['count'] }),
    agent: { name: 'tool', format: 'hermes', maxTurns: 12, history: 'full', episodeTimeoutS: 600 },
    seed: 11,
  });
  try {
    const env = episode.environment as BashTerminalEnvironment;
    expect(env).toBeInstanceOf(BashTerminalEnvironment);
    const [system, user] = first.messages;
    expect(system.content).toContain('bash(command: string)');
    expect(user).toEqual({ role: 'user', content: env.task.prompt });

    const call = formatToolCall('hermes', { name: 'bash', arguments: { command: SOLUTIONS.count(env.task.params) } });
    const stepped = await episode.respond(call);
    expect(stepped).toMatchObject({ kind: 'stepped', done: false, next: { messages: [{ role: 'tool', content: 'exit 0' }] } });
    await expect(episode.respond('done')).resolves.toMatchObject({ kind: 'stepped', done: true, reward: 1 });
  } finally {
    await episode.close();
  }
  expect(sandboxDirs()).toEqual([]);
});
