/**
 * A process space: what an instance's sandbox does differently at each privilege level the server
 * can hold (support.ts), behind one interface, the way Playwright's `Page` leaves what differs per
 * browser to its `PageDelegate`. The `Sandbox` (sandbox.ts) keeps what is the same everywhere
 * (its processes, cgroup, seeding, listeners, stop) and asks its space, chosen once when it is
 * created (`openSpace`, index.ts), only what the level decides:
 *
 * - how the disk is made (a directory, a loop-mounted quota, or a tmpfs the anchor mounts);
 * - how the anchor and pid 1 are started, and what is known of them after;
 * - how a process joins the instance's namespaces and drops to its uid (the spawn chain);
 * - how the listen step reaches the network namespace;
 * - which ids it holds and gives back.
 *
 * Each level is one file whose chain is the security boundary at that level: `none.ts` (no
 * isolation), `root.ts`, `userns.ts` (a server without CAP_SYS_ADMIN) and `subids.ts` (a normal
 * user with a subordinate range); `isolated.ts` is the part the last three share, ending in
 * bubblewrap.
 */
import type { StdioOptions } from 'node:child_process';
import type { ExitInfo, Supervised } from '../../../internal/process.js';
import type { CgroupLayout } from '../cgroups.js';
import type { SandboxHost } from '../host.js';
import type { ChainTools } from '../plan.js';

export type SandboxMode =
  /** Namespaces, its own host uid, cgroups, disk quota, seccomp (root server). */
  | 'isolated'
  /** No isolation at all (`--insecure-no-isolation`). */
  | 'none';

/** The four levels, one file each in this folder. */
export type SpaceLevel = 'none' | 'root' | 'userns' | 'subids';

/** Host paths of an instance's home, tmp and /dev/shm (on its disk). */
export interface DiskPaths {
  home: string;
  tmp: string;
  shm: string;
}

/** What a space uses of the sandbox it serves. */
export interface SpaceContext {
  readonly host: SandboxHost;
  /** The instance's name (its id): names pid 1 and every process on the host. */
  readonly name: string;
  /** The cgroup.procs files every chain's first step joins (none before the cgroup exists). */
  cgroupFiles(): readonly string[];
  /** A process of the sandbox's own: paused, resumed and killed with it until it exits. */
  track(proc: Supervised): void;
  /** The anchor, once started, exited (a crash unless the sandbox is stopping). */
  anchorExited(exit: ExitInfo): void;
}

/**
 * The instance's network namespace, for the listen step (listen.ts): a step on the root side of
 * a chain that joins that namespace alone.
 */
export interface NetworkEntry {
  /**
   * Start `step` (the program and its arguments) on the root side of a chain whose first step
   * joins the cgroup; `step` is given the descriptors of the namespaces it must join, in order,
   * and the programs of the spawn plan.
   */
  enter(
    stdio: StdioOptions,
    step: (namespaces: readonly number[], tools: ChainTools) => string[],
  ): Supervised;
}

export interface ProcessSpace {
  readonly level: SpaceLevel;
  readonly mode: SandboxMode;
  /** HOME and /tmp as seen inside. */
  readonly home: string;
  readonly tmp: string;
  /** The instance's host uid where the server sets it itself (`setpriv`); else undefined. */
  readonly uid: number | undefined;
  /**
   * Host paths of the instance's home, tmp and shm. With a disk the anchor mounts (a tmpfs in its
   * own mount namespace) they lead there through `/proc/<anchor>/root` once the anchor runs.
   */
  readonly disk: Readonly<DiskPaths>;
  /** Where the instance's cgroup goes; undefined: it has none. */
  readonly cgroups: CgroupLayout | undefined;
  /** Whether pausing needs the cgroup freezer (stopping processes one by one is no pause). */
  readonly pauseNeedsFreezer: boolean;
  /** The disk's own size limit in bytes, or null. */
  readonly diskBytes: number | null;
  /** Host pid of pid 1 of the instance's pid namespace; 0 without one (yet). */
  readonly init: number;
  /** Whether the anchor (pid 1's parent) runs. */
  readonly anchored: boolean;
  /** How the listen step reaches the instance's network namespace; undefined: it has none. */
  readonly network: NetworkEntry | undefined;
  /** Whether a process may be started ahead of its command (`Sandbox.prepareSpawn`). */
  readonly startsAhead: boolean;
  /** Make the instance's disk and its three directories. */
  makeDisk(): Promise<void>;
  /** Start the anchor, once what it needs of `ready` is there. */
  start(ready: { cgroup: Promise<void> | undefined; disk: Promise<void> }): Promise<void>;
  /** Start `argv` inside, with exactly `env`, in `cwd` (as seen inside). */
  spawn(
    argv: readonly string[],
    stdio: StdioOptions,
    env: Record<string, string>,
    cwd: string,
  ): Supervised;
  /** Remove the instance's disk (its processes are gone). */
  removeDisk(): Promise<void>;
  /** Give the instance's host ids back for a later instance. */
  releaseIds(): void;
}
