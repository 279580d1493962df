/**
 * An instance's sandbox: a machine of its own for both instance types (ISOLATION.md in this
 * folder).
 *
 * How it is built (root server):
 * - **Identity.** A host uid of its own (`SandboxHost.allocateUid`), never 0, owning nothing on
 *   the host but the instance's disk. Inside, that uid is `user` (1000) in a user namespace that
 *   maps nothing else: host root does not exist in there.
 * - **Namespaces.** An anchor process, started as that uid with `unshare`, owns the instance's
 *   user, pid, network, IPC, UTS and cgroup namespaces; pid 1 of the pid namespace is a small
 *   shell that reaps orphans, and when it dies the kernel kills everything in the namespace.
 *   Every other process of the instance joins those namespaces (network, IPC, UTS with `nsenter`
 *   as root; user and pid with bubblewrap `--userns/--pidns` after dropping to the instance's
 *   uid), so they share one loopback, one SysV IPC space and one process tree: one machine.
 * - **Filesystem.** bubblewrap builds each process's mount namespace the same way (rootfs.ts),
 *   from the instance's disk (quota.ts) and a generated /etc; `--cap-drop ALL`, no_new_privs and
 *   the seccomp filter (seccomp.ts) apply to every process.
 * - **Limits.** Each process writes its pid into the instance's cgroup (cgroups.ts) before it
 *   executes anything; pause freezes the cgroup; stop kills pid 1 and empties the cgroup.
 * - **Network.** The namespace has only a loopback interface. `listen(port)` opens a TCP listener
 *   inside it and hands the socket to the server, which is how the egress proxy (egress.ts)
 *   serves the instance without any route out.
 *
 * The chain every process is started through:
 *   setpriv --pdeathsig  →  sh (join cgroup)  →  nsenter --net --ipc --uts --cgroup  →
 *   setpriv --reuid U  →  bwrap --userns --pidns --seccomp … --  command
 *
 * A server that is not root, or root without CAP_SYS_ADMIN (support.ts finds the level), builds
 * the same machine through user namespaces it owns (`#outerUserns`, `#joinUserns`):
 *   anchor:  setpriv --pdeathsig  →  unshare --user --mount [→ sh: mount the tmpfs disk]  →  bwrap
 *   others:  perl  →  [setpriv --reuid U]  →  nsenter --user(outer) --mount(outer) --net --ipc
 *            --uts --cgroup  →  setpriv --pdeathsig  →  bwrap --userns --pidns --seccomp …
 * and every command starts behind a shell that closes bubblewrap's two namespace descriptors.
 * A normal user with a subordinate range (subids.ts) gives each instance a host uid of it:
 *   anchor:  setpriv --pdeathsig  →  unshare --user --map-users/--map-groups (newuidmap) --mount
 *            →  sh: stage, disk, the server's idmapped view  →  setpriv --reuid 1000  →  bwrap
 *   others:  perl  →  nsenter (as above)  →  setpriv --reuid 1000 --pdeathsig  →  bwrap …
 *
 * `none` mode (`--insecure-no-isolation`): processes are plain children of the server with HOME
 * and TMPDIR in the instance directory. Convenience, not isolation.
 */
import type { StdioOptions } from 'node:child_process';
import { closeSync, constants, openSync, readFileSync, readlinkSync } from 'node:fs';
import {
  chmod,
  chown,
  cp,
  lstat,
  mkdir,
  open,
  readdir,
  realpath,
  rm,
  writeFile,
} from 'node:fs/promises';
import { Server as NetServer, type Server } from 'node:net';
import { join, posix } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { raceDeadline, until } from '../../internal/deadline.js';
import {
  descendants,
  freezeAll,
  parentOf,
  processRef,
  reaped,
  signalProcess,
  signalQuietly,
  stillRunning,
  Supervised,
  type ExitInfo,
} from '../../internal/process.js';
import type { InstanceLimits } from '../../api/index.js';
import { background } from '../../internal/background.js';
import type { Logger } from '../../internal/log.js';
import { stage } from '../../internal/stages.js';
import { Cgroup } from './cgroups.js';
import type { SandboxHost } from './host.js';
import type { DiskQuota } from './quota.js';
import { mountArgs, SANDBOX_HOME, SANDBOX_HOSTNAME, SANDBOX_PATH, SANDBOX_UID } from './rootfs.js';
import { anchorSteps, dropToInner, STAGE, type SubordinateIds } from './subids.js';

export { SANDBOX_HOME, SANDBOX_PATH } from './rootfs.js';

/**
 * The first step of every root-side chain (perl: Essential in Debian, starts in ~2 ms): write its
 * pid into each cgroup file named, close every descriptor from the given number up
 * (`close_range`, 436 on every Linux architecture), then execute the rest of its arguments.
 * Arguments: N, N cgroup.procs paths, the first descriptor to close, the command.
 */
const CHAIN_START =
  'my $n = shift; for (1 .. $n) { my $f = shift; open(my $h, ">", $f) or exit 125; ' +
  'print $h "$$\\n"; close($h) or exit 125 } my $keep = 0 + shift; ' +
  'syscall(436, $keep, 0xffffffff, 0) == 0 or exit 126; exec { $ARGV[0] } @ARGV; exit 127';

/**
 * A process started ahead (`Sandbox.prepareSpawn`), as the last step of a chain: read the command
 * from the descriptor named (argument count, the arguments, then name and value of each
 * variable, every field ended by a NUL) until the server closes it, close it, and become the
 * command with exactly that environment plus the `BURROW_INSTANCE` bubblewrap set. Nothing to
 * read (the server discarded it) exits 0. Built-ins only: no module to load.
 */
const LAUNCH_STEP =
  'open(my $in, "<&=", 0 + shift) or exit 125; my $m = do { local $/; <$in> }; close($in); ' +
  'exit 0 unless defined $m && length $m; my @f = split(/\\0/, $m, -1); pop @f; ' +
  'my $n = shift @f; my @argv = splice(@f, 0, $n); my %env = @f; ' +
  '$env{BURROW_INSTANCE} = $ENV{BURROW_INSTANCE}; %ENV = %env; exec { $argv[0] } @argv; exit 127';

/**
 * The stdio of a browser's Chromium (chromium.ts): stderr read for errors, fds 3 and 4 its
 * DevTools pipe. What a sandbox made ahead for a start prepares a process for (stock.ts).
 */
