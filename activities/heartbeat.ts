/** Heartbeats while long activity work runs, so Temporal tells a dead worker from a busy one. */
import { Context } from '@temporalio/activity';

/** Heartbeats every 5 s while `work` runs (a warm-up or an evaluation holds the event loop in bursts). */
export async function withHeartbeat<T>(work: () => Promise<T>): Promise<T> {
  const heartbeat = setInterval(() => Context.current().heartbeat(), 5_000);
  try {
    return await work();
  } finally {
    clearInterval(heartbeat);
  }
}
