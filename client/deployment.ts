/**
 * Which build of a versioned deployment (workers/deployment.ts) takes new runs: the current
 * version of the Worker Deployment, set through the gRPC API that `temporal worker deployment
 * set-current-version` uses too, and each version's state (current, draining while runs pinned to
 * it are open, drained once none is).
 */
import type { Client } from '@temporalio/client';
import { deploymentVersionOf } from '../workers/deployment';
import type { Role } from '../workers/start';
import { deploymentNameFor, taskQueuePrefixOf, taskQueuesFor, type QueueScopedConfig } from '../workers/taskQueues';

/** How long a build's workers may take to be registered with the deployment after they first poll. */
const REGISTRATION_TIMEOUT_MS = 30_000;
/** How long a new current build may take to reach every task queue partition. */
const ROUTING_TIMEOUT_MS = 30_000;
const RETRY_MS = 250;

const GRPC_NOT_FOUND = 5;
const GRPC_FAILED_PRECONDITION = 9;

/** `temporal.api.enums.v1.RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS` */
const ROUTING_IN_PROGRESS = 1;

/** `temporal.api.enums.v1.WorkerDeploymentVersionStatus`, by number. */
const VERSION_STATUS = ['unspecified', 'inactive', 'current', 'ramping', 'draining', 'drained', 'created'] as const;

/** A build that cannot be made current, said in one line (the CLI prints it without a stack). */
export class DeploymentError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'DeploymentError';
  }
}

export interface BuildSwitch {
  deploymentName: string;
  buildId: string;
  /** The build that was current before, if any. */
  previousBuildId?: string;
}

