import { RunWeightsLease } from '../src/inference/runWeightsLease';

/** Acquires for `runId` and records the order in which requests were let in. */
function request(lease: RunWeightsLease, runId: string, name: string, admitted: string[]): Promise<void> {
  return lease.acquire(runId).then(() => {
    admitted.push(name);
  });
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("the lease on one run's weights", () => {
  it("lets a run's requests share it, and another run in only once they are done", async () => {
    const lease = new RunWeightsLease();
    const admitted: string[] = [];
    void request(lease, 'A', 'a1', admitted);
    void request(lease, 'A', 'a2', admitted);
    void request(lease, 'B', 'b1', admitted);
    // A request of the run being served queues behind the waiting run, so B is not starved.
    void request(lease, 'A', 'a3', admitted);
    void request(lease, 'B', 'b2', admitted);
    await settle();
    expect(admitted).toEqual(['a1', 'a2']);

    lease.release();
    await settle();
    expect(admitted).toEqual(['a1', 'a2']);
    lease.release();
    await settle();
    expect(admitted).toEqual(['a1', 'a2', 'b1', 'b2']);

    lease.release();
    lease.release();
    await settle();
    expect(admitted).toEqual(['a1', 'a2', 'b1', 'b2', 'a3']);
    lease.release();
  });

  it('releases when the work fails, and refuses a release without an acquire', async () => {
    const lease = new RunWeightsLease();
    await expect(
      lease.with('A', async () => {
        throw new Error('sampling failed');
      }),
    ).rejects.toThrow('sampling failed');
    // Free again: another run gets it at once.
    await expect(lease.with('B', async () => 'sampled')).resolves.toBe('sampled');
    expect(() => lease.release()).toThrow(/without a matching acquire/);
  });
});
