/**
 * Where every trajflow client and worker connects, resolved here alone, Temporal's way: its
 * environment configuration (`@temporalio/envconfig`: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
 * TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE and the profiles of its TOML file,
 * TEMPORAL_CONFIG_FILE or ~/.config/temporalio/temporal.toml), with the run config's `temporal:`
 * section over it and the local dev server under it:
 *
 *   address, namespace = config `temporal.*`  >  environment / profile  >  127.0.0.1:7233, default
 *
 * Connecting fails fast, with one line that says what was wrong: an address that does not answer
 * within CONNECT_TIMEOUT_MS, a namespace the server does not have, a certificate file that is not
 * there, credentials the server refuses. Each names the setting and where it came from.
 */
import { existsSync } from 'node:fs';
import { Connection } from '@temporalio/client';
import { loadClientConfigProfile, toClientOptions, type ClientConfigProfile, type ClientConfigTLS } from '@temporalio/envconfig';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import type { TemporalConfig } from '../../config/schema';
import { DEFAULT_NAMESPACE, LOCAL_ADDRESS } from './defaults';

/** Long enough for a far cluster's TLS handshake, short enough that a wrong address is noticed. */
export const CONNECT_TIMEOUT_MS = 10_000;

/** A connection problem, said in one line: the CLI prints it without a stack. */
export class TemporalConnectionError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TemporalConnectionError';
  }
}

/** Where to connect, resolved. */
export interface TemporalTarget {
  address: string;
  namespace: string;
  /** The resolved client profile (address and namespace included): what connections are made from. */
  profile: ClientConfigProfile;
  /** Where the address and the namespace came from, for messages. */
  origin: { address: string; namespace: string };
}

/** A worker's connection and the namespace it polls: what every worker role is created with. */
export interface WorkerConnection {
  connection: NativeConnection;
  namespace: string;
}

const TLS_FILES = [
  { key: 'clientCert', what: 'TLS client certificate', env: 'TEMPORAL_TLS_CLIENT_CERT_PATH' },
  { key: 'clientKey', what: 'TLS client key', env: 'TEMPORAL_TLS_CLIENT_KEY_PATH' },
  { key: 'serverCACert', what: 'TLS server CA certificate', env: 'TEMPORAL_TLS_SERVER_CA_CERT_PATH' },
] as const satisfies readonly { key: keyof ClientConfigTLS; what: string; env: string }[];

type Env = Record<string, string | undefined>;

function definedOnly(env: Env): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

/** The profile Temporal's environment configuration gives (its file's profile, then the variables over it). */
function loadProfile(profileName: string | undefined, env: Env): ClientConfigProfile {
  // The SDK treats a missing config file as an empty one; a file named explicitly must be there.
  if (env.TEMPORAL_CONFIG_FILE && !existsSync(env.TEMPORAL_CONFIG_FILE)) {
    throw new TemporalConnectionError(`Temporal config file ${env.TEMPORAL_CONFIG_FILE} does not exist (TEMPORAL_CONFIG_FILE)`);
  }
  try {
    return loadClientConfigProfile({ profile: profileName, overrideEnvVars: definedOnly(env) });
  } catch (err) {
    throw new TemporalConnectionError(`Temporal client configuration (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE): ${(err as Error).message}`, { cause: err });
  }
}

/** A TLS file that is named but missing fails now, naming it, rather than as a handshake error later. */
function checkTlsFiles(tls: ClientConfigTLS | undefined, env: Env): void {
  if (!tls || tls.disabled) return;
  for (const { key, what, env: variable } of TLS_FILES) {
    const source = tls[key];
    if (source && 'path' in source && !existsSync(source.path)) {
      throw new TemporalConnectionError(`${what} file ${source.path} does not exist (${env[variable] ? variable : 'the Temporal config profile'})`);
    }
  }
  if (Boolean(tls.clientCert) !== Boolean(tls.clientKey)) {
    throw new TemporalConnectionError(
      `a TLS client ${tls.clientCert ? 'certificate is set without its key' : 'key is set without its certificate'} (TEMPORAL_TLS_CLIENT_CERT_* and TEMPORAL_TLS_CLIENT_KEY_* go together)`,
    );
  }
}

/**
 * Resolves where to connect: `section` (a run config's `temporal:`) over Temporal's environment
 * configuration over the local defaults. `env` is for tests; by default the process's.
 */
export function resolveTemporal(section: Partial<TemporalConfig> = {}, env: Env = process.env): TemporalTarget {
  const profileName = section.profile ?? env.TEMPORAL_PROFILE ?? 'default';
  const loaded = loadProfile(section.profile, env);
  checkTlsFiles(loaded.tls, env);
  const originOf = (setting: 'address' | 'namespace', variable: string): string => {
    if (section[setting] !== undefined) return `temporal.${setting} in the run config`;
    if (env[variable] !== undefined) return variable;
    if (loaded[setting] !== undefined) return `profile "${profileName}" of the Temporal config file`;
    return 'the local default';
  };
  const address = section.address ?? loaded.address ?? LOCAL_ADDRESS;
  const namespace = section.namespace ?? loaded.namespace ?? DEFAULT_NAMESPACE;
  return {
    address,
    namespace,
    profile: { ...loaded, address, namespace },
    origin: { address: originOf('address', 'TEMPORAL_ADDRESS'), namespace: originOf('namespace', 'TEMPORAL_NAMESPACE') },
  };
}

