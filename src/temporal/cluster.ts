/**
 * Makes a namespace of any Temporal cluster ready for trajflow (`trajflow cluster prepare`): checks
 * that the namespace exists, then registers trajflow's search attributes through the operator
 * service, namespace-scoped. Idempotent: attributes already there with their type are left alone.
 * One there with another type is an error naming it and both types, and then nothing is added
 * (the server itself accepts a second add of a name with another type without a word, so the
 * types are compared here, from its list).
 *
 * A missing namespace is created only when asked (a dev server's): on a real cluster namespaces
 * are the operator's, with their own retention and replication.
 */
import type { Connection } from '@temporalio/client';
import { SearchAttributeType } from '@temporalio/common';
// Exported by the SDK for registering search attributes (the proto enum <-> the SDK's type names).
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { msToTs } from '@temporalio/common/lib/time';
import { CONNECT_TIMEOUT_MS, GRPC_NOT_FOUND, namespaceError, type TemporalTarget } from './connection';
import { SEARCH_ATTRIBUTES, searchAttributeTypeName } from './searchAttributes';

/** Retention of a namespace created here: the Temporal CLI's default for `operator namespace create`. */
const CREATED_NAMESPACE_RETENTION = '72h';

export class ClusterPrepareError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ClusterPrepareError';
  }
}

export interface PrepareOptions {
  /** Create the namespace if it does not exist (for a dev server). */
  createNamespace?: boolean;
}

export interface PrepareReport {
  namespaceCreated: boolean;
  /** Attributes this call registered, and those already there with the right type. */
  added: string[];
  present: string[];
}

/** The SDK's type name of a proto IndexedValueType, or its number if the SDK does not know it. */
function typeOf(indexed: number): string {
  const type = Object.values(SearchAttributeType).find((t) => encodeSearchAttributeIndexedValueType(t) === indexed);
  return type ? searchAttributeTypeName(type) : `type #${indexed}`;
}

/** The commands that register `names` by hand: the Temporal CLI, or tcld on Temporal Cloud. */
function byHand(namespace: string, names: string[]): string {
  const keys = Object.values(SEARCH_ATTRIBUTES).filter((key) => names.includes(key.name));
  // The Temporal CLI takes one type and many names per command.
  const types = [...new Set(keys.map((key) => key.type))];
  const cli = types.map(
    (type) =>
      `temporal operator search-attribute create --namespace ${namespace} --type ${searchAttributeTypeName(type)} ${keys
        .filter((key) => key.type === type)
        .map((key) => `--name ${key.name}`)
        .join(' ')}`,
  );
  const cloud = `tcld namespace search-attributes add --namespace ${namespace} ${keys.map((key) => `--sa ${key.name}=${searchAttributeTypeName(key.type)}`).join(' ')}`;
  return `register them by hand: ${cli.join('; ')} (on Temporal Cloud: ${cloud})`;
}

function reason(err: unknown): string {
  return String((err as Error)?.message ?? err).split('\n')[0];
}

async function ensureNamespace(connection: Connection, target: TemporalTarget, create: boolean): Promise<boolean> {
  try {
    await connection.withDeadline(Date.now() + CONNECT_TIMEOUT_MS, () => connection.workflowService.describeNamespace({ namespace: target.namespace }));
    return false;
  } catch (err) {
    if ((err as { code?: number }).code !== GRPC_NOT_FOUND) throw namespaceError(target, err);
    if (!create) {
      throw new ClusterPrepareError(
        `namespace "${target.namespace}" (${target.origin.namespace}) does not exist on Temporal at ${target.address}: create it first (temporal operator namespace create, or Temporal Cloud's UI), or pass --create-namespace on a dev server`,
      );
    }
  }
  await connection.workflowService.registerNamespace({ namespace: target.namespace, workflowExecutionRetentionPeriod: msToTs(CREATED_NAMESPACE_RETENTION) });
  return true;
}

/** How long a namespace created here may take to reach the server's namespace cache. */
const NEW_NAMESPACE_VISIBLE_MS = 20_000;

/** The namespace's search attributes and their types, waiting out a namespace that is still new. */
async function listSearchAttributes(connection: Connection, namespace: string, justCreated: boolean): Promise<Record<string, number>> {
  const deadline = Date.now() + (justCreated ? NEW_NAMESPACE_VISIBLE_MS : 0);
  for (;;) {
    try {
      const listed = await connection.operatorService.listSearchAttributes({ namespace });
      return { ...(listed.systemAttributes ?? {}), ...(listed.customAttributes ?? {}) } as Record<string, number>;
    } catch (err) {
      if ((err as { code?: number }).code !== GRPC_NOT_FOUND || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** Registers trajflow's search attributes in `target`'s namespace (see the top of this file). */
export async function prepareNamespace(connection: Connection, target: TemporalTarget, options: PrepareOptions = {}): Promise<PrepareReport> {
  const namespaceCreated = await ensureNamespace(connection, target, options.createNamespace ?? false);
  const wanted = Object.values(SEARCH_ATTRIBUTES);
  let existing: Record<string, number>;
  try {
    existing = await listSearchAttributes(connection, target.namespace, namespaceCreated);
  } catch (err) {
    throw new ClusterPrepareError(
      `cannot list the search attributes of namespace "${target.namespace}": ${reason(err)}; ${byHand(
        target.namespace,
        wanted.map((k) => k.name),
      )}`,
      { cause: err },
    );
  }
  const conflicts = wanted
    .filter((key) => key.name in existing && existing[key.name] !== encodeSearchAttributeIndexedValueType(key.type))
    .map((key) => `${key.name} is ${typeOf(existing[key.name])} there, trajflow needs ${searchAttributeTypeName(key.type)}`);
  if (conflicts.length > 0) {
    throw new ClusterPrepareError(
      `search attribute type conflict in namespace "${target.namespace}": ${conflicts.join('; ')} (remove or rename it; nothing was added)`,
    );
  }
  const missing = wanted.filter((key) => !(key.name in existing));
  const present = wanted.filter((key) => key.name in existing).map((key) => key.name);
  if (missing.length > 0) {
    try {
      await connection.operatorService.addSearchAttributes({
        namespace: target.namespace,
        searchAttributes: Object.fromEntries(missing.map((key) => [key.name, encodeSearchAttributeIndexedValueType(key.type)!])),
      });
    } catch (err) {
      throw new ClusterPrepareError(
        `cannot add search attributes to namespace "${target.namespace}": ${reason(err)}; ${byHand(
          target.namespace,
          missing.map((k) => k.name),
        )}`,
        {
          cause: err,
        },
      );
    }
  }
  return { namespaceCreated, added: missing.map((key) => key.name), present };
}
