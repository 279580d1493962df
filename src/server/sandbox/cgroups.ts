/**
 * Resource limits of an instance: one cgroup per instance with a memory, process-count and CPU
 * limit, and the freezer for pause. cgroup v2 where the machine mounts it at /sys/fs/cgroup
 * (unified hierarchy), else cgroup v1 with one directory per controller
 * (/sys/fs/cgroup/{memory,pids,cpu,freezer}). Needs root; without it an instance runs unlimited
 * and `burrow doctor` says so.
 *
 * Every process of the instance is placed in the cgroup before it executes anything (the spawn
 * wrapper writes its own pid into `cgroup.procs`), so nothing it forks can be outside.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { until } from '../../internal/deadline.js';
import { signalQuietly } from '../../internal/process.js';

const ROOT = '/sys/fs/cgroup';
const V1_CONTROLLERS = ['memory', 'pids', 'cpu', 'freezer'] as const;
/** Directory under each hierarchy holding burrow's instance cgroups. */
const PARENT = 'burrow';

export interface Limits {
  /** Memory (RAM, page cache and tmpfs pages the instance touches) in bytes. */
  memoryBytes: number;
  /** Processes and threads at once. */
  pids: number;
  /** CPU time in cores (1.5 = one and a half cores' worth of time per period). */
  cpus: number;
}

export type CgroupVersion = 1 | 2;

/** Which cgroup version this machine offers to a root process, or undefined. */
export function cgroupVersion(): CgroupVersion | undefined {
  if (process.getuid?.() !== 0) return undefined;
  if (existsSync(join(ROOT, 'cgroup.controllers'))) {
    const have = readFileSync(join(ROOT, 'cgroup.controllers'), 'utf8').split(/\s+/);
    return ['memory', 'pids', 'cpu'].every((c) => have.includes(c)) ? 2 : undefined;
  }
  return V1_CONTROLLERS.every((c) => existsSync(join(ROOT, c, 'cgroup.procs'))) ? 1 : undefined;
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
  static async create(version: CgroupVersion, name: string, limits: Limits): Promise<Cgroup> {
    if (version === 2) {
      const parent = join(ROOT, PARENT);
      await mkdir(parent, { recursive: true });
      // children of `burrow` may use these controllers
      await writeFile(join(parent, 'cgroup.subtree_control'), '+memory +pids +cpu').catch(() => {});
      const dir = join(parent, name);
      await mkdir(dir);
      const cg = new Cgroup(2, [dir], dir);
      try {
        await writeFile(join(dir, 'memory.max'), String(limits.memoryBytes));
        await writeFile(join(dir, 'memory.swap.max'), '0').catch(() => {});
        await writeFile(join(dir, 'pids.max'), String(limits.pids));
        const period = 100_000;
        await writeFile(join(dir, 'cpu.max'), `${Math.round(limits.cpus * period)} ${period}`);
      } catch (err) {
        await cg.remove();
        throw err;
      }
      return cg;
    }
    const dirs: string[] = [];
    for (const c of V1_CONTROLLERS) {
      const dir = join(ROOT, c, PARENT, name);
      await mkdir(join(ROOT, c, PARENT), { recursive: true });
      await mkdir(dir); // never share a cgroup with a leftover of the same name
      dirs.push(dir);
    }
    const cg = new Cgroup(1, dirs, join(ROOT, 'freezer', PARENT, name));
    try {
      const [memory, pids, cpu] = dirs as [string, string, string, string];
      await writeFile(join(memory, 'memory.limit_in_bytes'), String(limits.memoryBytes));
      // with swap accounting, also cap memory+swap so the limit cannot be dodged into swap
      if (existsSync(join(memory, 'memory.memsw.limit_in_bytes'))) {
        await writeFile(join(memory, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
      }
      await writeFile(join(pids, 'pids.max'), String(limits.pids));
      const period = 100_000;
      await writeFile(join(cpu, 'cpu.cfs_period_us'), String(period));
      await writeFile(join(cpu, 'cpu.cfs_quota_us'), String(Math.round(limits.cpus * period)));
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

  /** Remove the cgroup directories (they must be empty). Retries briefly while exits settle. */
  async remove(): Promise<void> {
    for (const dir of [...this.dirs].reverse()) {
      for (let i = 0; i < 50; i++) {
        try {
          await rmdir(dir);
          break;
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') break;
          if (code !== 'EBUSY' || i === 49) throw err;
          await sleep(20);
        }
      }
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
 * is left in them, and remove them.
 */
export async function sweepCgroups(
  version: CgroupVersion,
  live: (name: string) => boolean,
): Promise<void> {
  const parent = version === 2 ? join(ROOT, PARENT) : join(ROOT, 'pids', PARENT);
  let names: string[] = [];
  try {
    names = (await readdir(parent, { withFileTypes: true }))
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return;
  }
  for (const name of names) {
    if (live(name)) continue;
    const dirs =
      version === 2
        ? [join(ROOT, PARENT, name)]
        : V1_CONTROLLERS.map((c) => join(ROOT, c, PARENT, name));
    const cg = new Cgroup(
      version,
      dirs.filter((d) => existsSync(d)),
      version === 2 ? dirs[0]! : join(ROOT, 'freezer', PARENT, name),
    );
    try {
      await cg.kill();
      await cg.remove();
    } catch {
      /* busy: the next start tries again */
    }
  }
}
