/**
 * trajflow's OpenAI-compatible endpoint (`inference.endpoint`), served beside the inference
 * worker, for agent programs in any language (`agent.name: program`):
 *
 *   POST /v1/chat/completions   a model call; the API key (`Authorization: Bearer <trajectory id>`)
 *                               names the trajectory. Tools and `stream: true` as OpenAI's API has them.
 *   POST /v1/trajflow/reward    `{ "reward": <number> }`: the program's own reward for its episode.
 *   GET  /v1/models             the one model it serves.
 *
 * A call becomes an update of the trajectory's workflow, which answers it with an `invokeModel`
 * activity (workflows/trajectory/agentProgram.ts): the call is in the trajectory's history, and
 * sampled, stored and matched against the earlier calls as an AI SDK agent's call is. A call sent
 * again (the program retried, or was started again) is answered from the store.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Client, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { RunConfig } from '../config/schema';
import { callOptionsOf, chatCompletionChunksOf, chatCompletionOf, ChatCompletionRequestSchema, UnsupportedRequestError } from '../src/agentCalls/openai';
import { MODEL_CALL_LIMIT } from '../src/core/agentCallContext';
import { describeIssues } from '../src/core/issues';
import type { Logger } from '../src/log';
import { connectClient, resolveTemporal } from '../src/temporal/connection';
import { agentModelCallUpdate, agentRewardSignal } from '../workflows/signals';

/** The model name the endpoint lists; any name is accepted in a request (the run's policy answers). */
const MODEL_ID = 'trajflow';
/** Largest request body read: a long conversation, not a file upload. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** An HTTP error with OpenAI's error body. */
class EndpointError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'invalid_request_error',
  ) {
    super(message);
  }
}

export interface OpenAiEndpoint {
  url: string;
  close(): Promise<void>;
}

export async function startOpenAiEndpoint(config: Pick<RunConfig, 'temporal' | 'inference'>, logger: Logger): Promise<OpenAiEndpoint | undefined> {
  const settings = config.inference.endpoint;
  if (!settings) return undefined;
  const connection = await connectClient(resolveTemporal(config.temporal));
  const client = new Client({ connection, namespace: resolveTemporal(config.temporal).namespace });
  const server = createServer((request, response) => {
    handle(client, request, response).catch((err: unknown) => {
      const error = err instanceof EndpointError ? err : new EndpointError(500, (err as Error).message, 'server_error');
      if (error.status >= 500) logger.warn({ err, path: request.url }, 'endpoint request failed');
      if (!response.headersSent) sendJson(response, error.status, { error: { message: error.message, type: error.type } });
      else response.end();
    });
  });
  await listen(server, settings.port, settings.host);
  const url = `http://${settings.host}:${settings.port}/v1`;
  logger.info({ url }, 'OpenAI-compatible endpoint listening');
  return {
    url,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await connection.close();
    },
  };
}

async function handle(client: Client, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const route = `${request.method} ${new URL(request.url ?? '/', 'http://endpoint').pathname}`;
  switch (route) {
    case 'GET /v1/models':
      return sendJson(response, 200, { object: 'list', data: [{ id: MODEL_ID, object: 'model', created: 0, owned_by: 'trajflow' }] });
    case 'POST /v1/chat/completions':
      return chatCompletion(client, trajectoryOf(request), await jsonBody(request), response);
    case 'POST /v1/trajflow/reward':
      return reportReward(client, trajectoryOf(request), await jsonBody(request), response);
    default:
      throw new EndpointError(404, `no route ${route}: this endpoint serves POST /v1/chat/completions, POST /v1/trajflow/reward and GET /v1/models`);
  }
}

async function chatCompletion(client: Client, trajectoryId: string, body: unknown, response: ServerResponse): Promise<void> {
  const parsed = ChatCompletionRequestSchema.safeParse(body);
  if (!parsed.success) throw new EndpointError(400, `invalid chat completion request: ${describeIssues(parsed.error.issues).join('; ')}`);
  let options;
  try {
    options = callOptionsOf(parsed.data);
  } catch (err) {
    if (err instanceof UnsupportedRequestError) throw new EndpointError(400, err.message);
    throw err;
  }
  const result = await onTrajectory(trajectoryId, () =>
    client.workflow.getHandle(trajectoryId).executeUpdate(agentModelCallUpdate, { args: [{ modelId: parsed.data.model, options }] }),
  );
  const turn = (result.providerMetadata?.trajflow as { turn?: number } | undefined)?.turn;
  const id = `chatcmpl-${trajectoryId}-${turn ?? 'context-full'}`;
  const created = Math.floor(Date.now() / 1000);
  if (!parsed.data.stream) return sendJson(response, 200, chatCompletionOf(result, id, parsed.data.model, created));
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  for (const chunk of chatCompletionChunksOf(result, id, parsed.data.model, created, parsed.data.stream_options?.include_usage === true)) {
    response.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }
  response.end('data: [DONE]\n\n');
}

async function reportReward(client: Client, trajectoryId: string, body: unknown, response: ServerResponse): Promise<void> {
  const reward = (body as { reward?: unknown } | null)?.reward;
  if (typeof reward !== 'number' || !Number.isFinite(reward))
    throw new EndpointError(400, `the body must be { "reward": <finite number> }, got ${JSON.stringify(body)?.slice(0, 200)}`);
  await onTrajectory(trajectoryId, () => client.workflow.getHandle(trajectoryId).signal(agentRewardSignal, reward));
  sendJson(response, 200, { trajectoryId, reward });
}

/** Runs a call on the trajectory's workflow, its failures as HTTP errors. */
async function onTrajectory<T>(trajectoryId: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new EndpointError(404, `no running trajectory ${trajectoryId} (the API key names the trajectory)`);
    if (err instanceof WorkflowUpdateFailedError) {
      const reason = causeMessages(err);
      throw new EndpointError(reason.includes(MODEL_CALL_LIMIT) ? 429 : 400, reason);
    }
    throw err;
  }
}

function causeMessages(err: Error): string {
  const parts: string[] = [];
  for (let at: unknown = err.cause; at instanceof Error; at = at.cause) parts.push(`${(at as { type?: string }).type ?? at.name}: ${at.message}`);
  return parts.join('; ') || err.message;
}

function trajectoryOf(request: IncomingMessage): string {
  const key = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1]?.trim();
  if (!key) throw new EndpointError(401, 'no API key: the key is the trajectory id (the program gets it as OPENAI_API_KEY)', 'authentication_error');
  return key;
}

async function jsonBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new EndpointError(413, `request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw new EndpointError(400, `request body is not JSON: ${(err as Error).message}`);
  }
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
