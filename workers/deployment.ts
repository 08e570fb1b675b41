/**
 * Versioned rollouts of worker code (Temporal Worker Deployments). A deployment that sets
 * `TRAJFLOW_BUILD_ID` runs each worker it starts as version `<build id>` of the Worker Deployment
 * named after its task queue prefix (the config's, scoped: workers/taskQueues.ts). Temporal then starts new runs on the deployment's current
 * version (`trajflow deployment set-current`, client/deployment.ts) and keeps every task of a run,
 * its activities' included, on workers of the version it started on. Without `TRAJFLOW_BUILD_ID`
 * workers are unversioned: no deployment, no routing, everything as before.
 *
 * Every trajflow workflow is PINNED, none AUTO_UPGRADE:
 * - trajectories and groups last seconds to minutes: finishing on the build that started them is
 *   free, and no code change ever has to replay their half-written histories;
 * - the training workflow and the rollout controller last as long as the run, but a run is one
 *   experiment: it records its build in its fingerprint (src/core/compatibility.ts) and workers of
 *   another build refuse its activities, so upgrading it mid-run would mix trainer, sampling and
 *   orchestration code in one learning curve, and every workflow change would have to be made
 *   replay-safe (patched). Their continue-as-new stays on the pinned version (Temporal's default),
 *   and runs end (`trainer.steps`, `rollout.groups`), so an old build drains on its own.
 * Children started on the workflows queue inherit their parent's version, so a whole run (training
 * workflow, controller, groups, trajectories) completes on one build while new runs take the new one.
 */
import type { WorkerDeploymentVersion } from '@temporalio/common';
import type { WorkerOptions } from '@temporalio/worker';
import { deployedBuildId } from '../src/paths';
import { deploymentNameFor, taskQueuePrefixOf, type QueueScopedConfig } from './taskQueues';

/** This process's version of the deployment, or undefined when no build is deployed (versioning off). */
export function deploymentVersionOf(config: QueueScopedConfig): WorkerDeploymentVersion | undefined {
  const buildId = deployedBuildId();
  return buildId ? { deploymentName: deploymentNameFor(taskQueuePrefixOf(config)), buildId } : undefined;
}

/** Worker options of a role queue's worker: versioned when a build is deployed, else nothing. */
export function versioningOptions(config: QueueScopedConfig): Pick<WorkerOptions, 'workerDeploymentOptions'> {
  const version = deploymentVersionOf(config);
  return version ? { workerDeploymentOptions: { version, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' } } : {};
}
