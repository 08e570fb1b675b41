/**
 * Which roles a worker process may run: `--role` names only known roles, and a config whose model
 * calls run in the workflow worker (`inference.calls: local`) needs the model in that process.
 * Both are refused before anything connects or loads.
 */
import { createLogger } from '../src/log';
import { parseRunConfig } from '../src/runConfig';
import { parseRoles, ROLES, startWorkers, WorkerRolesError } from '../workers/start';

const logger = createLogger('test');
logger.level = 'silent';

test('--role takes known roles, lists of them, or all', () => {
  expect(parseRoles('all')).toEqual([...ROLES]);
  expect(parseRoles('workflows, inference')).toEqual(['workflows', 'inference']);
  expect(() => parseRoles('workflows,gpu')).toThrow(WorkerRolesError);
  expect(() => parseRoles('workflows,gpu')).toThrow(/unknown worker role "gpu"; roles: workflows, inference, env, trainer, all/);
});

test('local model calls need the inference role beside the workflow worker', async () => {
  // Nothing listens here: the roles are refused before the worker connects.
  const config = parseRunConfig({ env: { name: 'frozenlake' }, inference: { calls: 'local' }, temporal: { address: '127.0.0.1:1' } });
  await expect(startWorkers(config, ['workflows', 'env'], logger)).rejects.toThrow(WorkerRolesError);
  await expect(startWorkers(config, ['workflows'], logger)).rejects.toThrow(
    /inference\.calls is local: the workflow worker runs generate over its own process's model, so it needs the inference role beside it \(--role workflows,inference\)/,
  );
});