export const BROWSER_STDIO = Object.freeze(['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] as const);

/** How long a stop gives a process started ahead and never used to end by itself. */
const PREPARED_EXIT_MS = 1000;
/** Files `seedFiles` writes at once. */
const SEED_WRITES = 16;

/** How long a stop waits for the processes inside to end before it ends pid 1 anyway. */
const KILL_INSIDE_MS = 3000;
/**
 * How long a stop waits for what it SIGKILLed to be reaped by its own parent before it kills that
 * parent too (which hands the rest to the host's init). The kill cannot be refused; the wait is for
 * the kernel to finish the exits, which some processes make slow on purpose (an exit that must
 * free hundreds of GiB of mappings took 3–5 s here). The stop's answer does not wait for it.
 */
const REAP_MS = 30_000;

/** open(2)'s O_PATH (the same on x86_64 and arm64), which Node's constants lack. */
const O_PATH = 0o10000000;

/**
 * The listen step (`Sandbox.listen`), on the root side of a chain after CHAIN_START: join the
 * namespaces whose descriptors are named (`setns`), open a TCP listener on 127.0.0.1:port there
 * (non-blocking, `SO_REUSEADDR`, as Node opens its own), send it to the server over the Node IPC
 * channel (one JSON line and the descriptor: Node's own handle message for a `net.Server`), then
 * wait for the server to close the channel, so that its exit never comes before the message.
 * Built-ins and `syscall` only: no module to load. The structures are those of 64-bit Linux.
 * Arguments: the setns and sendmsg numbers, the channel's descriptor, the port, the namespaces.
 */
const LISTEN_STEP =
  'my ($setns, $sendmsg, $ipc, $port, @ns) = @ARGV; ' +
  'for my $fd (@ns) { syscall(0 + $setns, 0 + $fd, 0) == 0 or die "setns: $!\\n" } ' +
  'socket(my $s, 2, 1, 0) or die "socket: $!\\n"; ' +
  'setsockopt($s, 1, 2, pack("i", 1)) or die "setsockopt: $!\\n"; ' +
  'bind($s, pack("S n C4 x8", 2, $port, 127, 0, 0, 1)) or die "bind 127.0.0.1:$port: $!\\n"; ' +
  'listen($s, 511) or die "listen: $!\\n"; ' +
  'fcntl($s, 4, 0x800) or die "fcntl: $!\\n"; ' +
  'my $line = qq({"cmd":"NODE_HANDLE","type":"net.Server","msg":"listening"}\\n); ' +
  'my $iov = pack("P Q", $line, length $line); ' +
  'my $cmsg = pack("Q i i i x4", 20, 1, 1, fileno $s); ' +
  'my $msg = pack("Q L x4 P Q P Q i x4", 0, 0, $iov, 1, $cmsg, 24, 0); ' +
  'syscall(0 + $sendmsg, 0 + $ipc, $msg, 0) == length $line or die "sendmsg: $!\\n"; ' +
  'close($s); open(my $ch, "<&=", 0 + $ipc) or exit 0; 1 while sysread($ch, my $ack, 4096); exit 0';

/** The system call numbers the listen step needs, by Node's name of the architecture. */
const LISTEN_SYSCALLS: Readonly<Record<string, { setns: number; sendmsg: number }>> = {
  x64: { setns: 308, sendmsg: 46 },
  arm64: { setns: 268, sendmsg: 211 },
};

/** The whole environment of the root side of a chain, whatever the instance's is. */
const ROOT_SIDE_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } as const;

export type SandboxMode =
  /** Namespaces, its own host uid, cgroups, disk quota, seccomp (root server). */
  | 'isolated'
  /** No isolation at all (`--insecure-no-isolation`). */
  | 'none';

export interface SandboxOptions {
  /** The instance directory (created by the registry, root-only). */
  dir: string;
  /** A name unique among live instances (the instance id); names the cgroup. */
  name: string;
  log: Logger;
  /** A process of the sandbox's own (the anchor) died on its own. */
  onCrash?: (reason: string) => void;
  /** Start at a low CPU weight (a warm-pool instance) until `foreground()`. Default false. */
  background?: boolean;
}

/** How a process is started in an instance's sandbox (`Sandbox.spawn`). */
export interface SpawnOptions {
  /** The complete environment of the command (nothing of the server's is added). */
  env: Record<string, string>;
  /** stdio of the process; entries ≥ 3 reach the command as the same fd numbers. Default ignored. */
  stdio?: StdioOptions;
  /** Working directory as seen inside; default home. */
  cwd?: string;
}

/**
 * Starts `argv` in an instance's sandbox: `Sandbox.spawn`, or what stands for it (a plain child
 * of the server in tests of a component, a wrapper that adds the instance's environment). The
 * process is the instance's: paused, resumed and killed with it, and it dies with the server.
 */
export type SandboxSpawn = (argv: readonly string[], opts: SpawnOptions) => Supervised;

/** A process started ahead, waiting for its command (`Sandbox.prepareSpawn`). */
interface Prepared {
  proc: Supervised;
  stdio: readonly string[];
  /** Where its command goes: the server's end of the launch step's descriptor. */
  command: Writable;
}

export interface ExecResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
}

/** What an instance may use, as reported by `GET /v1/instance/{id}`. */
export type SandboxLimits = InstanceLimits;

export class Sandbox {
  readonly mode: SandboxMode;
  /** HOME as seen inside. */
  readonly home: string;
  /** /tmp as seen inside. */
  readonly tmp: string;
  /**
   * Host paths of the instance's home, tmp and /dev/shm (on its disk). With a tmpfs quota (the
   * user-namespace chain) the disk is mounted in the anchor's mount namespace only, and these
   * reach it through `/proc/<anchor>/root` once the anchor runs.
   */
  hostHome: string;
  hostTmp: string;
  hostShm: string;
  /** Server-only directory of the instance (root 0700, not visible inside). */
  readonly hostRun: string;
  /** The instance's host uid (isolated mode). */
  readonly uid: number | undefined;
  readonly #host: SandboxHost;
  readonly #procs = new Set<Supervised>();
  /** Told when a process of the sandbox's own dies on its own (replaced by `handOver`). */
  #onCrash: ((reason: string) => void) | undefined;
  readonly #log: Logger;
  /** Holds the disk image and its mount point (under the sandbox root in isolated mode). */
  readonly #diskDir: string;
  /** The instance's name (its id). */
  readonly #name: string;
  #cgroup: Cgroup | undefined;
  readonly #background: boolean;
  /** Directories `seedHome` made, as seen inside. */
  readonly #seeded = new Set<string>();
  /** Whether anything of the instance's own was started (burrow's own helpers aside). */
  #spawned = false;
  /** A process started ahead for the first command, not yet given one. */
  #prepared: Prepared | undefined;
  /** The anchor's own process (pid 1's parent), once started. */
  #anchor: Supervised | undefined;
  /** Listeners opened ahead (`listenAhead`) for the `listen` of their port to take. */
  readonly #ahead = new Map<number, Promise<Server>>();
  #quota: DiskQuota | undefined;
  /** Host pid of pid 1 of the instance's pid namespace. */
  #init = 0;
  /**
   * The user-namespace chain (a server that is not root, or root without CAP_SYS_ADMIN): host pid
   * of the anchor's outer process, in the user and mount namespaces the instance's wrappers join.
   */
  #outer = 0;
  /** Whether the user-namespace chain builds this instance (`spawnChainKind`). */
  readonly #userns: boolean;
  /** The disk is a tmpfs of `diskBytes` mounted by the anchor in its own mount namespace. */
  #tmpfsBytes = 0;
  /** The anchor mounts the disk as a tmpfs (of `#tmpfsBytes`, or unsized: 0). */
  #tmpfs = false;
  /**
   * A normal user's server with a subordinate range: the instance's host uid and gid (subids.ts).
   * The server cannot chown to them (`uid` stays undefined); it reaches the disk through the
   * anchor's idmapped view of it, where the instance's files read as its own.
   */
  readonly #subids: SubordinateIds | undefined;
  /** Where the instance's /etc, home, tmp and shm are bound from, when not the paths above. */
  #bindFrom: { home: string; tmp: string; shm: string; etc: string } | undefined;
  #stopping: Promise<void> | undefined;

