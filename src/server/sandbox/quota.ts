/**
 * The disk quota of an instance: everything it can write (home, /tmp, /dev/shm) lives on its own
 * ext4 file system, a sparse image file of the quota's size loop-mounted on the instance
 * directory. A write past the quota fails with ENOSPC inside the instance, and the host disk grows
 * by at most the quota (the image is sparse: it takes only what is written). Creating and
 * mounting one takes ~30 ms here. Needs root (mount, loop devices) and `mkfs.ext4` (e2fsprogs).
 *
 * The mount is `nosuid,nodev`: a file the instance makes setuid or a device node it creates means
 * nothing on the host. `autoclear` frees the loop device when the file system is unmounted.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, rm, rmdir } from 'node:fs/promises';
import { promisify } from 'node:util';
import { stage } from '../../internal/stages.js';

const run = promisify(execFile);

const MKFS = ['/usr/sbin/mkfs.ext4', '/sbin/mkfs.ext4'].find((p) => existsSync(p));
const MOUNT = ['/usr/bin/mount', '/bin/mount'].find((p) => existsSync(p));
const UMOUNT = ['/usr/bin/umount', '/bin/umount'].find((p) => existsSync(p));

/** What `burrow doctor` names when quotas are missing. */
export function quotaMissing(): string | undefined {
  if (process.getuid?.() !== 0) return 'the server is not root (mounting needs it)';
  if (!MKFS) return 'mkfs.ext4 is missing (apt-get install e2fsprogs)';
  if (!MOUNT || !UMOUNT) return 'mount/umount are missing (apt-get install mount)';
  if (!existsSync('/dev/loop-control') && !existsSync('/dev/loop0')) return 'no loop devices';
  return undefined;
}

export class DiskQuota {
  private constructor(
    readonly image: string,
    readonly mountpoint: string,
    readonly bytes: number,
  ) {}

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
      // no reserved blocks (the instance may use all of it), lazy init (fast on a sparse file)
      await stage('disk.mkfs', () =>
        run(MKFS!, [
          '-q',
          '-F',
          '-m',
          '0',
          '-E',
          'nodiscard,lazy_itable_init=1,lazy_journal_init=1',
          image,
        ]),
      );
      await mkdir(mountpoint, { recursive: true, mode: 0o700 });
      await stage('disk.mount', () =>
        run(MOUNT!, ['-o', 'loop,nosuid,nodev,noatime', image, mountpoint]),
      );
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
