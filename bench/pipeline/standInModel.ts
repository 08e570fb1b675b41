/** What the bench reads from its model stand-ins beyond the InferenceProvider interface. */
import type { InferenceProvider } from '../../src/inference/provider';

export interface StandInModel extends InferenceProvider {
  /** Milliseconds the model has been busy since it was created, up to now. */
  busyMsNow(): number;
}
