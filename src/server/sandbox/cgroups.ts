/**
 * Resource limits of an instance: one cgroup per instance with a memory, process-count and CPU
 * limit, and the freezer for pause. cgroup v2 where the machine mounts the unified hierarchy at
 * /sys/fs/cgroup with those controllers, else cgroup v1 with one directory per controller
 * (/sys/fs/cgroup/{memory,pids,cpu,freezer}).
 *
 * The cgroups nest: an instance's cgroup is made under the server's own (read from
 * `/proc/self/cgroup`, per controller on v1), in `<own>/burrow/<name>`, never at a fixed path at
 * the hierarchy's root, so instances stay inside whatever limits a pod, a systemd service or a CI
 * job put the server in. On v2 a cgroup with processes cannot hand controllers to its children,
 * so the server first moves itself into a leaf of its own (`<own>/burrow-server`) and then enables
 * the controllers in `<own>/cgroup.subtree_control` (`prepareCgroups`). A normal user gets limits
 * only where its own v2 subtree is delegated to it (systemd's `user@.service` delegation); the
 * probe (`probeCgroups`) tries the real thing once and says why when it fails.
 *
 * Every process of the instance is placed in the cgroup before it executes anything (the spawn
 * wrapper writes its own pid into `cgroup.procs`), so nothing it forks can be outside.
 */
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync,
} from 'node:fs';
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { until } from '../../internal/deadline.js';
import { signalQuietly } from '../../internal/process.js';

/** Where cgroupfs is mounted. */
export const CGROUP_ROOT = '/sys/fs/cgroup';
const V1_CONTROLLERS = ['memory', 'pids', 'cpu', 'freezer'] as const;
const V2_CONTROLLERS = ['memory', 'pids', 'cpu'] as const;
/** Directory under the server's own cgroup holding its instance cgroups. */
const PARENT = 'burrow';

/** The CPU limit's period: an instance gets `cpus` × this much CPU time in each. */
const CPU_PERIOD_US = 100_000;
/** How long `remove` retries a directory the kernel still calls busy while exits settle. */
const REMOVE_MS = 1000;

/**
 * Let an instance spend up to one period's quota it left unused before, on top of the period's
 * own (`cpu.cfs_burst_us`, v2 `cpu.max.burst`; Linux 5.14+, skipped where the file is missing).
 * Chromium's start is a burst of several processes at once: under a quota of 1.5 cores on a
 * 2-core machine it was throttled in about half of the cold starts, 4–14 ms each time (the
 * cgroup's `cpu.stat`); with the burst, in none. Its average over time stays at the quota.
 */
async function writeBurst(file: string, quota: number): Promise<void> {
  if (existsSync(file)) await writeFile(file, String(quota));
}
/** The leaf the server moves itself into on v2 (a cgroup with processes has no children's controllers). */
export const SERVER_LEAF = 'burrow-server';

export interface Limits {
  /** Memory (RAM, page cache and tmpfs pages the instance touches) in bytes. */
  memoryBytes: number;
  /** Processes and threads at once. */
  pids: number;
  /** CPU time in cores (1.5 = one and a half cores' worth of time per period). */
  cpus: number;
}

export type CgroupVersion = 1 | 2;

/** Where instance cgroups go: v2 one parent directory; v1 one per controller, in the order memory, pids, cpu, freezer. */
export interface CgroupLayout {
  version: CgroupVersion;
  parents: readonly string[];
  /** v2: the server's own cgroup directory (it moves into its `SERVER_LEAF` before use). */
  own?: string;
}

/** The server's cgroup per controller (v1) and its unified path (v2), from `/proc/self/cgroup` text. */
export function parseProcCgroup(text: string): { v1: Map<string, string>; v2: string | undefined } {
  const v1 = new Map<string, string>();
  let v2: string | undefined;
  for (const line of text.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const [, id, ctrls, path] = m as unknown as [string, string, string, string];
    if (id === '0' && ctrls === '') v2 = path;
    else for (const c of ctrls.split(',')) if (c) v1.set(c, path);
  }
  return { v1, v2 };
}

/**
 * Where this server's instance cgroups would go, from the cgroupfs under `root` and the server's
 * own `/proc/self/cgroup` text; or why there is no such place. Looks only; `probeCgroups` tries.
 */
