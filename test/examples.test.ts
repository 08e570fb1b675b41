/**
 * The user-facing examples (examples/), each run as its README tells a user to run it: the folder
 * installed into a project outside the checkout as a user installs it (bench/exampleProject: trajflow
 * and the packages the README pins, zod among them, linked into its node_modules), then
 * `trajflow train CONFIG --local` or `trajflow run CONFIG --local`.
 * The config gains only the suite's dev server address, a task queue prefix, a data directory that
 * adopts the suite's server, and a free port for an endpoint it serves. The run must print what the README's
 * expected output shows (the parts that are the same from run to run), and what it stored must
 * show the example's own code at work.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import YAML from 'yaml';
import { installExample } from '../bench/exampleProject';
import type { TrajectorySummary, TurnRecord } from '../src/core/records';
import { freePort } from '../src/ports';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { runningDevServer } from '../src/temporal/devServer';
import { testAddress } from './support/harness';

const ROOT = path.join(__dirname, '..');
const CLI = path.join(ROOT, 'bin', 'trajflow.js');

/** The README's "output to expect" block. */
function expectedOutput(readme: string): string {
  const block = /## The output to expect[\s\S]*?```\n([\s\S]*?)```/.exec(readme)?.[1];
  if (!block) throw new Error('README has no "The output to expect" block');
  return block;
}

/**
 * What of a run's printed output is the same from run to run: a rollout's summary lines but wall
 * time and speed; a training run's step count and, per step, its success and reward.
 */
function stableOutput(output: string): string[] {
  const summary = output.split('\n').filter((line) => /^\s+(groups|trajectories|mean reward|mean turns)\s/.test(line));
  const steps = /: (\d+ steps, version \d+),/.exec(output)?.[1];
  // A step row: step, elapsed, success, (held-out, empty without held-out seeds,) reward, ...
  const rows = output
    .split('\n')
    .filter((line) => /^\s+\d+\s+\d+s\s/.test(line))
    .map((line) =>
      line
        .trim()
        .split(/\s+/)
        .filter((_cell, i) => i === 0 || i === 2 || i === 3)
        .join(' '),
    );
  return [...summary, ...(steps ? [steps] : []), ...rows];
}

interface PlayedRun {
  stdout: string;
  trajectories: TrajectorySummary[];
  turns: TurnRecord[][];
}

/** Copies examples/`folder` into a fresh project, installs it as the README says, runs `command` on `config` and reads back what it stored. */
async function runExample(
  folder: string,
  command: 'run' | 'train',
  config: string,
  suiteSettings: Record<string, unknown> = {},
): Promise<PlayedRun & { project: string; runId: string; dataDir: string }> {
  // Outside the checkout, as a user's project is: under the suite's data directory, which teardown removes.
  const { project, readme, pins } = installExample(folder, process.env.TRAJFLOW_TEST_DATA_DIR ?? os.tmpdir());
  expect(pins.map((pin) => pin.slice(0, pin.lastIndexOf('@')))).toContain('zod');

  // `--local` starts a dev server unless its data directory has one running: adopt the suite's.
  const dataDir = path.join(project, '.trajflow');
  mkdirSync(path.join(dataDir, 'temporal'), { recursive: true });
  writeFileSync(path.join(dataDir, 'temporal', 'temporal-server.json'), JSON.stringify(runningDevServer(process.env.TRAJFLOW_TEST_DATA_DIR!)));
  const userConfig = YAML.parse(readFileSync(path.join(project, config), 'utf8'));
  const suiteConfig = {
    ...userConfig,
    ...suiteSettings,
    temporal: { address: testAddress(), taskQueuePrefix: `test-example-${folder}-${process.pid}` },
    dataDir,
  };
  const configFile = path.join(project, `suite-${config}`);
  writeFileSync(configFile, YAML.stringify(suiteConfig));

  const { stdout } = await promisify(execFile)(process.execPath, [CLI, command, configFile, '--local'], {
    cwd: project,
    timeout: 60_000,
    // The suite's prebuilt workflow bundle: the in-process workflow worker starts without bundling.
    env: { ...process.env, TRAJFLOW_WORKFLOW_BUNDLE: process.env.TRAJFLOW_TEST_WORKFLOW_BUNDLE },
  });
  const expected = stableOutput(expectedOutput(readme));
  expect(expected.length).toBeGreaterThanOrEqual(4);
  expect(stableOutput(stdout)).toEqual(expected);

  const runId = /^(?:run|training) ([^\s:]+)/m.exec(stdout)![1];
  const store = new TrajectoryStore(dataDir);
  const ids = (await store.listTrajectories(runId)).sort();
  const trajectories = await Promise.all(ids.map(async (id) => (await store.getTrajectory(runId, id))!));
  const turns = await Promise.all(trajectories.map((t) => store.getTurns(runId, t.trajectoryId, t.turns)));
  return { project, runId, dataDir, stdout, trajectories, turns };
}

/** What a plugin module's `register` registers, by kind and name. */
function registrations(moduleFile: string) {
  const registered = {
    env: new Map<string, unknown>(),
    agent: new Map<string, unknown>(),
    tool: new Map<string, unknown>(),
    reward: new Map<string, unknown>(),
  };
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  require(moduleFile).register({
    registerEnvironment: (name: string, definition: unknown) => registered.env.set(name, definition),
    registerAgent: (name: string, definition: unknown) => registered.agent.set(name, definition),
    registerTool: (tool: { name: string }) => registered.tool.set(tool.name, tool),
    registerReward: (name: string, score: unknown, options: unknown) => registered.reward.set(name, { score, options }),
  });
  return registered;
}

