/**
 * The server-wide part of the sandbox layer, made once at server start: what the machine
 * supports (support.ts), the limits every instance gets, the generated /etc, the seccomp
 * program, the uids handed out, and the egress policy the operator chose.
 */
import { randomInt } from 'node:crypto';
import { chmod, mkdir, readdir, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Logger } from '../../internal/log.js';
import { pidAlive } from '../../internal/process.js';
import { prepareCgroups, sweepCgroups, type CgroupLayout, type Limits } from './cgroups.js';
import type { RefusedEndpoint } from './egress/policy.js';
import { DiskQuota, DiskStock, unmountAllUnder } from './quota.js';
import { buildEtc } from './rootfs.js';
import { buildSpawnPlan, type SpawnPlan } from './plan.js';
import { hostPrivateNow } from './rootfs.js';
import { buildSeccompFilter } from './seccomp.js';
import { SubordinatePool, type SubordinateIds } from './subids.js';
import { DEFAULT_INSTANCE_LIMITS, DEFAULT_SANDBOX_ROOT } from '../config.js';
import {
  CORE_GUARANTEES,
  describeSupport,
  hostSupport,
  toolPath,
  type Guarantee,
  type HostSupport,
} from './support.js';

/**
 * What each instance's sandbox may use, as the operator set it (cgroup limits and disk quota, in
 * host units); `Sandbox.limits` reports the part that applies as the API's `InstanceLimits`.
 */
export interface SandboxResourceLimits extends Limits {
  /** Disk quota in bytes; 0 = none. */
  diskBytes: number;
}

/** An instance's limits where no setting says (config-schema.ts says why these). */
export const DEFAULT_LIMITS: SandboxResourceLimits = { ...DEFAULT_INSTANCE_LIMITS };

export interface SandboxHostOptions {
  /** The server run's directory in the data dir; its name also names this run's sandbox root. */
  runDir: string;
  /**
   * Where instance disks and the generated /etc live: a path every instance uid can traverse
   * (bubblewrap, unprivileged, opens what it binds by path), unlike a data dir under /root.
   * Default `/var/lib/burrow/sandboxes` (the server's `sandboxRoot`, src/server/config.ts).
   */
  sandboxRoot?: string;
  /** bubblewrap binary, used when it exists (the server's `bwrapPath`). Default the usual places. */
  bwrapPath?: string | undefined;
  limits?: Partial<SandboxResourceLimits>;
  /** Run instances without isolation when the machine cannot isolate them. Loudly logged. */
  insecureNoIsolation?: boolean;
  /**
   * Start isolated instances where they cannot get cgroup limits (`--allow-unlimited`). Default
   * true (startServer's embedded default); false makes such starts `refusal`s.
   */
  allowUnlimited?: boolean;
  /** Where the once-per-process line naming the missing guarantees goes. Default stderr (console.error). */
  notice?: (line: string) => void;
  /** Run instances without isolation even where it works (tests of that mode). Loudly logged. */
  disableIsolation?: boolean;
  /** Egress: every host loopback port but burrow's own (`--allow-host-loopback`). */
  allowHostLoopback?: boolean;
  /** Egress: these host loopback ports (`--allow-host-port`). */
  allowHostPorts?: readonly number[];
  /** Egress: these private networks, as CIDRs (`--allow-network`). */
  allowNetworks?: readonly string[];
  /**
   * Instance disks kept formatted and mounted ahead of starts (quota.ts `DiskStock`), where disks
   * have a quota. Default 2; 0 makes every disk at its instance's start.
   */
  diskStock?: number;
  log: Logger;
}

/** Disks made ahead by default: enough for a burst of two starts, ~2 loop devices held. */
const DEFAULT_DISK_STOCK = 2;

/** Host uids handed to instances: far above any account, below the 32-bit limits. */
const UID_BASE = 2_100_000_000;
const UID_SPAN = 1 << 24;

export class SandboxHost {
  readonly support: HostSupport;
  readonly limits: SandboxResourceLimits;
  /** Whether instances are sandboxed (false only with `--insecure-no-isolation`). */
  readonly isolated: boolean;
  /** Why instances may not start (core guarantees missing and no `--insecure-no-isolation`). */
  readonly #coreRefusal: string | undefined;
  /** Whether isolated instances may start without cgroup limits (`--allow-unlimited`). */
  readonly #allowUnlimited: boolean;
  /** Why the server's cgroup could not be prepared, where the probe found one. */
  #limitsWhy: string | undefined;
  /** This run's directory under the sandbox root (0711): `etc/` and one directory per instance. */
  readonly root: string;
  readonly etcDir: string;
  readonly seccomp: Buffer;
  readonly allowHostLoopback: boolean;
  readonly allowHostPorts: readonly number[];
  readonly allowNetworks: readonly string[];
  /** burrow's own listening ports, never reachable from an instance (set by the server). */
  protectedPorts: () => Iterable<number> = () => [];
  /** Endpoints of the server's cluster (database, nodes), never reachable (set by the server). */
  refusedEndpoints: () => Iterable<RefusedEndpoint> = () => [];
  readonly #uids = new Set<number>();
  /** A normal user's subordinate ids, where it has them (support.ts `subids`). */
  readonly #subids: SubordinatePool | undefined;
  readonly #sandboxRoot: string;
  #plan: SpawnPlan | undefined;
  #stock: DiskStock | undefined;
  /** The bubblewrap binary instances are built with (undefined where there is none). */
  readonly bwrap: string | undefined;
  /** Where instance cgroups go (the probe's layout, once the server is in place), or none. */
  cgroups: CgroupLayout | undefined;