export function cgroupLayout(
  root = CGROUP_ROOT,
  self = readText('/proc/self/cgroup'),
): { layout: CgroupLayout } | { why: string } {
  const own = parseProcCgroup(self);
  if (existsSync(join(root, 'cgroup.controllers'))) {
    const dir = join(root, own.v2 ?? '/');
    const have = readText(join(dir, 'cgroup.controllers')).split(/\s+/);
    const lacking = V2_CONTROLLERS.filter((c) => !have.includes(c));
    if (lacking.length > 0) {
      return {
        why: `the server's cgroup ${own.v2 ?? '/'} (v2) has no ${lacking.join(', ')} controller (run the server in a cgroup delegated to its user, e.g. systemd-run --user --scope -p Delegate=yes, or a service with Delegate=yes)`,
      };
    }
    return { layout: { version: 2, parents: [join(dir, PARENT)], own: dir } };
  }
  const parents: string[] = [];
  for (const c of V1_CONTROLLERS) {
    if (!existsSync(join(root, c, 'cgroup.procs'))) {
      return {
        why: `no cgroup v2 with memory, pids and cpu, and no cgroup v1 ${c} hierarchy at ${join(root, c)}`,
      };
    }
    parents.push(join(root, c, own.v1.get(c) ?? '/', PARENT));
  }
  return { layout: { version: 1, parents } };
}

/**
 * Find the layout and try it once: create a cgroup under each parent (v2: under the server's own
 * cgroup, which must be writable by the server's user), set a limit in it, remove it. Returns the
 * layout, or why limits do not hold here.
 */
export function probeCgroups(
  root = CGROUP_ROOT,
  self = readText('/proc/self/cgroup'),
): { layout: CgroupLayout } | { why: string } {
  const found = cgroupLayout(root, self);
  if (!('layout' in found)) return found;
  const { layout } = found;
  const probe = `probe-${process.pid}`;
  try {
    if (layout.version === 2) {
      // the server's own cgroup must let it make a leaf, move into it and hand down controllers
      const own = layout.own!;
      for (const f of ['', 'cgroup.procs', 'cgroup.subtree_control']) {
        accessSync(join(own, f), constants.W_OK);
      }
      return found;
    }
    for (const [i, parent] of layout.parents.entries()) {
      mkdirSyncP(parent);
      const dir = join(parent, probe);
      mkdirSync(dir);
      try {
        if (i === 1) writeFileSync(join(dir, 'pids.max'), '10'); // the pids controller
      } finally {
        rmdirQuiet(dir);
      }
    }
    return found;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why =
      e.code === 'EROFS' || (e.path !== undefined && mountedReadOnly(e.path))
        ? 'cgroupfs is mounted read-only (a container without cgroup delegation)'
        : e.code === 'EACCES' || e.code === 'EPERM'
          ? process.getuid?.() === 0
            ? 'the cgroup hierarchy refuses the server (no CAP_SYS_ADMIN, or a container without cgroup delegation)'
            : `the server's user cannot write its cgroup (${e.path ?? ''}); cgroup v1 hierarchies are root's, and a v2 subtree must be delegated to the user (systemd user@.service delegation)`
          : `could not create a cgroup: ${e.message}`;
    return { why };
  }
}

/**
 * Whether the file system holding `path` (the mount with the longest mount point above it, in
 * /proc/self/mountinfo) is mounted read-only. A read-only cgroupfs refuses a new cgroup with
 * ENOENT as well as EROFS, depending on which directory is missing.
 */
function mountedReadOnly(path: string): boolean {
  let best: { point: string; ro: boolean } | undefined;
  for (const line of readText('/proc/self/mountinfo').split('\n')) {
    const f = line.split(' ');
    const point = f[4];
    if (!point || !(path === point || path.startsWith(point.endsWith('/') ? point : `${point}/`))) {
      continue;
    }
    if (!best || point.length >= best.point.length) {
      best = { point, ro: (f[5] ?? '').split(',').includes('ro') };
    }
  }
  return best?.ro ?? false;
}

/**
 * v2 only: move this process into its leaf (`<own>/burrow-server`) and let `<own>` and
 * `<own>/burrow` hand memory, pids and cpu to their children. Idempotent. Throws when the
 * hierarchy refuses (other processes still in `<own>`, say).
 */
