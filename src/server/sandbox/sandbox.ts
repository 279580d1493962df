/**
 * An instance's sandbox: a machine of its own for both instance types (ISOLATION.md in this
 * folder).
 *
 * How it is built (root server):
 * - **Identity.** A host uid of its own (`SandboxHost.allocateUid`), never 0, owning nothing on
 *   the host but the instance's disk. Inside, that uid is `user` (1000) in a user namespace that
 *   maps nothing else: host root does not exist in there.
 * - **Namespaces.** An anchor process, started as that uid, owns the instance's user, pid,
 *   network, IPC, UTS and cgroup namespaces; pid 1 of the pid namespace is a small shell that
 *   reaps orphans, and when it dies the kernel kills everything in the namespace. Every other
 *   process of the instance joins those namespaces, so they share one loopback, one SysV IPC
 *   space and one process tree: one machine.
 * - **Filesystem.** bubblewrap builds each process's mount namespace the same way (rootfs.ts),
 *   from the instance's disk (quota.ts) and a generated /etc; `--cap-drop ALL`, no_new_privs and
 *   the seccomp filter (seccomp.ts) apply to every process.
 * - **Limits.** Each process writes its pid into the instance's cgroup (cgroups.ts) before it
 *   executes anything; pause freezes the cgroup; stop kills pid 1 and empties the cgroup.
 * - **Network.** The namespace has only a loopback interface. `listen(port)` opens a TCP listener
 *   inside it and hands the socket to the server, which is how the egress proxy (egress/) serves
 *   the instance without any route out.
 *
 * What differs with the server's privilege level (support.ts) is the instance's process space,
 * chosen once when the sandbox is created, one file per level with its chain of wrappers: the
 * security boundary at that level (space/: `root.ts`, `userns.ts` for a server without
 * CAP_SYS_ADMIN, `subids.ts` for a normal user with a subordinate range, `none.ts` for
 * `--insecure-no-isolation`). This class is the same at every level: its processes, cgroup and
 * limits, and the pieces in files of their own beside it: seeding home (seed.ts), listeners
 * (listen.ts), the process started ahead (prepared.ts) and stopping (stop.ts).
 */
import type { StdioOptions } from 'node:child_process';
import { mkdir, realpath } from 'node:fs/promises';
import type { Server } from 'node:net';
import { join } from 'node:path';
import type { InstanceLimits } from '../../api/index.js';
import type { Logger } from '../../internal/log.js';
import { descendants, freezeAll, signalQuietly, type Supervised } from '../../internal/process.js';
import { stage } from '../../internal/stages.js';
import { Cgroup } from './cgroups.js';
import { runToEnd, type ExecOptions, type ExecResult } from './exec.js';
import { describeExit } from './exit.js';
import type { SandboxHost } from './host.js';
import { Listeners } from './listen.js';
import { SpawnAhead } from './prepared.js';
import { HomeSeeds } from './seed.js';
import {
  chooseSpace,
  type ProcessSpace,
  type SandboxMode,
  type SpaceContext,
} from './space/index.js';
import { endProcesses, KILL_INSIDE_MS, terminate } from './stop.js';

export { SANDBOX_HOME, SANDBOX_PATH } from './rootfs.js';
export { describeExit } from './exit.js';
export type { ExecOptions, ExecResult } from './exec.js';
export type { SandboxMode } from './space/index.js';

/**
 * The stdio of a browser's Chromium (chromium.ts): stderr read for errors, fds 3 and 4 its
 * DevTools pipe. What a sandbox made ahead for a start prepares a process for (stock.ts).
 */
