/**
 * BENCH-ONLY STAND-IN for the model (never used by rollouts or tests other than the bench's own
 * smoke test): a continuous-batching engine whose decode steps cost what the embedded
 * BatchingEngine's measured ones do (./engineCost), without using the CPU for them.
 *
 * Requests join the running batch at decode step boundaries, up to maxBatch; each step lasts
 * cost(batch) = fixedMs + perSequenceMs x batch and emits one token per running request; a request
 * leaves once it has the number of tokens its sampling seed draws (./completion). A weights load
 * lands between two steps, and a request that spans it reports the version of every token, as the
 * real engine does.
 *
 * The engine runs on its own clock: steps follow each other back to back from the moment the
 * engine had work, and the event loop is woken only when a request can join or finish. A late
 * timer (a busy machine) therefore never stretches or skips a step: the steps that should have
 * ended meanwhile are run in order when it fires. Busy time is the sum of the steps' costs.
 */
import type { EngineStats, GenerateRequest, GenerateResult } from '../../src/inference/provider';
import { standInCompletion, type StandInCompletion } from './completion';
import type { StandInModel } from './standInModel';

/** The cost of one decode step as a function of the batch size: fixedMs + perSequenceMs x batch. */
export interface DecodeCost {
  fixedMs: number;
  perSequenceMs: number;
}

export function decodeStepMs(cost: DecodeCost, batch: number): number {
  return cost.fixedMs + cost.perSequenceMs * batch;
}

interface Request {
  completion: StandInCompletion;
  /** Policy version of each token emitted so far. */
  versions: number[];
  submittedAt: number;
  joinedAt: number;
  resolve: (result: GenerateResult) => void;
  reject: (error: Error) => void;
}

export class ContinuousBatchingStandIn implements StandInModel {
  private readonly waiting: Request[] = [];
  private running: Request[] = [];
  private version = 0;
  /** When the decode step in progress started, on the engine's clock (performance.now() ms); undefined while idle. */
  private stepStartedAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private startScheduled = false;
  private closed = false;
  private readonly startedAt = performance.now();
  private readonly counters = { busyMs: 0, decodeSteps: 0, batchSizeSum: 0, generatedTokens: 0 };

  constructor(
    readonly cost: DecodeCost,
    readonly maxBatch: number,
  ) {
    if (!(maxBatch >= 1)) throw new Error(`maxBatch must be >= 1, got ${maxBatch}`);
  }

  generate(request: GenerateRequest): Promise<GenerateResult> {
    if (this.closed) return Promise.reject(new Error('the model stand-in is closed'));
    // Steps due before this request arrived run first: it joins at the next step boundary.
    this.advance();
    return new Promise((resolve, reject) => {
      const now = performance.now();
      const entry: Request = { completion: standInCompletion(request.sampling), versions: [], submittedAt: now, joinedAt: now, resolve, reject };
      this.waiting.push(entry);
      request.signal?.addEventListener('abort', () => this.drop(entry, new Error('generate request aborted')), { once: true });
      if (this.stepStartedAt === undefined) this.startSoon();
      else this.advance();
    });
  }

  /**
   * An idle engine starts its first step once the current event-loop turn is over, as the real
   * one does (setImmediate): requests sent together join that step together.
   */
  private startSoon(): void {
    if (this.startScheduled) return;
    this.startScheduled = true;
    setImmediate(() => {
      this.startScheduled = false;
      if (this.closed || this.stepStartedAt !== undefined || this.waiting.length === 0) return;
      this.stepStartedAt = performance.now();
      this.advance();
    });
  }

  async loadWeights(_checkpoint: string, version: number): Promise<number> {
    // Between two steps: every step that ended before now still samples with the old version.
    this.advance();
    this.version = version;
    return version;
  }

