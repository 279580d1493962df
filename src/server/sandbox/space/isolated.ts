/**
 * What the three isolated levels share (root.ts, userns.ts, subids.ts fill in the rest): every
 * chain ends in bubblewrap with the instance's root file system, `--cap-drop ALL`, no_new_privs
 * and the seccomp filter, for pid 1 and for every other process; pid 1 is started the same way
 * and found the same way; the disk is made the same way unless the level's anchor mounts it. A
 * level says only how its chains get from the server to bubblewrap: which steps come before it
 * (`anchorSteps`, `joinSteps`, `networkSteps`), which uid pid 1 runs as on the host, what it
 * learns once the anchor runs, and which ids it gives back.
 */
import type { StdioOptions } from 'node:child_process';
import { constants, readFileSync, readlinkSync } from 'node:fs';
import { chmod, chown, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { until } from '../../../internal/deadline.js';
import type { Supervised } from '../../../internal/process.js';
import { stage } from '../../../internal/stages.js';
import type { CgroupLayout } from '../cgroups.js';
import { keepTail } from '../exit.js';
import type { SandboxHost } from '../host.js';
import type { ChainTools } from '../plan.js';
import type { DiskQuota } from '../quota.js';
import { mountArgs, SANDBOX_HOME, SANDBOX_HOSTNAME, SANDBOX_PATH, SANDBOX_UID } from '../rootfs.js';
import { closeNamespaceFds, startChain, type ChainFds } from './chain.js';
import type { DiskPaths, NetworkEntry, ProcessSpace, SpaceContext, SpaceLevel } from './space.js';

/** open(2)'s O_PATH (the same on x86_64 and arm64), which Node's constants lack. */
const O_PATH = 0o10000000;

/** The processes a chain joins: pid 1 of the instance's namespaces and the anchor (its parent). */
export interface Anchor {
  /** Host pid of pid 1. */
  init: number;
  /** Host pid of the anchor's own process, the first of its chain. */
  anchor: number;
}

/** Where the instance's /etc, home, tmp and shm are bound from, when not the paths the server uses. */
export interface BindFrom {
  home: string;
  tmp: string;
  shm: string;
  etc: string;
}

export abstract class IsolatedSpace implements ProcessSpace {
  abstract readonly level: Exclude<SpaceLevel, 'none'>;
  readonly mode = 'isolated';
  readonly home = SANDBOX_HOME;
  readonly tmp = '/tmp';
  readonly pauseNeedsFreezer = true;
  readonly startsAhead = true;
  readonly disk: DiskPaths;
  protected readonly ctx: SpaceContext;
  protected readonly host: SandboxHost;
  /** Holds the disk image and its mount point (under the sandbox root). */
  protected readonly diskDir: string;
  /** The size of the tmpfs the anchor mounts as the disk, where it does (0: none, or unsized). */
  protected tmpfsBytes = 0;
  /** Where the instance's directories are bound from, when not `disk` (`afterAnchor` sets it). */
  protected bindFrom: BindFrom | undefined;
  #quota: DiskQuota | undefined;
  #anchor: Supervised | undefined;
  #pids: Anchor = { init: 0, anchor: 0 };

  constructor(ctx: SpaceContext, diskDir: string) {
    this.ctx = ctx;
    this.host = ctx.host;
    this.diskDir = diskDir;
    const disk = join(diskDir, 'disk');
    this.disk = { home: join(disk, 'home'), tmp: join(disk, 'tmp'), shm: join(disk, 'shm') };
  }

  abstract readonly uid: number | undefined;
  /** The host uid pid 1 runs as (how it is told from the anchor's other children). */
  protected abstract readonly hostUid: number;
  /** The steps from the server to the anchor's bubblewrap. */
  protected abstract anchorSteps(): string[];
  /** The steps from the server to a process's bubblewrap: into the namespaces, down to the uid. */
  protected abstract joinSteps(at: Anchor): string[];
  /** The listen step's way into the network namespace: steps before it, and namespaces it joins. */
  protected abstract networkSteps(
    fds: ChainFds,
    at: Anchor,
  ): { steps: string[]; namespaces: number[] };
  /** What the level learns once the anchor runs (`at.anchor`: its process). */
  protected afterAnchor(_at: Anchor): void {}
  /** The anchor starts once these are there. */
  protected abstract anchorNeeds(ready: {
    cgroup: Promise<void> | undefined;
    disk: Promise<void>;
  }): unknown[];
  abstract releaseIds(): void;

  get tools(): ChainTools {
    return this.host.plan.tools;
  }

  get cgroups(): CgroupLayout | undefined {
    return this.host.cgroups;
  }

  get diskBytes(): number | null {
    return this.#quota ? this.#quota.bytes : this.tmpfsBytes || null;
  }

  get init(): number {
    return this.#pids.init;
  }

  get anchored(): boolean {
    return this.#anchor?.running === true;
  }

  /**
   * The disk on the host: a loop-mounted quota where the host has one, else a directory. Its three
   * directories belong to the instance's uid alone (0700): only that uid exists in there, and no
   * other local user may read its home or plant files in its /tmp. The disk's root stays
   * root-owned 0711: the instance reaches only its three directories.
   */
  async makeDisk(): Promise<void> {
    const host = this.host;
    const disk = join(this.diskDir, 'disk');
    if (host.limits.diskBytes > 0 && host.support.quotaKind === 'loop') {
      this.#quota = await stage('disk', () => host.disk(this.diskDir));
    } else {
      await mkdir(disk, { recursive: true, mode: 0o700 });
    }
    await Promise.all(
      [this.disk.home, this.disk.tmp, this.disk.shm].map(async (path) => {
        await mkdir(path, { recursive: true });
        await chmod(path, 0o700);
        if (this.uid !== undefined) await chown(path, this.uid, this.uid);
      }),
    );
    await chmod(disk, 0o711);
  }

  async start(ready: { cgroup: Promise<void> | undefined; disk: Promise<void> }): Promise<void> {
    await Promise.all(this.anchorNeeds(ready));
    await stage('anchor', () => this.#startAnchor());
  }

  spawn(
    argv: readonly string[],
    stdio: StdioOptions,
    env: Record<string, string>,
    cwd: string,
  ): Supervised {
    const at = this.#pids;
    return this.#chain(stdio, (fds) => this.spawnArgv(fds, at, argv, env, cwd));
  }

  readonly network: NetworkEntry = {
    enter: (stdio, step) => {
      const at = this.#pids;
      return this.#chain(stdio, (fds) => this.listenArgv(fds, at, step));
    },
  };

  async removeDisk(): Promise<void> {
    await this.#quota?.remove();
    await rm(this.diskDir, { recursive: true, force: true });
  }

  /**
   * The chain of a process of the instance after its first step: the level's way in, then
   * bubblewrap joining the instance's user and pid namespaces (`--userns/--pidns`) with its
   * confinement, then the shell closing those two descriptors, then `argv`.
   */
  spawnArgv(
    fds: ChainFds,
    at: Anchor,
    argv: readonly string[],
    env: Record<string, string>,
    cwd: string,
  ): string[] {
    const { tools } = this;
    const userns = fds.open(`/proc/${at.init}/ns/user`);
    const pidns = fds.open(`/proc/${at.init}/ns/pid`);
    return [
      ...this.joinSteps(at),
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
      ...this.#confinement(fds, env, cwd),
      '--',
      ...closeNamespaceFds([userns, pidns], tools.sh),
      ...argv,
    ];
  }

  /** The listen step's chain after its first step: the level's way in, then `step`. */
  listenArgv(
    fds: ChainFds,
    at: Anchor,
    step: (namespaces: readonly number[], tools: ChainTools) => string[],
  ): string[] {
    const { steps, namespaces } = this.networkSteps(fds, at);
    return [...steps, ...step(namespaces, this.tools)];
  }

  /**
   * The anchor's chain after its first step: pid 1 of the instance's pid namespace, a shell that
   * only reaps orphans. bubblewrap creates the instance's user, pid, network (loopback up), IPC,
   * UTS (host name set) and cgroup namespaces and runs the shell as pid 1 itself (`--as-pid-1`),
   * confined like every other process of the instance: its root file system, no capabilities,
   * no_new_privs, seccomp. So `/proc/1/root` inside is the instance's own root, and `/proc/1/mem`
   * gives nothing a command does not have. The outer bubblewrap stays on the host side as pid 1's
   * parent, outside the instance's pid namespace (invisible in there); pid 1 dies with it
   * (`--die-with-parent`: no `--pidns`, so none of the race described in `spawnArgv`).
   */
  anchorArgv(fds: ChainFds): string[] {
    return [
      ...this.anchorSteps(),
      this.tools.bwrap,
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
      ...this.#confinement(fds, { PATH: SANDBOX_PATH }, '/', 'init'),
      '--',
      '/bin/sh',
      '-c',
      // pid 1 reaps every orphan of the namespace while it waits for a sleep, started again if
      // something inside kills it (signals from inside reach pid 1 only when it handles them)
      'trap "" TERM INT HUP; while :; do sleep infinity & wait; done',
      `burrow-init-${this.ctx.name}`,
    ];
  }

  #chain(stdio: StdioOptions, build: (fds: ChainFds) => string[]): Supervised {
    return startChain(this.tools.perl, this.ctx.cgroupFiles(), stdio, build);
  }

  async #startAnchor(): Promise<void> {
    const anchor = this.#chain(['ignore', 'ignore', 'pipe'], (fds) => this.anchorArgv(fds));
    this.ctx.track(anchor);
    let stderr = '';
    anchor.child.stderr?.on('data', (c: Buffer) => (stderr = keepTail(stderr, c)));
    let init = 0;
    await until(() => !anchor.running || (init = namespaceInit(anchor.pid, this.hostUid)) !== 0, {
      timeoutMs: 10_000,
      intervalMs: 2,
    });
    if (!init) {
      await anchor.kill(0);
      throw new Error(`could not create the instance's namespaces: ${stderr.trim() || 'timeout'}`);
    }
    this.#pids = { init, anchor: anchor.pid };
    this.afterAnchor(this.#pids);
    this.#anchor = anchor;
    void anchor.exited.then((e) => this.ctx.anchorExited(e));
  }

  /**
   * bubblewrap options every process of the instance gets, pid 1 included: its root file system,
   * no capabilities, the seccomp filter, and its environment (through a pipe: an argument would
   * show the values to every local user in `ps`).
   */
  #confinement(
    fds: ChainFds,
    env: Record<string, string>,
    cwd: string,
    view: 'instance' | 'init' = 'instance',
  ): string[] {
    // the mounts come from the server's plan; this process adds its own descriptors of the
    // instance's directories (pid 1 binds none of them)
    const plan = this.host.plan;
    // the instance's own disk, not the server's view of it: by a path descriptor (the server may
    // not read those directories, only pass them on)
    const bind = this.bindFrom;
    const dir = (path: string, from: string | undefined) =>
      from === undefined ? fds.open(path) : fds.open(from, O_PATH | constants.O_DIRECTORY);
    const root =
      view === 'init'
        ? mountArgs(plan.init)
        : mountArgs(plan.instance, {
            etc: fds.open(bind?.etc ?? this.host.etcDir),
            home: dir(this.disk.home, bind?.home),
            tmp: dir(this.disk.tmp, bind?.tmp),
            shm: dir(this.disk.shm, bind?.shm),
          });
    const envArgs = ['--clearenv'];
    for (const [k, v] of Object.entries(env)) envArgs.push('--setenv', k, v);
    return [
      ...root,
      '--args',
      String(fds.pipe(Buffer.from(envArgs.map((a) => `${a}\0`).join('')))),
      // names the instance on the host (`pgrep -f <id>` lists its processes' wrappers) and
      // tells its processes which instance they are
      '--setenv',
      'BURROW_INSTANCE',
      this.ctx.name,
      '--cap-drop',
      'ALL',
      '--seccomp',
      String(fds.pipe(this.host.seccomp)),
      '--chdir',
      cwd,
    ];
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