export const BROWSER_STDIO = Object.freeze(['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] as const);

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

/** What an instance may use, as reported by `GET /v1/instance/{id}`. */
export type SandboxLimits = InstanceLimits;

export class Sandbox {
  /** Server-only directory of the instance (root 0700, not visible inside). */
  readonly hostRun: string;
  readonly #host: SandboxHost;
  readonly #space: ProcessSpace;
  readonly #procs = new Set<Supervised>();
  /** Told when a process of the sandbox's own dies on its own (replaced by `handOver`). */
  #onCrash: ((reason: string) => void) | undefined;
  readonly #log: Logger;
  /** The instance's name (its id). */
  readonly #name: string;
  #cgroup: Cgroup | undefined;
  readonly #background: boolean;
  readonly #seeds: HomeSeeds;
  readonly #listeners: Listeners;
  /** A process started ahead for the first command, not yet given one. */
  readonly #ahead = new SpawnAhead();
  /** Whether anything of the instance's own was started (burrow's own helpers aside). */
  #spawned = false;
  #stopping: Promise<void> | undefined;

  private constructor(
    host: SandboxHost,
    dir: string,
    opts: SandboxOptions,
    makeSpace: (ctx: SpaceContext) => ProcessSpace,
  ) {
    this.#host = host;
    this.#onCrash = opts.onCrash;
    this.#log = opts.log;
    this.#name = opts.name;
    this.#background = opts.background ?? false;
    this.hostRun = join(dir, 'run');
    const space = makeSpace({
      host,
      name: opts.name,
      cgroupFiles: () => this.#cgroup?.procsFiles ?? [],
      track: (proc) => this.#track(proc),
      anchorExited: (e) => {
        if (!this.#stopping) this.#onCrash?.(`the instance's init exited (${describeExit(e)})`);
      },
    });
    this.#space = space;
    this.#seeds = new HomeSeeds(
      {
        home: space.home,
        get hostHome() {
          return space.disk.home;
        },
        uid: space.uid,
      },
      () => this.#spawned,
    );
    this.#listeners = new Listeners({
      network: space.network,
      track: (proc) => this.#track(proc),
      stopping: () => this.#stopping !== undefined,
    });
  }

  /** Build the sandbox: disk, cgroup, namespaces. Cleans up after itself when a step fails. */
  static async create(host: SandboxHost, opts: SandboxOptions): Promise<Sandbox> {
    const dir = await realpath(opts.dir);
    const space = await chooseSpace(host, opts.name, dir);
    const sandbox = new Sandbox(host, dir, opts, space);
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
    const layout = this.#space.cgroups;
    const cgroup =
      layout &&
      stage('cgroup', () => Cgroup.create(layout, `${process.pid}.${name}`, host.limits)).then(
        async (made) => {
          this.#cgroup = made;
          if (this.#background) await made.setCpuWeight('low');
        },
      );
    const disk = this.#space.makeDisk();
    // the anchor joins the cgroup; whether it waits for the disk is its level's (space/)
    const anchor = this.#space.start({ cgroup, disk });
    const results = await Promise.allSettled([cgroup, disk, anchor]);
    for (const r of results) if (r.status === 'rejected') throw r.reason;
  }

  #track(proc: Supervised): void {
    this.#procs.add(proc);
    void proc.exited.then(() => this.#procs.delete(proc));
  }

  get mode(): SandboxMode {
    return this.#space.mode;
  }

  /** HOME as seen inside. */
  get home(): string {
    return this.#space.home;
  }

  /** /tmp as seen inside. */
  get tmp(): string {
    return this.#space.tmp;
  }

  /**
   * Host paths of the instance's home, tmp and /dev/shm (on its disk). With a tmpfs quota (the
   * user-namespace chain) the disk is mounted in the anchor's mount namespace only, and these
   * reach it through `/proc/<anchor>/root` once the anchor runs.
   */
  get hostHome(): string {
    return this.#space.disk.home;
  }

  get hostTmp(): string {
    return this.#space.disk.tmp;
  }

  get hostShm(): string {
    return this.#space.disk.shm;
  }

  /** The instance's host uid, where the server sets it itself (isolated mode). */
  get uid(): number | undefined {
    return this.#space.uid;
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
    return !this.#stopping && !this.#spawned && this.#space.anchored;
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

  /** Create directories under home (seed.ts). Refused once the instance ran anything. */
  seedHome(paths: readonly string[]): Promise<void> {
    return this.#seeds.seedHome(paths);
  }

  /** Copy a host directory read-only under home (seed.ts). Refused once anything ran. */
  seedReadOnly(rel: string, from: string, writable: readonly string[] = []): Promise<void> {
    return this.#seeds.seedReadOnly(rel, from, writable);
  }

  /** Write a tree of files under home as the instance's (seed.ts). Refused once anything ran. */
  seedFiles(
    rel: string,
    entries: readonly { path: string; data?: Buffer | undefined }[],
  ): Promise<void> {
    return this.#seeds.seedFiles(rel, entries);
  }

  /** Empty a directory of home of what was seeded (seed.ts). Refused once anything ran. */
  emptySeeded(rel: string): Promise<void> {
    return this.#seeds.emptySeeded(rel);
  }

  /**
   * The files and directories under a directory of home, bounded; `charge` is told their bytes
   * before any is read (seed.ts).
   */
  readTree(
    rel: string,
    maxBytes: number,
    skip?: (name: string) => boolean,
    charge?: (bytes: number) => Promise<void>,
  ): Promise<{ path: string; data?: Buffer }[]> {
    return this.#seeds.readTree(rel, maxBytes, skip, charge);
  }

  /** Whether every one of `paths` (as seen inside) was made by `seedHome` and nothing ran since. */
  seeded(paths: readonly string[]): boolean {
    return this.#seeds.seeded(paths);
  }

  /** Limits that apply to this instance. */
  get limits(): SandboxLimits {
    const l = this.#host.limits;
    return {
      memory_bytes: this.#cgroup ? l.memoryBytes : null,
      pids: this.#cgroup ? l.pids : null,
      cpus: this.#cgroup ? l.cpus : null,
      disk_bytes: this.#space.diskBytes,
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
    const launched = this.#ahead.launch([cmd, ...args], opts.env, stdio, cwd === this.home);
    if (launched) return launched;
    const proc = this.#space.spawn([cmd, ...args], stdio, opts.env, cwd);
    this.#track(proc);
    return proc;
  }

  /**
   * Start, ahead of any start, the chain of the first process an instance will run with
   * `stdio` (in home, with nothing of the server's environment): everything of a spawn but the
   * command itself (prepared.ts). The first `spawn` with that stdio then costs a write; a first
   * `spawn` of another shape, or the sandbox's stop, ends it unused. It runs nobody's code:
   * `fresh` still holds.
   */
  prepareSpawn(stdio: readonly ('ignore' | 'pipe')[]): void {
    const space = this.#space;
    if (!space.startsAhead || this.#spawned || this.#ahead.waiting || this.#stopping) return;
    const perl = this.#host.plan.tools.perl;
    const proc = this.#ahead.start(stdio, perl, (argv, s) => space.spawn(argv, s, {}, this.home));
    this.#track(proc);
  }

  /**
   * A TCP listener on `127.0.0.1:port` inside the instance's network namespace, handed to the
   * server (listen.ts): the one opened ahead for that port, or a new one.
   */
  listen(port: number): Promise<Server> {
    return this.#listeners.listen(port);
  }

  /**
   * Open the listener of `port` now, for the `listen(port)` to come to take (a sandbox made
   * ahead: stock.ts). Until then nothing inside runs that could connect to it; a sandbox that
   * stops first closes it.
   */
  listenAhead(port: number): Promise<void> {
    return this.#listeners.listenAhead(port);
  }

  /** Run a command inside to completion, with a deadline and capped output (exec.ts). */
  exec(argv: readonly string[], opts: ExecOptions): Promise<ExecResult> {
    const start = (stdio: StdioOptions) => {
      const spawnOpts: SpawnOptions = { env: opts.env, stdio };
      if (opts.cwd !== undefined) spawnOpts.cwd = opts.cwd;
      return this.spawn(argv, spawnOpts);
    };
    return runToEnd(start, (proc) => this.terminate(proc), opts);
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
    if (!this.#space.pauseNeedsFreezer || this.#cgroup) return undefined;
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
  terminate(proc: Supervised, reapMs = KILL_INSIDE_MS): Promise<void> {
    return terminate(proc, reapMs);
  }

  async #stop(): Promise<void> {
    await this.#ahead.end();
    this.#listeners.closeAhead();
    const lingering = await endProcesses({
      name: this.#name,
      log: this.#log,
      cgroup: this.#cgroup,
      init: this.#space.init,
      procs: this.#procs,
      pids: () => this.pids(),
    });
    await this.#space.removeDisk();
    if (lingering) {
      // a process the kernel has not let die yet still runs as the instance's ids: no later
      // instance may get them while it exists (the next server start sweeps what is left)
      this.#log.error(
        { instance: this.#name, uid: this.uid },
        "processes of the instance outlived its stop; its host ids stay taken until the server's next start",
      );
      return;
    }
    this.#space.releaseIds();
  }
}
