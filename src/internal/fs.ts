/**
 * Atomic file writes: temp file in the same directory, fsync, rename, fsync the directory. A
 * process killed mid-write leaves its temp file behind; `sweepAtomicTempsSync` removes those.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, rmSync } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** `.<name>.<12 hex>.tmp`: the temp file of a write of `<name>` that has not been renamed yet. */
const tempName = (name: string) => `.${name}.${randomBytes(6).toString('hex')}.tmp`;
const TEMP = /^\..+\.[0-9a-f]{12}\.tmp$/;

export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  mode = 0o600,
): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, tempName(basename(path)));
  const fh = await open(tmp, 'wx', mode);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  try {
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

/**
 * Removes the temp files `writeFileAtomic` left in `dir` when a process died mid-write (their
 * write never committed, so nothing is lost) and returns their names. Committed files are never
 * touched. Call it only while no write into `dir` is in flight, e.g. when opening a store.
 */
export function sweepAtomicTempsSync(dir: string): string[] {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const swept = entries.filter((e) => e.isFile() && TEMP.test(e.name)).map((e) => e.name);
  for (const name of swept) rmSync(join(dir, name), { force: true });
  return swept;
}
