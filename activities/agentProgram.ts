/**
 * An agent program's episode (`agent.name: program`): the program runs as a child process of an
 * env worker, told where trajflow's OpenAI-compatible endpoint is (`OPENAI_BASE_URL`) and which
 * trajectory it plays (`OPENAI_API_KEY`, also `TRAJFLOW_TRAJECTORY_ID`), with the task in
 * `TRAJFLOW_TASK`. What it prints is its answer. Any OpenAI client in any language works: its
 * model calls are the trajectory's turns.
 */
import { spawn } from 'node:child_process';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { HEARTBEAT_INTERVAL_MS } from '../src/core/liveness';

export interface AgentProgramInput {
  trajectoryId: string;
  /** The program and its arguments. */
  command: string[];
  cwd: string;
  prompt: string;
  /** The endpoint's base URL, as an OpenAI client takes it (`.../v1`). */
  endpoint: string;
}

/** Most of a program's output kept: its answer, and the end of its errors for a failure's message. */
const ANSWER_CHARS = 64 * 1024;
const ERROR_TAIL_CHARS = 2000;

export function createAgentProgramActivities() {
  /** Runs the program to its end; its answer is what it printed, trimmed. A program that fails fails the episode. */
  async function runAgentProgram(input: AgentProgramInput): Promise<{ answer: string }> {
    const [program, ...args] = input.command;
    const child = spawn(program, args, {
      cwd: input.cwd,
      env: {
        ...process.env,
        OPENAI_BASE_URL: input.endpoint,
        OPENAI_API_KEY: input.trajectoryId,
        TRAJFLOW_TRAJECTORY_ID: input.trajectoryId,
        TRAJFLOW_TASK: input.prompt,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout = (stdout + chunk.toString()).slice(0, ANSWER_CHARS)));
    child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-ERROR_TAIL_CHARS)));
    const context = Context.current();
    const heartbeat = setInterval(() => context.heartbeat(), HEARTBEAT_INTERVAL_MS);
    // A cancelled episode (its deadline passed) stops its program.
    const stop = () => child.kill('SIGKILL');
    context.cancellationSignal.addEventListener('abort', stop);
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        child.on('error', reject);
        child.on('close', resolve);
      });
      if (code !== 0) {
        throw ApplicationFailure.nonRetryable(
          `agent program \`${input.command.join(' ')}\` exited with ${code ?? 'a signal'}: ${stderr.trim() || '(no error output)'}`,
        );
      }
      return { answer: stdout.trim() };
    } catch (err) {
      if (err instanceof ApplicationFailure) throw err;
      throw ApplicationFailure.nonRetryable(`agent program \`${input.command.join(' ')}\` could not start: ${(err as Error).message}`);
    } finally {
      clearInterval(heartbeat);
      context.cancellationSignal.removeEventListener('abort', stop);
    }
  }
  return { runAgentProgram };
}

export type AgentProgramActivities = ReturnType<typeof createAgentProgramActivities>;
