import { admissionAllowance } from '../src/core/admission';

const training = (version: number, maxStaleness: number, syncPending = false) => ({ maxStaleness, version, batchTrajectories: 8, syncPending });

describe('admission within the staleness bound', () => {
  it('is plain concurrency without training', () => {
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 30, admitted: 1000 })).toBe(2);
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 32, admitted: 0 })).toBe(0);
  });

  it('admits one batch per version with eta = 0 (synchronous on-policy)', () => {
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 0, admitted: 0, training: training(0, 0) })).toBe(8);
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 0, admitted: 8, training: training(0, 0) })).toBe(0);
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 0, admitted: 8, training: training(1, 0) })).toBe(8);
  });

  it('lets eta more batches run ahead, capped by concurrency', () => {
    // (eta + v + 1) * B = (2 + 0 + 1) * 8 = 24 may be admitted under version 0.
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 0, admitted: 0, training: training(0, 2) })).toBe(24);
    expect(admissionAllowance({ maxConcurrency: 10, inFlight: 4, admitted: 0, training: training(0, 2) })).toBe(6);
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 3, admitted: 30, training: training(0, 2) })).toBe(0);
  });

  it('admits up to the fewest trajectories the next steps can take when steps replace filtered groups', () => {
    // L(3) = 56: steps 3 and 4 take at least up to trajectory 56, dropped groups included.
    const replacing = { ...training(3, 1), leastTakenTrajectories: 56 };
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 0, admitted: 40, training: replacing })).toBe(16);
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 5, admitted: 51, training: replacing })).toBe(5);
    // Counted as (eta + v + 1) x batch, version 3 would allow 40: a step waiting for a replacement would wait forever.
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 0, admitted: 40, training: training(3, 1) })).toBe(0);
  });

  it('admits nothing while an episode-level sync waits for in-flight episodes', () => {
    expect(admissionAllowance({ maxConcurrency: 32, inFlight: 1, admitted: 0, training: training(5, 1, true) })).toBe(0);
  });
});