  busyMsNow(): number {
    this.advance();
    const inProgress = this.stepStartedAt === undefined ? 0 : Math.min(performance.now() - this.stepStartedAt, decodeStepMs(this.cost, this.running.length));
    return this.counters.busyMs + Math.max(0, inProgress);
  }

  async stats(): Promise<EngineStats> {
    return {
      policyVersion: this.version,
      uptimeMs: performance.now() - this.startedAt,
      busyMs: this.busyMsNow(),
      decodeSteps: this.counters.decodeSteps,
      generatedTokens: this.counters.generatedTokens,
      batchSizeSum: this.counters.batchSizeSum,
      maxBatchSize: this.maxBatch,
      running: this.running.length,
      waiting: this.waiting.length,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const error = new Error('the model stand-in is closed');
    for (const request of [...this.waiting.splice(0), ...this.running.splice(0)]) request.reject(error);
  }

  /** Runs every decode step that has ended by now, then sleeps until the next join or finish. */
  private advance(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = performance.now();
    for (;;) {
      // Idle: the next request's arrival starts the engine (startSoon).
      if (this.stepStartedAt === undefined) return;
      this.join(this.stepStartedAt);
      if (this.running.length === 0) {
        if (this.waiting.length === 0) {
          this.stepStartedAt = undefined;
          return;
        }
        // Nobody joined: the engine idled until the next request arrived (always by now).
        this.stepStartedAt = this.waiting[0].submittedAt;
        continue;
      }
      const stepMs = decodeStepMs(this.cost, this.running.length);
      const endsAt = this.stepStartedAt + stepMs;
      if (endsAt > now) return this.sleepUntilNextEvent(now, stepMs);
      this.decodeStep(endsAt, stepMs);
      this.stepStartedAt = endsAt;
    }
  }

  /** Waiting requests that had arrived by `at` join the batch, oldest first, up to maxBatch. */
  private join(at: number): void {
    while (this.running.length < this.maxBatch && this.waiting.length > 0 && this.waiting[0].submittedAt <= at) {
      const request = this.waiting.shift()!;
      request.joinedAt = at;
      this.running.push(request);
    }
  }

  /** One decode step, ended at `endedAt`: one token for every running request. */
  private decodeStep(endedAt: number, stepMs: number): void {
    this.counters.busyMs += stepMs;
    this.counters.decodeSteps++;
    this.counters.batchSizeSum += this.running.length;
    this.counters.generatedTokens += this.running.length;
    this.running = this.running.filter((request) => {
      request.versions.push(this.version);
      if (request.versions.length < request.completion.completionIds.length) return true;
      request.resolve(this.result(request, endedAt));
      return false;
    });
  }

  /** The batch only changes at a step boundary where someone joins or leaves: wake up then. */
  private sleepUntilNextEvent(now: number, stepMs: number): void {
    const stepStartedAt = this.stepStartedAt!;
    const canJoin = this.waiting.length > 0 && this.running.length < this.maxBatch;
    const stepsToFirstFinish = Math.min(...this.running.map((r) => r.completion.completionIds.length - r.versions.length));
    const wakeAt = stepStartedAt + stepMs * (canJoin ? 1 : stepsToFirstFinish);
    this.timer = setTimeout(() => this.advance(), Math.max(0, wakeAt - now));
  }

  private result(request: Request, endedAt: number): GenerateResult {
    const { versions } = request;
    return {
      ...request.completion,
      policyVersion: versions[0],
      ...(versions.some((v) => v !== versions[0]) ? { tokenPolicyVersions: versions } : {}),
      queueMs: request.joinedAt - request.submittedAt,
      decodeMs: endedAt - request.joinedAt,
    };
  }

  private drop(request: Request, error: Error): void {
    const before = this.waiting.length + this.running.length;
    this.running = this.running.filter((r) => r !== request);
    const index = this.waiting.indexOf(request);
    if (index >= 0) this.waiting.splice(index, 1);
    if (this.waiting.length + this.running.length < before) request.reject(error);
  }
}