  private constructor(
    host: SandboxHost,
    mode: SandboxMode,
    dir: string,
    diskDir: string,
    uid: number | undefined,
    opts: SandboxOptions,
    subids?: SubordinateIds,
  ) {
    this.#host = host;
    this.mode = mode;
    this.uid = uid;
    this.#subids = subids;
    this.#onCrash = opts.onCrash;
    this.#log = opts.log;
    this.#diskDir = diskDir;
    this.#name = opts.name;
    this.#background = opts.background ?? false;
    this.#userns = mode === 'isolated' && host.support.level !== 'root';
    const disk = join(diskDir, 'disk');
    this.hostHome = join(disk, 'home');
    this.hostTmp = join(disk, 'tmp');
    this.hostShm = join(disk, 'shm');
    this.hostRun = join(dir, 'run');
    this.home = mode === 'none' ? this.hostHome : SANDBOX_HOME;
    this.tmp = mode === 'none' ? this.hostTmp : '/tmp';
  }

  /** Build the sandbox: disk, cgroup, namespaces. Cleans up after itself when a step fails. */
  static async create(host: SandboxHost, opts: SandboxOptions): Promise<Sandbox> {
    const dir = await realpath(opts.dir);
    const mode: SandboxMode = host.isolated ? 'isolated' : 'none';
    const uid = mode === 'isolated' && host.support.ownUid ? host.allocateUid() : undefined;
    const subids =
      mode === 'isolated' && uid === undefined ? host.allocateSubordinate() : undefined;
    const diskDir = mode === 'isolated' ? await host.instanceDir(opts.name) : dir;
    const sandbox = new Sandbox(host, mode, dir, diskDir, uid, opts, subids);
    try {
      await sandbox.#build(opts.name);
    } catch (err) {
      await sandbox.stop();
      throw err;
    }
    return sandbox;
  }

