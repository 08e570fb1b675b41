/**
 * Lint: the layers point down, workflows stay inside Temporal's deterministic sandbox, and no
 * promise is left floating. Layers, bottom to top:
 *
 *   config/schema  ->  src/ (domain; src/core is pure)  ->  activities/, workflows/  ->  workers/
 *     ->  client/  ->  cli/          bench/ and test/ sit on top and may use all but cli/.
 *
 * Formatting is prettier's (`npm run format`); eslint-config-prettier turns off rules it owns.
 */
const { builtinModules } = require('node:module');
const js = require('@eslint/js');
const tseslint = require('typescript-eslint');
const importX = require('eslint-plugin-import-x');
const prettier = require('eslint-config-prettier');

/** `no-restricted-imports` patterns forbidding relative imports of the given top-level folders. */
const above = (...folders) => [
  { regex: `^\\.{1,2}/(\\.\\./)*(${folders.join('|')})(/|$)`, message: `${folders.join('/, ')}/: a higher layer (see eslint.config.js for the layer order).` },
];

const restrict = (patterns, paths = []) => ['error', { patterns, paths }];

module.exports = tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      '.tools/**',
      '.trajflow/**',
      '.venv/**',
      '.venv-*/**',
      '.models/**',
      'python/**',
      'coverage/**',
      'scratch/**',
      'test/histories/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: __dirname } },
    plugins: { 'import-x': importX },
    settings: {
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [importX.createNodeResolver({ extensions: ['.ts', '.js', '.json'] })],
    },
    rules: {
      // Forgetting to await an activity, a signal or a timer silently changes what a workflow does.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'import-x/no-cycle': 'error',
      'object-shorthand': ['error', 'always'],
    },
  },
  {
    files: ['**/*.js'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', process: 'readonly', console: 'readonly' },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  { files: ['config/**/*.ts'], rules: { 'no-restricted-imports': restrict([{ regex: '^\\.', message: 'config/ is the bottom layer: zod only.' }]) } },
  { files: ['src/**/*.ts'], rules: { 'no-restricted-imports': restrict(above('activities', 'workflows', 'workers', 'client', 'cli', 'bench', 'test')) } },
  {
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': restrict([
        ...above('activities', 'workflows', 'workers', 'client', 'cli'),
        { regex: '^\\.\\./(?!\\.\\./config/schema$)', message: 'src/core is pure: it imports only src/core and the config schema (workflows use it).' },
      ]),
    },
  },
  { files: ['activities/**/*.ts'], rules: { 'no-restricted-imports': restrict(above('workers', 'client', 'cli', 'bench', 'test')) } },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no I/O modules, and
    // activity code only as types (the proxies call it by name).
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': 'off',
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            ...builtinModules
              .filter((m) => m !== 'assert')
              .flatMap((name) => [name, `node:${name}`])
              .map((name) => ({ name, message: 'workflows run in a deterministic sandbox without Node built-ins.' })),
            ...['@temporalio/activity', '@temporalio/client', '@temporalio/worker', 'pino'].map((name) => ({
              name,
              message: 'not available inside the workflow sandbox.',
            })),
          ],
          patterns: [
            ...above('workers', 'client', 'cli', 'bench', 'test'),
            { regex: '^\\.\\./activities/', allowTypeImports: true, message: 'workflows import activities as types only.' },
            {
              regex: '^\\.\\./src/(?!core/|temporal/searchAttributes$|trace/workflowSinks$)',
              allowTypeImports: true,
              message: 'workflows import only src/core, search attributes and workflow trace sinks as values.',
            },
          ],
        },
      ],
    },
  },
  { files: ['workers/**/*.ts'], rules: { 'no-restricted-imports': restrict(above('client', 'cli', 'bench', 'test')) } },
  { files: ['client/**/*.ts'], rules: { 'no-restricted-imports': restrict(above('cli', 'bench', 'test')) } },
  { files: ['bench/**/*.ts', 'test/**/*.ts'], rules: { 'no-restricted-imports': restrict(above('cli')) } },
  prettier,
);
