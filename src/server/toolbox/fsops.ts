/**
 * The instance's files as the edit, file and upload tools use them: the toolbox's operations
 * (./files.ts, run inside the sandbox as the instance's user) with the tools'
 * display paths and messages, plus the text helpers both tools share.
 */
import { MAX_LIST_ENTRIES, SandboxFiles, type Entry, type Lines, type LinesAsk } from './files.js';
import { ToolboxError, ToolboxUnavailable, type Toolbox } from './toolbox.js';
import { ToolFailure } from '../computer/failure.js';
import { displayPath } from './paths.js';
import { decodeSliced, encodeSliced } from './text-scan.js';

/** Largest file the text tools read into memory. */
export const MAX_TEXT_BYTES = 32 * 1024 * 1024;
/** Largest file `read` returns. */
export const MAX_READ_BYTES = 64 * 1024 * 1024;
/**
 * Lines a numbered answer (file `read` with `line_numbers`, file `view`) shows at most, and its
 * bytes: the toolbox numbers them inside the instance; past either the answer says where it
 * stopped. Numbering a file's every line on the server (60 MiB of newlines) held its main thread
 * over 30 s and took it past 5 GB.
 */
export const MAX_NUMBERED_LINES = 100_000;
export const MAX_NUMBERED_BYTES = 8 * 1024 * 1024;

/** A path as requested (`path`, sent to the toolbox) and as the tools show it (`display`). */
export interface Target {
  readonly path: string;
  readonly display: string;
}

export interface Stat extends Entry {
  /** How the tools show it: the request made absolute (not the canonical `path`). */
  display: string;
}

/** An upload in progress: `UploadSink` with the tools' messages. */
export interface FileUpload {
  /** Canonical sandbox path of the target. */
  readonly path: string;
  readonly display: string;
  write(chunk: Uint8Array): Promise<void>;
  /** fsync and rename the temp file into place. */
  commit(): Promise<void>;
  /** Remove the temp file. Never throws. */
  abort(): Promise<void>;
}

type Displays = Partial<Record<'path' | 'src' | 'dst', string>>;

export class InstanceFiles {
  /** The instance's home as seen inside: base of relative paths. */
  readonly home: string;
  readonly #files: SandboxFiles;

  constructor(
    toolbox: Toolbox,
    /** The instance's writable directories, named in "read-only" answers. */
    readonly writable: readonly string[],
  ) {
    this.#files = new SandboxFiles(toolbox);
    this.home = toolbox.home;
  }

  display(input: string): string {
    return displayPath(this.home, input);
  }

  target(input: string | Target): Target {
    return typeof input === 'string' ? { path: input, display: this.display(input) } : input;
  }

