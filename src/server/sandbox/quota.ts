/**
 * The disk quota of an instance: every file it can write (home, /tmp, /dev/shm; the rest of its
 * root is read-only, rootfs.ts) lives on its own ext4 file system, a sparse image file of the quota's size loop-mounted on the instance
 * directory. A write past the quota fails with ENOSPC inside the instance, and the host disk grows
 * by at most the quota (the image is sparse: it takes only what is written). Creating and
 * mounting one takes ~30 ms here. Needs root (mount, loop devices) and `mkfs.ext4` (e2fsprogs).
 *
 * The mount is `nosuid,nodev`: a file the instance makes setuid or a device node it creates means
 * nothing on the host. `autoclear` frees the loop device when the file system is unmounted.
 *
 * The disk lives as long as its instance and is thrown away with it: nothing on it has to survive
 * a crash of the host. So it has no journal and no write barriers (`barrier=0`): an `fdatasync`
 * inside (Chromium makes ~200 at a first start, ~100 before its DevTools answer) ends in the
 * host's page cache instead of a journal commit plus an `fsync` of the image file on the host
 * (1.4–1.8 ms each here, against 0.07–0.1 ms without; a host `/tmp` takes ~0.8 ms), and an
 * instance cannot make the host flush its disk at will.
 */
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { runAside } from '../../internal/aside.js';
import { until } from '../../internal/deadline.js';
import { stage, untraced } from '../../internal/stages.js';

/**
 * The commands below run in the server's command helper, not forked from the server's process: a
 * fork there holds its main thread for as long as copying its page tables takes (internal/aside.ts).
 */
const run = (file: string, args: readonly string[]) => runAside(file, args, { timeoutMs: 60_000 });

const MKFS = ['/usr/sbin/mkfs.ext4', '/sbin/mkfs.ext4'].find((p) => existsSync(p));
const MOUNT = ['/usr/bin/mount', '/bin/mount'].find((p) => existsSync(p));
const UMOUNT = ['/usr/bin/umount', '/bin/umount'].find((p) => existsSync(p));
const LOSETUP = ['/usr/sbin/losetup', '/sbin/losetup'].find((p) => existsSync(p));
const MKNOD = ['/usr/bin/mknod', '/bin/mknod'].find((p) => existsSync(p));

/** What `burrow doctor` names when quotas are missing. */
export function quotaMissing(): string | undefined {
  if (process.getuid?.() !== 0) return 'the server is not root (mounting needs it)';
  if (!MKFS) return 'mkfs.ext4 is missing (apt-get install e2fsprogs)';
  if (!MOUNT || !UMOUNT) return 'mount/umount are missing (apt-get install mount)';
  if (!existsSync('/dev/loop-control') && !existsSync('/dev/loop0')) return 'no loop devices';
  return undefined;
}

export class DiskQuota {
  constructor(
    readonly image: string,
    readonly mountpoint: string,
    readonly bytes: number,
  ) {}

  /** The disk of instance directory `dir`: `dir/disk.img` mounted on `dir/disk`. */
  static in(dir: string, bytes: number): Promise<DiskQuota> {
    return DiskQuota.create(join(dir, 'disk.img'), join(dir, 'disk'), bytes);
  }

  /** Create a `bytes`-sized file system in `image` and mount it on `mountpoint`. */
  static async create(image: string, mountpoint: string, bytes: number): Promise<DiskQuota> {
    await stage('disk.image', async () => {
      const fh = await open(image, 'wx', 0o600);
      try {
        await fh.truncate(bytes);
      } finally {
        await fh.close();
      }
    });
    const quota = new DiskQuota(image, mountpoint, bytes);
    try {
      // no reserved blocks (the instance may use all of it), lazy init (fast on a sparse file),
      // no journal (a disk thrown away with its instance needs no crash recovery)
      await stage('disk.mkfs', () =>
        run(MKFS!, [
          '-q',
          '-F',
          '-m',
          '0',
          '-O',
          '^has_journal',
          '-E',
          'nodiscard,lazy_itable_init=1',
          image,
        ]),
      );
      await mkdir(mountpoint, { recursive: true, mode: 0o700 });
      await stage('disk.mount', () => loopMount(image, mountpoint));
      // a fresh ext4 has lost+found; the instance's view binds subdirectories only
    } catch (err) {
      await rm(image, { force: true });
      throw new Error(`could not create the instance's disk: ${(err as Error).message}`);
    }
    return quota;
  }

  /** Unmount (lazily, if something still holds it) and delete the image. */
  async remove(): Promise<void> {
    await unmount(this.mountpoint);
    await rmdir(this.mountpoint).catch(() => {});
    await rm(this.image, { force: true });
  }
}

/**
 * Loop-mount `image` on `mountpoint`. In a container `/dev` is a copy made when the container
 * started: the loop devices the kernel adds later (on the host's devtmpfs) have no node there, and
 * `mount -o loop` fails once the ones that existed are taken. Then the kernel's next free loop
 * device (what `losetup -f` asks `/dev/loop-control` for) gets its node here (block major 7) and
 * the mount is tried again. `/dev` is the server's own, never an instance's.
 */
async function loopMount(image: string, mountpoint: string): Promise<void> {
  const mount = () => run(MOUNT!, ['-o', 'loop,nosuid,nodev,noatime,barrier=0', image, mountpoint]);
  for (let attempt = 0; ; attempt++) {
    try {
      await mount();
      return;
    } catch (err) {
      if (attempt >= 3 || !(await addLoopNode())) throw err;
    }
  }
}

