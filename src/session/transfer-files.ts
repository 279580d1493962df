/**
 * Local file names for the transfer proxy: a download's suggested name made one safe path
 * segment, a free name beside files already there (as Chromium numbers repeated downloads), and
 * the files under a directory a file input was given.
 */
import { readdir, stat } from 'node:fs/promises';
import { join, posix, relative } from 'node:path';

/** A page's suggested file name as one safe path segment. */
export function safeName(suggested: string): string {
  // eslint-disable-next-line no-control-regex
  const cleaned = suggested.replace(/[\u0000-\u001f/\\]/g, '_').trim();
  const name = posix.basename(cleaned);
  return name === '' || name === '.' || name === '..' ? 'download' : name;
}

/** `name`, or `name (1).ext`, `name (2).ext` … if taken, as Chromium names repeated downloads. */
export async function freeName(dir: string, name: string): Promise<string> {
  const dot = name.lastIndexOf('.');
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
  for (let i = 0; ; i++) {
    const candidate = i === 0 ? name : `${stem} (${i})${ext}`;
    const taken = await stat(join(dir, candidate)).then(
      () => true,
      () => false,
    );
    if (!taken) return candidate;
  }
}

/** Regular files under `dir` (symlinks followed, as Chromium would), relative to it. */
export async function listFiles(
  dir: string,
): Promise<{ rel: string; size: number; mtimeMs: number }[]> {
  const out: { rel: string; size: number; mtimeMs: number }[] = [];
  const walk = async (at: string) => {
    for (const entry of await readdir(at, { withFileTypes: true })) {
      const full = join(at, entry.name);
      const info = await stat(full).catch(() => undefined);
      if (info?.isDirectory()) await walk(full);
      else if (info?.isFile()) {
        out.push({ rel: relative(dir, full), size: info.size, mtimeMs: info.mtimeMs });
      }
    }
  };
  await walk(dir);
  return out.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
}