  /** What is at a path (the last symlink followed unless `follow` is false). */
  stat(input: string | Target, follow = true): Promise<Stat> {
    const t = this.target(input);
    return this.#run({ path: t.display }, async () => ({
      ...(await this.#files.stat(t.path, follow)),
      display: t.display,
    }));
  }

  readBytes(input: string | Target, max: number): Promise<{ path: string; data: Buffer }> {
    const t = this.target(input);
    return this.#run({ path: t.display }, () => this.#files.read(t.path, max));
  }

  /** A UTF-8 text file; invalid UTF-8 is an error (editing it would corrupt it). */
  async readText(input: string | Target): Promise<{ path: string; text: string }> {
    const t = this.target(input);
    const { path, data } = await this.readBytes(t, MAX_TEXT_BYTES);
    // decoded in the shared slices: 32 MiB in one go held the main thread tens of ms
    const text = await decodeSliced(data);
    if (text === undefined)
      throw new ToolFailure(`Ran into invalid UTF-8 data while trying to read ${t.display}`);
    return { path, text };
  }

  /** Atomic write, parents created, an existing file's mode kept (see `SandboxFiles.write`). */
  write(
    input: string | Target,
    data: string | Uint8Array,
    opts: { append?: boolean; exclusive?: boolean } = {},
  ): Promise<{ path: string; appended: boolean }> {
    const t = this.target(input);
    return this.#run({ path: t.display }, async () =>
      this.#files.write(t.path, typeof data === 'string' ? await encodeSliced(data) : data, opts),
    );
  }

  mkdir(input: string | Target): Promise<string> {
    const t = this.target(input);
    return this.#run({ path: t.display }, () => this.#files.mkdir(t.path));
  }

  remove(
    input: string | Target,
    opts: { recursive?: boolean; dirOnly?: boolean } = {},
  ): Promise<string> {
    const t = this.target(input);
    return this.#run({ path: t.display }, () => this.#files.remove(t.path, opts));
  }

  move(src: Target, dst: Target): Promise<void> {
    return this.#run({ src: src.display, dst: dst.display }, () =>
      this.#files.move(src.path, dst.path),
    );
  }

  copy(src: Target, dst: Target): Promise<void> {
    return this.#run({ src: src.display, dst: dst.display }, () =>
      this.#files.copy(src.path, dst.path),
    );
  }

  /**
   * Sorted names of a directory, directories suffixed `/` (symlinks followed): the first
   * `MAX_LIST_ENTRIES`, and how many it has in all.
   */
  async list(input: string | Target): Promise<{ names: string[]; total: number }> {
    const t = this.target(input);
    const { entries, total } = await this.#run({ path: t.display }, () => this.#files.list(t.path));
    return { names: entries.map((e) => (e.dir ? `${e.name}/` : e.name)).sort(), total };
  }

  /**
   * `find <dir> -maxdepth <depth> -not -path '*\/.*'` as paths relative to the directory: the
   * first `MAX_LIST_ENTRIES`, and how many there are in all.
   */
  async tree(input: string | Target, depth: number): Promise<{ entries: string[]; total: number }> {
    const t = this.target(input);
    const { entries, total } = await this.#run({ path: t.display }, () =>
      this.#files.tree(t.path, depth),
    );
    return { entries, total };
  }

  /** Lines of a text file as the toolbox cut them (`SandboxFiles.lines`). */
  lines(input: string | Target, ask: LinesAsk): Promise<Lines> {
    const t = this.target(input);
    return this.#run({ path: t.display }, () => this.#files.lines(t.path, ask));
  }

  /** Start an upload (`UploadSink`); its failures name the target as `display`. */
  async openUpload(input: string | Target): Promise<FileUpload> {
    const t = this.target(input);
    const sink = await this.#run({ path: t.display }, () => this.#files.openUpload(t.path));
    const run = <T>(fn: () => Promise<T>) => this.#run({ path: t.display }, fn);
    return {
      path: sink.path,
      display: t.display,
      write: (chunk) => run(() => sink.write(chunk)),
      commit: () => run(() => sink.commit()),
      abort: () => sink.abort(),
    };
  }

  /** Run a toolbox call, its failures as the tools report them. */
  async #run<T>(displays: Displays, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.describe(err, displays);
    }
  }

  /**
   * A toolbox failure as a `ToolFailure` naming the path it concerns, with the toolbox's code and
   * the system's words for it (`reason`); other errors unchanged.
   */
  describe(err: unknown, displays: Displays): unknown {
    if (err instanceof ToolboxUnavailable) {
      const reason = `The instance's file operations are unavailable: ${err.message}`;
      return new ToolFailure(reason, { code: 'UNAVAILABLE' });
    }
    if (!(err instanceof ToolboxError)) return err;
    const d =
      displays[err.arg as keyof Displays] ?? displays.path ?? displays.src ?? displays.dst ?? '';
    const { size, max } = err.details;
    const message = (() => {
      switch (err.code) {
        case 'HIDDEN':
          return `Access denied: ${d} is outside what this instance can access`;
        case 'EROFS':
          return `Access denied: ${d} is read-only (writes are allowed only under ${this.writable.join(' and ')})`;
        case 'EISDIR':
          return `${d} is a directory`;
        case 'NOT_REGULAR':
          return `${d} is not a regular file`;
        case 'INVALID_UTF8':
          return `Ran into invalid UTF-8 data while trying to read ${d}`;
        case 'TOO_LARGE':
          return `${d} is ${String(size)} bytes; this tool reads files of at most ${String(max)} bytes`;
        case 'OWN_DIR':
          return `Refusing to remove ${d}: it is one of the instance's own directories`;
        case 'UNWALKABLE':
          return `Cannot copy ${d}: it contains paths this instance cannot access`;
        case 'ENOSPC':
        case 'EDQUOT':
          return `${err.message}: ${d} (the instance's disk is full)`;
        default:
          return `${err.message}: ${d}`;
      }
    })();
    return new ToolFailure(message, { code: err.code, reason: err.message });
  }
}

/**
 * What a listing cut at `MAX_LIST_ENTRIES` (or the toolbox's 1 MiB of names) says of the rest;
 * undefined when nothing was left out.
 */
export function listingNote(shown: number, total: number): string | undefined {
  if (total <= shown) return undefined;
  return `listing truncated: showing the first ${shown} of ${total} entries (at most ${MAX_LIST_ENTRIES} a listing); ${total - shown} left out. Use bash (find, ls) to see the rest`;
}

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
    throw new ToolFailure('Invalid `view_range`. It should be a list of two integers.');
  const [first, last] = range as [number, number];
  const shown = pyList(range);
  if (first < 1 || first > lines) {
    throw new ToolFailure(
      `Invalid \`view_range\`: ${shown}. Its first element \`${first}\` should be within the range of lines of the file: ${pyList([1, lines])}`,
    );
  }
  if (last > lines) {
    throw new ToolFailure(
      `Invalid \`view_range\`: ${shown}. Its second element \`${last}\` should be smaller than the number of lines in the file: \`${lines}\``,
    );
  }
  if (last !== -1 && last < first) {
    throw new ToolFailure(
      `Invalid \`view_range\`: ${shown}. Its second element \`${last}\` should be larger or equal than its first \`${first}\``,
    );
  }
  return [first, last];
}
