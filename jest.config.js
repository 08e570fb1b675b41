/**
 * Tests run TypeScript through swc (no type check here; `npm run typecheck` does that). The AI SDK
 * and its parts ship ES modules only, which Node 20 loads from CommonJS but jest does not: swc
 * turns them into CommonJS too.
 */
const ES_MODULE_PACKAGES = ['ai', '@ai-sdk', 'eventsource-parser', '@standard-schema', '@workflow', 'pkce-challenge', 'zod'];
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest'], '^.+\\.js$': ['@swc/jest', { module: { type: 'commonjs' } }] },
  transformIgnorePatterns: [`/node_modules/(?!(${ES_MODULE_PACKAGES.join('|')})/)`],
  globalSetup: '<rootDir>/test/support/globalSetup.ts',
  globalTeardown: '<rootDir>/test/support/globalTeardown.ts',
  testTimeout: 120000,
  maxWorkers: 1,
};
