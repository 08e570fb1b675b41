/** The workflows a trajflow workflow worker runs (this file is the sandbox bundle's entry). */
export { trajectoryWorkflow } from './trajectory';
export { groupWorkflow } from './group';
export { rolloutWorkflow } from './rollout';
export { trainingWorkflow } from './training';
