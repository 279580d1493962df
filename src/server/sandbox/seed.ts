/**
 * Seeding an instance's home from the server, before anything runs inside: directories, a
 * read-only copy of a host directory (an unpacked extension), a tree of files (a saved profile),
 * and reading such a tree back. The disk is new and no process of the instance exists yet, so
 * nothing can have planted a link, and doing it from here spares a process start; every write is
 * refused once the instance ran anything (`ran`). Paths are relative to home, never absolute,
 * never through `..`.
 */
import { constants } from 'node:fs';
import {
  chmod,
  chown,
  cp,
  type FileHandle,
  lstat,
  mkdir,
  open,
  readdir,
  rm,
  writeFile,
} from 'node:fs/promises';
import { join, posix } from 'node:path';

/** Files `seedFiles` writes at once. */
const SEED_WRITES = 16;

/**
 * Files and directories `readTree` lists at most: each costs the server an entry and a path even
 * when empty (a profile has a few thousand).
 */
const MAX_TREE_ENTRIES = 100_000;

/**
 * The `size` bytes of `fd` (its size when stat'ed), never more: a file that grew since is
 * refused rather than read on, so what is held is what was charged.
 */
async function readAtMost(fd: FileHandle, size: number): Promise<Buffer> {
  const data = Buffer.allocUnsafe(size);
  let at = 0;
  while (at < size) {
    const { bytesRead } = await fd.read(data, at, size - at, at);
    if (bytesRead === 0) return data.subarray(0, at); // it shrank
    at += bytesRead;
  }
  const { bytesRead } = await fd.read(Buffer.alloc(1), 0, 1, size);
  if (bytesRead > 0) throw new Error('a file grew while it was read');
  return data;
}

/** What seeding needs of the sandbox: where home is, and whose it is. */
export interface SeedTarget {
  /** HOME as seen inside. */
  readonly home: string;
  /** Host path of the instance's home (read at each call: it may move once the anchor runs). */
  readonly hostHome: string;
  /** The instance's host uid where the server chowns to it; else undefined. */
  readonly uid: number | undefined;
}

export class HomeSeeds {
  readonly #target: SeedTarget;
  readonly #ran: () => boolean;
  /** Directories `seedHome` made, as seen inside. */
  readonly #seeded = new Set<string>();

  /** `ran`: whether anything of the instance's own was started (burrow's own helpers aside). */
  constructor(target: SeedTarget, ran: () => boolean) {
    this.#target = target;
    this.#ran = ran;
  }

