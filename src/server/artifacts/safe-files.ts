/**
 * The artifact files as the server, which runs as root, touches them in a home the instance
 * controls: opened without following links or blocking on FIFOs and checked to be a regular file
 * at exactly the expected path (`/proc/self/fd/N`, race-free), and copied out bounded by what the
 * file really occupies inside, zeros written as holes (store.ts says why).
 */
import { constants } from 'node:fs';
import { open, readlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Bytes by which a file's size may exceed the blocks it occupies before it counts as sparse
 * (a file's last block, ext4's inline data of tiny files).
 */
const SPARSE_SLACK = 1024 * 1024;
/** Unit of the copy: a run of this many zero bytes becomes a hole in the copy. */
const COPY_CHUNK = 64 * 1024;
const ZEROS = Buffer.alloc(COPY_CHUNK);

/**
 * Why a file of `size` bytes occupying `allocated` bytes on the instance's disk is not copied out
 * with `budget` bytes left, or undefined when it may be.
 */
export function retainRefusal(size: number, allocated: number, budget: number): string | undefined {
  if (size > budget) return `larger than what is left of the instance's budget (${budget} bytes)`;
  if (size > allocated + SPARSE_SLACK) {
    return `sparse: ${size} bytes long but only ${allocated} bytes on the disk`;
  }
  return undefined;
}

/**
 * Copies the first `size` bytes of `source` into a new file `dest` (created, never replaced),
 * leaving every all-zero chunk a hole: what the instance turns into holes while this runs costs
 * nothing here either.
 */
export async function copySparse(source: FileHandle, size: number, dest: string): Promise<void> {
  const out = await open(dest, 'wx', 0o600);
  try {
    const buf = Buffer.alloc(COPY_CHUNK);
    for (let pos = 0; pos < size;) {
      const want = Math.min(COPY_CHUNK, size - pos);
      const { bytesRead } = await source.read(buf, 0, want, pos);
      if (bytesRead === 0) break; // shrunk meanwhile: the rest stays a hole
      const chunk = buf.subarray(0, bytesRead);
      if (!chunk.equals(ZEROS.subarray(0, bytesRead))) await out.write(chunk, 0, bytesRead, pos);
      pos += bytesRead;
    }
    await out.truncate(size);
  } finally {
    await out.close();
  }
}

/** Whether `path` reaches into another process's mount namespace (`/proc/<pid>/root/…`). */
export function viaProc(path: string): boolean {
  return /^\/proc\/\d+\/root\//.test(path);
}

/**
 * Open `rel` under `root` (a real path) for reading, refusing links, FIFOs and anything that is
 * not a regular file at exactly that path. Undefined when it is missing or refused.
 */
export async function safeOpen(root: string, rel: string): Promise<FileHandle | undefined> {
  const path = join(root, rel);
  if (!path.startsWith(`${root}/`)) return undefined;
  let fh: FileHandle;
  try {
    fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = await fh.stat();
    const real = await readlink(`/proc/self/fd/${fh.fd}`);
    // through /proc/<pid>/root the descriptor names the path as its own mount namespace sees it
    const expected = viaProc(path) ? path.replace(/^\/proc\/\d+\/root/, '') : path;
    if (st.isFile() && real === expected) return fh;
  } catch {
    /* refused below */
  }
  await fh.close();
  return undefined;
}