describe('the examples, run as a user runs them', () => {
  it('guess-number: its environment and agent train on the embedded model', async () => {
    const { project, trajectories, turns } = await runExample('guess-number', 'train', 'guess.yaml');
    // 4 steps of one group of 4.
    expect(trajectories).toHaveLength(16);
    for (const [i, trajectory] of trajectories.entries()) {
      expect(trajectory.env).toBe('guess-number');
      expect(['ended', 'max_turns']).toContain(trajectory.status);
      // The environment's reset wrote the question, under the agent's system prompt.
      expect(turns[i][0].messages).toEqual([
        { role: 'system', content: 'Answer with a number only.' },
        { role: 'user', content: 'Guess my number.' },
      ]);
    }
    // After the format warm-up, guesses are numbers: the environment's step answers them, and finds some right.
    const observations = turns.flat().flatMap((turn) => turn.messages.map((m) => m.content));
    expect(observations).toContain('Higher.');
    expect(observations).toContain('Lower.');
    const solved = trajectories.filter((t) => t.reward === 1);
    expect(solved.length).toBeGreaterThan(0);
    for (const t of solved) expect(t).toMatchObject({ status: 'ended', reason: 'episode ended: done' });

    // The winning answer's observation is never shown to the model: the environment, played directly.
    type Definition = { options: { parse(v: unknown): unknown }; create(options: unknown, context: { seed: number }): unknown };
    const guessNumber = registrations(path.join(project, 'guess-plugin.js')).env.get('guess-number') as Definition;
    const env = guessNumber.create(guessNumber.options.parse({ max: 20 }), { seed: 25 }) as {
      step(guess: number): { observation: string; reward: number; done: boolean };
    };
    expect(env.step(3)).toMatchObject({ observation: 'Higher.', reward: 0, done: false });
    expect(env.step(9)).toMatchObject({ observation: 'Lower.', reward: 0, done: false });
    expect(env.step(6)).toMatchObject({ observation: 'Right!', reward: 1, done: true });
  });

  it("tool-and-reward: the arithmetic environment offers its tool and scores with its reward's partial credit", async () => {
    const { project, trajectories, turns } = await runExample('tool-and-reward', 'run', 'tools.yaml');
    expect(trajectories).toHaveLength(8);
    for (const [i, trajectory] of trajectories.entries()) {
      expect(trajectory).toMatchObject({ env: 'arithmetic', status: 'ended' });
      expect(turns[i][0].messages[0].content).toContain('square(x: number) - The square of a number.');
    }
    // numeric_match and exact_match score 0 or 1: a reward in between is closeness's partial credit.
    expect(trajectories.filter((t) => t.reward > 0 && t.reward < 1).length).toBeGreaterThan(0);

    const registered = registrations(path.join(project, 'tools-plugin.js'));
    const square = registered.tool.get('square') as { run(args: { x: number }): string };
    expect(square.run({ x: 3 })).toBe('9');
    const closeness = registered.reward.get('closeness') as { score(input: { answer: string; reference: string }, options: { tolerance: number }): number };
    expect(closeness.score({ answer: 'It is 12.4', reference: '12' }, { tolerance: 0.5 })).toBe(1);
    expect(closeness.score({ answer: '14', reference: '12' }, { tolerance: 0.5 })).toBeCloseTo(1 / 2.5);
    expect(closeness.score({ answer: 'twelve', reference: '12' }, { tolerance: 0.5 })).toBe(0);
  });

  it('ai-sdk-agent: an AI SDK agent workflow trains as it is, each model call a turn of its trajectory', async () => {
    const { trajectories, turns, runId, dataDir } = await runExample('ai-sdk-agent', 'train', 'agent.yaml');
    // 3 steps of one group of 4.
    expect(trajectories).toHaveLength(12);
    for (const [i, trajectory] of trajectories.entries()) {
      expect(trajectory).toMatchObject({ env: 'arithmetic', status: 'ended' });
      expect(trajectory.turns).toBeGreaterThanOrEqual(1);
      // The agent's own system prompt, with its tool as the AI SDK passed it, and the environment's task.
      const [system, user] = turns[i][0].messages;
      expect(system.content).toContain('Answer with the number only. Use the calculator for arithmetic.');
      expect(system.content).toContain('calculator(expression: string) - Evaluates an arithmetic expression such as 12 * 34.');
      expect(user.content).toMatch(/^What is \d{3} \* \d{3}\?$/);
    }
    // bench:tool-use reads the run: the embedded model's bytes are never a tool call.
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(ROOT, 'dist', 'bench', 'toolUse.js'), '--data-dir', dataDir, '--run', runId]);
    expect(stdout).toContain('version  episodes  tool ok   solved   held-out');
    expect(stdout).toMatch(/^ +0 +\d+ +0\.0% +0\.0%/m);
  });

  it("openai-agent: a program on OpenAI's client trains through the endpoint, each call a turn of its trajectory", async () => {
    const { trajectories, turns } = await runExample('openai-agent', 'train', 'agent.yaml', { inference: { endpoint: { port: await freePort() } } });
    expect(trajectories).toHaveLength(12);
    for (const [i, trajectory] of trajectories.entries()) {
      expect(trajectory).toMatchObject({ env: 'arithmetic', status: 'ended' });
      const [system, user] = turns[i][0].messages;
      expect(system.content).toContain('Answer with the number only. Use the calculator for arithmetic.');
      expect(system.content).toContain('calculator(expression: string) - Evaluates an arithmetic expression such as 12 * 34.');
      expect(user.content).toMatch(/^What is \d{3} \* \d{3}\?$/);
    }
  });
});
