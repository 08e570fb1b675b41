/**
 * Lint: the layers point down, workflows stay inside Temporal's deterministic sandbox, and no
 * promise is left floating. Layers, bottom to top:
 *
 *   config/schema  ->  src/ (domain; src/core is pure)  ->  activities/, workflows/  ->  workers/
 *     ->  client/  ->  cli/          bench/ and test/ sit on top and may use all but cli/.
 *
 * Inside src/, the folders (and the files directly in src/) are layered too, bottom to top as
 * SRC_LAYERS lists them: each may import only those listed before it, so no two import each other
 * (test/layers.test.ts checks the import graph itself has no cycle).
 *
 * Formatting is prettier's (`npm run format`); eslint-config-prettier turns off rules it owns.
 */
const fs = require('node:fs');
const path = require('node:path');
const { builtinModules } = require('node:module');
const js = require('@eslint/js');
const tseslint = require('typescript-eslint');
const importX = require('eslint-plugin-import-x');
const prettier = require('eslint-config-prettier');

/** src/, bottom to top: a folder (or file) imports only the ones above it in this list. */
const SRC_LAYERS = [
  // Pure rules and small helpers with no trajflow state: core imports only itself and config/schema.
  'core',
  'log.ts',
  'paths.ts',
  'ports.ts',
  'sandbox',
  'terminal',
  'temporal',
  'chat',
  // What is written to disk and read back.
  'store',
  'trace',
  'metrics',
  // The parts of an episode, the registry that names them for configs, an episode played from a config.
  'tools',
  'rewards',
  'envs',
  'agents',
  // Model calls of agents written elsewhere (the AI SDK's), as trajflow turns.
  'agentCalls',
  'plugins',
  'episode',
  // Model serving: the provider interface and HTTP clients, then the embedded engine and the choice between them.
  'inference',
  'model',
  // Training, and the reports read from a run.
  'rl',
  'report',
  // Config loading, the config reference, and the public API.
  'runConfig.ts',
  'docs',
  'index.ts',
];

const unlayered = fs.readdirSync(path.join(__dirname, 'src')).filter((name) => !SRC_LAYERS.includes(name));
if (unlayered.length > 0) throw new Error(`eslint.config.js: src/${unlayered.join(', src/')} missing from SRC_LAYERS; add each at its layer.`);

/** One `import-x/no-restricted-paths` zone per src/ layer: it may not import any layer above it. */
const srcLayerZones = SRC_LAYERS.slice(0, -1).map((layer, i) => ({
  target: `./src/${layer}`,
  from: SRC_LAYERS.slice(i + 1).map((higher) => `./src/${higher}`),
  message: `src/${layer} is below them in SRC_LAYERS (eslint.config.js).`,
}));

/** `no-restricted-imports` patterns forbidding relative imports of the given top-level folders, from any depth. */
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
      globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', process: 'readonly', console: 'readonly', fetch: 'readonly' },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  { files: ['config/**/*.ts'], rules: { 'no-restricted-imports': restrict([{ regex: '^\\.', message: 'config/ is the bottom layer: zod only.' }]) } },
  {
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': restrict(above('activities', 'workflows', 'workers', 'client', 'cli', 'bench', 'test')),
      'import-x/no-restricted-paths': ['error', { basePath: __dirname, zones: srcLayerZones }],
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
            { regex: '^(\\.\\./)+activities/', allowTypeImports: true, message: 'workflows import activities as types only.' },
            {
              regex: '^(\\.\\./)+src/(?!core/|temporal/searchAttributes$|trace/workflowSinks$)',
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
