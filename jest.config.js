/**
 * Tests run TypeScript through swc (no type check here; `npm run typecheck` does that). The AI SDK
 * and its parts ship ES modules only, which Node 20 loads from CommonJS but jest does not: swc
 * turns them into CommonJS too.
 */
const ES_MODULE_PACKAGES = ['ai', '@ai-sdk', 'eventsource-parser', '@standard-schema', '@workflow', 'pkce-challenge', 'zod'];

/**
 * `npm test` runs the suite in two parts on its two cores. Most test files wait on Temporal, on
 * timeouts and on worker processes more than they compute, so two run at once. These need the
 * machine to themselves, and run first, one at a time: a real model's Python trainer and model
 * servers keep both cores busy, and the worker-deployment test waits on the dev server's routing
 * propagation, which a second test's load delays past its limit. Unset (`npx jest FILE`): every
 * file, one at a time.
 */
const ALONE = ['realModel.*.test.ts', 'cli.realModelResume.test.ts', 'workerDeployment.test.ts'];
const PART = process.env.TRAJFLOW_TEST_PART;
if (PART !== undefined && PART !== 'alone' && PART !== 'shared') throw new Error(`TRAJFLOW_TEST_PART: "${PART}" is neither alone nor shared`);

module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: PART === 'alone' ? ALONE.map((file) => `**/test/${file}`) : ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest'], '^.+\\.js$': ['@swc/jest', { module: { type: 'commonjs' } }] },
  transformIgnorePatterns: [`/node_modules/(?!(${ES_MODULE_PACKAGES.join('|')})/)`],
  globalSetup: '<rootDir>/test/support/globalSetup.ts',
  globalTeardown: '<rootDir>/test/support/globalTeardown.ts',
  testTimeout: 120000,
  ...(PART === 'shared' && {
    testPathIgnorePatterns: ['/node_modules/', ...ALONE.map((file) => `/test/${file.replaceAll('.', '\\.').replace('*', '[^/]*')}$`)],
  }),
  maxWorkers: PART === 'shared' ? 2 : 1,
};
