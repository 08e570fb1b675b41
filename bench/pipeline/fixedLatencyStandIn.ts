/**
 * BENCH-ONLY STAND-IN for the model (never used by rollouts or tests other than the bench's own
 * smoke test): every generate takes the same fixed time, however many run at once. It isolates
 * what orchestration adds around a model call (Temporal vs in-process), with no batching effects.
 *
 * Tokens are spread evenly over the call, so a weights load during a call gives its later tokens
 * the new version, reported per token as the real engine does. Busy time is the time at least one
 * request is in flight.
 */
import type { EngineStats, GenerateRequest, GenerateResult } from '../../src/inference/provider';
import { BusyTracker } from '../../src/metrics/busy';
import { standInCompletion } from './completion';
import type { StandInModel } from './standInModel';

export class FixedLatencyStandIn implements StandInModel {
  /** Every version loaded and when (performance.now() ms), oldest first. */
  private readonly loads: { at: number; version: number }[] = [{ at: -Infinity, version: 0 }];
  /** Requests in flight: busy while at least one is. */
  private readonly calls = new BusyTracker();
  private requests = 0;
  private generatedTokens = 0;

  constructor(readonly latencyMs: number) {}

  async generate(request: GenerateRequest): Promise<GenerateResult> {
    const startedAt = performance.now();
    const callDone = this.calls.begin();
    this.requests++;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, this.latencyMs);
        request.signal?.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            reject(new Error('generate request aborted'));
          },
          { once: true },
        );
      });
    } finally {
      callDone();
    }
    const completion = standInCompletion(request.sampling);
    const count = completion.completionIds.length;
    const versions = completion.completionIds.map((_, i) => this.versionAt(startedAt + (this.latencyMs * (i + 1)) / count));
    this.generatedTokens += count;
    return {
      ...completion,
      policyVersion: versions[0],
      ...(versions.some((v) => v !== versions[0]) ? { tokenPolicyVersions: versions } : {}),
      queueMs: 0,
      decodeMs: performance.now() - startedAt,
    };
  }

  async loadWeights(_checkpoint: string, version: number): Promise<number> {
    this.loads.push({ at: performance.now(), version });
    return version;
  }

  busyMsNow(): number {
    return this.calls.stats().busyMs;
  }

  async stats(): Promise<EngineStats> {
    const { uptimeMs, busyMs, inFlight } = this.calls.stats();
    return {
      policyVersion: this.loads[this.loads.length - 1].version,
      uptimeMs,
      busyMs,
      decodeSteps: this.requests,
      generatedTokens: this.generatedTokens,
      batchSizeSum: this.requests,
      maxBatchSize: this.calls.mostInFlight,
      running: inFlight,
      waiting: 0,
    };
  }

  async close(): Promise<void> {}

  private versionAt(at: number): number {
    let version = 0;
    for (const load of this.loads) if (load.at <= at) version = load.version;
    return version;
  }
}
