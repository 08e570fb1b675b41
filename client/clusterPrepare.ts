/**
 * `trajflow cluster prepare`: what a deployment does once before its workers start. It makes the
 * namespace ready (src/temporal/cluster.ts: the namespace checked, trajflow's search attributes
 * registered) and marks the shared data directory (src/store/dataMarker.ts), when one is given.
 * Both are idempotent: run it again after an upgrade, or to check.
 */
import path from 'node:path';
import type { TemporalConfig } from '../config/schema';
import { markDataDir } from '../src/store/dataMarker';
import { prepareNamespace } from '../src/temporal/cluster';
import { connectClient, resolveTemporal } from '../src/temporal/connection';

export interface ClusterPrepareOptions {
  /** A run config's `temporal:` section (over the environment, as everywhere). */
  temporal?: Partial<TemporalConfig>;
  /** The shared data directory to mark. */
  dataDir?: string;
  /** Create the namespace if it is missing (a dev server's). */
  createNamespace?: boolean;
}

/** Prepares the cluster and the data directory; returns what was done, as lines to print. */
export async function prepareCluster(options: ClusterPrepareOptions): Promise<string[]> {
  const target = resolveTemporal(options.temporal);
  const connection = await connectClient(target, { checkNamespace: false });
  let report: Awaited<ReturnType<typeof prepareNamespace>>;
  try {
    report = await prepareNamespace(connection, target, { createNamespace: options.createNamespace });
  } finally {
    await connection.close();
  }
  const lines = [
    `Temporal at ${target.address} (${target.origin.address}), namespace ${target.namespace} (${target.origin.namespace})${report.namespaceCreated ? ', created now' : ''}`,
    `  search attributes added: ${report.added.join(', ') || 'none'}; already there: ${report.present.join(', ') || 'none'}`,
  ];
  if (options.dataDir === undefined) {
    lines.push('  data directory: none given (-c or --data-dir), so none marked');
  } else {
    const { marker, created } = await markDataDir(options.dataDir);
    lines.push(`  data directory ${path.resolve(options.dataDir)}: ${created ? 'marked now' : 'already marked'} (id ${marker.id})`);
  }
  return lines;
}