export async function prepareCgroups(layout: CgroupLayout, pid = process.pid): Promise<void> {
  if (layout.version !== 2) {
    for (const p of layout.parents) await mkdir(p, { recursive: true });
    return;
  }
  const own = layout.own!;
  const enable = V2_CONTROLLERS.map((c) => `+${c}`).join(' ');
  // the hierarchy's real root has no cgroup.type and may keep processes beside its children
  if (existsSync(join(own, 'cgroup.type'))) {
    const leaf = join(own, SERVER_LEAF);
    await mkdir(leaf, { recursive: true });
    await writeFile(join(leaf, 'cgroup.procs'), `${pid}\n`);
  }
  await writeFile(join(own, 'cgroup.subtree_control'), enable);
  const parent = layout.parents[0]!;
  await mkdir(parent, { recursive: true });
  await writeFile(join(parent, 'cgroup.subtree_control'), enable);
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function mkdirSyncP(dir: string): void {
  mkdirSync(dir, { recursive: true });
}

function rmdirQuiet(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    /* gone already */
  }
}

export class Cgroup {
  readonly version: CgroupVersion;
  /** One directory (v2) or one per controller (v1). */
  readonly dirs: readonly string[];
  readonly #freezer: string;

  /** Use `create`; the sweep of dead servers' cgroups builds one over existing directories. */
  constructor(version: CgroupVersion, dirs: string[], freezer: string) {
    this.version = version;
    this.dirs = dirs;
    this.#freezer = freezer;
  }

