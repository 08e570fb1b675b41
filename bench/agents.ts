/**
 * `npm run bench:agents -- [--steps N] [--model DIR]`: the two agent examples trained on a real
 * model, each installed into a scratch project outside the checkout as a user installs it
 * (bench/exampleProject) and run with `trajflow train CONFIG --local` (its own dev server, vLLM
 * server and data directory). The config is the example's own with the model, inference, sampling,
 * rollout and trainer sections of config/examples/tool-use-smollm2-train.yaml, warm-up included,
 * and `--steps` RL steps; `eval` stays off, as held-out evaluation is refused
 * for workflow and program agents. Prints, per policy version and side by side, each example's
 * episodes, tool-result share and solved share (bench/toolUseByVersion), and each run's wall time.
 *
 * The warm-up's demonstrations are the tool agent's (scripts/tool-demonstrations.js: the task, a
 * calculator call, its result, the result as the answer) with the system prompt the examples send,
 * rendered as trajflow's agent path renders it (src/agentCalls/prompt); each run's stored turns are
 * checked to begin with that same system prompt.
 * Needs `bash scripts/setup.sh` (.venv, .venv-vllm, .models/smollm2-135m-instruct) and `npm run build`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import YAML from 'yaml';
import { promptItemsOf } from '../src/agentCalls/prompt';
import type { ChatMessage } from '../src/core/tokenizer';
import { PROJECT_ROOT, SMOLLM2_DIR } from '../src/paths';
import { freePort } from '../src/ports';
import { TrajectoryStore } from '../src/store/trajectoryStore';
import { stopDevServer } from '../src/temporal/devServer';
import type { ToolCallFormat } from '../src/tools/parsers';
import { installExample } from './exampleProject';
import { percentCell, toolUseByVersion, type VersionRow } from './toolUseByVersion';

const TOOL_USE_CONFIG = path.join(PROJECT_ROOT, 'config', 'examples', 'tool-use-smollm2-train.yaml');
const EXAMPLES = ['ai-sdk-agent', 'openai-agent'] as const;
const DEMONSTRATIONS = 48;

/**
 * What both examples send the model (examples/ai-sdk-agent/workflows.js, examples/openai-agent/agent.js):
 * their system prompt and calculator tool. Each run checks its stored prompts against the rendering of these.
 */
const EXAMPLE_SYSTEM = 'Answer with the number only. Use the calculator for arithmetic.';
const EXAMPLE_CALCULATOR = {
  type: 'function' as const,
  name: 'calculator',
  description: 'Evaluates an arithmetic expression such as 12 * 34.',
  inputSchema: { type: 'object' as const, properties: { expression: { type: 'string' as const } }, required: ['expression'] },
};

/** The sections of the tool-use config this reads (YAML as written: paths stay relative to it). */
interface ToolUseConfig {
  run: Record<string, unknown>;
  model: Record<string, unknown>;
  inference: Record<string, unknown>;
  sampling: Record<string, unknown>;
  rollout: { groupSize: number };
  trainer: { batchGroups: number; warmup: { steps: number; batchSize: number } };
  agent: { format: ToolCallFormat };
}

interface Arguments {
  steps: number;
  model: string;
  /** Keep each scratch project (its run's store and checkpoints, gigabytes) rather than remove it once read. */
  keep: boolean;
}

/** RL steps a run takes unless --steps says, sized to keep the whole benchmark within about 25 minutes on an idle 2-core machine. */
const DEFAULT_STEPS = 8;
const USAGE = `usage: npm run bench:agents -- [--steps N (RL steps, default ${DEFAULT_STEPS})] [--model DIR (default ${path.relative(PROJECT_ROOT, SMOLLM2_DIR)})] [--keep (the scratch projects)]`;

function parseArguments(): Arguments {
  const { values } = parseArgs({
    options: {
      steps: { type: 'string', default: String(DEFAULT_STEPS) },
      model: { type: 'string', default: SMOLLM2_DIR },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const steps = Number(values.steps);
  if (!Number.isInteger(steps) || steps < 1) throw new Error(`--steps needs a positive integer, got ${JSON.stringify(values.steps)}\n${USAGE}`);
  return { steps, model: path.resolve(values.model!), keep: values.keep! };
}

/** The examples' system prompt with their calculator, as the agent path renders it for the model. */
function examplesSystemPrompt(format: ToolCallFormat): string {
  const items = promptItemsOf([{ role: 'system', content: EXAMPLE_SYSTEM }], [EXAMPLE_CALCULATOR], format);
  const first = items[0];
  if (first?.kind !== 'message') throw new Error('the examples rendered no system message');
  return first.message.content;
}

/** The tool agent's demonstrations with `system` as their system prompt, written to `file`. */
function writeDemonstrations(file: string, system: string): void {
  const lines = execFileSync(process.execPath, [path.join(PROJECT_ROOT, 'scripts', 'tool-demonstrations.js'), TOOL_USE_CONFIG, String(DEMONSTRATIONS)], {
    encoding: 'utf8',
  })
    .trim()
    .split('\n');
  const rewritten = lines.map((line) => {
    const { messages } = JSON.parse(line) as { messages: ChatMessage[] };
    if (messages[0]?.role !== 'system') throw new Error(`scripts/tool-demonstrations.js wrote a demonstration without a system prompt: ${line}`);
    return JSON.stringify({ messages: [{ role: 'system', content: system }, ...messages.slice(1)] });
  });
  writeFileSync(file, rewritten.join('\n') + '\n');
}

/** The example's own config with the real-model sections of the tool-use config. */
async function realModelConfig(
  exampleConfig: Record<string, unknown>,
  toolUse: ToolUseConfig,
  folder: string,
  dataDir: string,
  args: Arguments,
  demonstrations: string,
) {
  const endpoint = (exampleConfig.inference as { endpoint?: Record<string, unknown> } | undefined)?.endpoint;
  return {
    ...exampleConfig,
    run: { ...toolUse.run, name: `agents-${folder}` },
    dataDir,
    model: { ...toolUse.model, path: args.model },
    // Its own vLLM server on a free port: a server already answering there would be adopted.
    inference: {
      ...toolUse.inference,
      servers: [`http://127.0.0.1:${await freePort()}`],
      ...(endpoint ? { endpoint: { ...endpoint, port: await freePort() } } : {}),
    },
    sampling: toolUse.sampling,
    rollout: toolUse.rollout,
    trainer: { ...toolUse.trainer, steps: args.steps, warmup: { ...toolUse.trainer.warmup, demonstrations } },
  };
}

/** Runs `trajflow train CONFIG --local` in `project`, its output passed through; returns the output and seconds taken. */
function train(project: string, configFile: string): Promise<{ stdout: string; seconds: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, [path.join(PROJECT_ROOT, 'bin', 'trajflow.js'), 'train', configFile, '--local'], {
    cwd: project,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    process.stdout.write(chunk);
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`trajflow train ${configFile} exited with ${code}`));
      else resolve({ stdout, seconds: (performance.now() - started) / 1000 });
    });
  });
}

