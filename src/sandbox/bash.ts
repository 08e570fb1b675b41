/**
 * A per-episode bash sandbox: a fresh scratch directory, commands run in it one `bash -c` each,
 * with a clean environment, a timeout that kills the command's whole process tree, and capped
 * output. Linux only.
 *
 * Confinement is the strongest this machine allows without privileges, found once per process by
 * trying it (`probeConfinement`). What was found on the development machine (Firecracker VM,
 * kernel 6.18, util-linux 2.38, running as root, no bubblewrap installed):
 * - `unshare --user --map-root-user` works (user.max_user_namespaces > 0), also from uid 65534,
 *   and with it `--net` (only a downed loopback: connect() fails "Network is unreachable"),
 *   `--mount` (bind mounts, tmpfs, remounting read-only) and `--pid --mount-proc`.
 * - `setpriv` (util-linux) can switch to uid 65534 before unsharing, drop the capability bounding
 *   set inside the namespace, set no_new_privs and a parent-death signal.
 * - `bwrap` is not installed; it would give nothing the above does not, so it is not used (no new
 *   system dependency).
 * - `ulimit -f/-t/-u` work; `-u` (processes) is only enforced for a uid other than root, and counts
 *   every process of that uid, so it is applied only when the sandbox runs as its own uid.
 *
 * With namespaces (the normal case): the command sees the whole filesystem read-only except the
 * scratch directory (bound writable), has no network and no capabilities, and runs in its own pid
 * namespace, so killing it (timeout, close, or the worker dying) takes every descendant with it,
 * even daemonized ones. When the worker runs as root, the namespace's root is uid 65534 outside,
 * so even a mount the setup missed would not give it root's file access.
 *
 * Without user namespaces (the fallback): cwd, HOME and TMPDIR are the scratch directory, the
 * environment is clean, limits apply, and as root the command runs as uid 65534; but it can still
 * write anywhere that uid may (world-writable /tmp, /dev/shm), reach the network, and a process
 * that leaves the process group (setsid) survives the timeout. `isolation()` says which applies.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface BashSandboxOptions {
  /** Where scratch directories are made; default os.tmpdir(). */
  rootDir?: string;
  commandTimeoutMs: number;
  /** Per stream: stdout and stderr are each cut after this many bytes. */
  maxOutputBytes: number;
  /** Largest file a command may write (ulimit -f); default 256 MiB. */
  maxFileBytes?: number;
  /** Processes the sandbox uid may have (ulimit -u), only when it runs as its own uid; default 512. */
  maxProcesses?: number;
}

export interface BashResult {
  /** The shell's exit status; 128 + signal number when it was killed (a timeout reads 137). */
  exitCode: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** stdout or stderr went over maxOutputBytes and was cut. */
  truncated: boolean;
}

export interface Confinement {
  /** Namespaces in place: the filesystem is read-only outside the scratch dir, and so on. */
  namespaces: boolean;
  /** No network (network namespace). */
  noNetwork: boolean;
  /** Writes outside the scratch directory fail (checked by the probe, not assumed). */
  readOnlyOutside: boolean;
  /** One line per guarantee (or missing one), for logs and `BashSandbox.isolation()`. */
  description: string[];
}

const DIR_PREFIX = 'trajflow-sandbox-';
/** `trajflow-sandbox-<owner pid>-<mkdtemp suffix>`: the pid lets a sweep find dead owners' dirs. */
const DIR_PATTERN = /^trajflow-sandbox-(\d+)-[A-Za-z0-9]{6}$/;

/** What commands find on PATH; also where the wrapper's own tools are looked up. */
const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** nobody: the uid commands run as when the worker is root, so they never hold root's file access. */
const SANDBOX_UID = 65534;
/** After the shell exits, how long its leftover background jobs may hold the output pipes open. */
const PIPE_GRACE_MS = 200;

const DEFAULT_MAX_FILE_BYTES = 256 * 2 ** 20;
const DEFAULT_MAX_PROCESSES = 512;

/**
 * Inside the namespaces, as the namespace's root: keep the scratch dir writable by binding it onto
 * itself, then remount every other mount read-only. Locked flags (nosuid, nodev, noexec) are
 * repeated, since a remount in a user namespace may not clear them. Any failure aborts: a mount
 * left writable is a hole, and the probe then falls back to a weaker mode that says so.
 */
