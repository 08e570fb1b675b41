/**
 * Every benchmark script, run as a user runs it (the built script, in its own process) at a tiny
 * size, so none can rot unnoticed: each must exit 0 and print its figures. The figures themselves
 * are not judged here (a benchmark's numbers on a shared 2-core machine say nothing in a test);
 * the scripts print them beside their targets.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { openWorkflowsQuery } from '../client/runWorkflows';
import { INTERRUPTED_EXIT_CODE } from '../client/launch';
import { TemporalConfigSchema } from '../config/schema';
import { taskQueuesFor } from '../workers/taskQueues';
import { PROJECT_ROOT } from '../src/paths';
import { loadRunConfig } from '../src/runConfig';
import { freePort } from '../src/ports';
import { startDevServer, stopDevServer } from '../src/temporal/devServer';

interface ScriptRun {
  code: number | null;
  output: string;
}

/**
 * Runs `dist/bench/<script>.js` with `args` (and `env` added); resolves with its exit code and
 * everything it printed. `whileRunning` gets the process, to signal it.
 */
function runScript(
  script: string,
  args: string[],
  timeoutMs: number,
  env: Record<string, string> = {},
  whileRunning?: (child: ChildProcess) => Promise<void>,
): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'dist', 'bench', `${script}.js`), ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, HF_HUB_OFFLINE: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} ${args.join(' ')} ran past ${timeoutMs} ms; it printed:\n${output}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
    whileRunning?.(child).catch((err: unknown) => {
      child.kill('SIGKILL');
      reject(err);
    });
  });
}

/** The script exited 0; returns what it printed (shown in full when it did not). */
async function expectSuccess(script: string, args: string[], timeoutMs: number, env: Record<string, string> = {}): Promise<string> {
  const run = await runScript(script, args, timeoutMs, env);
  if (run.code !== 0) throw new Error(`${script} ${args.join(' ')} exited ${run.code}:\n${run.output}`);
  return run.output;
}

/**
 * A small classic-map training config of `steps` steps, in a new temporary directory named after
 * `label`: its file and its data directory.
 */
function smallTrainingConfig(label: string, fileName: string, steps: number, more: object = {}): { dataDir: string; configFile: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), `trajflow-smoke-${label}-`));
  const dataDir = path.join(dir, 'data');
  const configFile = path.join(dir, fileName);
  writeFileSync(
    configFile,
    JSON.stringify({
      dataDir,
      env: { name: 'frozenlake', size: 4, map: 'classic', maxSteps: 6, sessions: 'local' },
      agent: { maxTurns: 6, history: 'none' },
      sampling: { maxTokens: 8 },
      rollout: { groupSize: 4, maxConcurrency: 8 },
      trainer: { batchGroups: 1, steps, formatWarmupSteps: 2 },
      ...more,
    }),
  );
  return { dataDir, configFile };
}

const NUMBER = String.raw`\d+(\.\d+)?`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How many workflows of `runId` are still running on the server at `address`, once visibility has caught up (up to 10 s). */
async function workflowsLeftRunning(address: string, runId: string): Promise<number> {
  const connection = await Connection.connect({ address });
  try {
    const client = new Client({ connection });
    const running = async () => {
      let count = 0;
      for await (const _ of client.workflow.list({ query: openWorkflowsQuery(runId) })) count++;
      return count;
    };
    let left = await running();
    for (const deadline = Date.now() + 10_000; left > 0 && Date.now() < deadline; left = await running()) await sleep(500);
    return left;
  } finally {
    await connection.close();
  }
}

