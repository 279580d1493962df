/**
 * An ubuntu instance's shell trying to write outside its disk: `/` and what bubblewrap makes
 * there (its root and /dev are tmpfs mounts the size of half the host's memory, owned by the
 * instance's user unless made read-only), the host's programs and the generated /etc, then more
 * than its quota into every place it may write. Used by test/integration/sandbox/rootfs-writes.test.ts
 * at the root level (in its own process) and, through test/helpers/as-user-rootfs.ts, by a server a
 * normal user runs. Nothing here asserts: it returns what happened.
 */
import { readFileSync } from 'node:fs';

/** Paths outside the instance's disk a shell tries to create (`/opt` and `/srv` do not exist). */
export const OUTSIDE = [
  '/x',
  '/usr/x',
  '/etc/x',
  '/opt/x',
  '/srv/x',
  '/var/x',
  '/run/x',
  '/dev/x',
  '/proc/1/root/x',
] as const;

/** The places an instance's processes are meant to write: all on its disk. */
export const WRITABLE = ['/home/user', '/tmp', '/var/tmp', '/dev/shm'] as const;

export interface RootfsFindings {
  /** Per path of `OUTSIDE`: `wrote`, or the shell's error. */
  outside: Record<string, string>;
  /** Mounts the shell sees writable: `mount point` → `major:minor fstype`. */
  writableMounts: Record<string, string>;
  /**
   * Per directory of `WRITABLE`: `full` when the write stopped at ENOSPC/EDQUOT, else what it
   * said (empty where the attack did not fill: a level without a quota).
   */
  fills: Record<string, string>;
  /** Bytes the instance's disk reports used once every fill stopped. */
  diskUsed: number;
  /** Growth of the host's shared memory (tmpfs, shm) while the instance holds what it wrote (bytes). */
  shmemGrowth: number;
}

/** The host's `Shmem` (tmpfs pages among them), in bytes. */
function hostShmem(): number {
  const kb = /^Shmem:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
  return Number(kb) * 1024;
}

/** Runs `command` in the instance's bash; its output and error text. */
export type Shell = (command: string, timeoutSeconds?: number) => Promise<string>;

/**
 * Writes `attemptBytes` (more than the quota) at each path of `OUTSIDE` (its directory made first
 * where missing), then, with `fill`, into each of `WRITABLE`, keeping what landed until the host's
 * shared memory is read again.
 */
export async function attackRootfs(
  sh: Shell,
  attemptBytes: number,
  fill = true,
): Promise<RootfsFindings> {
  const mib = Math.ceil(attemptBytes / 2 ** 20);
  const before = hostShmem();
  const outside: Record<string, string> = {};
  for (const path of OUTSIDE) {
    const out = await sh(
      `mkdir -p "$(dirname ${path})" 2>&1 && dd if=/dev/zero of=${path} bs=1M count=${mib} 2>&1 >/dev/null | grep -v records; ` +
        `test -f ${path} && echo wrote`,
      60,
    );
    outside[path] = out.trim().split('\n').pop() ?? '';
  }
  const fills: Record<string, string> = {};
  for (const dir of fill ? WRITABLE : []) {
    const out = await sh(`dd if=/dev/zero of=${dir}/fill bs=1M count=${mib} 2>&1 | head -1`, 60);
    fills[dir] = /No space left on device|Disk quota exceeded/.test(out) ? 'full' : out.trim();
    // leave the disk full for the next directory: each must stop at the same quota
  }
  const growth = hostShmem() - before;
  const used = await sh('df -B1 --output=used /tmp | tail -1', 30);
  const mounts = await sh('cat /proc/self/mountinfo', 30);
  await sh(
    `rm -f ${[...OUTSIDE, ...WRITABLE.map((d) => `${d}/fill`)].join(' ')} 2>/dev/null; true`,
    60,
  );
  return {
    outside,
    writableMounts: writableMounts(mounts),
    fills,
    diskUsed: Number(used.trim()),
    shmemGrowth: growth,
  };
}

/**
 * The writable mounts of a mountinfo text, but the kernel's own views (proc, devpts) and the
 * single device nodes bubblewrap binds into /dev (a write to /dev/null stores nothing).
 */
export function writableMounts(mountinfo: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of mountinfo.split('\n').filter(Boolean)) {
    const [pre, post] = line.split(' - ');
    const f = pre!.split(' ');
    const [fstype] = post!.split(' ');
    const [device, point, options] = [f[2]!, f[4]!, f[5]!];
    if (!options.split(',').includes('rw')) continue;
    if (fstype === 'proc' || fstype === 'devpts') continue;
    if (fstype === 'devtmpfs' && /^\/dev\/(null|zero|full|random|urandom|tty)$/.test(point)) {
      continue;
    }
    out[point] = `${device} ${fstype}`;
  }
  return out;
}
