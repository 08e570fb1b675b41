import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  BashSandbox,
  isolationLevel,
  probeConfinement,
  refuseWeakIsolation,
  sweepStaleSandboxes,
  WeakIsolationError,
  type Confinement,
} from '../src/sandbox/bash';

const confinement = probeConfinement();
const options = { commandTimeoutMs: 10_000, maxOutputBytes: 64 * 1024 };
const repoRoot = path.resolve(__dirname, '..');

/** Processes, from this machine's view, whose command line contains marker. */
function processesWith(marker: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmdline.includes(marker)) found.push(`${pid}: ${cmdline}`);
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

let sandbox: BashSandbox;
beforeEach(async () => {
  sandbox = await BashSandbox.create(options);
});
afterEach(() => sandbox.close());

test('reports its isolation', () => {
  console.log(`bash sandbox isolation on this machine:\n  ${sandbox.isolation().join('\n  ')}`);
  expect(sandbox.isolation()).toEqual(confinement.description);
  expect(path.basename(sandbox.dir)).toMatch(new RegExp(`^trajflow-sandbox-${process.pid}-`));
  expect(path.dirname(sandbox.dir)).toBe(fs.realpathSync(os.tmpdir()));
});

test('runs in the scratch dir with a clean environment; files persist between commands', async () => {
  process.env.TRAJFLOW_TEST_SECRET = 'do-not-leak';
  try {
    const r = await sandbox.run('pwd; echo "$HOME"; env; echo data > kept.txt');
    expect(r).toMatchObject({ exitCode: 0, stderr: '', timedOut: false, truncated: false });
    const [pwd, home] = r.stdout.split('\n');
    expect(pwd).toBe(sandbox.dir);
    expect(home).toBe(sandbox.dir);
    expect(r.stdout).not.toContain('do-not-leak');
  } finally {
    delete process.env.TRAJFLOW_TEST_SECRET;
  }
  await expect(sandbox.run('cat kept.txt; exit 3')).resolves.toMatchObject({ exitCode: 3, stdout: 'data\n', limitsReached: [] });
  expect(fs.readFileSync(path.join(sandbox.hostDir, 'kept.txt'), 'utf8')).toBe('data\n');
});

const confinedTest = confinement.readOnlyOutside ? test : test.skip;
if (!confinement.readOnlyOutside) {
  console.warn(`SKIPPED write-confinement test: this machine allows no mount namespace (${confinement.description.join('; ')})`);
}
confinedTest('cannot create files outside the scratch dir', async () => {
  const marker = `trajflow-escape-${process.pid}-${Date.now()}`;
  const targets = [path.join(os.tmpdir(), marker), path.join(repoRoot, marker), path.join(path.dirname(sandbox.dir), marker)];
  try {
    for (const target of targets) {
      const r = await sandbox.run(`echo x > '${target}'`);
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toMatch(/Read-only file system|Permission denied/);
      expect(fs.existsSync(target)).toBe(false);
    }
    // Nor can it undo the read-only mounts.
    const remount = await sandbox.run(`mount -o remount,rw / || mount -o remount,rw '${os.tmpdir()}'`);
    expect(remount.exitCode).not.toBe(0);
  } finally {
    for (const target of targets) fs.rmSync(target, { force: true });
  }
});

const noNetworkTest = confinement.noNetwork ? test : test.skip;
if (!confinement.noNetwork) console.warn('SKIPPED no-network test: this machine allows no network namespace');
noNetworkTest('has no network', async () => {
  const tcp = await sandbox.run('echo > /dev/tcp/1.1.1.1/80');
  expect(tcp.exitCode).not.toBe(0);
  expect(tcp.stderr).toMatch(/Network is unreachable/);
  const curl = await sandbox.run('command -v curl >/dev/null || exit 99; curl -sS -m 3 http://1.1.1.1/');
  expect(curl.exitCode).not.toBe(0);
});

test('a command over its timeout is killed, with its children', async () => {
  await sandbox.close();
  sandbox = await BashSandbox.create({ ...options, commandTimeoutMs: 500 });
  const marker = `7.${process.pid}`;
  const started = Date.now();
  const r = await sandbox.run(`sleep ${marker} & bash -c 'sleep ${marker}'; sleep 10`);
  expect(r.timedOut).toBe(true);
  expect(r.exitCode).toBe(137);
  expect(Date.now() - started).toBeLessThan(3000);
  expect(processesWith(`sleep ${marker}`)).toEqual([]);
  // The sandbox stays usable.
  await expect(sandbox.run('echo still here')).resolves.toMatchObject({ exitCode: 0, stdout: 'still here\n', timedOut: false });
});

