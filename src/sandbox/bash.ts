/**
 * A per-episode bash sandbox: a fresh scratch directory, commands run in it one `bash -c` each,
 * with a clean environment, a timeout that kills the command's whole process tree, capped output,
 * and limits on memory and on the scratch directory's size and number of files. Linux only.
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
 * - `ulimit -f/-t/-u/-v` work. `-u` (processes) is enforced for a uid other than root and counted
 *   per user namespace (Linux 5.14 and later): set inside a sandbox's own user namespace it caps that
 *   sandbox alone, while without namespaces it counts every process of the uid, all sandboxes'.
 * - cgroups are hybrid: cgroup v2 (/sys/fs/cgroup/unified) offers only hugetlb, and the v1 memory
 *   and pids hierarchies are writable by root. Each sandbox gets a cgroup (sandboxCgroup.ts) whose
 *   memory limit covers its commands' processes together and its scratch tmpfs, and whose pids.max
 *   caps its processes. Where no memory cgroup can be made, memory is capped by `ulimit -v` per
 *   process: an allocation past it fails (Python raises MemoryError, bash and coreutils print
 *   "cannot allocate" or "memory exhausted"), so the command fails, not the worker; but several
 *   processes of one command may each use that much, and the scratch files come on top.
 * - Disk: the host's ext4 has no quotas, and a loop-mounted image needs root on the host and leaves
 *   a mount behind when the worker crashes. A tmpfs mounted inside the user namespace needs neither:
 *   `size=` and `nr_inodes=` cap bytes and files (ENOSPC past either). The files must last the
 *   episode while each command gets fresh namespaces, so a holder process per sandbox (`unshare
 *   --user --mount`, mount, then `sleep`) keeps a mount namespace with the tmpfs on the scratch dir,
 *   and each command enters it (`nsenter --preserve-credentials`: plain nsenter calls setgroups,
 *   which a --map-root-user namespace denies) before unsharing its own namespaces. The worker
 *   reaches the files through /proc/<holder>/root (`hostDir`). The holder dies with the worker
 *   (parent-death signal) and the tmpfs with it, so a crash leaves neither a mount nor used space.
 *   The scratch files are memory, charged to the sandbox's memory cgroup when it has one.
 *
 * With namespaces (the normal case): the command sees the whole filesystem read-only except the
 * scratch directory (a capped tmpfs, or the host directory bound writable where no holder can be
 * made), has no network and no capabilities, and runs in its own pid namespace, so killing it
 * (timeout, close, or the worker dying) takes every descendant with it, even daemonized ones. When
 * the worker runs as root, the namespace's root is uid 65534 outside, so even a mount the setup
 * missed would not give it root's file access.
 *
 * Without user namespaces (the fallback): cwd, HOME and TMPDIR are the scratch directory, the
 * environment is clean, limits apply, and as root the command runs as uid 65534; but it can still
 * write anywhere that uid may (world-writable /tmp, /dev/shm), reach the network, a process that
 * leaves the process group (setsid) survives the timeout, and the scratch directory is on the host's
 * disk with only one file's size capped. `isolation()` says which applies. Such a sandbox is refused
 * unless its creator accepts it (`allowWeakIsolation`): isolation never weakens silently.
 */
import { spawn, spawnSync, type ChildProcess, type ChildProcessByStdio } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { isAlive, probeSandboxCgroups, SandboxCgroup, type CgroupProbe } from './sandboxCgroup';

export interface BashSandboxOptions {
  /** Where scratch directories are made; default os.tmpdir(). */
  rootDir?: string;
  commandTimeoutMs: number;
  /** Per stream: stdout and stderr are each cut after this many bytes. */
  maxOutputBytes: number;
  /** Largest file a command may write (ulimit -f); default 256 MiB. */
  maxFileBytes?: number;
  /**
   * Processes (and threads) of the sandbox at once: its cgroup's pids.max and its user namespace's
   * ulimit -u, whichever the machine gives (`Confinement.processLimit`); default 512.
   */
  maxProcesses?: number;
  /**
   * Memory of one command: all its processes together and the scratch files it writes, in its
   * memory cgroup where the machine gives one (the sandbox's cgroup then holds at most this plus
   * maxScratchBytes in all), else the address space of each process (ulimit -v); default 512 MiB.
   */
  maxMemoryBytes?: number;
  /** Size of the scratch directory, where the machine allows a quota (`scratchQuota`); default 256 MiB. */
  maxScratchBytes?: number;
  /** Files, directories and links the scratch directory may hold, with the same quota; default 10000. */
  maxScratchFiles?: number;
  /**
   * Starting files (top-level name -> content), in place before the first command and owned by
   * the uid commands run as, so they are theirs to change as a user's own files would be.
   */
  files?: Record<string, string>;
  /**
   * Run commands even where the machine allows no namespaces (network reachable, files outside
   * the scratch directory writable where permissions allow); else creating a sandbox there throws.
   */
  allowWeakIsolation?: boolean;
}