/** What a connection to `target` is made with: address, TLS (files read now), API key, gRPC metadata. */
export function connectionOptionsOf(target: TemporalTarget): NativeConnectionOptions {
  try {
    return toClientOptions(target.profile).connectionOptions;
  } catch (err) {
    throw new TemporalConnectionError(`cannot read the Temporal TLS settings: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The first line of an SDK error, shortened: the rest is a gRPC dump. The worker's (Rust) transport
 * errors are debug prints; their kind and message say it (`tcp connect error: Connection refused`).
 */
function shortReason(err: unknown): string {
  const line = String((err as Error)?.message ?? err).split('\n')[0];
  if (line.startsWith('tonic::transport::Error')) {
    const kind = /ConnectError\("([^"]+)"/.exec(line)?.[1];
    const detail = /(?:message|error): "([^"]+)"/.exec(line)?.[1];
    if (detail) return kind ? `${kind}: ${detail}` : detail;
  }
  return line.length > 300 ? `${line.slice(0, 300)}...` : line;
}

function unreachable(target: TemporalTarget, options: NativeConnectionOptions, err: unknown): TemporalConnectionError {
  const how = `${target.origin.address}, ${options.tls ? 'TLS' : 'no TLS'}`;
  return new TemporalConnectionError(`cannot connect to Temporal at ${target.address} (${how}): ${shortReason(err)}`, { cause: err });
}

export const GRPC_NOT_FOUND = 5;
const GRPC_PERMISSION_DENIED = 7;
const GRPC_UNAUTHENTICATED = 16;

function credentialsOf(target: TemporalTarget): string {
  if (target.profile.apiKey) return 'the API key';
  const cert = target.profile.tls?.clientCert;
  if (cert) return `the client certificate${'path' in cert ? ` ${cert.path}` : ''}`;
  return 'no credentials (no API key, no client certificate)';
}

/** A failed DescribeNamespace said in one line: a missing namespace, refused credentials, or else the server's reason. */
export function namespaceError(target: TemporalTarget, err: unknown): TemporalConnectionError {
  const code = (err as { code?: number }).code;
  const where = `Temporal at ${target.address}`;
  if (code === GRPC_NOT_FOUND) {
    return new TemporalConnectionError(`namespace "${target.namespace}" (${target.origin.namespace}) does not exist on ${where}`, { cause: err });
  }
  if (code === GRPC_PERMISSION_DENIED || code === GRPC_UNAUTHENTICATED) {
    return new TemporalConnectionError(`${where} refused namespace "${target.namespace}" to ${credentialsOf(target)}: ${shortReason(err)}`, { cause: err });
  }
  return new TemporalConnectionError(`${where}, namespace "${target.namespace}": ${shortReason(err)}`, { cause: err });
}

/** Checks that the namespace exists and that the credentials may use it. */
/** A connection whose namespace check failed is closed, not leaked. */
async function closeAndThrow(connection: { close(): Promise<void> }, err: unknown): Promise<never> {
  await connection.close();
  throw err;
}

async function checkNamespace(
  describe: (request: { namespace: string }) => Promise<unknown>,
  withDeadline: <T>(deadline: number, fn: () => Promise<T>) => Promise<T>,
  target: TemporalTarget,
): Promise<void> {
  try {
    await withDeadline(Date.now() + CONNECT_TIMEOUT_MS, () => describe({ namespace: target.namespace }));
  } catch (err) {
    throw namespaceError(target, err);
  }
}

/**
 * A client connection to `target`, its namespace checked (unless `checkNamespace` is false: for
 * `cluster prepare`, which may create it); throws TemporalConnectionError.
 */
export async function connectClient(target: TemporalTarget, { checkNamespace: check = true } = {}): Promise<Connection> {
  const options = connectionOptionsOf(target);
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...options, connectTimeout: CONNECT_TIMEOUT_MS });
  } catch (err) {
    throw unreachable(target, options, err);
  }
  if (!check) return connection;
  await checkNamespace(
    (request) => connection.workflowService.describeNamespace(request),
    (deadline, fn) => connection.withDeadline(deadline, fn),
    target,
  ).catch((err) => closeAndThrow(connection, err));
  return connection;
}

/** A worker connection to `target`, its namespace checked; throws TemporalConnectionError. */
export async function connectWorker(target: TemporalTarget): Promise<WorkerConnection> {
  const options = connectionOptionsOf(target);
  let timer: NodeJS.Timeout | undefined;
  const connecting = NativeConnection.connect(options);
  let connection: NativeConnection;
  try {
    connection = await Promise.race([
      connecting,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)), CONNECT_TIMEOUT_MS);
      }),
    ]);
  } catch (err) {
    // A connection that comes up after the deadline is closed, not leaked.
    void connecting.then((late) => late.close()).catch(() => undefined);
    throw unreachable(target, options, err);
  } finally {
    clearTimeout(timer);
  }
  await checkNamespace(
    (request) => connection.workflowService.describeNamespace(request),
    (deadline, fn) => connection.withDeadline(deadline, fn),
    target,
  ).catch((err) => closeAndThrow(connection, err));
  return { connection, namespace: target.namespace };
}