test('background jobs do not outlive their command', async () => {
  const marker = `8.${process.pid}`;
  const started = Date.now();
  const r = await sandbox.run(`sleep ${marker} & echo started`);
  expect(r).toMatchObject({ exitCode: 0, stdout: 'started\n', timedOut: false });
  expect(Date.now() - started).toBeLessThan(3000);
  expect(processesWith(`sleep ${marker}`)).toEqual([]);
});

test('output over the cap is truncated, per stream', async () => {
  await sandbox.close();
  sandbox = await BashSandbox.create({ ...options, maxOutputBytes: 1000 });
  const r = await sandbox.run("head -c 100000 /dev/zero | tr '\\0' a; head -c 5000 /dev/zero | tr '\\0' b >&2; echo done >&2");
  expect(r.exitCode).toBe(0);
  expect(r.truncated).toBe(true);
  expect(r.stdout).toBe('a'.repeat(1000));
  expect(r.stderr).toBe('b'.repeat(1000));
  await expect(sandbox.run('echo short')).resolves.toMatchObject({ stdout: 'short\n', truncated: false });
});

test('file size limit', async () => {
  await sandbox.close();
  sandbox = await BashSandbox.create({ ...options, maxFileBytes: 64 * 1024 });
  const r = await sandbox.run('head -c 1000000 /dev/zero > big; echo "status $?"');
  expect(r.stdout).toMatch(/status [1-9]/);
  expect(fs.statSync(path.join(sandbox.hostDir, 'big')).size).toBeLessThanOrEqual(64 * 1024);
});

describe('memory limit', () => {
  const MIB = 2 ** 20;
  const limit = 128 * MIB;
  /** Allocates (and touches) `mib` MiB in one python3 process, then says so. */
  const allocate = (mib: number) => `python3 -c 'b = bytearray(${mib} * 2**20); print("allocated", len(b) >> 20)'`;

  test(`a command allocating twice its limit is stopped and says so (${confinement.memoryLimit === 'sandbox' ? 'cgroup per command and sandbox' : 'ulimit -v per process'}); the sandbox and another one go on`, async () => {
    await sandbox.close();
    sandbox = await BashSandbox.create({ ...options, maxMemoryBytes: limit });
    const other = await BashSandbox.create(options);
    try {
      const [bomb, neighbour] = await Promise.all([sandbox.run(allocate(256)), other.run(allocate(200))]);
      expect(bomb.exitCode).not.toBe(0);
      expect(bomb.stdout).toBe('');
      expect(bomb).toMatchObject({ timedOut: false, limitsReached: ['memory'] });
      // The other sandbox has the default 512 MiB.
      expect(neighbour).toMatchObject({ exitCode: 0, stdout: 'allocated 200\n', limitsReached: [] });

      // bash's own memory: a string doubling until the shell cannot grow it.
      const shellBomb = await sandbox.run('s=x; while :; do s=$s$s; done');
      expect(shellBomb.exitCode).not.toBe(0);
      expect(shellBomb).toMatchObject({ timedOut: false, limitsReached: ['memory'] });

      await expect(sandbox.run(allocate(32))).resolves.toMatchObject({ exitCode: 0, stdout: 'allocated 32\n', limitsReached: [] });
    } finally {
      await other.close();
    }
  });

  const perCommandTest = confinement.memoryLimit === 'sandbox' ? test : test.skip;
  if (confinement.memoryLimit !== 'sandbox') {
    console.warn(
      "SKIPPED memory-per-command test: this machine gives no memory cgroup, so memory is capped per process (ulimit -v) and a command's processes together may use more",
    );
  }
  perCommandTest("a command's processes together are held to its limit", async () => {
    await sandbox.close();
    sandbox = await BashSandbox.create({ ...options, maxMemoryBytes: limit });
    // Three processes of 60% each: each fits, together they do not.
    const hold = `python3 -c 'import time; b = bytearray(77 * 2**20); time.sleep(3)'`;
    const r = await sandbox.run(`${hold} & ${hold} & ${hold} & wait; echo survived`);
    expect(r.stdout).not.toContain('survived');
    expect(r.limitsReached).toEqual(['memory']);
  });
});