  async #build(name: string): Promise<void> {
    const host = this.#host;
    await mkdir(this.hostRun, { recursive: true, mode: 0o700 });
    // the cgroup is made while the disk is (they do not depend on each other); both are kept as
    // soon as they exist, so that the stop after a failed step releases them
    const layout = this.mode === 'isolated' ? host.cgroups : undefined;
    const cgroup =
      layout &&
      stage('cgroup', () => Cgroup.create(layout, `${process.pid}.${name}`, host.limits)).then(
        async (made) => {
          this.#cgroup = made;
          if (this.#background) await made.setCpuWeight('low');
        },
      );
    const disk = this.#makeDisk();
    // the anchor joins the cgroup; at the root level it starts beside the disk, which its pid 1
    // never sees (it binds none of the instance's directories), while the user-namespace chain's
    // anchor mounts the disk itself and so waits for its directory
    const anchor =
      this.mode === 'isolated'
        ? Promise.all([cgroup, this.#userns && disk]).then(() =>
            stage('anchor', () => this.#startAnchor()),
          )
        : undefined;
    const results = await Promise.allSettled([cgroup, disk, anchor]);
    for (const r of results) if (r.status === 'rejected') throw r.reason;
  }

  /** The instance's disk (its quota, isolated) and its three directories on it. */
  async #makeDisk(): Promise<void> {
    const host = this.#host;
    const disk = join(this.#diskDir, 'disk');
    const quota = host.limits.diskBytes > 0 && host.support.quotaKind === 'tmpfs';
    if (this.#userns && (quota || this.#subids)) {
      // the anchor mounts it (startAnchor) and makes the three directories in it; with
      // subordinate ids always (the server's view of it needs a file system of the namespace's)
      this.#tmpfs = true;
      this.#tmpfsBytes = quota ? host.limits.diskBytes : 0;
      await mkdir(disk, { recursive: true, mode: 0o700 });
      if (this.uid !== undefined) await chown(disk, this.uid, this.uid);
      return;
    }
    if (
      this.mode === 'isolated' &&
      host.limits.diskBytes > 0 &&
      host.support.quotaKind === 'loop'
    ) {
      this.#quota = await stage('disk', () => host.disk(this.#diskDir));
    } else {
      await mkdir(disk, { recursive: true, mode: 0o700 });
    }
    // Isolated, the three belong to the instance's uid alone (0700): only that uid exists in
    // there, and no other local user may read its home or plant files in its /tmp.
    const shared = this.mode === 'none' ? 0o1777 : 0o700;
    const dirs = [
      [this.hostHome, this.mode === 'none' ? 0o755 : 0o700],
      [this.hostTmp, shared],
      [this.hostShm, shared],
    ] as const;
    await Promise.all(
      dirs.map(async ([path, mode]) => {
        await mkdir(path, { recursive: true });
        await chmod(path, mode);
        if (this.uid !== undefined) await chown(path, this.uid, this.uid);
      }),
    );
    // the disk's root stays root-owned 0711: the instance reaches only its three directories
    if (this.mode === 'isolated') await chmod(disk, 0o711);
  }

  /** The name it was created with (the instance id). */
  get name(): string {
    return this.#name;
  }

  /**
   * Whether a sandbox made ahead (stock.ts) can still be handed over: not stopping, its anchor
   * running, and nothing of an instance's ever started in it.
   */
  get fresh(): boolean {
    return (
      this.mode === 'isolated' &&
      !this.#stopping &&
      !this.#spawned &&
      this.#anchor?.running === true
    );
  }

  /**
   * Give a sandbox made ahead to the instance it was named for: from now on its crashes are
   * that instance's, and it runs at the weight the instance asks for. Refused (and the sandbox
   * stopped) when it is no longer `fresh`.
   */
  async handOver(opts: Pick<SandboxOptions, 'onCrash' | 'background'>): Promise<void> {
    if (!this.fresh) {
      await this.stop();
      throw new Error('the sandbox made ahead for this instance is gone');
    }
    this.#onCrash = opts.onCrash;
    await this.#cgroup?.setCpuWeight(opts.background ? 'low' : 'normal');
  }

  /** Give a background (warm-pool) sandbox the normal CPU weight. */
  async foreground(): Promise<void> {
    await this.#cgroup?.setCpuWeight('normal');
  }

  /**
   * Create directories under home (paths relative to it) before anything runs inside: the disk is
   * new and no process of the instance exists yet, so nothing can have planted a link, and doing
   * it from here spares a process start. Refused once the instance ran anything.
   */
  async seedHome(paths: readonly string[]): Promise<void> {
    if (this.#spawned) throw new Error('seedHome: the instance already runs processes');
    for (const rel of paths) {
      if (rel.split('/').includes('..') || rel.startsWith('/')) throw new Error(`bad path ${rel}`);
      let at = this.hostHome;
      for (const part of rel.split('/').filter(Boolean)) {
        at = join(at, part);
        await mkdir(at, { mode: 0o755 }).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
        if (this.uid !== undefined) await chown(at, this.uid, this.uid);
      }
      this.#seeded.add(posix.join(this.home, rel));
    }
  }

  /**
   * Copy the host directory `from` (regular files and directories only, e.g. an unpacked browser
   * extension) to `rel` under home before anything runs inside. The copy and the directories
   * leading to it under home are root's (files 0644, directories 0755): the instance's user reads
   * them and cannot change them, except the directories `writable` (relative to the copy, made
   * empty and owned by the user). `from` is never visible inside. Refused once the instance ran
   * anything.
   */
  async seedReadOnly(rel: string, from: string, writable: readonly string[] = []): Promise<void> {
    if (this.#spawned) throw new Error('seedReadOnly: the instance already runs processes');
    if (rel.split('/').includes('..') || rel.startsWith('/')) throw new Error(`bad path ${rel}`);
    let at = this.hostHome;
    for (const part of rel.split('/').filter(Boolean)) {
      at = join(at, part);
      if (at !== join(this.hostHome, rel)) {
        await mkdir(at, { mode: 0o755 }).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
      }
    }
    await cp(from, at, {
      recursive: true,
      errorOnExist: true,
      force: false,
      // only what the server wrote itself is copied: no link is followed or made
      filter: async (src) => {
        const st = await lstat(src);
        return st.isFile() || st.isDirectory();
      },
    });
    // readable by everyone, writable by root alone, whatever modes the source had
    const open = async (path: string): Promise<void> => {
      const st = await lstat(path);
      await chmod(path, st.isDirectory() ? 0o755 : 0o644);
      if (st.isDirectory()) {
        for (const name of await readdir(path)) await open(join(path, name));
      }
    };
    await open(at);
    for (const sub of writable) {
      if (sub.split('/').includes('..') || sub.startsWith('/')) throw new Error(`bad path ${sub}`);
      const dir = join(at, sub);
      await mkdir(dir, { mode: 0o700 });
      if (this.uid !== undefined) await chown(dir, this.uid, this.uid);
    }
  }

  /**
   * Write a tree of files under the directory `rel` of home, owned by the instance's user
   * (directories 0700, files 0600), before anything runs inside (e.g. a saved browser profile).
   * Entry paths are relative to `rel`, without `.` or `..`; refused once the instance ran anything.
   * Every path is checked before anything is written; every directory is made once, parents
   * first; then the files are written `SEED_WRITES` at a time. (Written one after the other, with
   * each file's parent directories made again, a saved profile's small files took 40-75 ms of its
   * instance's start: each step a round trip to libuv's thread pool.)
   */
  async seedFiles(
    rel: string,
    entries: readonly { path: string; data?: Buffer | undefined }[],
  ): Promise<void> {
    if (this.#spawned) throw new Error('seedFiles: the instance already runs processes');
    const dirs = new Set<string>();
    const files: { path: string; data: Buffer }[] = [];
    for (const e of entries) {
      const parts = e.path.split('/');
      if (e.path.startsWith('/') || parts.some((p) => p === '' || p === '.' || p === '..')) {
        throw new Error(`bad path ${e.path}`);
      }
      const dirParts = e.data ? parts.slice(0, -1) : parts;
      for (let i = 1; i <= dirParts.length; i++) dirs.add(dirParts.slice(0, i).join('/'));
      if (e.data) files.push({ path: e.path, data: e.data });
    }
    await this.seedHome([rel]);
    const base = join(this.hostHome, rel);
    const own = async (p: string) => {
      if (this.uid !== undefined) await chown(p, this.uid, this.uid);
    };
    // insertion order puts each directory after its parent
    for (const dir of dirs) {
      const at = join(base, dir);
      const made = await mkdir(at, { mode: 0o700 }).then(
        () => true,
        (err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
          return false;
        },
      );
      if (made) await own(at);
    }
    let next = 0;
    const writer = async () => {
      while (next < files.length) {
        const { path, data } = files[next++]!;
        const file = join(base, path);
        try {
          await writeFile(file, data, { flag: 'wx', mode: 0o600 });
          await own(file);
        } catch (err) {
          next = files.length; // the others stop after the file they are on
          throw err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(SEED_WRITES, files.length) }, writer));
  }

  /**
   * Empty the directory `rel` of home of what was seeded there (e.g. a profile skeleton a saved
   * profile replaces), keeping the directory; nothing if it does not exist. Refused once the
   * instance ran anything: until then nothing of the instance's can have planted a link there.
   */
  async emptySeeded(rel: string): Promise<void> {
    if (this.#spawned) throw new Error('emptySeeded: the instance already runs processes');
    if (rel.split('/').includes('..') || rel.startsWith('/')) throw new Error(`bad path ${rel}`);
    const at = join(this.hostHome, rel);
    const names = await readdir(at).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    await Promise.all(names.map((n) => rm(join(at, n), { recursive: true, force: true })));
  }

  /**
   * The regular files and directories under the directory `rel` of home (links, sockets and the
   * like skipped, none followed), read from the host once nothing of the instance runs that could
   * change them; at most `maxBytes` of file data, else throws saying so. Paths relative to `rel`.
   */
  async readTree(
    rel: string,
    maxBytes: number,
    skip: (name: string) => boolean = () => false,
  ): Promise<{ path: string; data?: Buffer }[]> {
    if (rel.split('/').includes('..') || rel.startsWith('/')) throw new Error(`bad path ${rel}`);
    let at = this.hostHome;
    for (const part of rel.split('/').filter(Boolean)) {
      at = join(at, part);
      const st = await lstat(at).catch(() => undefined);
      if (!st?.isDirectory()) return [];
    }
    const out: { path: string; data?: Buffer }[] = [];
    let total = 0;
    const walk = async (dir: string, prefix: string): Promise<void> => {
      for (const name of (await readdir(dir)).sort()) {
        if (skip(name)) continue;
        const path = join(dir, name);
        const shown = prefix ? `${prefix}/${name}` : name;
        const st = await lstat(path);
        if (st.isDirectory()) {
          out.push({ path: shown });
          await walk(path, shown);
        } else if (st.isFile()) {
          const fd = await open(
            path,
            constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK,
          );
          try {
            if (!(await fd.stat()).isFile()) continue;
            const data = await fd.readFile();
            total += data.length;
            if (total > maxBytes) throw new Error(`more than ${maxBytes} bytes`);
            out.push({ path: shown, data });
          } finally {
            await fd.close();
          }
        }
      }
    };
    await walk(at, '');
    return out;
  }

  /** Whether every one of `paths` (as seen inside) was made by `seedHome` and nothing ran since. */
  seeded(paths: readonly string[]): boolean {
    return !this.#spawned && paths.every((p) => this.#seeded.has(posix.normalize(p)));
  }

  /** Limits that apply to this instance. */
  get limits(): SandboxLimits {
    const l = this.#host.limits;
    return {
      memory_bytes: this.#cgroup ? l.memoryBytes : null,
      pids: this.#cgroup ? l.pids : null,
      cpus: this.#cgroup ? l.cpus : null,
      disk_bytes: this.#quota ? this.#quota.bytes : this.#tmpfsBytes || null,
    };
  }

  /** Start a process inside. It is tracked: paused, resumed and killed with the sandbox. */
  spawn(argv: readonly string[], opts: SpawnOptions): Supervised {
    if (this.#stopping) throw new Error('sandbox is stopping');
    const [cmd, ...args] = argv;
    if (!cmd) throw new Error('spawn: empty argv');
    const stdio: StdioOptions = opts.stdio ?? ['ignore', 'ignore', 'ignore'];
    // a Node IPC channel carries descriptors and messages the server's runtime acts on: never
    // to a process the instance can take over (ISOLATION.md, the egress listener)
    if (Array.isArray(stdio) && stdio.includes('ipc')) throw new Error('spawn: no IPC channel');
    const cwd = opts.cwd ?? this.home;
    this.#spawned = true;
    const prepared = this.#takePrepared(stdio, cwd);
    if (prepared) {
      let message: Buffer;
      try {
        message = launchMessage([cmd, ...args], opts.env);
      } catch (err) {
        prepared.command.end(); // it exits unused
        throw err;
      }
      prepared.command.end(message);
      return prepared.proc;
    }
    const proc =
      this.mode === 'none'
        ? new Supervised(cmd, args, { env: opts.env, cwd, stdio })
        : this.#spawnInside([cmd, ...args], stdio, opts.env, cwd);
    this.#procs.add(proc);
    void proc.exited.then(() => this.#procs.delete(proc));
    return proc;
  }

  /**
   * Start, ahead of any start, the chain of the first process an instance will run with
   * `stdio` (in home, with nothing of the server's environment): everything of a spawn but the
   * command itself, which a perl step inside waits for (`LAUNCH_STEP`). The first `spawn` with
   * that stdio then costs a write instead of the chain's ~12 ms of process starts and the
   * server's own fork (~5 ms, more as its memory grows); a first `spawn` of another shape, or
   * the sandbox's stop, ends it unused. It runs nobody's code: `fresh` still holds.
   */
  prepareSpawn(stdio: readonly ('ignore' | 'pipe')[]): void {
    if (this.mode !== 'isolated' || this.#spawned || this.#prepared || this.#stopping) return;
    const at = stdio.length;
    const proc = this.#spawnInside(
      [this.#host.plan.tools.perl, '-e', LAUNCH_STEP, String(at)],
      [...stdio, 'pipe'],
      {},
      this.home,
    );
    const command = proc.child.stdio[at] as Writable;
    command.on('error', () => {});
    this.#prepared = { proc, stdio, command };
    this.#procs.add(proc);
    void proc.exited.then(() => {
      this.#procs.delete(proc);
      if (this.#prepared?.proc === proc) this.#prepared = undefined;
    });
  }

  /** The process started ahead, if it is still there and fits; else it is ended unused. */
  #takePrepared(stdio: StdioOptions, cwd: string): Prepared | undefined {
    const prepared = this.#prepared;
    if (!prepared) return undefined;
    this.#prepared = undefined;
    const fits =
      Array.isArray(stdio) &&
      stdio.length === prepared.stdio.length &&
      stdio.every((s, i) => s === prepared.stdio[i]) &&
      cwd === this.home &&
      prepared.proc.running;
    if (fits) return prepared;
    prepared.command.end(); // nothing to read: it exits
    return undefined;
  }

  #spawnInside(
    argv: string[],
    stdio: StdioOptions,
    env: Record<string, string>,
    cwd: string,
  ): Supervised {
    const init = this.#init;
    const { tools } = this.#host.plan;
    return this.#spawnChain(stdio, (pass) => {
      const userns = pass(openSync(`/proc/${init}/ns/user`, 'r'));
      const pidns = pass(openSync(`/proc/${init}/ns/pid`, 'r'));
      return [
        ...(this.#userns ? this.#joinUserns(init) : this.#joinRoot(init)),
        tools.bwrap,
        // No --die-with-parent: with --pidns, bubblewrap forks a throwaway intermediate process
        // that exits at once, and the command, when it sets its parent-death signal before that
        // exit, is SIGKILLed by it (bubblewrap 0.8; a few starts per thousand under load died
        // so). The command dies with the server anyway: it is in the instance's pid namespace,
        // whose pid 1 dies with the anchor, and stop kills the cgroup.
        '--userns',
        String(userns),
        '--pidns',
        String(pidns),
        ...this.#confinement(pass, env, cwd),
        '--',
        ...closeNamespaceFds([userns, pidns], tools.sh),
        ...argv,
      ];
    });
  }

  /**
   * Start a chain of root-side wrappers that ends in bubblewrap. Every chain has the same shape
   * at its root end, whatever the instance asked for: a fixed environment (the instance's
   * variables travel to bubblewrap in a pipe and reach only the command, so nothing it sets,
   * `LD_PRELOAD` say, is seen by a process running as root), and a first step that joins the
   * instance's cgroup and closes every descriptor but the ones listed in `stdio` and those the
   * chain passes on purpose (descriptors the server inherited from whoever started it would
   * otherwise reach every instance process).
   *
   * `build` names the rest of the chain; its `pass` opens a descriptor for the chain (closed
   * here once the child has it) and gives the number the child sees it as.
   */
  #spawnChain(
    stdio: StdioOptions,
    build: (pass: (fd: number | 'pipe', data?: Buffer) => number) => string[],
  ): Supervised {
    const list: unknown[] = Array.isArray(stdio)
      ? [...(stdio as unknown[])]
      : [stdio, stdio, stdio];
    const opened: number[] = [];
    const pipes: [number, Buffer][] = [];
    const pass = (fd: number | 'pipe', data?: Buffer) => {
      if (fd === 'pipe') pipes.push([list.length, data ?? Buffer.alloc(0)]);
      else opened.push(fd);
      list.push(fd);
      return list.length - 1;
    };
    try {
      const chain = build(pass);
      const files = this.#cgroup?.procsFiles ?? [];
      const proc = new Supervised(
        this.#host.plan.tools.perl,
        ['-e', CHAIN_START, String(files.length), ...files, String(list.length), ...chain],
        { env: ROOT_SIDE_ENV, stdio: list as StdioOptions },
      );
      for (const [fd, data] of pipes) {
        const pipe = proc.child.stdio[fd] as Writable | null;
        pipe?.on('error', () => {});
        pipe?.end(data);
      }
      return proc;
    } finally {
      for (const fd of opened) closeSync(fd);
    }
  }

  /**
   * The root chain's way into an instance's namespaces: `nsenter` (as root) into its network,
   * IPC, UTS and cgroup namespaces, then setpriv to its uid; bubblewrap then joins its user and
   * pid namespaces as that uid, the owner of the user namespace.
   */
  #joinRoot(init: number): string[] {
    return [
      this.#host.plan.tools.nsenter,
      `--net=/proc/${init}/ns/net`,
      `--ipc=/proc/${init}/ns/ipc`,
      `--uts=/proc/${init}/ns/uts`,
      `--cgroup=/proc/${init}/ns/cgroup`,
      '--',
      ...this.#dropToUid(),
    ];
  }

  /**
   * The user-namespace chain's way in (no root, or root without CAP_SYS_ADMIN). The anchor is two
   * user namespaces deep: an outer one (the server's uid, or the instance's, as its root) that
   * owns the instance's mount namespace with its disk, and inside it the instance's own, which
   * owns its pid, network, IPC, UTS and cgroup namespaces. `nsenter` joins the outer user
   * namespace (the server owns it, so it may), which gives it the capabilities there that
   * joining the instance's network, IPC, UTS, cgroup and mount namespaces needs; bubblewrap, as
   * root of the outer namespace, then joins the inner user namespace and the pid namespace
   * (`--userns/--pidns`), exactly as the root chain's does, and drops every capability.
   */
  #joinUserns(init: number): string[] {
    const outer = this.#outer;
    return [
      ...(this.uid !== undefined ? this.#dropToUid(false) : []),
      this.#host.plan.tools.nsenter,
      '--preserve-credentials',
      `--user=/proc/${outer}/ns/user`,
      `--mount=/proc/${outer}/ns/mnt`,
      `--net=/proc/${init}/ns/net`,
      `--ipc=/proc/${init}/ns/ipc`,
      `--uts=/proc/${init}/ns/uts`,
      `--cgroup=/proc/${init}/ns/cgroup`,
      '--',
      // with subordinate ids: down to the instance's uid, the owner of its user namespace
      ...(this.#subids
        ? dropToInner(this.#host.plan.tools.setpriv, true)
        : [this.#host.plan.tools.setpriv, '--pdeathsig=SIGKILL', '--']),
    ];
  }

  /**
   * setpriv to the instance's uid; the parent-death signal after the uid change clears it
   * (`deathSignal` false where a later step sets it).
   */
  #dropToUid(deathSignal = true): string[] {
    return [
      this.#host.plan.tools.setpriv,
      `--reuid=${this.uid}`,
      `--regid=${this.uid}`,
      '--clear-groups',
      ...(deathSignal ? ['--pdeathsig=SIGKILL'] : []),
      '--',
    ];
  }

  /**
   * bubblewrap options every process of the instance gets, pid 1 included: its root file system,
   * no capabilities, the seccomp filter, and its environment (through a pipe: an argument would
   * show the values to every local user in `ps`).
   */
  #confinement(
    pass: (fd: number | 'pipe', data?: Buffer) => number,
    env: Record<string, string>,
    cwd: string,
    view: 'instance' | 'init' = 'instance',
  ): string[] {
    // the mounts come from the server's plan; this process adds its own descriptors of the
    // instance's directories (pid 1 binds none of them)
    const plan = this.#host.plan;
    // the instance's own disk, not the server's view of it: by a path descriptor (the server may
    // not read those directories, only pass them on)
    const bind = this.#bindFrom;
    const dir = (path: string, from: string | undefined) =>
      pass(
        from === undefined ? openSync(path, 'r') : openSync(from, O_PATH | constants.O_DIRECTORY),
      );
    const root =
      view === 'init'
        ? mountArgs(plan.init)
        : mountArgs(plan.instance, {
            etc: pass(openSync(bind?.etc ?? this.#host.etcDir, 'r')),
            home: dir(this.hostHome, bind?.home),
            tmp: dir(this.hostTmp, bind?.tmp),
            shm: dir(this.hostShm, bind?.shm),
          });
    const envArgs = ['--clearenv'];
    for (const [k, v] of Object.entries(env)) envArgs.push('--setenv', k, v);
    return [
      ...root,
      '--args',
      String(pass('pipe', Buffer.from(envArgs.map((a) => `${a}\0`).join('')))),
      // names the instance on the host (`pgrep -f <id>` lists its processes' wrappers) and
      // tells its processes which instance they are
      '--setenv',
      'BURROW_INSTANCE',
      this.#name,
      '--cap-drop',
      'ALL',
      '--seccomp',
      String(pass('pipe', this.#host.seccomp)),
      '--chdir',
      cwd,
    ];
  }

  /**
   * The anchor: pid 1 of the instance's pid namespace, a shell that only reaps orphans. bubblewrap
   * creates the instance's user, pid, network (loopback up), IPC, UTS (host name set) and cgroup
   * namespaces and runs the shell as pid 1 itself (`--as-pid-1`), confined like every other
   * process of the instance: its root file system, no capabilities, no_new_privs, seccomp. So
   * `/proc/1/root` inside is the instance's own root, and `/proc/1/mem` gives nothing a command
   * does not have. The outer bubblewrap stays on the host side as pid 1's parent, outside the
   * instance's pid namespace (invisible in there); pid 1 dies with it (`--die-with-parent`: no
   * `--pidns`, so none of the race described in `#spawnInside`).
   */
  async #startAnchor(): Promise<void> {
    const anchor = this.#spawnChain(['ignore', 'ignore', 'pipe'], (pass) => [
      ...(this.#userns ? this.#outerUserns() : this.#dropToUid()),
      this.#host.plan.tools.bwrap,
      '--unshare-user',
      '--uid',
      String(SANDBOX_UID),
      '--gid',
      String(SANDBOX_UID),
      '--unshare-pid',
      '--as-pid-1',
      '--unshare-net',
      '--unshare-ipc',
      '--unshare-uts',
      '--hostname',
      SANDBOX_HOSTNAME,
      '--unshare-cgroup',
      '--die-with-parent',
      ...this.#confinement(pass, { PATH: SANDBOX_PATH }, '/', 'init'),
      '--',
      '/bin/sh',
      '-c',
      // pid 1 reaps every orphan of the namespace while it waits for a sleep, started again if
      // something inside kills it (signals from inside reach pid 1 only when it handles them)
      'trap "" TERM INT HUP; while :; do sleep infinity & wait; done',
      `burrow-init-${this.#name}`,
    ]);
    this.#procs.add(anchor);
    let stderr = '';
    anchor.child.stderr?.on('data', (c: Buffer) => (stderr = keepTail(stderr, c)));
    const hostUid = this.#subids?.uid ?? this.uid ?? process.getuid?.() ?? 0;
    await until(() => !anchor.running || (this.#init = namespaceInit(anchor.pid, hostUid)) !== 0, {
      timeoutMs: 10_000,
      intervalMs: 2,
    });
    if (!this.#init) {
      await anchor.kill(0);
      throw new Error(`could not create the instance's namespaces: ${stderr.trim() || 'timeout'}`);
    }
    if (this.#userns) {
      this.#outer = anchor.pid;
      if (this.#tmpfs) {
        // the disk exists in the anchor's mount namespace only: the server reaches it from there
        const root = `/proc/${anchor.pid}/root`;
        const disk = `${root}${this.#subids ? `${STAGE}/disk` : join(this.#diskDir, 'disk')}`;
        // with subordinate ids, the server's own files there go through the idmapped view, and
        // the instance gets the disk itself (subids.ts)
        const mine = this.#subids ? `${root}${STAGE}/view` : disk;
        if (this.#subids) {
          const from = (d: string) => join(disk, d);
          const etc = `${root}${STAGE}/etc`;
          this.#bindFrom = { home: from('home'), tmp: from('tmp'), shm: from('shm'), etc };
        }
        this.hostHome = join(mine, 'home');
        this.hostTmp = join(mine, 'tmp');
        this.hostShm = join(mine, 'shm');
      }
    }
    this.#anchor = anchor;
    void anchor.exited.then((e) => {
      this.#procs.delete(anchor);
      if (!this.#stopping) this.#onCrash?.(`the instance's init exited (${describeExit(e)})`);
    });
  }

  /**
   * The start of the user-namespace chain's anchor (`#joinUserns` says how the rest join it):
   * [setpriv to the instance's uid, where the server can give it one] → `unshare` making the
   * outer user namespace (the caller as its root) with a mount namespace of its own → with a
   * quota, a shell mounting the instance's disk there as a tmpfs of the quota's size and making
   * home, tmp and shm on it → the anchor's bubblewrap.
   */
  #outerUserns(): string[] {
    const { tools } = this.#host.plan;
    const disk = join(this.#diskDir, 'disk');
    if (this.#subids) {
      const steps = anchorSteps(tools, this.#subids, this.#host.etcDir, this.#tmpfsBytes);
      return [tools.setpriv, '--pdeathsig=SIGKILL', '--', ...steps];
    }
    return [
      ...(this.uid !== undefined
        ? this.#dropToUid()
        : [tools.setpriv, '--pdeathsig=SIGKILL', '--']),
      tools.unshare,
      '--user',
      '--map-root-user',
      '--mount',
      '--propagation',
      'private',
      '--',
      ...(this.#tmpfs
        ? [
            tools.sh,
            '-c',
            'set -e; mount -t tmpfs -o "size=$1,mode=0711,nosuid,nodev" burrow-disk "$2"; ' +
              'cd "$2"; mkdir -m 0700 home tmp shm; shift 2; exec "$@"',
            'burrow-disk',
            String(this.#tmpfsBytes),
            disk,
          ]
        : []),
    ];
  }

  /**
   * A TCP listener on `127.0.0.1:port` inside the instance's network namespace, handed to the
   * server. A perl step on the root side of a chain (`LISTEN_STEP`) joins that namespace alone
   * (nothing of the instance's file system, uid or processes), opens the socket and sends it over
   * the Node IPC channel of its spawn, then exits. Connections the instance makes to it arrive in
   * the server process. No process of the instance holds the channel at any time, and the step
   * starts in a few ms (a Node helper inside the instance took hundreds under load).
   */
  async listen(port: number): Promise<Server> {
    if (this.mode === 'none') throw new Error('no network namespace in none mode');
    if (this.#stopping) throw new Error('sandbox is stopping');
    const ahead = this.#ahead.get(port);
    if (ahead) {
      this.#ahead.delete(port);
      return ahead;
    }
    return this.#listen(port);
  }

  /**
   * Open the listener of `port` now, for the `listen(port)` to come to take (a sandbox made
   * ahead: stock.ts). Until then nothing inside runs that could connect to it; a sandbox that
   * stops first closes it.
   */
  async listenAhead(port: number): Promise<void> {
    if (this.mode === 'none' || this.#ahead.has(port)) return;
    const opening = this.#listen(port);
    this.#ahead.set(port, opening);
    opening.catch(() => this.#ahead.delete(port));
    await opening;
  }

  async #listen(port: number): Promise<Server> {
    const init = this.#init;
    const { tools } = this.#host.plan;
    const calls = LISTEN_SYSCALLS[process.arch];
    if (!calls) throw new Error(`no listen step for ${process.arch}`);
    const proc = this.#spawnChain(['ignore', 'ignore', 'pipe', 'ipc'], (pass) => {
      // joined in this order: the outer user namespace first (the user-namespace chain), whose
      // capabilities joining the network namespace needs
      const ns = [
        ...(this.#userns ? [pass(openSync(`/proc/${this.#outer}/ns/user`, 'r'))] : []),
        pass(openSync(`/proc/${init}/ns/net`, 'r')),
      ];
      return [
        // a container's root owns nothing of the instance's namespaces: the instance's uid does
        ...(this.#userns && this.uid !== undefined ? this.#dropToUid(false) : []),
        tools.perl,
        '-e',
        LISTEN_STEP,
        String(calls.setns),
        String(calls.sendmsg),
        '3',
        String(port),
        ...ns.map(String),
      ];
    });
    this.#procs.add(proc);
    void proc.exited.then(() => this.#procs.delete(proc));
    let stderr = '';
    proc.child.stderr?.on('data', (c: Buffer) => (stderr = keepTail(stderr, c)));
    const server = await new Promise<Server | Error>((resolve) => {
      proc.child.once('message', (_msg, handle) =>
        resolve(handle instanceof NetServer ? handle : new Error('no socket in its message')),
      );
      void proc.exited.then((e) =>
        resolve(new Error(stderr.trim() || `the listen step exited (${describeExit(e)})`)),
      );
      setTimeout(() => resolve(new Error('the listen step timed out')), 15_000).unref();
    });
    if (server instanceof Error) {
      await proc.kill(0);
      throw new Error(`could not open port ${port} inside the instance: ${server.message}`);
    }
    proc.child.disconnect?.();
    return background(server);
  }

  /** Run a command inside to completion, with a deadline and capped output. */
  async exec(
    argv: readonly string[],
    opts: {
      env: Record<string, string>;
      timeoutMs: number;
      maxBytes?: number;
      cwd?: string;
      /** Written to the command's stdin (default: no stdin). */
      stdin?: string | Buffer;
    },
  ): Promise<ExecResult> {
    const spawnOpts: SpawnOptions = {
      env: opts.env,
      stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    };
    if (opts.cwd !== undefined) spawnOpts.cwd = opts.cwd;
    const proc = this.spawn(argv, spawnOpts);
    const max = opts.maxBytes ?? 1 << 20;
    const collect = (stream: Readable | null) => {
      const chunks: Buffer[] = [];
      let size = 0;
      stream?.on('data', (c: Buffer) => {
        if (size < max) chunks.push(c.subarray(0, max - size));
        size += c.length;
      });
      return () => Buffer.concat(chunks);
    };
    const out = collect(proc.child.stdout);
    const err = collect(proc.child.stderr);
    if (opts.stdin !== undefined) {
      proc.child.stdin?.on('error', () => {});
      proc.child.stdin?.end(opts.stdin);
    }
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      void this.terminate(proc);
    }, opts.timeoutMs);
    const info = await proc.exited;
    clearTimeout(timer);
    await streamsClosed(proc);
    return { code: info.code, signal: info.signal, stdout: out(), stderr: err(), timedOut };
  }

  /** Every live process of the instance (host pids). */
  pids(): number[] {
    if (this.#cgroup) return this.#cgroup.pids();
    const roots = [...this.#procs].filter((p) => p.pid > 0 && p.running).map((p) => p.pid);
    return roots.length > 0 ? [...roots, ...descendants(roots)] : [];
  }

  /**
   * Why this instance cannot be paused, or undefined. An isolated instance without a cgroup (a
   * server without the `limits` guarantee) has no freezer, and stopping its processes one by one
   * is not a pause its processes could not undo; `none` mode keeps that best effort.
   */
  get pauseRefusal(): string | undefined {
    if (this.mode !== 'isolated' || this.#cgroup) return undefined;
    return "Pausing needs the cgroup freezer (the 'limits' isolation guarantee), which this server does not hold; run `burrow doctor` for why and the fix";
  }

  /** Freeze every process (the cgroup freezer: atomic; else SIGSTOP until all are stopped). */
  async pause(): Promise<void> {
    if (this.#cgroup) await this.#cgroup.freeze();
    else await freezeAll(() => this.pids());
  }

  async resume(): Promise<void> {
    if (this.#cgroup) await this.#cgroup.thaw();
    else for (const pid of this.pids().reverse()) signalQuietly(pid, 'SIGCONT');
  }

  /** Kill every process, release the cgroup and the disk. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  /**
   * Kill one process of the sandbox with everything below it: the processes inside first
   * (their bubblewrap then exits on its own), then the process itself.
   */
  async terminate(proc: Supervised, reapMs = KILL_INSIDE_MS): Promise<void> {
    if (!proc.running) return;
    // by start time: while the namespace dies, a number seen may go to another process
    const below = descendants(proc.pid).flatMap((pid) => processRef(pid) ?? []);
    signalQuietly(proc.pid, 'SIGCONT');
    for (const ref of below) signalProcess(ref, 'SIGCONT');
    for (const ref of below) signalProcess(ref, 'SIGKILL');
    if (below.length > 0) {
      // the process reaps what it started and then exits by itself; ended first, it would
      // leave them to the host's init (a busy machine can take over a second for all to end)
      await raceDeadline(proc.exited, reapMs);
    }
    await proc.kill(200);
  }

  /**
   * SIGKILL every process in the instance's pid namespace but pid 1, and wait until those whose
   * parent is not pid 1 are gone. pid 1's own children need no wait: pid 1 reaps them, and the
   * kernel does when pid 1 dies; and pid 1 starts its `sleep` again as soon as it is killed, so
   * waiting for them all never ended before the timeout (3 s of every stop).
   */
  async #killInside(): Promise<void> {
    if (!this.#cgroup || !this.#init || !this.#cgroup.pids().includes(this.#init)) return;
    let ns: string;
    try {
      ns = readlinkSync(`/proc/${this.#init}/ns/pid`);
    } catch {
      return; // pid 1 is gone already
    }
    const inside = () =>
      this.#cgroup!.pids().filter((pid) => {
        if (pid === this.#init) return false;
        try {
          return readlinkSync(`/proc/${pid}/ns/pid`) === ns;
        } catch {
          return false;
        }
      });
    await this.#cgroup.freeze().catch(() => {}); // nothing forks between listing and signals
    for (const pid of inside()) signalQuietly(pid, 'SIGKILL');
    await this.#cgroup.thaw().catch(() => {});
    const init = this.#init;
    const ended = await until(
      () => {
        const left = inside();
        for (const pid of left) signalQuietly(pid, 'SIGKILL');
        return left.every((pid) => parentOf(pid) === init);
      },
      { timeoutMs: KILL_INSIDE_MS, intervalMs: 5 },
    );
    if (!ended) {
      this.#log.warn(
        { instance: this.#name, left: inside() },
        `processes of the instance still ran ${KILL_INSIDE_MS} ms after SIGKILL; ending pid 1 anyway`,
      );
    }
  }

  async #stop(): Promise<void> {
    /** Whether processes of the instance were still there after every kill and wait. */
    let lingering = false;
    // a process started ahead and never used ends by itself once its descriptor closes, reaped
    // by its wrapper; killed with its wrapper, it would be left to the host's init to reap
    const prepared = this.#prepared;
    this.#prepared = undefined;
    if (prepared) {
      prepared.command.end();
      await raceDeadline(prepared.proc.exited, PREPARED_EXIT_MS);
    }
    for (const opening of this.#ahead.values())
      void opening.then(
        (l) => l.close(),
        () => {},
      );
    this.#ahead.clear();
    if (this.#cgroup) {
      // Every process of the instance is in its cgroup, the wrappers outside its pid namespace
      // too. Its disk goes with it: nothing needs a graceful end. Order matters: the processes
      // inside die first, while their parents (bubblewrap outside, pid 1 inside) are there to
      // reap them; only then pid 1, whose death could not complete while the namespace held
      // zombies nobody reaps (orphans would go to the host's init, which need not reap).
      await this.#killInside();
      // only while it is still ours: a pid 1 that died earlier may have left its number to
      // another process (of another instance, say)
      const init =
        this.#init && this.#cgroup.pids().includes(this.#init) ? processRef(this.#init) : undefined;
      if (init) {
        signalProcess(init, 'SIGKILL');
        // Its parent, the anchor that made its pid namespace, reaps it and then ends by itself.
        // Killed with the rest at once, the anchor often died first, and pid 1 became a zombie
        // of the host's init (which need not reap: in a container it may be the server itself).
        // pid 1 dies last in its namespace, after every process in there has exited.
        const done = await until(() => reaped(init), { timeoutMs: REAP_MS, intervalMs: 5 });
        if (!done) {
          this.#log.warn(
            { instance: this.#name },
            `the instance's pid 1 was not reaped ${REAP_MS} ms after SIGKILL; killing its parent`,
          );
        }
      }
      await this.#cgroup.kill();
      await Promise.all([...this.#procs].map((p) => p.exited));
      lingering = this.#cgroup.pids().length > 0;
      if (!lingering) {
        await this.#cgroup
          .remove()
          .catch((err: unknown) => this.#log.warn({ err }, 'could not remove the instance cgroup'));
      }
    } else {
      // by start time: a number seen before the waits may have gone to another process since
      const all = this.pids().flatMap((pid) => processRef(pid) ?? []);
      // pid 1 dying makes the kernel kill the whole pid namespace
      const init = this.#init ? all.find((ref) => ref.pid === this.#init) : undefined;
      if (init) signalProcess(init, 'SIGKILL');
      await Promise.all([...this.#procs].map((p) => this.terminate(p, REAP_MS)));
      for (const ref of all) signalProcess(ref, 'SIGKILL');
      lingering = !(await until(() => !all.some(stillRunning), {
        timeoutMs: 3000,
        intervalMs: 20,
      }));
    }
    await this.#quota?.remove();
    if (this.mode === 'isolated') await rm(this.#diskDir, { recursive: true, force: true });
    if (lingering) {
      // a process the kernel has not let die yet still runs as the instance's ids: no later
      // instance may get them while it exists (the next server start sweeps what is left)
      this.#log.error(
        { instance: this.#name, uid: this.uid },
        "processes of the instance outlived its stop; its host ids stay taken until the server's next start",
      );
      return;
    }
    if (this.uid !== undefined) this.#host.releaseUid(this.uid);
    if (this.#subids) this.#host.releaseSubordinate(this.#subids);
  }
}

/**
 * pid 1 of the namespace the anchor (`unshare --fork`) created: its child, once the child runs as
 * the instance's uid in a user namespace of its own. 0 while not there yet.
 */
function namespaceInit(anchorPid: number, uid: number): number {
  let children: string;
  try {
    children = readFileSync(`/proc/${anchorPid}/task/${anchorPid}/children`, 'utf8').trim();
  } catch {
    return 0;
  }
  const child = Number(children.split(' ')[0]);
  if (!child) return 0;
  try {
    const status = readFileSync(`/proc/${child}/status`, 'utf8');
    const uidLine = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    const comm = /^Name:\s+(\S+)/m.exec(status)?.[1];
    if (Number(uidLine) !== uid || comm !== 'sh') return 0;
    // a shell of the anchor's own (the disk's mount in the user-namespace chain forks one) is
    // still in the anchor's pid namespace; pid 1 is the first process of a new one
    const ns = (pid: number) => readlinkSync(`/proc/${pid}/ns/pid`);
    return ns(child) !== ns(anchorPid) ? child : 0;
  } catch {
    return 0;
  }
}

/** The command for `LAUNCH_STEP`: every field NUL-ended (a NUL cannot be in one). */
function launchMessage(argv: readonly string[], env: Record<string, string>): Buffer {
  const fields = [String(argv.length), ...argv, ...Object.entries(env).flat()];
  if (fields.some((f) => f.includes('\0'))) throw new Error('spawn: a NUL in an argument');
  return Buffer.from(fields.map((f) => `${f}\0`).join(''));
}

/**
 * bubblewrap closes the descriptors it reads (`--args`, `--seccomp`, `--bind-fd`) but not the two
 * namespace descriptors of `--userns/--pidns`, which the command would inherit open. A shell
 * (dash: ~1 ms) closes them and executes the command in its place, same pid, same argv.
 */
function closeNamespaceFds(fds: readonly number[], sh: string): string[] {
  return [sh, '-c', `exec ${fds.map((fd) => `${fd}<&-`).join(' ')} "$@"`, 'burrow-exec'];
}

/** Error output kept for a message: its last 2 KiB (the process writing it may be hostile). */
function keepTail(kept: string, chunk: Buffer): string {
  return (kept + chunk.toString()).slice(-2048);
}

export function describeExit(e: ExitInfo): string {
  return e.signal ? `signal ${e.signal}` : `status ${e.code}`;
}

/** Resolve when the child's stdout and stderr have delivered everything (after exit). */
function streamsClosed(proc: Supervised): Promise<void> {
  const wait = (s: Readable | null) =>
    s && !s.readableEnded && !s.destroyed
      ? new Promise<void>((r) => {
          s.once('close', r);
          s.once('end', r);
        })
      : Promise.resolve();
  return Promise.all([wait(proc.child.stdout), wait(proc.child.stderr)]).then(() => undefined);
}