/**
 * A limit a command ran into. `memory`: it was killed for going over, or an allocation failed.
 * `disk`, `files`: the scratch directory is full, so writes (or new files) fail until something is
 * deleted; reported after every command while it stays full.
 */
export type SandboxLimit = 'memory' | 'disk' | 'files';

export interface BashResult {
  /** The shell's exit status; 128 + signal number when it was killed (a timeout reads 137). */
  exitCode: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** stdout or stderr went over maxOutputBytes and was cut. */
  truncated: boolean;
  /** Limits reached, in this order: memory, disk, files. */
  limitsReached: SandboxLimit[];
}

export interface Confinement {
  /** Namespaces in place: the filesystem is read-only outside the scratch dir, and so on. */
  namespaces: boolean;
  /** No network (network namespace). */
  noNetwork: boolean;
  /** Writes outside the scratch directory fail (checked by the probe, not assumed). */
  readOnlyOutside: boolean;
  /** The scratch dir is a tmpfs capped in bytes and files (checked by the probe); else it is on the host's disk. */
  scratchQuota: boolean;
  /** `sandbox`: a cgroup caps its processes and scratch files together; `process`: ulimit -v caps each process. */
  memoryLimit: 'sandbox' | 'process';
  /**
   * `cgroup`: pids.max per sandbox; `userNamespace`: ulimit -u counted in the sandbox's own user
   * namespace; `sharedUid`: ulimit -u on a uid all sandboxes share (one can use up the others'
   * share); `none`.
   */
  processLimit: 'cgroup' | 'userNamespace' | 'sharedUid' | 'none';
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
/** How often a command whose OOM kill takes one process is checked for one (cgroup v1). */
const OOM_POLL_MS = 50;
/** How long the scratch holder may take to mount its tmpfs (it takes a few ms). */
const HOLDER_START_MS = 5000;

const MIB = 2 ** 20;
const DEFAULT_MAX_FILE_BYTES = 256 * MIB;
const DEFAULT_MAX_PROCESSES = 512;
const DEFAULT_MAX_MEMORY_BYTES = 512 * MIB;
const DEFAULT_MAX_SCRATCH_BYTES = 256 * MIB;
const DEFAULT_MAX_SCRATCH_FILES = 10_000;

/** The probe's quota: small, so filling it is quick. */
const PROBE_QUOTA: ScratchQuota = { bytes: 64 * 1024, files: 8 };

/**
 * What programs print when an allocation fails under ulimit -v (ENOMEM): bash ("xmalloc: cannot
 * allocate"), coreutils ("memory exhausted"), C ("Cannot allocate memory"), Python (MemoryError),
 * C++ (bad_alloc), Go and Node ("out of memory").
 */
const ALLOCATION_FAILED = /cannot allocate|memory exhausted|MemoryError|out of memory|bad_alloc/i;

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

/**
 * The scratch holder, as its user namespace's root: a tmpfs on the scratch dir ($1) of $2 bytes
 * and $3 inodes (the root directory takes one), the starting files copied in from the host dir
 * underneath (still the cwd after the mount), then nothing but staying alive: `sleep` running
 * means ready. The mount is private to its new mount namespace (unshare's default propagation), so
 * the host never sees it. The worker cannot write the files itself: the tmpfs belongs to the user
 * namespace, where the worker's uid (root) has no mapping, so creating a file there fails.
 */
const HOLDER_SCRIPT =
  'cd "$1" && mount -t tmpfs -o "size=$2,nr_inodes=$3,mode=0700,nosuid,nodev" trajflow-scratch "$1" && cp -a ./. "$1" && exec sleep infinity';

interface ScratchQuota {
  bytes: number;
  files: number;
}

interface Mode {
  confinement: Confinement;
  /** The bash that runs the wrappers. */
  shell: string;
  /**
   * argv that runs `bash -c <script> sandbox SCRATCH COMMAND FSIZE_KB CPU_S NPROC VMEM_KB`; in
   * modes with a holder, inside the holder's namespaces (holderPid).
   */
  command(holderPid?: number): string[];
  /** argv that runs the scratch holder, `bash -c <script> holder SCRATCH BYTES INODES`; quota modes only. */
  holder?: string[];
  /** Owner to give the scratch directory (the uid the command runs as), when it differs from ours. */
  uid?: number;
  /** Whether ulimit -u applies: in its own user namespace (counted there) or as its own uid. */
  nproc: boolean;
  /** Where sandbox cgroups are made, per controller; without memory, ulimit -v applies. */
  cgroups: CgroupProbe;
}

const modes = new Map<string, Mode>();
let cgroupProbe: CgroupProbe | undefined;

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
    cgroupProbe ??= probeSandboxCgroups(findTool('bash') ?? '/bin/bash');
    mode = probe(root, cgroupProbe);
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
function candidates(cgroups: CgroupProbe): Mode[] {
  const bash = findTool('bash') ?? '/bin/bash';
  const unshare = findTool('unshare');
  const setpriv = findTool('setpriv');
  const nsenter = findTool('nsenter');
  const asRoot = process.getuid?.() === 0;
  const dedicatedUid = asRoot && setpriv !== undefined;
  const uid = dedicatedUid ? SANDBOX_UID : undefined;
  // Outside: switch to the sandbox uid, and die with the worker (the parent-death signal; the
  // "parent" is the spawning thread, so a sandbox driven from a worker_thread dies with that thread).
  const outer = setpriv
    ? [setpriv, ...(dedicatedUid ? [`--reuid=${SANDBOX_UID}`, `--regid=${SANDBOX_UID}`, '--clear-groups'] : []), '--pdeathsig=KILL', '--']
    : [];
  const env = `env -i HOME="$1" TMPDIR="$1" PATH=${SANDBOX_PATH} LANG=C.UTF-8 ${bash} -c "$2"`;
  const limits = `ulimit -f "$3"; ulimit -t "$4"; if [ -n "$5" ]; then ulimit -u "$5"; fi; if [ -n "$6" ]; then ulimit -v "$6"; fi; cd "$1"`;
  const memoryLimit = cgroups.memory ? 'sandbox' : 'process';
  const common = [
    'clean environment: HOME=TMPDIR=scratch dir, PATH=' + SANDBOX_PATH,
    'ulimit: file size, CPU time',
    'timeout kills the process group',
    cgroups.memory
      ? `memory: a cgroup v${cgroups.memory.version} per sandbox under ${cgroups.memory.parent} (a command's processes and the scratch files it writes together, no swap; the sandbox's in all at most that plus the scratch quota; over it, a command is killed)`
      : `memory: ulimit -v per process, not for a command's processes together nor its scratch files (no memory cgroup: ${cgroups.missing.memory})`,
  ];
  const processLine = (limit: Confinement['processLimit']) =>
    ({
      cgroup: `processes: pids.max of a cgroup v${cgroups.pids?.version} per sandbox under ${cgroups.pids?.parent}`,
      userNamespace: `processes: ulimit -u in the sandbox's own user namespace (per sandbox; no pids cgroup: ${cgroups.missing.pids})`,
      sharedUid: `processes: ulimit -u on uid ${SANDBOX_UID}, shared by all sandboxes (no pids cgroup: ${cgroups.missing.pids})`,
      none: `processes: no limit (no pids cgroup: ${cgroups.missing.pids}; no uid of its own)`,
    })[limit];
  const processLimit = (namespaces: boolean): Confinement['processLimit'] =>
    cgroups.pids ? 'cgroup' : namespaces ? 'userNamespace' : dedicatedUid ? 'sharedUid' : 'none';
  const uidLine = dedicatedUid ? [`runs as uid ${SANDBOX_UID} outside (the worker is root)`] : [];
  const noQuota = (why: string) => `no scratch quota (${why}): the scratch dir is on the host's disk; only one file's size is capped (ulimit -f)`;
  const quotaLine =
    "scratch dir: a tmpfs private to the sandbox's mount namespace, capped in bytes and files; its files are memory, freed at close or worker death";
  const modes: Mode[] = [];

  if (unshare && setpriv) {
    const dropCaps = `${setpriv} --no-new-privs --bounding-set=-all --inh-caps=-all --`;
    const script = `set -eu\n${READ_ONLY_SETUP}\n${limits}\nexec ${dropCaps} ${env}`;
    const userNs = ['--user', '--map-root-user'];
    const commandNs = ['--net', '--mount'];
    const pidNs = ['--pid', '--fork', '--kill-child', '--mount-proc'];
    const nsLines = [
      'user namespace, no capabilities, no_new_privs',
      'network namespace: no network',
      'mount namespace: filesystem read-only except the scratch dir',
    ];
    const pidLine = 'pid namespace: timeout, close or worker death kills every descendant';
    // Mounting a fresh /proc is refused where /proc has masked paths: then no pid namespace.
    const noPidLine = 'no pid namespace: a process that leaves the process group (setsid) survives a timeout';
    const confined = (withPid: boolean, quota: boolean, extra: string[]): Confinement => ({
      namespaces: true,
      noNetwork: true,
      readOnlyOutside: true,
      scratchQuota: quota,
      memoryLimit,
      processLimit: processLimit(true),
      description: [...nsLines, withPid ? pidLine : noPidLine, ...extra, ...uidLine, ...common, processLine(processLimit(true))],
    });
    for (const withPid of [true, false]) {
      const inner = [...commandNs, ...(withPid ? pidNs : []), '--', bash, '-c', script];
      if (nsenter) {
        const exposed = withPid ? [] : ['a command can kill the scratch holder (no pid namespace), which loses the scratch files'];
        modes.push({
          shell: bash,
          // The holder's user namespace is owned by our (or the sandbox) uid, so entering it gives
          // the capabilities to unshare the rest; its mount namespace brings the tmpfs.
          command: (holderPid) => [...outer, nsenter, '--preserve-credentials', `--target=${holderPid}`, '--user', '--mount', '--', unshare, ...inner],
          holder: [...outer, unshare, ...userNs, '--mount', '--', bash, '-c', HOLDER_SCRIPT],
          uid,
          nproc: true,
          cgroups,
          confinement: confined(withPid, true, [quotaLine, ...exposed]),
        });
      }
    }
    for (const withPid of [true, false]) {
      const inner = [...commandNs, ...(withPid ? pidNs : []), '--', bash, '-c', script];
      modes.push({
        shell: bash,
        command: () => [...outer, unshare, ...userNs, ...inner],
        uid,
        nproc: true,
        cgroups,
        confinement: confined(withPid, false, [noQuota(nsenter ? 'no tmpfs holder' : 'util-linux nsenter not found')]),
      });
    }
  }
  const nnp = setpriv ? `${setpriv} --no-new-privs --` : '';
  modes.push({
    shell: bash,
    command: () => [...outer, bash, '-c', `${limits}\nexec ${nnp} ${env}`],
    uid,
    nproc: dedicatedUid,
    cgroups,
    confinement: {
      namespaces: false,
      noNetwork: false,
      readOnlyOutside: false,
      scratchQuota: false,
      memoryLimit,
      processLimit: processLimit(false),
      description: [
        'no namespaces: network reachable; writes outside the scratch dir fail only where file permissions forbid them',
        ...(unshare && setpriv ? [] : ['util-linux unshare or setpriv not found']),
        'a process that leaves the process group (setsid) survives a timeout',
        noQuota('no mount namespace'),
        ...(dedicatedUid ? uidLine : [asRoot ? 'runs as root (setpriv missing): no file protection at all' : 'runs as the worker user']),
        ...common,
        processLine(processLimit(false)),
      ],
    },
  });
  return modes;
}

/**
 * Runs each candidate on a throwaway scratch dir and uses the first that works. Synchronous (once
 * per process and root dir, a few tens of ms) so callers and tests can decide up front.
 */
function probe(root: string, cgroups: CgroupProbe): Mode {
  const failures: string[] = [];
  for (const mode of candidates(cgroups)) {
    const failure = tryMode(root, mode);
    if (failure === undefined) {
      const skipped = failures.length ? [`stronger modes unavailable: ${failures.join('; ')}`] : [];
      return { ...mode, confinement: { ...mode.confinement, description: [...mode.confinement.description, ...skipped] } };
    }
    failures.push(failure);
  }
  // Unreachable in practice (plain bash always works); kept so a broken machine reports why.
  throw new Error(`no way to run bash here: ${failures.join('; ')}`);
}

/**
 * Undefined when the mode works here, else why not. A command must write inside the scratch dir;
 * for modes that promise it, it must fail to write next to it; and with a holder, its writes must
 * land in the tmpfs (seen through the holder, not in the host directory) and stop at the quota.
 */
function tryMode(root: string, mode: Mode): string | undefined {
  const dir = makeScratchSync(root, mode.uid);
  const outside = `${dir}-probe-outside`;
  const holderLog = `${dir}-probe-holder-log`;
  let holderPid: number | undefined;
  try {
    writeFilesSync(dir, { given: 'given\n' }, mode.uid);
    let filesDir = dir;
    if (mode.holder) {
      const log = fs.openSync(holderLog, 'w');
      try {
        holderPid = spawnHolder(mode.holder, dir, PROBE_QUOTA, log).pid;
      } finally {
        fs.closeSync(log);
      }
      if (holderPid === undefined || !waitForHolderSync(holderPid, dir)) {
        return `no scratch tmpfs: ${fs.readFileSync(holderLog, 'utf8').trim().split('\n')[0] || 'its holder did not start'}`;
      }
      filesDir = holderView(holderPid, dir);
    }
    // The outside name is mkdtemp's, so it needs no shell quoting.
    const writes = `cat given && echo ok > inside && cat inside && { (echo x > ../${path.basename(outside)}) 2>/dev/null && echo wrote-outside || true; }`;
    const fill = `; { head -c ${2 * PROBE_QUOTA.bytes} /dev/zero > fill; for i in {0..${PROBE_QUOTA.files}}; do : > f$i || break; done; } 2>/dev/null; true`;
    const probeCommand = mode.holder ? writes + fill : writes;
    const argv = mode.command(holderPid);
    const result = spawnSync(argv[0], [...argv.slice(1), 'sandbox', dir, probeCommand, '1024', '10', '', ''], {
      env: { PATH: SANDBOX_PATH },
      encoding: 'utf8',
      timeout: 10_000,
    });
    const worked = result.status === 0 && result.stdout.startsWith('given\nok\n');
    const escaped = fs.existsSync(outside) || result.stdout.includes('wrote-outside');
    if (!worked) return (result.stderr || String(result.error ?? `exit ${result.status}`)).trim().split('\n')[0];
    if (escaped && mode.confinement.readOnlyOutside) return 'a probe write outside the scratch dir succeeded';
    if (mode.holder) {
      if (readOr(path.join(filesDir, 'inside')) !== 'ok\n' || fs.existsSync(path.join(dir, 'inside')))
        return 'the scratch tmpfs is not seen through its holder';
      const space = fs.statfsSync(filesDir);
      if (space.bavail !== 0 || space.ffree !== 0) return 'the scratch tmpfs did not stop writes at its size and file count';
    }
    return undefined;
  } finally {
    if (holderPid !== undefined) killGroup(holderPid);
    for (const file of [outside, holderLog]) fs.rmSync(file, { force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function makeScratchSync(root: string, uid: number | undefined): string {
  const dir = fs.mkdtempSync(path.join(root, `${DIR_PREFIX}${process.pid}-`));
  if (uid !== undefined) fs.chownSync(dir, uid, uid);
  return dir;
}

function checkFileName(name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new Error(`sandbox starting file ${JSON.stringify(name)}: not a plain file name`);
  }
}

function writeFilesSync(dir: string, files: Record<string, string>, uid: number | undefined): void {
  for (const [name, content] of Object.entries(files)) {
    checkFileName(name);
    fs.writeFileSync(path.join(dir, name), content, { flag: 'wx' });
    if (uid !== undefined) fs.chownSync(path.join(dir, name), uid, uid);
  }
}

async function writeFiles(dir: string, files: Record<string, string>, uid: number | undefined): Promise<void> {
  for (const [name, content] of Object.entries(files)) {
    checkFileName(name);
    await fs.promises.writeFile(path.join(dir, name), content, { flag: 'wx' });
    if (uid !== undefined) await fs.promises.chown(path.join(dir, name), uid, uid);
  }
}

/** The scratch dir as the holder sees it: its tmpfs, reached from outside its mount namespace. */
function holderView(holderPid: number, dir: string): string {
  return path.join(`/proc/${holderPid}/root`, dir);
}

/** Starts a holder for dir in its own process group; stderr: 'pipe', or a file descriptor. */
function spawnHolder(argv: readonly string[], dir: string, quota: ScratchQuota, stderr: 'pipe' | number): ChildProcess {
  const child = spawn(argv[0], [...argv.slice(1), 'holder', dir, String(quota.bytes), String(quota.files + 1)], {
    env: { PATH: SANDBOX_PATH },
    stdio: ['ignore', 'ignore', stderr],
    detached: true,
  });
  // A failed spawn shows as a holder that never comes up.
  child.on('error', () => undefined);
  return child;
}

type HolderState = 'ready' | 'starting' | 'gone';

/** Ready once it sleeps (it has mounted and filled the tmpfs) and the dir seen through it is not the host's. */
function holderState(holderPid: number, dir: string): HolderState {
  try {
    const sleeping = readOr(`/proc/${holderPid}/comm`) === 'sleep\n';
    if (sleeping && fs.statSync(holderView(holderPid, dir)).dev !== fs.statSync(dir).dev) return 'ready';
  } catch {
    // not readable yet (changing credentials), or gone: /proc/<pid>/stat says which
  }
  const stat = readOr(`/proc/${holderPid}/stat`);
  const state = stat.charAt(stat.lastIndexOf(')') + 2);
  return state === '' || state === 'Z' || state === 'X' ? 'gone' : 'starting';
}

function waitForHolderSync(holderPid: number, dir: string): boolean {
  const deadline = Date.now() + HOLDER_START_MS;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    const state = holderState(holderPid, dir);
    if (state !== 'starting') return state === 'ready';
    if (Date.now() > deadline) return false;
    Atomics.wait(pause, 0, 0, 5);
  }
}

/** The process whose mount namespace holds a sandbox's scratch tmpfs: the tmpfs lives as long as it. */
class ScratchHolder {
  private constructor(
    private readonly child: ChildProcess,
    readonly pid: number,
    /** The scratch tmpfs, as this process reaches it. */
    readonly filesDir: string,
    private readonly exited: Promise<void>,
  ) {}

  static async start(argv: readonly string[], dir: string, quota: ScratchQuota): Promise<ScratchHolder> {
    const child = spawnHolder(argv, dir, quota, 'pipe');
    const exited = new Promise<void>((resolve) => {
      child.on('exit', () => resolve());
      child.on('error', () => resolve());
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < 1000) stderr += chunk.toString('utf8');
    });
    const pid = child.pid;
    const deadline = Date.now() + HOLDER_START_MS;
    let state: HolderState = 'starting';
    while (pid !== undefined && child.exitCode === null && state === 'starting' && Date.now() <= deadline) {
      state = holderState(pid, dir);
      if (state === 'starting') await new Promise((resolve) => setTimeout(resolve, 5));
    }
    if (pid === undefined || state !== 'ready' || child.exitCode !== null) {
      if (pid !== undefined) killGroup(pid);
      await exited;
      throw new Error(`cannot make the sandbox's scratch tmpfs: ${stderr.trim() || 'its holder did not start'}`);
    }
    // An OOM kill in the sandbox's memory cgroup must take a command, not the scratch files with
    // the holder (tmpfs pages are nobody's resident memory, so the holder could be the pick).
    // Lowering it takes CAP_SYS_RESOURCE: a worker that is not root leaves it as it is.
    await fs.promises.writeFile(`/proc/${pid}/oom_score_adj`, '-1000').catch(() => undefined);
    // It sleeps from here on: nothing more to read, and it must not keep the worker's event loop alive.
    child.stderr?.destroy();
    child.unref();
    return new ScratchHolder(child, pid, holderView(pid, dir), exited);
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async stop(): Promise<void> {
    killGroup(this.pid);
    await this.exited;
  }
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // ESRCH: the group is already gone
  }
}

function readOr(file: string, fallback = ''): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return fallback;
  }
}