describe('weak isolation', () => {
  const weak: Confinement = {
    namespaces: false,
    noNetwork: false,
    readOnlyOutside: false,
    scratchQuota: false,
    memoryLimit: 'process',
    processLimit: 'sharedUid',
    description: ['no namespaces: network reachable', 'util-linux unshare or setpriv not found'],
  };

  test('is refused with what is missing and the config key that accepts it', () => {
    expect(() => refuseWeakIsolation(weak, false)).toThrow(WeakIsolationError);
    expect(() => refuseWeakIsolation(weak, false)).toThrow(
      /bash sandbox refused: this machine allows no user, network and mount namespaces.*util-linux unshare or setpriv not found.*`allowWeakIsolation: true`.*env\.allowWeakIsolation/,
    );
    expect(() => refuseWeakIsolation(weak, true)).not.toThrow();
    expect(isolationLevel(weak)).toMatch(/^WEAK: no namespaces/);
  });

  test("this machine's sandboxes are refused exactly when it gives no namespaces", async () => {
    console.log(`bash sandbox isolation level on this machine: ${isolationLevel(confinement)}`);
    if (confinement.namespaces) {
      expect(() => refuseWeakIsolation(confinement, false)).not.toThrow();
      expect(isolationLevel(confinement)).toMatch(/^namespaces \(no network, read-only outside the scratch dir\)/);
    } else {
      await expect(BashSandbox.create(options)).rejects.toThrow(/allowWeakIsolation/);
      const accepted = await BashSandbox.create({ ...options, allowWeakIsolation: true });
      await accepted.close();
    }
  });
});

describe('process limit', () => {
  const perSandbox = confinement.processLimit === 'cgroup' || confinement.processLimit === 'userNamespace';
  if (!perSandbox) {
    console.warn(
      `SKIPPED fork bomb test: this machine gives no per-sandbox process limit (processLimit ${confinement.processLimit}: ${confinement.description.join('; ')})`,
    );
  }
  (perSandbox ? test : test.skip)(
    `a fork bomb is held to its sandbox's cap (${confinement.processLimit}); a sandbox beside it runs its command`,
    async () => {
      await sandbox.close();
      sandbox = await BashSandbox.create({ ...options, commandTimeoutMs: 4000, maxProcesses: 64 });
      const other = await BashSandbox.create({ ...options, maxProcesses: 64 });
      try {
        // Every process keeps forking and stays alive, so the bomb holds its cap until the timeout.
        const bomb = sandbox.run('bomb() { bomb | bomb & sleep 30; }; bomb');
        // Give the bomb time to reach its cap before the neighbour starts.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const neighbour = await other.run('for i in $(seq 30); do sleep 0.2 & done; wait; echo all 30 ran');
        expect(neighbour).toMatchObject({ exitCode: 0, stdout: 'all 30 ran\n', stderr: '', timedOut: false });
        const bombed = await bomb;
        // It hit the cap (fork failed), and the timeout ended it.
        expect(bombed.timedOut).toBe(true);
        expect(bombed.stderr).toMatch(/fork: (retry: )?Resource temporarily unavailable|fork: Interrupted system call/);
        // The bomb's sandbox works again once its command is gone.
        await expect(sandbox.run('echo again')).resolves.toMatchObject({ exitCode: 0, stdout: 'again\n' });
      } finally {
        await other.close();
      }
    },
    30_000,
  );
});

const tmpfsMemoryTest = confinement.memoryLimit === 'sandbox' && confinement.scratchQuota ? test : test.skip;
if (!(confinement.memoryLimit === 'sandbox' && confinement.scratchQuota)) {
  console.warn('SKIPPED scratch-files-count-as-memory test: this machine gives no memory cgroup or no scratch tmpfs');
}
tmpfsMemoryTest('the scratch files a command writes count against its memory limit', async () => {
  const MIB = 2 ** 20;
  await sandbox.close();
  sandbox = await BashSandbox.create({ ...options, maxMemoryBytes: 64 * MIB, maxScratchBytes: 128 * MIB });
  // Either fits the limit alone: 40 MiB of files, or a process holding 40 MiB.
  const hold = `python3 -c 'import time; b = bytearray(40 * 2**20); time.sleep(0.5); print("held")'`;
  await expect(sandbox.run(hold)).resolves.toMatchObject({ exitCode: 0, stdout: 'held\n', limitsReached: [] });
  await expect(sandbox.run('head -c 40M /dev/zero > files && echo written')).resolves.toMatchObject({ exitCode: 0, stdout: 'written\n' });
  await expect(sandbox.run('rm files')).resolves.toMatchObject({ exitCode: 0 });
  // Together, in one command, they do not.
  const both = await sandbox.run(`head -c 40M /dev/zero > files && ${hold}`);
  expect(both.stdout).not.toContain('held');
  expect(both.limitsReached).toContain('memory');
  // The files stay (the scratch quota, not the command's limit, bounds them) and the sandbox goes on.
  await expect(sandbox.run('rm files && echo ok')).resolves.toMatchObject({ exitCode: 0, stdout: 'ok\n' });
});

