/** How the trainer worker starts the Python trainer: the module alone, or torchrun with a rank per process on each host. */
import { pythonTrainerArgs } from '../workers/pythonTrainer';

describe('the Python trainer command', () => {
  it('is the worker module alone for one process on one host', () => {
    expect(pythonTrainerArgs({ processes: 1, hosts: 1, maxRestarts: 3 }, '/tmp/s.json', 'q-trainer')).toEqual([
      '-m',
      'trajflow_py.trainer',
      '--settings',
      '/tmp/s.json',
    ]);
  });

  it('is torchrun for several processes, standalone on one host and meeting at the rendezvous across hosts', () => {
    expect(pythonTrainerArgs({ processes: 8, hosts: 1, maxRestarts: 2 }, '/tmp/s.json', 'q-trainer')).toEqual(
      ['-m', 'torch.distributed.run', '--nnodes=1', '--nproc-per-node=8', '--max-restarts=2', '--standalone'].concat([
        '-m',
        'trajflow_py.trainer',
        '--settings',
        '/tmp/s.json',
      ]),
    );
    const twoHosts = pythonTrainerArgs({ processes: 4, hosts: 2, rendezvous: 'trainer-0:29500', maxRestarts: 3 }, '/tmp/s.json', 'q-trainer');
    expect(twoHosts.slice(0, 8)).toEqual([
      '-m',
      'torch.distributed.run',
      '--nnodes=2',
      '--nproc-per-node=4',
      '--max-restarts=3',
      '--rdzv-backend=c10d',
      '--rdzv-endpoint=trainer-0:29500',
      '--rdzv-id=q-trainer',
    ]);
  });
});