/** Thrown where a sandbox would run without namespaces and its creator did not accept that. */
export class WeakIsolationError extends Error {
  override name = 'WeakIsolationError';
}

/**
 * Throws unless the confinement has namespaces or weak isolation is accepted: without them a
 * command reaches the network, writes wherever its uid may and can outlive its timeout.
 */
export function refuseWeakIsolation(confinement: Confinement, allowWeakIsolation: boolean): void {
  if (confinement.namespaces || allowWeakIsolation) return;
  throw new WeakIsolationError(
    'bash sandbox refused: this machine allows no user, network and mount namespaces, so commands would reach the network, ' +
      'write outside their scratch directory wherever file permissions allow, and could outlive their timeout ' +
      `(${confinement.description.join('; ')}). Install util-linux (unshare, setpriv) and allow user namespaces ` +
      '(sysctl user.max_user_namespaces > 0), or set `allowWeakIsolation: true` in the bash environment config (env.allowWeakIsolation) to run them anyway',
  );
}

/** One line for logs and the Web UI: how strongly this machine confines sandbox commands. */
export function isolationLevel(confinement: Confinement): string {
  const confined = confinement.namespaces
    ? `namespaces (${confinement.noNetwork ? 'no network, ' : ''}${confinement.readOnlyOutside ? 'read-only outside the scratch dir' : 'writable outside'})`
    : 'WEAK: no namespaces (network reachable, writable outside the scratch dir)';
  const scratch = confinement.scratchQuota ? 'scratch quota' : 'no scratch quota';
  const memory = confinement.memoryLimit === 'sandbox' ? 'memory per sandbox' : 'memory per process only';
  const processes = {
    cgroup: 'processes per sandbox (cgroup)',
    userNamespace: 'processes per sandbox (user namespace)',
    sharedUid: 'processes shared by all sandboxes',
    none: 'no process limit',
  }[confinement.processLimit];
  return `${confined}; ${scratch}; ${memory}; ${processes}`;
}