/** Make the node of the next free loop device when it is missing; true when one was made. */
async function addLoopNode(): Promise<boolean> {
  if (!LOSETUP || !MKNOD || !existsSync('/dev/loop-control')) return false;
  const free = await run(LOSETUP, ['-f']).then(
    (r) => r.stdout.trim(),
    () => '',
  );
  const index = /^\/dev\/loop(\d+)$/.exec(free)?.[1];
  if (index === undefined || existsSync(free)) return false;
  try {
    await run(MKNOD, ['-m', '0660', free, 'b', '7', index]);
  } catch {
    return existsSync(free); // another start made it meanwhile
  }
  return true;
}

/** Unmount `path` if it is a mount point; lazily when it is busy. */
export async function unmount(path: string): Promise<void> {
  if (!UMOUNT || !existsSync(path)) return;
  try {
    await run(UMOUNT, [path]);
  } catch {
    await run(UMOUNT, ['-l', path]).catch(() => {});
  }
}

/** Unmount every instance disk under `dir` (a killed server's run directory) before removing it. */
export async function unmountAllUnder(dir: string): Promise<void> {
  let mounts: string;
  try {
    mounts = await readFile('/proc/self/mounts', 'utf8');
  } catch {
    return;
  }
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  const targets = mounts
    .split('\n')
    .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((m): m is string => !!m && m.startsWith(prefix))
    .sort((a, b) => b.length - a.length);
  for (const m of targets) await unmount(m);
}

/** How long after a claim the stock is refilled: not while the claiming start still runs. */
const REFILL_DELAY_MS = 1500;

/**
 * Instance disks made ahead: a few formatted, mounted, never used disks, each in a directory of
 * its own under a root-only (0700) directory, where no instance can reach them. A start claims
 * one by renaming its directory to the instance's (the mount follows the rename), which takes a
 * fraction of a millisecond where making a disk takes a `mkfs` and a loop mount (~40–100 ms on a
 * 2-core machine, more under load). The stock is refilled in the background a moment after each
 * claim; an empty stock only means the start makes its disk itself, as without a stock.
 *
 * A stock disk is what a fresh one is: nothing ran with it, its root is root-owned, and the
 * instance's directories on it are made and given to the instance's uid at its start
 * (space/isolated.ts), exactly as on a disk made then.
 */
export class DiskStock {
  readonly #dir: string;
  readonly #bytes: number;
  readonly #size: number;
  readonly #onError: (err: unknown) => void;
  /** Directories each holding `disk.img` mounted on `disk/`, ready to be claimed. */
  readonly #ready: string[] = [];
  #timer: NodeJS.Timeout | undefined;
  #filling: Promise<void> | undefined;
  #closed = false;
  #next = 0;

  /**
   * `dir`: the stock's directory (created root-only, on the file system of the instance
   * directories: a claim is a rename); `size` disks of `bytes` each.
   */
  constructor(dir: string, bytes: number, size: number, onError: (err: unknown) => void) {
    this.#dir = dir;
    this.#bytes = bytes;
    this.#size = size;
    this.#onError = onError;
  }

  /** Disks ready to be claimed now. */
  get ready(): number {
    return this.#ready.length;
  }

  /** Start filling the stock (in the background after `delayMs`). */
  refill(delayMs = 0): void {
    if (this.#closed || this.#timer || this.#size === 0) return;
    // not part of whichever start asked for it (its stages, src/internal/stages.ts)
    untraced(() => {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#filling ??= this.#fill().finally(() => (this.#filling = undefined));
      }, delayMs);
      this.#timer.unref();
    });
  }

  /** Resolve once the stock is full (or closed): for tests and the first instances' start. */
  async filled(): Promise<void> {
    const done = () =>
      this.#closed || this.#ready.length >= this.#size || (!this.#filling && !this.#timer);
    // a fill under way is waited for; a refill whose timer has not fired yet, polled
    await until(
      async () => {
        if (done()) return true;
        await this.#filling;
        return done();
      },
      { timeoutMs: Infinity, intervalMs: 10 },
    );
  }

  /**
   * Make `dir` (an empty directory, or none) the instance directory of a stock disk: its
   * `disk.img` mounted on its `disk/`. Undefined when the stock is empty.
   */
  async claim(dir: string): Promise<DiskQuota | undefined> {
    const item = this.#ready.shift();
    this.refill(REFILL_DELAY_MS);
    if (!item) return undefined;
    try {
      await rename(item, dir); // replaces an empty `dir`
    } catch (err) {
      this.#onError(err);
      await new DiskQuota(join(item, 'disk.img'), join(item, 'disk'), this.#bytes).remove();
      await rm(item, { recursive: true, force: true });
      return undefined;
    }
    return new DiskQuota(join(dir, 'disk.img'), join(dir, 'disk'), this.#bytes);
  }

  async #fill(): Promise<void> {
    await mkdir(this.#dir, { recursive: true, mode: 0o700 });
    while (!this.#closed && this.#ready.length < this.#size) {
      const item = join(this.#dir, String(this.#next++));
      try {
        await mkdir(item, { mode: 0o711 });
        const disk = await DiskQuota.in(item, this.#bytes);
        if (this.#closed) {
          await disk.remove();
          await rm(item, { recursive: true, force: true });
        } else {
          this.#ready.push(item);
        }
      } catch (err) {
        await rm(item, { recursive: true, force: true }).catch(() => {});
        this.#onError(err);
        return; // the next claim tries again
      }
    }
  }

  /** Unmount and delete every disk of the stock; no refill after this. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#filling;
    for (const item of this.#ready.splice(0)) {
      await new DiskQuota(join(item, 'disk.img'), join(item, 'disk'), this.#bytes).remove();
    }
    await rm(this.#dir, { recursive: true, force: true });
  }
}