  private constructor(opts: SandboxHostOptions, support: HostSupport) {
    this.support = support;
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    const missing = support.guarantees.filter((g) => CORE_GUARANTEES.includes(g.name) && !g.ok);
    this.isolated = missing.length === 0 && !opts.disableIsolation;
    this.#allowUnlimited = (opts.allowUnlimited ?? true) || opts.insecureNoIsolation === true;
    this.#coreRefusal =
      missing.length > 0 && !opts.insecureNoIsolation && !opts.disableIsolation
        ? `This server cannot isolate instances: ${missing
            .map((g) => `${g.name} (${g.fix ?? 'unavailable'})`)
            .join(
              '; ',
            )}. Run \`burrow doctor\`, or start the server with --insecure-no-isolation to run instances unisolated.`
        : undefined;
    // a normal user cannot write the system default: its sandboxes go beside its data
    const sandboxRoot =
      !support.root && (opts.sandboxRoot ?? DEFAULT_SANDBOX_ROOT) === DEFAULT_SANDBOX_ROOT
        ? join(dirname(dirname(opts.runDir)), 'sandboxes')
        : (opts.sandboxRoot ?? DEFAULT_SANDBOX_ROOT);
    this.cgroups = support.cgroups;
    this.#subids = support.subids && new SubordinatePool(support.subids);
    this.#sandboxRoot = sandboxRoot;
    this.bwrap = toolPath('bwrap', opts.bwrapPath);
    this.root = join(sandboxRoot, basename(opts.runDir));
    this.etcDir = join(this.root, 'etc');
    this.seccomp = support.seccomp ? buildSeccompFilter() : Buffer.alloc(0);
    this.allowHostLoopback = opts.allowHostLoopback ?? false;
    this.allowHostPorts = opts.allowHostPorts ?? [];
    this.allowNetworks = opts.allowNetworks ?? [];
  }