export class BashSandbox {
  private closed = false;
  /** Process groups of commands still running (killed by close()), with their run's completion. */
  private readonly running = new Map<number, Promise<void>>();

  private constructor(
    /** The scratch directory as commands see it: their cwd, HOME and TMPDIR. */
    readonly dir: string,
    /**
     * Where this process reads and writes the scratch files: `dir` itself, or, when the scratch dir
     * is a tmpfs only the sandbox's namespaces see, the same directory through its holder.
     */
    readonly hostDir: string,
    private readonly mode: Mode,
    private readonly options: Required<Omit<BashSandboxOptions, 'rootDir' | 'files' | 'allowWeakIsolation'>>,
    private readonly holder: ScratchHolder | undefined,
    private readonly cgroup: SandboxCgroup | undefined,
  ) {}

  /** Throws WeakIsolationError where the machine allows no namespaces, unless `allowWeakIsolation`. */
  static async create(options: BashSandboxOptions): Promise<BashSandbox> {
    const root = await fs.promises.realpath(options.rootDir ?? os.tmpdir());
    const mode = modeFor(root);
    refuseWeakIsolation(mode.confinement, options.allowWeakIsolation ?? false);
    const limits = {
      commandTimeoutMs: options.commandTimeoutMs,
      maxOutputBytes: options.maxOutputBytes,
      maxFileBytes: options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES,
      maxProcesses: options.maxProcesses ?? DEFAULT_MAX_PROCESSES,
      maxMemoryBytes: options.maxMemoryBytes ?? DEFAULT_MAX_MEMORY_BYTES,
      maxScratchBytes: options.maxScratchBytes ?? DEFAULT_MAX_SCRATCH_BYTES,
      maxScratchFiles: options.maxScratchFiles ?? DEFAULT_MAX_SCRATCH_FILES,
    };
    const dir = await fs.promises.mkdtemp(path.join(root, `${DIR_PREFIX}${process.pid}-`));
    let holder: ScratchHolder | undefined;
    let cgroup: SandboxCgroup | undefined;
    try {
      cgroup = await SandboxCgroup.create(mode.cgroups, {
        // The scratch tmpfs is capped at maxScratchBytes on its own, so a full one never leaves
        // a command less than its maxMemoryBytes (a command could not even start to delete files).
        sandboxMemoryBytes: limits.maxMemoryBytes + (mode.holder ? limits.maxScratchBytes : 0),
        commandMemoryBytes: limits.maxMemoryBytes,
        processes: limits.maxProcesses,
      });
      if (mode.uid !== undefined) await fs.promises.chown(dir, mode.uid, mode.uid);
      // With a holder they are copied into its tmpfs; their copies here stay hidden under it.
      await writeFiles(dir, options.files ?? {}, mode.uid);
      if (mode.holder) {
        // In the sandbox's cgroup, so the files it copies count against the sandbox's memory.
        const argv = cgroup ? await cgroup.holder(mode.shell, mode.holder) : mode.holder;
        holder = await ScratchHolder.start(argv, dir, { bytes: limits.maxScratchBytes, files: limits.maxScratchFiles });
      }
    } catch (err) {
      await holder?.stop();
      await cgroup?.remove();
      await removeTree(dir);
      throw err;
    }
    return new BashSandbox(dir, holder?.filesDir ?? dir, mode, limits, holder, cgroup);
  }

