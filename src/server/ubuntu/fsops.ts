/**
 * File operations shared by the edit and file tools, all through the sandbox's view: reads of
 * resolved paths, atomic writes (temp file in the same directory, fsync, rename) into binds only.
 */
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, posix } from 'node:path';
import { writeFileAtomic } from '../../internal/fs.js';
import { ToolError, type Bind, type Resolved, type SandboxView } from './paths.js';

/** Largest file the text tools read into memory. */
export const MAX_TEXT_BYTES = 32 * 1024 * 1024;
/** Largest file `read` returns. */
export const MAX_READ_BYTES = 64 * 1024 * 1024;

/** Resolve and require an existing regular file (following symlinks). */
export async function resolveFile(view: SandboxView, input: string): Promise<Resolved> {
  const r = await view.resolve(input);
  if (!r.stat) throw new ToolError(`No such file or directory: ${r.display}`);
  if (r.stat.isDirectory()) throw new ToolError(`${r.display} is a directory`);
  if (!r.stat.isFile()) throw new ToolError(`${r.display} is not a regular file`);
  return r;
}

export async function readBytes(view: SandboxView, r: Resolved, max: number): Promise<Buffer> {
  if (r.stat && r.stat.size > max) {
    throw new ToolError(
      `${r.display} is ${r.stat.size} bytes; this tool reads files of at most ${max} bytes`,
    );
  }
  await view.verify(r);
  return readFile(r.host);
}

/** Read a UTF-8 text file; invalid UTF-8 is an error (editing it would corrupt it). */
export async function readText(view: SandboxView, r: Resolved): Promise<string> {
  const bytes = await readBytes(view, r, MAX_TEXT_BYTES);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ToolError(`Ran into invalid UTF-8 data while trying to read ${r.display}`);
  }
}

/** Write atomically to a writable resolved path, creating parents; keeps an existing file's mode. */
export async function writeAtomic(
  view: SandboxView,
  r: Resolved & { bind: Bind },
  data: string | Uint8Array,
): Promise<void> {
  if (r.stat?.isDirectory()) throw new ToolError(`${r.display} is a directory`);
  await mkdirInside(view, r, dirname(r.host));
  const mode = r.stat ? r.stat.mode & 0o7777 : 0o644;
  await writeFileAtomic(r.host, data, mode);
}

/** Copy `src` (a host file) to `r` atomically. */
export async function copyFileAtomic(
  view: SandboxView,
  src: string,
  r: Resolved & { bind: Bind },
): Promise<void> {
  await mkdirInside(view, r, dirname(r.host));
  const tmp = tempPath(r.host);
  try {
    await copyFile(src, tmp);
    const fh = await open(tmp, 'r+');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, r.host);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** `mkdir -p` of a host directory inside r's bind, re-checked against symlink swaps afterwards. */
export async function mkdirInside(
  view: SandboxView,
  r: Resolved & { bind: Bind },
  hostDir: string,
): Promise<void> {
  await view.verify(r);
  await mkdir(hostDir, { recursive: true });
  await view.verify(r);
}

export const tempPath = (host: string) =>
  join(dirname(host), `.${basename(host)}.${randomBytes(6).toString('hex')}.tmp`);

/** `cat -n` style: `%6d\t%s` per line. */
export function numbered(content: string, first = 1): string {
  return content
    .split('\n')
    .map((line, i) => `${String(i + first).padStart(6)}\t${line}`)
    .join('\n');
}

/** Python's list repr of integers: `[1, 2]`. */
export const pyList = (nums: readonly number[]) => `[${nums.join(', ')}]`;

/** Python's `str.count` (an empty needle occurs len+1 times). */
export function countOccurrences(haystack: string, needle: string): number {
  if (needle === '') return haystack.length + 1;
  let n = 0;
  for (let i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + needle.length))
    n++;
  return n;
}

/** Validate a `view_range` against `lines` lines (messages of the well-known editor tool). */
export function checkViewRange(range: readonly number[], lines: number): [number, number] {
  if (range.length !== 2)
    throw new ToolError('Invalid `view_range`. It should be a list of two integers.');
  const [first, last] = range as [number, number];
  const shown = pyList(range);
  if (first < 1 || first > lines) {
    throw new ToolError(
      `Invalid \`view_range\`: ${shown}. Its first element \`${first}\` should be within the range of lines of the file: ${pyList([1, lines])}`,
    );
  }
  if (last > lines) {
    throw new ToolError(
      `Invalid \`view_range\`: ${shown}. Its second element \`${last}\` should be smaller than the number of lines in the file: \`${lines}\``,
    );
  }
  if (last !== -1 && last < first) {
    throw new ToolError(
      `Invalid \`view_range\`: ${shown}. Its second element \`${last}\` should be larger or equal than its first \`${first}\``,
    );
  }
  return [first, last];
}

/** Sorted names of a directory, directories suffixed `/` (symlinks followed in the sandbox's view). */
export async function listDir(view: SandboxView, dir: Resolved): Promise<string[]> {
  const out: string[] = [];
  for (const name of await view.readdir(dir.path)) {
    const child = await view.lstatChild(dir.path, name);
    let isDir = child.stat?.isDirectory() ?? false;
    if (child.stat?.isSymbolicLink()) {
      isDir = await view
        .resolve(child.path)
        .then((t) => t.stat?.isDirectory() ?? false)
        .catch(() => false);
    }
    out.push(isDir ? `${name}/` : name);
  }
  return out;
}

/**
 * The editor tool's directory view: `find <dir> -maxdepth 2 -not -path '*\/.*'` (entries sorted,
 * symlinks not followed).
 */
export async function tree(view: SandboxView, dir: Resolved, shown: string): Promise<string[]> {
  const lines = [shown];
  const walk = async (sandboxDir: string, shownDir: string, depth: number) => {
    for (const name of await view.readdir(sandboxDir)) {
      if (name.startsWith('.')) continue;
      const child = await view.lstatChild(sandboxDir, name);
      const childShown = posix.join(shownDir, name);
      lines.push(childShown);
      if (depth < 2 && child.stat?.isDirectory() && !child.hidden)
        await walk(child.path, childShown, depth + 1);
    }
  };
  await walk(dir.path, shown, 1);
  return lines;
}