  static async create(opts: SandboxHostOptions): Promise<SandboxHost> {
    const host = new SandboxHost(opts, hostSupport(opts.bwrapPath));
    const { log } = opts;
    for (const line of describeSupport(host.support)) log.info(`isolation: ${line}`);
    if (!host.isolated) {
      if (opts.insecureNoIsolation || opts.disableIsolation) {
        log.warn(
          'INSECURE: --insecure-no-isolation: instances run as plain processes of the server, with its privileges, its network and its files. Use only with code and agents you trust.',
        );
      } else {
        log.warn(host.refusal!);
      }
    }
    if (host.isolated) {
      // what is left of dead runs' instances dies first, and only then their disks go: a
      // process still running could swap a directory being removed for a link
      if (host.cgroups) {
        try {
          // v2: the server moves into a leaf of its cgroup before handing controllers down
          await prepareCgroups(host.cgroups);
          await sweepCgroups(host.cgroups, (name) => pidAlive(Number(name.split('.')[0])));
        } catch (err) {
          host.#limitsWhy = `could not prepare the server's cgroup (${(err as Error).message})`;
          log.warn(`isolation: MISSING limits: ${host.#limitsWhy}`);
          host.cgroups = undefined;
        }
      }
      if (host.refusal) log.warn(host.refusal);
      else sayMissingOnce(host.missing(), opts.notice);
      await host.#sweep();
      await mkdirTraversable(host.root);
      await buildEtc(host.etcDir);
      host.#plan = buildSpawnPlan(host.bwrap); // now, not at the first instance's start
      if (host.limits.diskBytes > 0 && host.support.quotaKind === 'loop') {
        host.#stock = new DiskStock(
          join(host.root, '.stock'),
          host.limits.diskBytes,
          opts.diskStock ?? DEFAULT_DISK_STOCK,
          (err) => log.warn({ err }, 'could not make an instance disk ahead'),
        );
        host.#stock.refill();
      }
    }
    return host;
  }

  /**
   * Why instances may not start: core guarantees missing (without `--insecure-no-isolation`), or
   * no cgroup limits on a server that requires them (without `--allow-unlimited`).
   */
  get refusal(): string | undefined {
    if (this.#coreRefusal) return this.#coreRefusal;
    if (!this.isolated || this.cgroups || this.#allowUnlimited) return undefined;
    const fix = this.support.guarantees.find((g) => g.name === 'limits')?.fix;
    return `This server starts no instance without limits, and the 'limits' isolation guarantee (memory, process-count and CPU limits by cgroups) is missing here. Start the server with --allow-unlimited (or BURROW_ALLOW_UNLIMITED=1) to run instances without them, or give it limits: ${fix ?? 'see burrow doctor'}. The server's log at its start says why they are missing.`;
  }

  /** The guarantees isolated instances of this server go without (none when not isolated). */
  missing(): Guarantee[] {
    if (!this.isolated) return [];
    return this.support.guarantees.flatMap((g) =>
      g.name === 'limits' && g.ok && !this.cgroups
        ? [{ ...g, ok: false, status: 'missing' as const, why: this.#limitsWhy ?? 'unknown' }]
        : g.ok
          ? []
          : [g],
    );
  }

  /**
   * The part of every instance process's start that is the same for the whole server run
   * (plan.ts): the chain's tool paths and the mount steps, resolved from the host once, and again
   * when a host directory it must mask has appeared since (one `stat` per process started in an
   * instance, beside the spawn itself).
   */
  get plan(): SpawnPlan {
    if (this.#plan?.masked !== hostPrivateNow()) this.#plan = buildSpawnPlan(this.bwrap);
    return this.#plan;
  }

  /**
   * Where the sandbox of instance `name` keeps its disk: root-owned 0711, traversable (bubblewrap,
   * as the instance's uid, resolves the directories it binds by path) but not listable. What is
   * in there belongs to the instance's uid alone (space/isolated.ts).
   */
  async instanceDir(name: string): Promise<string> {
    const dir = join(this.root, name);
    await mkdir(dir, { mode: 0o711 });
    await chmod(dir, 0o711);
    return dir;
  }

  /**
   * The disk of the instance directory `dir` (made by `instanceDir`, still empty): one of the
   * stock's, else made now.
   */
  async disk(dir: string): Promise<DiskQuota> {
    return (await this.#stock?.claim(dir)) ?? DiskQuota.in(dir, this.limits.diskBytes);
  }

  /** The stock of disks made ahead (undefined without disk quotas). */
  get diskStock(): DiskStock | undefined {
    return this.#stock;
  }

  /** Remove the sandbox roots of server runs whose process is gone (their disks unmounted). */
  async #sweep(): Promise<void> {
    let runs: string[] = [];
    try {
      runs = await readdir(this.#sandboxRoot);
    } catch {
      return;
    }
    for (const run of runs) {
      const pid = Number(/^run-(\d+)-/.exec(run)?.[1]);
      if (!pid || pidAlive(pid)) continue;
      const dir = join(this.#sandboxRoot, run);
      await unmountAllUnder(dir);
      await rm(dir, { recursive: true, force: true }).catch(() => {});
    }
  }

  /** Remove this run's sandbox root (after every instance stopped). */
  async close(): Promise<void> {
    await this.#stock?.close();
    await unmountAllUnder(this.root);
    await rm(this.root, { recursive: true, force: true }).catch(() => {});
  }

  /** A host uid no live instance of this server uses; freed with `releaseUid`. */
  allocateUid(): number {
    for (;;) {
      const uid = UID_BASE + randomInt(UID_SPAN);
      if (!this.#uids.has(uid)) {
        this.#uids.add(uid);
        return uid;
      }
    }
  }

  releaseUid(uid: number): void {
    this.#uids.delete(uid);
  }

  /**
   * A normal user's server: a host uid and gid out of the user's subordinate ranges that no live
   * instance uses (subids.ts), freed with `releaseSubordinate`; undefined without ranges.
   */
  allocateSubordinate(): SubordinateIds | undefined {
    return this.#subids?.take();
  }

  releaseSubordinate(ids: SubordinateIds): void {
    this.#subids?.release(ids);
  }
}

/** Whether this process has said which guarantees its instances go without (once per process). */
let missingSaid = false;

/**
 * One line, once per process (not per server or instance, and not when nothing is missing): the
 * guarantees instances start without, so an embedded server's user knows what the sandbox does
 * not give their own scripts. A server for others refuses instead (`refusal`).
 */
function sayMissingOnce(missing: Guarantee[], notice?: (line: string) => void): void {
  if (missingSaid || missing.length === 0) return;
  missingSaid = true;
  const list = missing.map((g) => `${g.name} (${g.why ?? 'unavailable'})`).join('; ');
  const line = `burrow: warning: instances start without these isolation guarantees: ${list}. \`burrow doctor\` says how to get them; \`burrow serve\` refuses starts without limits unless given --allow-unlimited.`;
  (notice ?? ((l: string) => console.error(l)))(line);
}

/** mkdir -p where every created component is mode 0711 (root-owned, traversable, not listable). */
async function mkdirTraversable(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let d = dir; d !== dirname(d); d = dirname(d)) {
    try {
      await stat(d);
      break;
    } catch {
      missing.unshift(d);
    }
  }
  for (const d of missing) {
    await mkdir(d, { mode: 0o711 });
    await chmod(d, 0o711);
  }
}