  /** Create directories under home (paths relative to it). */
  async seedHome(paths: readonly string[]): Promise<void> {
    if (this.#ran()) throw new Error('seedHome: the instance already runs processes');
    const { hostHome, uid, home } = this.#target;
    for (const rel of paths) {
      if (rel.split('/').includes('..') || rel.startsWith('/')) throw new Error(`bad path ${rel}`);
      let at = hostHome;
      for (const part of rel.split('/').filter(Boolean)) {
        at = join(at, part);
        await mkdir(at, { mode: 0o755 }).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
        if (uid !== undefined) await chown(at, uid, uid);
      }
      this.#seeded.add(posix.join(home, rel));
    }
  }

  /**
   * Copy the host directory `from` (regular files and directories only, e.g. an unpacked browser
   * extension) to `rel` under home. The copy and the directories leading to it under home are
   * root's (files 0644, directories 0755): the instance's user reads them and cannot change them,
   * except the directories `writable` (relative to the copy, made empty and owned by the user).
   * `from` is never visible inside.
   */
  async seedReadOnly(rel: string, from: string, writable: readonly string[] = []): Promise<void> {
    if (this.#ran()) throw new Error('seedReadOnly: the instance already runs processes');
    if (rel.split('/').includes('..') || rel.startsWith('/')) throw new Error(`bad path ${rel}`);
    const { hostHome, uid } = this.#target;
    let at = hostHome;
    for (const part of rel.split('/').filter(Boolean)) {
      at = join(at, part);
      if (at !== join(hostHome, rel)) {
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
    const readable = async (path: string): Promise<void> => {
      const st = await lstat(path);
      await chmod(path, st.isDirectory() ? 0o755 : 0o644);
      if (st.isDirectory()) {
        for (const name of await readdir(path)) await readable(join(path, name));
      }
    };
    await readable(at);
    for (const sub of writable) {
      if (sub.split('/').includes('..') || sub.startsWith('/')) throw new Error(`bad path ${sub}`);
      const dir = join(at, sub);
      await mkdir(dir, { mode: 0o700 });
      if (uid !== undefined) await chown(dir, uid, uid);
    }
  }

  /**
   * Write a tree of files under the directory `rel` of home, owned by the instance's user
   * (directories 0700, files 0600) (e.g. a saved browser profile). Entry paths are relative to
   * `rel`, without `.` or `..`. Every path is checked before anything is written; every directory
   * is made once, parents first; then the files are written `SEED_WRITES` at a time. (Written one
   * after the other, with each file's parent directories made again, a saved profile's small
   * files took 40-75 ms of its instance's start: each step a round trip to libuv's thread pool.)
   */
  async seedFiles(
    rel: string,
    entries: readonly { path: string; data?: Buffer | undefined }[],
  ): Promise<void> {
    if (this.#ran()) throw new Error('seedFiles: the instance already runs processes');
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
    const { hostHome, uid } = this.#target;
    const base = join(hostHome, rel);
    const own = async (p: string) => {
      if (uid !== undefined) await chown(p, uid, uid);
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
   * profile replaces), keeping the directory; nothing if it does not exist. Until anything ran,
   * nothing of the instance's can have planted a link there.
   */
  async emptySeeded(rel: string): Promise<void> {
    if (this.#ran()) throw new Error('emptySeeded: the instance already runs processes');
    if (rel.split('/').includes('..') || rel.startsWith('/')) throw new Error(`bad path ${rel}`);
    const at = join(this.#target.hostHome, rel);
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
   * The tree is listed first and each file charged at its size (a sparse one at its apparent
   * size, a preallocated one at its blocks), so a tree past the budget is refused before a byte of
   * it is read; then `charge` is told the total (it may wait, e.g. for a server-wide budget, or
   * throw) and the files are read, each charged again as opened: a file that grew since it was
   * listed is refused rather than read on, so what is held is what was charged.
   */
  async readTree(
    rel: string,
    maxBytes: number,
    skip: (name: string) => boolean = () => false,
    charge: (bytes: number) => Promise<void> = async () => {},
  ): Promise<{ path: string; data?: Buffer }[]> {
    if (rel.split('/').includes('..') || rel.startsWith('/')) throw new Error(`bad path ${rel}`);
    let at = this.#target.hostHome;
    for (const part of rel.split('/').filter(Boolean)) {
      at = join(at, part);
      const st = await lstat(at).catch(() => undefined);
      if (!st?.isDirectory()) return [];
    }
    const listed: { path: string; host: string; file: boolean }[] = [];
    let total = 0;
    const cost = (st: { size: number; blocks: number }) => Math.max(st.size, st.blocks * 512);
    const walk = async (dir: string, prefix: string): Promise<void> => {
      for (const name of (await readdir(dir)).sort()) {
        if (skip(name)) continue;
        const host = join(dir, name);
        const path = prefix ? `${prefix}/${name}` : name;
        const st = await lstat(host);
        if ((st.isDirectory() || st.isFile()) && listed.length >= MAX_TREE_ENTRIES) {
          throw new Error(`more than ${MAX_TREE_ENTRIES} files and directories`);
        }
        if (st.isDirectory()) {
          listed.push({ path, host, file: false });
          await walk(host, path);
        } else if (st.isFile()) {
          // charged before a byte is read: a sparse file counts at its apparent size
          total += cost(st);
          if (total > maxBytes) throw new Error(`more than ${maxBytes} bytes`);
          listed.push({ path, host, file: true });
        }
      }
    };
    await walk(at, '');
    await charge(total);
    const out: { path: string; data?: Buffer }[] = [];
    let read = 0;
    for (const { path, host, file } of listed) {
      if (!file) {
        out.push({ path });
        continue;
      }
      const fd = await open(host, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      try {
        const st = await fd.stat();
        if (!st.isFile()) continue;
        read += cost(st);
        if (read > total) throw new Error('the files changed while they were read');
        out.push({ path, data: await readAtMost(fd, st.size) });
      } finally {
        await fd.close();
      }
    }
    return out;
  }

  /** Whether every one of `paths` (as seen inside) was made by `seedHome` and nothing ran since. */
  seeded(paths: readonly string[]): boolean {
    return !this.#ran() && paths.every((p) => this.#seeded.has(posix.normalize(p)));
  }
}