export interface SetCurrentOptions {
  /** Switch even if the build does not poll every task queue the current one did (its role is gone). */
  ignoreMissingTaskQueues?: boolean;
  timeoutMs?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function grpcCode(err: unknown): number | undefined {
  return (err as { code?: number }).code;
}

/**
 * Makes `buildId` the current version of the deployment of `taskQueuePrefix` (a config's scoped one,
 * `taskQueuePrefixOf`): runs started from
 * now on run on it, runs already started stay on theirs. A build whose workers were just started
 * is waited for until it is registered and polls every task queue the current build polls; the
 * switch is waited for until every task queue routes by it.
 */
export async function setCurrentBuild(client: Client, taskQueuePrefix: string, buildId: string, options: SetCurrentOptions = {}): Promise<BuildSwitch> {
  const deploymentName = deploymentNameFor(taskQueuePrefix);
  const deadline = Date.now() + (options.timeoutMs ?? REGISTRATION_TIMEOUT_MS);
  for (;;) {
    try {
      const response = await client.connection.workflowService.setWorkerDeploymentCurrentVersion({
        namespace: client.options.namespace,
        deploymentName,
        buildId,
        identity: client.options.identity,
        ignoreMissingTaskQueues: options.ignoreMissingTaskQueues ?? false,
      });
      await waitForRouting(client, taskQueuePrefix, buildId);
      return { deploymentName, buildId, previousBuildId: response.previousDeploymentVersion?.buildId || undefined };
    } catch (err) {
      if (err instanceof DeploymentError) throw err;
      const code = grpcCode(err);
      if ((code !== GRPC_NOT_FOUND && code !== GRPC_FAILED_PRECONDITION) || Date.now() > deadline) {
        const hint =
          code === GRPC_NOT_FOUND || code === GRPC_FAILED_PRECONDITION
            ? `; start workers of every role with TRAJFLOW_BUILD_ID=${buildId} and the same config first`
            : '';
        throw new DeploymentError(`cannot make build ${buildId} current in worker deployment ${deploymentName}: ${(err as Error).message}${hint}`, {
          cause: err,
        });
      }
      await sleep(RETRY_MS);
    }
  }
}

/**
 * Resolves once every task queue (and each partition) of the deployment routes by the new current
 * build: until then a run started now may still be dispatched to, and pinned on, the build that
 * was current before.
 */
async function waitForRouting(client: Client, taskQueuePrefix: string, buildId: string): Promise<void> {
  const deadline = Date.now() + ROUTING_TIMEOUT_MS;
  for (;;) {
    const status = await deploymentStatus(client, taskQueuePrefix);
    if (status.currentBuildId !== buildId)
      throw new DeploymentError(
        `build ${status.currentBuildId ?? '(none)'} was made current in worker deployment ${status.deploymentName} while build ${buildId} was being made current`,
      );
    if (!status.routingInProgress) return;
    if (Date.now() > deadline)
      throw new DeploymentError(
        `build ${buildId} is current in worker deployment ${status.deploymentName}, but not every task queue routes by it after ${ROUTING_TIMEOUT_MS / 1000} s`,
      );
    await sleep(RETRY_MS);
  }
}

export interface DeploymentStatus {
  deploymentName: string;
  currentBuildId?: string;
  /** The current build is not yet what every task queue routes by (servers older than the field never say so). */
  routingInProgress: boolean;
  versions: { buildId: string; status: (typeof VERSION_STATUS)[number] }[];
}

/** The deployment's builds and their state; none if no versioned worker has polled it yet. */
export async function deploymentStatus(client: Client, taskQueuePrefix: string): Promise<DeploymentStatus> {
  const deploymentName = deploymentNameFor(taskQueuePrefix);
  let info;
  try {
    ({ workerDeploymentInfo: info } = await client.connection.workflowService.describeWorkerDeployment({
      namespace: client.options.namespace,
      deploymentName,
    }));
  } catch (err) {
    if (grpcCode(err) === GRPC_NOT_FOUND) return { deploymentName, routingInProgress: false, versions: [] };
    throw err;
  }
  return {
    deploymentName,
    currentBuildId: info?.routingConfig?.currentDeploymentVersion?.buildId || undefined,
    routingInProgress: info?.routingConfigUpdateState === ROUTING_IN_PROGRESS,
    versions: (info?.versionSummaries ?? []).map((v) => ({
      buildId: v.deploymentVersion?.buildId ?? '?',
      status: VERSION_STATUS[v.status ?? 0] ?? 'unspecified',
    })),
  };
}

/** Resolves once the build's workers are registered on each of `queues`. */
async function waitForRegistration(client: Client, version: { deploymentName: string; buildId: string }, queues: readonly string[]): Promise<void> {
  const deadline = Date.now() + REGISTRATION_TIMEOUT_MS;
  for (;;) {
    let registered = new Set<string>();
    try {
      const response = await client.connection.workflowService.describeWorkerDeploymentVersion({
        namespace: client.options.namespace,
        deploymentVersion: version,
      });
      registered = new Set((response.workerDeploymentVersionInfo?.taskQueueInfos ?? []).map((q) => q.name ?? ''));
    } catch (err) {
      if (grpcCode(err) !== GRPC_NOT_FOUND) throw err;
    }
    const missing = queues.filter((q) => !registered.has(q));
    if (missing.length === 0) return;
    if (Date.now() > deadline)
      throw new DeploymentError(
        `build ${version.buildId} of worker deployment ${version.deploymentName} was not registered on ${missing.join(', ')} within ${REGISTRATION_TIMEOUT_MS / 1000} s`,
      );
    await sleep(RETRY_MS);
  }
}

/**
 * A `--local` run with `TRAJFLOW_BUILD_ID` set: this machine's build is the one to run, so it
 * becomes current once its workers of `roles` are registered. Queues only an earlier build polled
 * (a local rollout has no trainer) do not hold it back. Nothing to do without a deployed build.
 */
export async function useLocalBuild(client: Client, config: QueueScopedConfig, roles: readonly Role[]): Promise<void> {
  const version = deploymentVersionOf(config);
  if (!version) return;
  const prefix = taskQueuePrefixOf(config);
  const queues = taskQueuesFor(prefix);
  await waitForRegistration(
    client,
    version,
    roles.map((role) => queues[role]),
  );
  await setCurrentBuild(client, prefix, version.buildId, { ignoreMissingTaskQueues: true });
}