const READ_ONLY_SETUP = String.raw`
mount --bind "$1" "$1"
while read -r _ _ _ _ mp opts _; do
  case $mp in *\\*) mp=$(printf '%b' "$mp") ;; esac
  [ "$mp" = "$1" ] && continue
  extra=
  case ",$opts," in *,nosuid,*) extra=$extra,nosuid ;; esac
  case ",$opts," in *,nodev,*) extra=$extra,nodev ;; esac
  case ",$opts," in *,noexec,*) extra=$extra,noexec ;; esac
  mount -o "remount,bind,ro$extra" "$mp"
done < /proc/self/mountinfo
`;

interface Mode {
  confinement: Confinement;
  /** argv that runs `bash -c <script> sandbox SCRATCH COMMAND FSIZE_KB CPU_S NPROC`. */
  argv: string[];
  /** Owner to give the scratch directory (the uid the command runs as), when it differs from ours. */
  uid?: number;
}

const modes = new Map<string, Mode>();

/** The confinement sandboxes under rootDir get; probed on first use, then cached. */
export function probeConfinement(rootDir = os.tmpdir()): Confinement {
  return modeFor(fs.realpathSync(rootDir)).confinement;
}

/** root: a real path, since the read-only setup compares it with mount points. */
function modeFor(root: string): Mode {
  let mode = modes.get(root);
  if (!mode) {
    if (process.getuid?.() === 0 && (fs.statSync(root).mode & 0o001) === 0) {
      throw new Error(`sandbox root dir ${root} must be searchable by others (chmod o+x), or uid ${SANDBOX_UID} cannot reach its scratch dirs`);
    }
    mode = probe(root);
    modes.set(root, mode);
  }
  return mode;
}

