/** The lock that makes inference processes take turns syncing one model server's weights. */
import { mkdtempSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ServerSyncLock } from '../src/inference/http/serverSyncLock';

const SERVER = 'http://127.0.0.1:8000';

describe('ServerSyncLock', () => {
  const dir = () => mkdtempSync(path.join(os.tmpdir(), 'trajflow-lock-'));

  it('runs one holder at a time per server, and none waits for another server', async () => {
    const lock = new ServerSyncLock(dir(), { pollMs: 5 });
    const events: string[] = [];
    const hold = (name: string, server: string, ms: number) =>
      lock.hold(server, async () => {
        events.push(`${name} in`);
        await new Promise((resolve) => setTimeout(resolve, ms));
        events.push(`${name} out`);
      });
    await Promise.all([hold('a', SERVER, 300), hold('b', SERVER, 300), hold('c', 'http://127.0.0.1:8001', 10)]);
    // Either of a and b may win the race for the lock; the other enters once the first is out.
    const sameServer = events.filter((e) => !e.startsWith('c'));
    const first = sameServer[0][0];
    const second = first === 'a' ? 'b' : 'a';
    expect(sameServer).toEqual([`${first} in`, `${first} out`, `${second} in`, `${second} out`]);
    // c, on another server, did not wait for the first holder.
    expect(events.indexOf('c out')).toBeLessThan(events.indexOf(`${first} out`));
    await expect(fs.readdir(lock.dir)).resolves.toEqual([]);
  });

  it('takes over a lock its holder stopped touching (a process that died holding it), and only such a one', async () => {
    const lock = new ServerSyncLock(dir(), { staleMs: 1_000, pollMs: 5 });
    const folder = lock.lockPath(SERVER);
    await fs.mkdir(folder, { recursive: true });
    // Fresh: a waiter waits.
    let entered = false;
    const waiting = lock.hold(SERVER, async () => {
      entered = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(entered).toBe(false);
    // Untouched for longer than staleMs: taken over.
    const old = new Date(Date.now() - 5_000);
    await fs.utimes(folder, old, old);
    await waiting;
    expect(entered).toBe(true);
  });

  it('keeps a long sync held by touching its folder', async () => {
    const lock = new ServerSyncLock(dir(), { staleMs: 200, pollMs: 5 });
    const order: string[] = [];
    await Promise.all([
      lock.hold(SERVER, async () => {
        await new Promise((resolve) => setTimeout(resolve, 700));
        order.push('long');
      }),
      new Promise((resolve) => setTimeout(resolve, 20)).then(() => lock.hold(SERVER, async () => void order.push('next'))),
    ]);
    expect(order).toEqual(['long', 'next']);
  });
});
