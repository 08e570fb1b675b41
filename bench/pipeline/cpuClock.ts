/**
 * CPU time spent by this process (workers, engine stand-in, in-process runs) and, when the bench
 * started it, by the Temporal dev server: what tells an orchestration-bound run (the CPUs full of
 * bookkeeping) from a latency-bound one on a small machine.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface CpuReading {
  processMs: number;
  /** The dev server's user + system CPU time; undefined when unknown (a server the bench did not start, or no /proc). */
  serverMs?: number;
}

/** user + system time of a process from /proc/<pid>/stat (fields 14 and 15, in clock ticks). */
function procCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? (ticks * 1000) / CLOCK_TICKS_PER_SECOND : undefined;
  } catch {
    return undefined;
  }
}

/** Linux's USER_HZ, 100 on every common build. */
const CLOCK_TICKS_PER_SECOND = 100;

export function readCpu(serverPid: number | undefined): CpuReading {
  const usage = process.cpuUsage();
  return { processMs: (usage.user + usage.system) / 1000, serverMs: serverPid === undefined ? undefined : procCpuMs(serverPid) };
}

/** CPU used between two readings, in ms. */
export function cpuSince(before: CpuReading, after: CpuReading): CpuReading {
  return {
    processMs: after.processMs - before.processMs,
    serverMs: before.serverMs === undefined || after.serverMs === undefined ? undefined : after.serverMs - before.serverMs,
  };
}

export function loadAverage(): number {
  return os.loadavg()[0];
}
