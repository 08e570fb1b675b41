/**
 * An inference provider holds one training run's weights at a time. Two runs whose trajectories
 * reach the same inference worker (shared task queues, or a run left over on the server) must not
 * sample with each other's weights: a request holds a lease on its run's weights from loading them
 * until its tokens are sampled. Requests of the run being served share the lease; a request of
 * another run waits until they are done, and requests that arrive while one waits queue behind it,
 * so neither run starves. Requests that need no run's weights take no lease.
 */
export class RunWeightsLease {
  /** The run whose requests hold the lease, while any do. */
  private holder: string | undefined;
  private holders = 0;
  private readonly waiting: { runId: string; admit: () => void }[] = [];

  /** Resolves once requests of `runId` may load and sample with its weights; call `release` after. */
  async acquire(runId: string): Promise<void> {
    if (this.waiting.length === 0 && (this.holders === 0 || this.holder === runId)) {
      this.holder = runId;
      this.holders++;
      return;
    }
    await new Promise<void>((admit) => this.waiting.push({ runId, admit }));
  }

  release(): void {
    if (this.holders === 0) throw new Error('RunWeightsLease.release without a matching acquire');
    if (--this.holders > 0 || this.waiting.length === 0) return;
    // The run waiting longest goes next, with every request of it that is waiting.
    const next = this.waiting[0].runId;
    this.holder = next;
    for (let i = 0; i < this.waiting.length;) {
      if (this.waiting[i].runId !== next) {
        i++;
        continue;
      }
      const [admitted] = this.waiting.splice(i, 1);
      this.holders++;
      admitted.admit();
    }
  }

  /** Runs `fn` holding the lease for `runId`. */
  async with<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    await this.acquire(runId);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }
}