/** How many of the run's trajectories began with a system prompt other than `system`. */
async function promptMismatches(dataDir: string, runId: string, system: string): Promise<number> {
  const store = new TrajectoryStore(dataDir);
  let mismatches = 0;
  for (const id of await store.listTrajectories(runId)) {
    const summary = await store.getTrajectory(runId, id);
    if (!summary || summary.turns === 0) continue;
    const [first] = await store.getTurns(runId, id, 1);
    if (first.messages[0]?.content !== system) mismatches++;
  }
  return mismatches;
}

interface ExampleResult {
  folder: string;
  project: string;
  runId: string;
  seconds: number;
  rows: Map<number, VersionRow>;
  mismatches: number;
}

async function trainExample(folder: string, toolUse: ToolUseConfig, args: Arguments, system: string): Promise<ExampleResult> {
  const { project } = installExample(folder, os.tmpdir());
  const demonstrations = path.join(project, 'demonstrations.jsonl');
  writeDemonstrations(demonstrations, system);
  const exampleConfig = YAML.parse(readFileSync(path.join(project, 'agent.yaml'), 'utf8')) as Record<string, unknown>;
  const configFile = path.join(project, 'agent-smollm2.yaml');
  const dataDir = path.join(project, '.trajflow');
  writeFileSync(configFile, YAML.stringify(await realModelConfig(exampleConfig, toolUse, folder, dataDir, args, demonstrations)));
  console.log(`\n== ${folder}: trajflow train ${configFile} --local`);
  // `--local` leaves the dev server running for the project's next command; the next example must start its own.
  const { stdout, seconds } = await train(project, configFile).finally(() => stopDevServer(dataDir));
  const runId = /^(?:run|training) ([^\s:]+)/m.exec(stdout)?.[1];
  if (!runId) throw new Error(`${folder}: the run printed no run id`);
  const result = { folder, project, runId, seconds, rows: await toolUseByVersion(dataDir, runId), mismatches: await promptMismatches(dataDir, runId, system) };
  if (!args.keep) rmSync(project, { recursive: true, force: true });
  return result;
}

function printTable(results: ExampleResult[]): void {
  const versions = [...new Set(results.flatMap((r) => [...r.rows.keys()]))].sort((a, b) => a - b);
  const width = 36;
  console.log(`  ${''.padStart(7)}  ${results.map((r) => r.folder.padEnd(width)).join('')}`.trimEnd());
  console.log(`  version  ${results.map(() => 'episodes  tool ok   solved'.padEnd(width)).join('')}`.trimEnd());
  for (const version of versions) {
    const cells = results.map((r) => {
      const row = r.rows.get(version);
      return (row ? `${String(row.episodes).padStart(8)}  ${percentCell(row.toolResults, row.episodes)} ${percentCell(row.solved, row.episodes)}` : '').padEnd(
        width,
      );
    });
    console.log(`  ${String(version).padStart(7)}  ${cells.join('')}`.trimEnd());
  }
  console.log(`  wall     ${results.map((r) => `${Math.round(r.seconds)} s`.padStart(8).padEnd(width)).join('')}`.trimEnd());
}

async function main(): Promise<void> {
  const args = parseArguments();
  const toolUse = YAML.parse(readFileSync(TOOL_USE_CONFIG, 'utf8')) as ToolUseConfig;
  const system = examplesSystemPrompt(toolUse.agent.format);
  const results: ExampleResult[] = [];
  for (const folder of EXAMPLES) results.push(await trainExample(folder, toolUse, args, system));

  const warmup = toolUse.trainer.warmup;
  console.log(
    `\nbench:agents: ${path.relative(PROJECT_ROOT, args.model) || args.model}, ${args.steps} RL steps of ${toolUse.trainer.batchGroups} groups of ${toolUse.rollout.groupSize}, eval off`,
  );
  console.log(
    `warm-up: ${warmup.steps} steps of ${warmup.batchSize} on ${DEMONSTRATIONS} demonstrations of the tool agent's (scripts/tool-demonstrations.js) with the examples' system prompt`,
  );
  for (const r of results) {
    const check =
      r.mismatches === 0
        ? "every trajectory's system prompt is the warm-up's"
        : `${r.mismatches} trajectories began with another system prompt than the warm-up's`;
    console.log(`  ${r.folder}: run ${r.runId}${args.keep ? ` in ${r.project}` : ''}; ${check}`);
  }
  console.log('sampled episodes by the policy version they started with:');
  printTable(results);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