function findTool(name: string): string | undefined {
  for (const dir of SANDBOX_PATH.split(':')) {
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/** Candidate modes, strongest first; the first whose probe passes is used. */
function candidates(): Mode[] {
  const bash = findTool('bash') ?? '/bin/bash';
  const unshare = findTool('unshare');
  const setpriv = findTool('setpriv');
  const asRoot = process.getuid?.() === 0;
  const dedicatedUid = asRoot && setpriv !== undefined;
  // Outside: switch to the sandbox uid, and die with the worker (the parent-death signal; the
  // "parent" is the spawning thread, so a sandbox driven from a worker_thread dies with that thread).
  const outer = setpriv
    ? [setpriv, ...(dedicatedUid ? [`--reuid=${SANDBOX_UID}`, `--regid=${SANDBOX_UID}`, '--clear-groups'] : []), '--pdeathsig=KILL', '--']
    : [];
  const env = `env -i HOME="$1" TMPDIR="$1" PATH=${SANDBOX_PATH} LANG=C.UTF-8 ${bash} -c "$2"`;
  const limits = `ulimit -f "$3"; ulimit -t "$4"; if [ -n "$5" ]; then ulimit -u "$5"; fi; cd "$1"`;
  const common = [
    'clean environment: HOME=TMPDIR=scratch dir, PATH=' + SANDBOX_PATH,
    'ulimit: file size, CPU time' + (dedicatedUid ? ', processes (per sandbox uid)' : ''),
    'timeout kills the process group',
  ];
  const uidLine = dedicatedUid ? [`runs as uid ${SANDBOX_UID} outside (the worker is root)`] : [];
  const modes: Mode[] = [];

  if (unshare && setpriv) {
    const dropCaps = `${setpriv} --no-new-privs --bounding-set=-all --inh-caps=-all --`;
    const script = `set -eu\n${READ_ONLY_SETUP}\n${limits}\nexec ${dropCaps} ${env}`;
    const ns = ['--user', '--map-root-user', '--net', '--mount'];
    const nsLines = [
      'user namespace, no capabilities, no_new_privs',
      'network namespace: no network',
      'mount namespace: filesystem read-only except the scratch dir',
    ];
    modes.push({
      argv: [...outer, unshare, ...ns, '--pid', '--fork', '--kill-child', '--mount-proc', '--', bash, '-c', script],
      uid: dedicatedUid ? SANDBOX_UID : undefined,
      confinement: {
        namespaces: true,
        noNetwork: true,
        readOnlyOutside: true,
        description: [...nsLines, 'pid namespace: timeout, close or worker death kills every descendant', ...uidLine, ...common],
      },
    });
    // Without the pid namespace: mounting a fresh /proc is refused where /proc has masked paths.
    modes.push({
      argv: [...outer, unshare, ...ns, '--', bash, '-c', script],
      uid: dedicatedUid ? SANDBOX_UID : undefined,
      confinement: {
        namespaces: true,
        noNetwork: true,
        readOnlyOutside: true,
        description: [...nsLines, 'no pid namespace: a process that leaves the process group (setsid) survives a timeout', ...uidLine, ...common],
      },
    });
  }
  const nnp = setpriv ? `${setpriv} --no-new-privs --` : '';
  modes.push({
    argv: [...outer, bash, '-c', `${limits}\nexec ${nnp} ${env}`],
    uid: dedicatedUid ? SANDBOX_UID : undefined,
    confinement: {
      namespaces: false,
      noNetwork: false,
      readOnlyOutside: false,
      description: [
        'no namespaces: network reachable; writes outside the scratch dir fail only where file permissions forbid them',
        ...(unshare && setpriv ? [] : ['util-linux unshare or setpriv not found']),
        'a process that leaves the process group (setsid) survives a timeout',
        ...(dedicatedUid ? uidLine : [asRoot ? 'runs as root (setpriv missing): no file protection at all' : 'runs as the worker user']),
        ...common,
      ],
    },
  });
  return modes;
}

/**
 * Runs each candidate on a throwaway scratch dir: a command must write inside it, and, for modes
 * that promise it, must fail to write next to it. Synchronous (once per process and root dir,
 * a few tens of ms) so callers and tests can decide up front.
 */
function probe(root: string): Mode {
  const all = candidates();
  const failures: string[] = [];
  for (const mode of all) {
    const dir = makeScratchSync(root, mode.uid);
    const outside = `${dir}-probe-outside`;
    try {
      // The outside name is mkdtemp's, so it needs no shell quoting.
      const probeCommand = `echo ok > inside && cat inside && { (echo x > ../${path.basename(outside)}) 2>/dev/null && echo wrote-outside || true; }`;
      const result = spawnSync(mode.argv[0], [...mode.argv.slice(1), 'sandbox', dir, probeCommand, '1024', '10', ''], {
        env: { PATH: SANDBOX_PATH },
        encoding: 'utf8',
        timeout: 10_000,
      });
      const worked = result.status === 0 && result.stdout.startsWith('ok\n');
      const escaped = fs.existsSync(outside) || result.stdout.includes('wrote-outside');
      if (worked && !(escaped && mode.confinement.readOnlyOutside)) {
        const skipped = failures.length ? [`stronger modes unavailable: ${failures.join('; ')}`] : [];
        return { ...mode, confinement: { ...mode.confinement, description: [...mode.confinement.description, ...skipped] } };
      }
      failures.push(
        escaped ? 'a probe write outside the scratch dir succeeded' : (result.stderr || String(result.error ?? `exit ${result.status}`)).trim().split('\n')[0],
      );
    } finally {
      fs.rmSync(outside, { force: true });
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  // Unreachable in practice (plain bash always works); kept so a broken machine reports why.
  throw new Error(`no way to run bash here: ${failures.join('; ')}`);
}

function makeScratchSync(root: string, uid: number | undefined): string {
  const dir = fs.mkdtempSync(path.join(root, `${DIR_PREFIX}${process.pid}-`));
  if (uid !== undefined) fs.chownSync(dir, uid, uid);
  return dir;
}

export class BashSandbox {
  private closed = false;
  /** Process groups of commands still running (killed by close()), with their run's completion. */
  private readonly running = new Map<number, Promise<void>>();

  private constructor(
    readonly dir: string,
    private readonly mode: Mode,
    private readonly options: Required<Omit<BashSandboxOptions, 'rootDir'>>,
  ) {}

  static async create(options: BashSandboxOptions): Promise<BashSandbox> {
    const root = await fs.promises.realpath(options.rootDir ?? os.tmpdir());
    const mode = modeFor(root);
    const dir = await fs.promises.mkdtemp(path.join(root, `${DIR_PREFIX}${process.pid}-`));
    if (mode.uid !== undefined) await fs.promises.chown(dir, mode.uid, mode.uid);
    return new BashSandbox(dir, mode, {
      commandTimeoutMs: options.commandTimeoutMs,
      maxOutputBytes: options.maxOutputBytes,
      maxFileBytes: options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES,
      maxProcesses: options.maxProcesses ?? DEFAULT_MAX_PROCESSES,
    });
  }

  isolation(): string[] {
    return [...this.mode.confinement.description];
  }

  async run(command: string): Promise<BashResult> {
    if (this.closed) throw new Error('bash sandbox is closed');
    const { commandTimeoutMs, maxOutputBytes, maxFileBytes, maxProcesses } = this.options;
    // The directory's mtime is the sandbox's heartbeat for sweepStaleSandboxes.
    const now = new Date();
    await fs.promises.utimes(this.dir, now, now).catch(() => undefined);
    if (this.closed) throw new Error('bash sandbox is closed');

    const fileKb = String(Math.max(1, Math.ceil(maxFileBytes / 1024)));
    // A backstop only: the timeout kills first; this bounds a process that somehow outlives it.
    const cpuSeconds = String(Math.ceil(commandTimeoutMs / 1000) + 1);
    const nproc = this.mode.uid !== undefined ? String(maxProcesses) : '';
    const [file, ...args] = this.mode.argv;
    const child = spawn(file, [...args, 'sandbox', this.dir, command, fileKb, cpuSeconds, nproc], {
      cwd: this.dir,
      env: { PATH: SANDBOX_PATH },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so a timeout can kill the shell and everything it started.
      detached: true,
    });

    let truncated = false;
    const capture = (stream: NodeJS.ReadableStream) => {
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (chunk: Buffer) => {
        const room = maxOutputBytes - size;
        if (chunk.length > room) truncated = true;
        if (room <= 0) return; // keep draining so the command is not blocked on a full pipe
        const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
        chunks.push(kept);
        size += kept.length;
      });
      return () => Buffer.concat(chunks).toString('utf8');
    };
    const stdout = capture(child.stdout);
    const stderr = capture(child.stderr);

    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // ESRCH: the group is already gone
      }
    };
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, commandTimeoutMs);

    const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
    const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; spawnError?: Error }>((resolve) => {
      child.on('exit', (code, signal) => resolve({ code, signal }));
      child.on('error', (spawnError) => resolve({ code: null, signal: null, spawnError }));
    });
    let finished!: () => void;
    if (child.pid !== undefined) this.running.set(child.pid, new Promise<void>((resolve) => (finished = resolve)));
    try {
      const { code, signal, spawnError } = await done;
      clearTimeout(timer);
      // Background jobs the command left behind die with it.
      killGroup();
      await Promise.race([closed, new Promise((r) => setTimeout(r, PIPE_GRACE_MS))]);
      child.stdout.destroy();
      child.stderr.destroy();
      if (spawnError) return { exitCode: 127, stdout: '', stderr: `cannot start the sandbox: ${spawnError.message}`, timedOut, truncated };
      const exitCode = code ?? 128 + (signal ? os.constants.signals[signal] : 0);
      return { exitCode, stdout: stdout(), stderr: stderr(), timedOut, truncated };
    } finally {
      if (child.pid !== undefined) {
        this.running.delete(child.pid);
        finished();
      }
    }
  }

  /** Kills running commands and removes the directory; safe to call more than once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const [pgid, finished] of this.running) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
      await finished;
    }
    await removeTree(this.dir);
  }
}

/**
 * Removes scratch directories under rootDir whose owning process is gone and which have been idle
 * for maxAgeMs (a crashed worker's leftovers). The age guard spares sandboxes of workers in other
 * pid namespaces sharing the directory, whose pids look dead from here. Returns what it removed.
 */
export async function sweepStaleSandboxes(maxAgeMs: number, rootDir = os.tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await fs.promises.readdir(rootDir)) {
    const owner = DIR_PATTERN.exec(name)?.[1];
    if (owner === undefined || isAlive(Number(owner))) continue;
    const dir = path.join(rootDir, name);
    const stat = await fs.promises.lstat(dir).catch(() => undefined);
    if (!stat?.isDirectory() || Date.now() - stat.mtimeMs < maxAgeMs) continue;
    await removeTree(dir);
    removed.push(dir);
  }
  return removed;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * rm -rf, also when a command left read-only directories (as `go mod download` does): a worker
 * that is not root cannot delete their entries until it makes them writable again.
 */
async function removeTree(dir: string): Promise<void> {
  try {
    await fs.promises.rm(dir, { recursive: true, force: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EPERM') throw err;
    await makeWritable(dir);
    await fs.promises.rm(dir, { recursive: true, force: true });
  }
}

async function makeWritable(dir: string): Promise<void> {
  await fs.promises.chmod(dir, 0o700).catch(() => undefined);
  const entries = await fs.promises.readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) if (entry.isDirectory()) await makeWritable(path.join(dir, entry.name));
}