describe('benchmark scripts at tiny sizes', () => {
  test('npm run bench: engine batching and orchestration overhead', async () => {
    const output = await expectSuccess('index', ['--quick'], 120_000);
    expect(output).toMatch(new RegExp(`batch  4: ${NUMBER} tokens/s`));
    expect(output).toMatch(new RegExp(`ratio: +${NUMBER}x`));
    expect(output).toMatch(new RegExp(`through Temporal: median ${NUMBER} ms, p99 ${NUMBER} ms`));
    expect(output).toMatch(new RegExp(`in-process: +median ${NUMBER} ms`));
    // Every activity type of the episode, timed on both sides.
    for (const type of ['openSession', 'generate', 'sessionTurn', 'recordTrajectory']) {
      expect(output).toMatch(new RegExp(`${type} +\\d+ +${NUMBER} ms \\(${NUMBER} ms\\) +${NUMBER} ms`));
    }
    expect(output).toMatch(new RegExp(`overhead: +median ${NUMBER} ms, p99 ${NUMBER} ms per activity`));
    expect(output).toMatch(
      new RegExp(`bare SDK floor: +median ${NUMBER} ms \\(dispatch ${NUMBER} ms\\), p99 ${NUMBER} ms per no-op activity \\(\\d+ in one workflow`),
    );
  });

  test('npm run bench:scale, then the FrozenLake move analysis of its stored trajectories', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-smoke-scale-'));
    const output = await expectSuccess('scale', ['--trajectories', '32', '--concurrency', '16', '--group-size', '8', '--data-dir', dataDir], 120_000);
    expect(output).toMatch(/finished: +32, failed 0, most in flight at once (1[0-6]|[1-9])\b/);
    expect(output).toMatch(new RegExp(`schedule-to-start median ${NUMBER} ms, p99 ${NUMBER} ms`));
    expect(output).toMatch(new RegExp(`per trajectory: +${NUMBER} actions, ${NUMBER} history events .+, ${NUMBER} turns`));

    const moves = await expectSuccess('frozenlakeMoves', ['scale', dataDir, '10'], 60_000);
    // The zero-latency stand-in samples version 0 only: one band holding all 32 episodes.
    const band = moves.match(
      /^v0-9: 32 episodes, goal \d+%, hole \d+%, out of steps \d+%; moves into a visible hole \d\.\d\d \(of \d+ turns next to one; into the edge there \d\.\d\d\); down and right blocked on \d+ of them, left or up there \d\.\d\d; onto a dead end where the other of down and right was not one \d\.\d\d \(of (\d+) turns, right there \d\.\d\d; (\d+) of them in groups with mixed outcomes, on (\d+) cells the group played both\); unreadable answers \d+%$/m,
    );
    expect(band).not.toBeNull();
    // A cell counted as compared holds at least two of the turns in mixed-outcome groups, which are some of the dead-end turns.
    const [deadEndTurns, inMixedGroups, comparedCells] = band!.slice(1).map(Number);
    expect(inMixedGroups).toBeLessThanOrEqual(deadEndTurns);
    expect(2 * comparedCells).toBeLessThanOrEqual(inMixedGroups);
  });

  test('npm run bench:held-out-ceiling', async () => {
    const output = await expectSuccess('heldOutCeiling', ['--seeds', '1,2'], 60_000);
    // It plays as many maps a seed as the example's evaluation does.
    const { eval: evaluation, env } = loadRunConfig(path.join(PROJECT_ROOT, 'config/examples/frozenlake-random-train.yaml'));
    expect(output).toContain(`(${evaluation.episodes} a seed, as eval plays them, ${env.maxSteps} moves at most)`);
    expect(output).toMatch(
      /^seed +shortest path +down, else right +right, else down +down or right at even odds +even odds, off dead ends +even odds, stepping back$/m,
    );
    // Every generated map is solvable within 12 moves; the one-step policies solve some of them,
    // and keeping off dead ends, or stepping back out of them, never solves fewer than the same
    // policy walking onto them and stopping there.
    for (const row of ['1', '2', 'mean']) {
      const [, evenOdds, lookingAhead, steppingBack] = output.match(new RegExp(`^${row} +100% +\\d+% +\\d+% +(\\d+)% +(\\d+)% +(\\d+)%$`, 'm')) ?? [];
      expect(Number(lookingAhead)).toBeGreaterThanOrEqual(Number(evenOdds));
      expect(Number(steppingBack)).toBeGreaterThanOrEqual(Number(evenOdds));
    }

    const refused = await runScript('heldOutCeiling', ['--config', 'config/examples/frozenlake-train.yaml'], 60_000);
    expect(refused.code).toBe(1);
    expect(refused.output).toContain('config/examples/frozenlake-train.yaml: env must be frozenlake with map: random and slippery: false');
  });

  test('npm run bench:hole-reading, and its refusal of an unknown model setting', async () => {
    const output = await expectSuccess(
      'holeReading',
      ['--steps', '2', '--every', '1', '--batch', '4', '--maps-per-step', '2', '--warmup-steps', '1', '--model', '{"dModel":32}'],
      60_000,
    );
    expect(output).toMatch(/model \{"vocabSize":\d+,"dModel":32,/);
    expect(output).toContain('supervised steps of 4 turns (from 2 maps)');
    expect(output).toMatch(/over 200 turns beside one \(a uniform legal move: 0\.\d{3}\)/);
    for (const step of [0, 1, 2]) expect(output).toMatch(new RegExp(`^step ${step}: 0\\.\\d{3} \\(\\d+ s\\)$`, 'm'));

    const refused = await runScript('holeReading', ['--model', '{"dmodel":32}'], 60_000);
    expect(refused.code).toBe(1);
    expect(refused.output).toContain('--model: (model): Unrecognized key: "dmodel"');

    const deadEnds = await expectSuccess(
      'holeReading',
      ['--skill', 'dead-ends', '--steps', '1', '--batch', '4', '--warmup-steps', '1', '--model', '{"dModel":32}'],
      60_000,
    );
    // Exactly one of the two measured moves is wrong on every probe turn: even odds score 0.5.
    expect(deadEnds).toMatch(/over 200 turns where one of them leads onto one \(either at even odds: 0\.500\)/);
    expect(deadEnds).toMatch(/^step 1: 0\.\d{3} \(\d+ s\)$/m);
    const stepBack = await expectSuccess(
      'holeReading',
      ['--skill', 'step-back', '--steps', '1', '--batch', '4', '--warmup-steps', '1', '--model', '{"dModel":32}'],
      60_000,
    );
    // On a dead end at least one legal move is wrong (down or right) and at least one is not.
    const [, uniformStepBack] = /over 200 turns on a dead end \(a uniform legal move: (0\.\d{3})\)/.exec(stepBack) ?? [];
    expect(Number(uniformStepBack)).toBeGreaterThan(0);
    expect(Number(uniformStepBack)).toBeLessThan(1);
    expect(stepBack).toMatch(/^step 1: 0\.\d{3} \(\d+ s\)$/m);
    const unknownSkill = await runScript('holeReading', ['--skill', 'walls'], 60_000);
    expect(unknownSkill.code).toBe(1);
    expect(unknownSkill.output).toContain('--skill must be one of holes, dead-ends, step-back, got walls');
  });

  test('npm run bench:trainer', async () => {
    const output = await expectSuccess('trainer', ['--sequences', '6', '--rounds', '1'], 60_000);
    expect(output).toMatch(/^6 turns of random maps \(\d+ tokens, \d+ a turn\)/m);
    expect(output).toMatch(new RegExp(`^every sequence alone +median ${NUMBER} ms a batch`, 'm'));
    expect(output).toMatch(new RegExp(`^packed +median ${NUMBER} ms a batch`, 'm'));
    expect(output).toMatch(new RegExp(`^packed, tfjs slicing +median ${NUMBER} ms a batch`, 'm'));
    expect(output).toMatch(new RegExp(`^packed / alone speed: +${NUMBER}x$`, 'm'));
    expect(output).toMatch(new RegExp(`^heap / tfjs slicing speed \\(packed\\): +${NUMBER}x$`, 'm'));
  });

  test('npm run bench:storage', async () => {
    const output = await expectSuccess('storage', ['--turns', '24'], 60_000);
    expect(output).toMatch(new RegExp(`^ +1 +${NUMBER} /s +${NUMBER} /s +durable is ${NUMBER}x slower`, 'm'));
    expect(output).toMatch(new RegExp(`^ +16 +${NUMBER} /s +${NUMBER} /s +durable is ${NUMBER}x slower`, 'm'));
  });

  test('npm run soak: kills of the rollout worker lose and double-train nothing', async () => {
    // Exits 1 itself when a group was lost or trained twice.
    // Its smallest useful size: a short calm stretch, then one kill, 1 s into a 1.5 s stretch (the
    // next would fall past its end). The run then waits out the killed worker's heartbeat and
    // session timeouts, so each kill, and each second it comes later, lengthens the test.
    const output = await expectSuccess('soak', ['--quick', '--calm-minutes', '0.05', '--kill-minutes', '0.025', '--every', '1'], 180_000);
    expect(output).toMatch(/with kills: [\d.]+ trajectories\/s over 1\.5 s, 1 SIGKILLs of the rollout worker/);
    expect(output).toMatch(/groups lost: 0; groups trained twice: 0/);
    // Groups report their trajectories when the whole group ends, so a 3 s calm stretch can see
    // none finish: the script then says so instead of printing a ratio.
    expect(output).toMatch(new RegExp(`throughput with kills / without: (${NUMBER}|n/a \\(no trajectory finished in the calm stretch)`));
  }, 180_000);

  test('node dist/bench/tracing.js', async () => {
    const output = await expectSuccess('tracing', ['--rounds', '1', '--groups', '1'], 240_000);
    expect(output).toMatch(new RegExp(`recorder: ${NUMBER} us per span`));
    expect(output).toMatch(/events written while tracing was off: 0/);
  });

  test('npm run bench:learning (one seed, two small train steps), then a replay of its last step', async () => {
    const { dataDir, configFile } = smallTrainingConfig('learning', 'tiny.json', 2, { eval: { everySteps: 1, episodes: 2 } });
    // Its --local run starts a dev server in the data directory: on a free port, not the default
    // one a developer's own server may hold, and stopped afterwards.
    const address = `127.0.0.1:${await freePort()}`;
    const output = await expectSuccess('learning', ['--config', configFile, '--seeds', '7'], 180_000, { TEMPORAL_ADDRESS: address }).finally(() =>
      stopDevServer(dataDir),
    );
    expect(output).toMatch(/^tiny.json seed 7 #1 \(.+\): 2 steps in \d+ s/m);
    expect(output).toMatch(/^ +sampled +50% /m);
    expect(output).toMatch(
      /^ +held-out 70%: reached median (\d+ s|never), worst (\d+ s|never) \([01]\/1, held [01]\/1\); settled median (\d+ s|never), worst (\d+ s|never) \([01]\/1\)/m,
    );

    expect(output).toMatch(/^ +held-out, mean of 3 70% /m);
    expect(output).toMatch(/^ {4}steps that trained no group: [0-2] of 2(, every one from step [01] \(\d+ s\) to the end)?$/m);
    expect(output).toMatch(/^ {4}runs that trained nothing from some step to the end: [01]\/1$/m);

    // Judged again from its stored files (--runs), the run gets the same milestones.
    const runId = /^tiny\.json seed 7 #1 \((.+)\):/m.exec(output)![1];
    const again = await expectSuccess('learning', ['--runs', runId, '--data-dir', dataDir], 60_000);
    const milestones = (text: string) => text.split('\n').filter((line) => /^ {4}(sampled|held-out)/.test(line));
    expect(milestones(output).length).toBeGreaterThanOrEqual(6);
    expect(milestones(again)).toEqual(milestones(output));
    expect(again).toMatch(new RegExp(`^\\S+ seed 7 #1 \\(${runId}\\): 2 steps in \\d+ s`, 'm'));

    // The embedded trainer is deterministic: step 1 trained again gives the metrics it recorded.
    const replay = await expectSuccess('replayStep', [runId, '1', '--data-dir', dataDir, '--episodes', '2', '--max-update-kl', '1000'], 120_000);
    const recorded = /recorded: (approxKl \S+, gradNorm \S+, loss \S+)$/m.exec(replay)?.[1];
    expect(recorded).toBeDefined();
    expect(replay).toContain(`replayed: ${recorded}; update KL `);
    expect(replay).toMatch(new RegExp(`maxUpdateKl 1000\\)\n +success at temperature 1 over 2 episodes: v1 ${NUMBER}%, replayed v2 ${NUMBER}%`));
    // Each group's rewards, as value x count (groups of 4 episodes).
    const group = `${NUMBER} x[1-4](, ${NUMBER} x[1-4])*`;
    expect(replay).toMatch(new RegExp(`^  rewards by group \\(grpo\\): ${group}( \\| ${group})*$`, 'm'));
    const badEstimator = await runScript('replayStep', [runId, '1', '--data-dir', dataDir, '--advantage', 'ppo'], 60_000);
    expect(badEstimator.code).not.toBe(0);
    expect(badEstimator.output).toContain('--advantage must be one of grpo, rloo, drgrpo, got ppo');
  });

  test('npm run bench:learning, interrupted, ends the run it was on: nothing of it goes on in Temporal', async () => {
    const { dataDir, configFile } = smallTrainingConfig('learning-stop', 'long.json', 500);
    const address = `127.0.0.1:${await freePort()}`;
    const firstStepDone = () => readdirSync(path.join(dataDir, 'runs')).some((run) => existsSync(path.join(dataDir, 'runs', run, 'train', 'metrics.jsonl')));
    const stopOnceTraining = async (child: ChildProcess) => {
      for (const deadline = Date.now() + 120_000; !(existsSync(path.join(dataDir, 'runs')) && firstStepDone()); await sleep(500)) {
        if (Date.now() > deadline) throw new Error('no train step finished within 120 s');
      }
      child.kill('SIGTERM');
    };
    const run = await runScript('learning', ['--config', configFile], 180_000, { TEMPORAL_ADDRESS: address }, stopOnceTraining);
    try {
      expect(run.code).toBe(INTERRUPTED_EXIT_CODE);
      const [, runId, terminated] = /^interrupted: run (\S+) ended, (\d+) workflows terminated$/m.exec(run.output) ?? [];
      expect(runId).toBeDefined();
      // At least the training workflow and its rollout controller were still running.
      expect(Number(terminated)).toBeGreaterThanOrEqual(2);
      expect(run.output).not.toContain('stays in Temporal');
      expect(await workflowsLeftRunning(address, runId)).toBe(0);
    } finally {
      await stopDevServer(dataDir);
    }
  }, 240_000);

  test('npm run bench:learning refuses to start while the dev server holds open workflows of another run', async () => {
    const { dataDir, configFile } = smallTrainingConfig('learning-leftover', 'tiny.json', 2);
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    try {
      // A run left open, as one whose server stopped under it: nothing polls its task queue yet.
      await startDevServer({ dataDir, port, namespace: 'default', log: () => undefined });
      const connection = await Connection.connect({ address });
      try {
        const taskQueue = taskQueuesFor(TemporalConfigSchema.parse({}).taskQueuePrefix).workflows;
        await new Client({ connection }).workflow.start('trainingWorkflow', { workflowId: 'leftover-run', taskQueue, args: [] });
      } finally {
        await connection.close();
      }
      const refused = await runScript('learning', ['--config', configFile], 60_000, { TEMPORAL_ADDRESS: address });
      expect(refused.code).toBe(1);
      expect(refused.output).toContain(`the dev server of ${dataDir} holds open workflows of leftover-run; this benchmark's workers would run them beside it`);
      // Refused before its own run began.
      expect(readdirSync(dataDir)).not.toContain('runs');
    } finally {
      await stopDevServer(dataDir);
    }
  });

  test('npm run bench:learning --minutes stops each run at its time limit and judges the steps it took', async () => {
    const { dataDir, configFile } = smallTrainingConfig('learning-minutes', 'long.json', 500, { eval: { everySteps: 1, episodes: 2 } });
    const address = `127.0.0.1:${await freePort()}`;
    let output: string;
    let runId: string;
    try {
      // 9 s: time for a few steps even on a loaded machine (a run stopped before its first has nothing to judge).
      output = await expectSuccess('learning', ['--config', configFile, '--minutes', '0.15'], 180_000, { TEMPORAL_ADDRESS: address });
      runId = /^long\.json seed 1 #1 \((.+)\):/m.exec(output)![1];
      // The groups its rollout had started finished before the bench's workers stopped.
      expect(await workflowsLeftRunning(address, runId)).toBe(0);
    } finally {
      await stopDevServer(dataDir);
    }
    const [, steps, seconds] = /^long\.json seed 1 #1 \(.+\): (\d+) steps in (\d+) s/m.exec(output) ?? [];
    expect(Number(steps)).toBeGreaterThan(0);
    expect(Number(steps)).toBeLessThan(500);
    expect(Number(seconds)).toBeGreaterThanOrEqual(9);
    expect(output).toMatch(/^ +held-out 70%: reached /m);
    const bad = await runScript('learning', ['--config', configFile, '--minutes', 'soon'], 60_000);
    expect(bad.code).not.toBe(0);
    expect(bad.output).toContain('--minutes: "soon" is not a positive number');
  }, 240_000);

  test('npm run bench:real-model (the SGLang-API server, no training)', async () => {
    const output = await expectSuccess('realModel', ['--backends', 'sglang', '--decode-tokens', '4', '--syncs', '1', '--no-training'], 240_000);
    expect(output).toMatch(new RegExp(`batch 16: ${NUMBER} tokens/s`));
    expect(output).toMatch(new RegExp(`weight sync, whole model from disk: ${NUMBER} s`));
    expect(output).toMatch(
      new RegExp(`weight sync, LoRA adapter \\(rank 16, 7 modules\\): ${NUMBER} s \\(the first 4, filling the server: (${NUMBER}, ){3}${NUMBER} s\\)`),
    );
    expect(output).toMatch(new RegExp(`LoRA once the server is full / whole \\(medians\\): ${NUMBER} +target <= 0.25: (MET|NOT MET)`));
  });

  test('npm run bench:agents, as far as its arguments (a run starts vLLM and trains SmolLM2 for many minutes)', async () => {
    const help = await expectSuccess('agents', ['--help'], 30_000);
    expect(help).toContain('usage: npm run bench:agents -- [--steps N');
    const bad = await runScript('agents', ['--steps', '0'], 30_000);
    expect(bad.code).not.toBe(0);
    expect(bad.output).toContain('--steps needs a positive integer, got "0"');
  });
});