  isolation(): string[] {
    return [...this.mode.confinement.description];
  }

  async run(command: string): Promise<BashResult> {
    if (this.closed) throw new Error('bash sandbox is closed');
    if (this.holder && !this.holder.alive) throw new Error('bash sandbox lost its scratch directory: the process holding its tmpfs exited');
    const { commandTimeoutMs, maxOutputBytes, maxFileBytes, maxProcesses, maxMemoryBytes } = this.options;
    // The directory's mtime is the sandbox's heartbeat for sweepStaleSandboxes.
    const now = new Date();
    await fs.promises.utimes(this.dir, now, now).catch(() => undefined);
    if (this.closed) throw new Error('bash sandbox is closed');

    const fileKb = String(Math.max(1, Math.ceil(maxFileBytes / 1024)));
    // A backstop only: the timeout kills first; this bounds a process that somehow outlives it.
    const cpuSeconds = String(Math.ceil(commandTimeoutMs / 1000) + 1);
    const nproc = this.mode.nproc ? String(maxProcesses) : '';
    const memoryKb = this.mode.cgroups.memory ? '' : String(Math.max(1, Math.ceil(maxMemoryBytes / 1024)));
    const argv = this.mode.command(this.holder?.pid);
    const cgroup = this.cgroup ? await this.cgroup.command(this.mode.shell, argv) : undefined;
    const [file, ...args] = cgroup?.argv ?? argv;
    let child: ChildProcessByStdio<null, Readable, Readable>;
    try {
      child = spawn(file, [...args, 'sandbox', this.dir, command, fileKb, cpuSeconds, nproc, memoryKb], {
        cwd: this.dir,
        env: { PATH: SANDBOX_PATH },
        stdio: ['ignore', 'pipe', 'pipe'],
        // Its own process group, so a timeout can kill the shell and everything it started.
        detached: true,
      });
    } catch (err) {
      // Refused arguments (a NUL byte in the command): nothing started.
      await cgroup?.remove();
      throw err;
    }

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
    // Under ulimit -v nothing is killed: a failed allocation is known only by what the program
    // says, read from all of stderr (a message past the output cap counts too).
    let allocationFailed = false;
    if (!this.mode.cgroups.memory) {
      let previousTail = '';
      child.stderr.on('data', (chunk: Buffer) => {
        const text = previousTail + chunk.toString('latin1');
        if (ALLOCATION_FAILED.test(text)) allocationFailed = true;
        previousTail = text.slice(-64);
      });
    }

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
    // Where the kernel's OOM kill takes one process, the rest of the command goes with it.
    const oomWatch = cgroup && !cgroup.killsWhole ? setInterval(() => void cgroup.overMemory().then((over) => over && killGroup()), OOM_POLL_MS) : undefined;

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
      clearInterval(oomWatch);
      // Background jobs the command left behind die with it.
      killGroup();
      await Promise.race([closed, new Promise((r) => setTimeout(r, PIPE_GRACE_MS))]);
      child.stdout.destroy();
      child.stderr.destroy();
      if (spawnError) {
        return { exitCode: 127, stdout: '', stderr: `cannot start the sandbox: ${spawnError.message}`, timedOut, truncated, limitsReached: [] };
      }
      const exitCode = code ?? 128 + (signal ? os.constants.signals[signal] : 0);
      const memoryOver = this.mode.cgroups.memory ? (await cgroup?.overMemory()) === true : allocationFailed;
      return { exitCode, stdout: stdout(), stderr: stderr(), timedOut, truncated, limitsReached: await this.limitsReached(memoryOver) };
    } finally {
      await cgroup?.remove();
      if (child.pid !== undefined) {
        this.running.delete(child.pid);
        finished();
      }
    }
  }

  /** memory as the command found it; disk and files from the scratch tmpfs after it. */
  private async limitsReached(memoryOver: boolean): Promise<SandboxLimit[]> {
    const reached: SandboxLimit[] = memoryOver ? ['memory'] : [];
    if (this.holder) {
      const space = await fs.promises.statfs(this.hostDir).catch(() => undefined);
      if (space?.bavail === 0) reached.push('disk');
      if (space?.ffree === 0) reached.push('files');
    }
    return reached;
  }

  /** Kills running commands, unmounts the scratch tmpfs and removes the directory; safe to call more than once. */
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
    await this.holder?.stop();
    await this.cgroup?.remove();
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