const quotaTest = confinement.scratchQuota ? test : test.skip;
if (!confinement.scratchQuota) {
  console.warn(`SKIPPED scratch quota tests: this machine gives the scratch dir no quota (${confinement.description.join('; ')})`);
}
describe('scratch directory quota', () => {
  quotaTest('writing past the size limit fails and says so, on the tmpfs only; deleting frees it; another sandbox goes on', async () => {
    await sandbox.close();
    sandbox = await BashSandbox.create({ ...options, maxScratchBytes: 2 ** 20 });
    const other = await BashSandbox.create(options);
    try {
      const [filler, neighbour] = await Promise.all([
        sandbox.run('head -c 2000000 /dev/zero > big; echo "status $?"'),
        other.run('head -c 2000000 /dev/zero > big && wc -c < big'),
      ]);
      expect(filler.stdout).toMatch(/status [1-9]/);
      expect(filler.stderr).toMatch(/No space left on device/);
      expect(filler.limitsReached).toEqual(['disk']);
      expect(fs.statSync(path.join(sandbox.hostDir, 'big')).size).toBeLessThanOrEqual(2 ** 20);
      // Nothing reached the host's disk: the directory under the tmpfs is empty.
      expect(fs.readdirSync(sandbox.dir)).toEqual([]);
      expect(neighbour).toMatchObject({ exitCode: 0, stdout: '2000000\n', limitsReached: [] });

      // Still full: said again, until the files go.
      await expect(sandbox.run('echo more >> big')).resolves.toMatchObject({ limitsReached: ['disk'] });
      await expect(sandbox.run('rm big && echo small > small && cat small')).resolves.toMatchObject({ exitCode: 0, stdout: 'small\n', limitsReached: [] });
    } finally {
      await other.close();
    }
  });

  quotaTest('creating more files than allowed fails and says so', async () => {
    await sandbox.close();
    sandbox = await BashSandbox.create({ ...options, maxScratchFiles: 20 });
    const r = await sandbox.run('mkdir d && for i in $(seq 40); do : > d/f$i || break; done; ls d | wc -l');
    expect(r.stderr).toMatch(/No space left on device/);
    // The directory counts as one of the 20.
    expect(r.stdout).toBe('19\n');
    expect(r.limitsReached).toEqual(['files']);
    await expect(sandbox.run('rm -r d && touch a b c && ls | wc -l')).resolves.toMatchObject({ exitCode: 0, stdout: '3\n', limitsReached: [] });
  });

  quotaTest('close unmounts the tmpfs: the holder is gone', async () => {
    await sandbox.run('echo x > kept');
    expect(fs.existsSync(path.join(sandbox.hostDir, 'kept'))).toBe(true);
    await sandbox.close();
    expect(fs.existsSync(sandbox.hostDir)).toBe(false);
  });
});

test('close removes the directory, kills running commands, and is idempotent', async () => {
  const marker = `9.${process.pid}`;
  await sandbox.run('mkdir -p a/b && echo x > a/b/c && chmod 500 a/b');
  const pending = sandbox.run(`sleep ${marker}`);
  await new Promise((r) => setTimeout(r, 300));
  await sandbox.close();
  await expect(pending).resolves.toMatchObject({ exitCode: 137 });
  expect(processesWith(`sleep ${marker}`)).toEqual([]);
  expect(fs.existsSync(sandbox.dir)).toBe(false);
  await sandbox.close();
  await expect(sandbox.run('true')).rejects.toThrow(/closed/);
});

test('sweepStaleSandboxes removes idle dirs of dead owners only', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'trajflow-sweep-test-'));
  try {
    const deadPid = spawnSync('true').pid;
    const make = (name: string, ageMs: number) => {
      const dir = path.join(root, name);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'f'), '');
      const t = new Date(Date.now() - ageMs);
      fs.utimesSync(dir, t, t);
      return dir;
    };
    const stale = make(`trajflow-sandbox-${deadPid}-abc123`, 60_000);
    const recent = make(`trajflow-sandbox-${deadPid}-def456`, 0);
    const alive = make(`trajflow-sandbox-${process.pid}-ghi789`, 60_000);
    const unrelated = make(`other-${deadPid}-abc123`, 60_000);
    await expect(sweepStaleSandboxes(10_000, root)).resolves.toEqual([stale]);
    expect([recent, alive, unrelated].every((d) => fs.existsSync(d))).toBe(true);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