  /** Create the instance's cgroup `name` with `limits`. */
  static async create(layout: CgroupLayout, name: string, limits: Limits): Promise<Cgroup> {
    if (layout.version === 2) {
      const dir = join(layout.parents[0]!, name);
      await mkdir(dir);
      const cg = new Cgroup(2, [dir], dir);
      try {
        await writeFile(join(dir, 'memory.max'), String(limits.memoryBytes));
        await writeFile(join(dir, 'memory.swap.max'), '0').catch(() => {});
        await writeFile(join(dir, 'pids.max'), String(limits.pids));
        const quota = Math.round(limits.cpus * CPU_PERIOD_US);
        await writeFile(join(dir, 'cpu.max'), `${quota} ${CPU_PERIOD_US}`);
        await writeBurst(join(dir, 'cpu.max.burst'), quota);
      } catch (err) {
        await cg.remove();
        throw err;
      }
      return cg;
    }
    const dirs: string[] = [];
    for (const parent of layout.parents) {
      const dir = join(parent, name);
      await mkdir(parent, { recursive: true });
      await mkdir(dir); // never share a cgroup with a leftover of the same name
      dirs.push(dir);
    }
    const cg = new Cgroup(1, dirs, dirs[3]!);
    try {
      const [memory, pids, cpu] = dirs as [string, string, string, string];
      await writeFile(join(memory, 'memory.limit_in_bytes'), String(limits.memoryBytes));
      // with swap accounting, also cap memory+swap so the limit cannot be dodged into swap
      if (existsSync(join(memory, 'memory.memsw.limit_in_bytes'))) {
        await writeFile(join(memory, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
      }
      await writeFile(join(pids, 'pids.max'), String(limits.pids));
      const quota = Math.round(limits.cpus * CPU_PERIOD_US);
      await writeFile(join(cpu, 'cpu.cfs_period_us'), String(CPU_PERIOD_US));
      await writeFile(join(cpu, 'cpu.cfs_quota_us'), String(quota));
      await writeBurst(join(cpu, 'cpu.cfs_burst_us'), quota);
    } catch (err) {
      await cg.remove();
      throw err;
    }
    return cg;
  }

  /** The `cgroup.procs` files a process writes its pid into to join. */
  get procsFiles(): string[] {
    return this.dirs.map((d) => join(d, 'cgroup.procs'));
  }

  /** Every process in the cgroup (host pids). */
  pids(): number[] {
    try {
      return readFileSync(join(this.dirs[0]!, 'cgroup.procs'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map(Number);
    } catch {
      return [];
    }
  }

  /** Freeze every process at once; resolves when the kernel reports them all frozen. */
  async freeze(): Promise<void> {
    if (this.version === 2) {
      await writeFile(join(this.#freezer, 'cgroup.freeze'), '1');
      await this.#until(async () =>
        (await readFile(join(this.#freezer, 'cgroup.events'), 'utf8')).includes('frozen 1'),
      );
    } else {
      await writeFile(join(this.#freezer, 'freezer.state'), 'FROZEN');
      await this.#until(
        async () =>
          (await readFile(join(this.#freezer, 'freezer.state'), 'utf8')).trim() === 'FROZEN',
      );
    }
  }

  async thaw(): Promise<void> {
    if (this.version === 2) await writeFile(join(this.#freezer, 'cgroup.freeze'), '0');
    else await writeFile(join(this.#freezer, 'freezer.state'), 'THAWED');
  }

  /**
   * The share of contended CPU time: `low` (a warm-pool instance starting in the background) gets
   * a tenth of a normal one's when the CPU is contended, so that it yields to the instances in
   * use without starving on a busy machine. The quota set at creation still caps both.
   */
  async setCpuWeight(weight: 'low' | 'normal'): Promise<void> {
    if (this.version === 2) {
      await writeFile(join(this.dirs[0]!, 'cpu.weight'), weight === 'low' ? '10' : '100');
    } else {
      await writeFile(join(this.dirs[2]!, 'cpu.shares'), weight === 'low' ? '102' : '1024');
    }
  }

  /** SIGKILL every process in the cgroup until it is empty (thawing first), then remove it. */
  async kill(): Promise<void> {
    if (this.version === 2 && existsSync(join(this.dirs[0]!, 'cgroup.kill'))) {
      writeFileSync(join(this.dirs[0]!, 'cgroup.kill'), '1');
    }
    if (existsSync(this.#freezer)) {
      // frozen, nothing can fork between the listing and the signals; thawed, they act on them
      await this.freeze().catch(() => {});
      for (const pid of this.pids()) signalQuietly(pid, 'SIGKILL');
      await this.thaw().catch(() => {});
    }
    await until(
      () => {
        const pids = this.pids();
        for (const pid of pids) signalQuietly(pid, 'SIGKILL');
        return pids.length === 0;
      },
      { timeoutMs: 5000, intervalMs: 10 },
    );
  }

  /** Remove the cgroup directories (they must be empty). Retries for a second while exits settle. */
  async remove(): Promise<void> {
    for (const dir of [...this.dirs].reverse()) {
      let busy: unknown;
      const removed = await until(
        async () => {
          try {
            await rmdir(dir);
            return true;
          } catch (err) {
            const code = (err as NodeJS.ErrnoException).code;
            if (code === 'ENOENT') return true;
            if (code !== 'EBUSY') throw err;
            busy = err;
            return false;
          }
        },
        { timeoutMs: REMOVE_MS, intervalMs: 20 },
      );
      if (!removed) throw busy;
    }
  }

  async #until(done: () => Promise<boolean>): Promise<void> {
    if (!(await until(done, { timeoutMs: 5000, intervalMs: 2 }))) {
      throw new Error('the cgroup did not freeze within 5 s');
    }
  }
}

/**
 * Release the instance cgroups of servers that died: thaw them (a frozen process cannot act on
 * SIGKILL, so a server killed while an instance was paused leaves it frozen for good), kill what
 * is left in them, and remove them. Under v1 an instance has a directory in each controller's
 * hierarchy, and a server can die between removing one and the next: the names are gathered from
 * every hierarchy, so a memory cgroup left without its pids one is removed too.
 */
export async function sweepCgroups(
  layout: CgroupLayout,
  live: (name: string) => boolean,
): Promise<void> {
  const names = new Set<string>();
  for (const parent of layout.parents) {
    try {
      for (const d of await readdir(parent, { withFileTypes: true })) {
        if (d.isDirectory()) names.add(d.name);
      }
    } catch {
      /* a hierarchy without the parent yet */
    }
  }
  for (const name of names) {
    if (live(name)) continue;
    const dirs = layout.parents.map((p) => join(p, name));
    const cg = new Cgroup(
      layout.version,
      dirs.filter((d) => existsSync(d)),
      layout.version === 2 ? dirs[0]! : dirs[3]!,
    );
    try {
      await cg.kill();
      await cg.remove();
    } catch {
      /* busy: the next start tries again */
    }
  }
}
