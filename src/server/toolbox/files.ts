/**
 * Typed file operations on a toolbox (toolbox.ts): what the edit, file, upload and notebook
 * tools ask of the instance's file system. Paths are sandbox paths (relative ones against the
 * instance's home) resolved by the kernel inside the sandbox; results carry the canonical path
 * (symlinks resolved there). Failures are `ToolboxError` (errno name or toolbox code) or
 * `ToolboxUnavailable`.
 */
import { MAX_PAYLOAD_BYTES, type FrameHeader } from './frames.js';
import { ToolboxUnavailable, type Toolbox } from './toolbox.js';

export type EntryType = 'file' | 'dir' | 'link' | 'other';

export interface Entry {
  /** Canonical sandbox path. */
  path: string;
  /** What is there; `undefined` when nothing is. */
  type: EntryType | undefined;
  size: number;
  /** Permission bits (`st_mode & 0o7777`). */
  mode: number;
}

/**
 * Entries a listing (list, tree) answers at most; the toolbox also stops at 1 MiB of names
 * (toolbox_ops.py `MAX_LIST_ENTRIES`, `MAX_LIST_BYTES`). Past them the tools say how many were
 * left out.
 */
export const MAX_LIST_ENTRIES = 10_000;

/** The first entries of a listing and how many it has in all. */
export interface Listing<T> {
  path: string;
  entries: T[];
  total: number;
}

/** What `lines` asks of the toolbox (toolbox_ops.py `op_lines`). */
export interface LinesAsk {
  /** Largest file read (TOO_LARGE past it). */
  max: number;
  /** First line wanted, 1-based. */
  first: number;
  /** Last line wanted; -1: to the end. */
  last: number;
  maxLines: number;
  /** Bytes of UTF-8 sent at most. */
  maxBytes: number;
  /** A final newline ends an empty last line (the editor's count), not the last line. */
  phantom: boolean;
  /** Each line shown `%6d\t%s` from its number. */
  number: boolean;
  /** Invalid UTF-8 is refused (INVALID_UTF8) rather than decoded as `encoding`. */
  strict: boolean;
  encoding?: 'utf8' | 'ascii' | 'latin1' | 'utf16le';
}

/** Lines of a text file as the toolbox cut them. */
export interface Lines {
  path: string;
  /** The lines sent, joined by `\n` (numbered if asked). */
  text: string;
  /** The file's count of lines. */
  lines: number;
  /** Lines in `text`. */
  sent: number;
  /** Whether `text` stops before the range asked ends. */
  cut: boolean;
}

/** Deadline of operations that walk trees (copy, move across file systems, recursive delete). */
const TREE_TIMEOUT_MS = 300_000;

const str = (h: FrameHeader, key: string): string => {
  const v = h[key];
  if (typeof v !== 'string') throw new ToolboxUnavailable(`toolbox reply without ${key}`);
  return v;
};

const listed = (h: FrameHeader): unknown[] => (Array.isArray(h.entries) ? h.entries : []);
const total = (h: FrameHeader, shown: number): number =>
  Number.isSafeInteger(h.total) ? Math.max(h.total as number, shown) : shown;

export class SandboxFiles {
  constructor(readonly toolbox: Toolbox) {}

  /** What is at `path` (the last symlink followed unless `follow` is false). */
  async stat(path: string, follow = true): Promise<Entry> {
    const { header: h } = await this.toolbox.request('stat', { path, follow });
    const type = typeof h.type === 'string' ? (h.type as EntryType) : undefined;
    return {
      path: str(h, 'path'),
      type,
      size: typeof h.size === 'number' ? h.size : 0,
      mode: typeof h.mode === 'number' ? h.mode : 0,
    };
  }

  /**
   * A regular file's bytes; `TOO_LARGE` (details `size`, `max`) past `max` bytes, and never more
   * than a frame carries (`MAX_PAYLOAD_BYTES`).
   */
  async read(path: string, max: number): Promise<{ path: string; data: Buffer }> {
    const limit = Math.min(max, MAX_PAYLOAD_BYTES);
    const { header, payload } = await this.toolbox.request('read', { path, max: limit });
    return { path: str(header, 'path'), data: payload };
  }

  /**
   * Write atomically (temp file beside it, fsync, rename), parents created, an existing file's
   * mode kept. `append` writes the old contents first; `exclusive` refuses an existing path.
   */
  async write(
    path: string,
    data: string | Uint8Array,
    opts: { append?: boolean; exclusive?: boolean } = {},
  ): Promise<{ path: string; appended: boolean }> {
    const payload = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    const { header } = await this.toolbox.request(
      'write',
      { path, append: opts.append ?? false, exclusive: opts.exclusive ?? false },
      { payload },
    );
    return { path: str(header, 'path'), appended: header.appended === true };
  }

  /** `mkdir -p`. */
  async mkdir(path: string): Promise<string> {
    return str((await this.toolbox.request('mkdir', { path })).header, 'path');
  }

  /** Delete `path` itself (a symlink, not its target); a directory only when empty unless `recursive`. */
  async remove(
    path: string,
    opts: { recursive?: boolean; dirOnly?: boolean } = {},
  ): Promise<string> {
    const { header } = await this.toolbox.request(
      'remove',
      { path, recursive: opts.recursive ?? false, dir_only: opts.dirOnly ?? false },
      { timeoutMs: TREE_TIMEOUT_MS },
    );
    return str(header, 'path');
  }

  /** Rename `src` (not followed) to `dst`, parents created; across file systems by copying. */
  async move(src: string, dst: string): Promise<void> {
    await this.toolbox.request('rename', { src, dst }, { timeoutMs: TREE_TIMEOUT_MS });
  }

  /** Copy `src` (followed): a file atomically, a directory recursively (links as links). */
  async copy(src: string, dst: string): Promise<void> {
    await this.toolbox.request('copy', { src, dst }, { timeoutMs: TREE_TIMEOUT_MS });
  }

  /**
   * A directory's names, each with whether it is a directory (symlinks followed): the first
   * `MAX_LIST_ENTRIES` in the order shown, and how many there are in all.
   */
  async list(path: string): Promise<Listing<{ name: string; dir: boolean }>> {
    const { header } = await this.toolbox.request('list', { path, limit: MAX_LIST_ENTRIES });
    const entries = listed(header).map((e) => {
      const [name, dir] = Array.isArray(e) ? (e as [unknown, unknown]) : [e, false];
      return { name: String(name), dir: dir === true };
    });
    return { path: str(header, 'path'), entries, total: total(header, entries.length) };
  }

  /**
   * `find <path> -maxdepth <depth> -not -path '*\/.*'` as relative paths (links not followed):
   * the first `MAX_LIST_ENTRIES`, and how many there are in all.
   */
  async tree(path: string, depth: number): Promise<Listing<string>> {
    const { header } = await this.toolbox.request(
      'tree',
      { path, depth, limit: MAX_LIST_ENTRIES },
      { timeoutMs: TREE_TIMEOUT_MS },
    );
    const entries = listed(header).map(String);
    return { path: str(header, 'path'), entries, total: total(header, entries.length) };
  }

  /**
   * Lines of a text file, chosen, cut and (with `number`) numbered by the toolbox inside the
   * instance, so that the server holds and works through only what it shows (see `LinesAsk`).
   */
  async lines(path: string, ask: LinesAsk): Promise<Lines> {
    const { header, payload } = await this.toolbox.request('lines', {
      path,
      max: Math.min(ask.max, MAX_PAYLOAD_BYTES),
      first: ask.first,
      last: ask.last,
      max_lines: ask.maxLines,
      max_bytes: ask.maxBytes,
      phantom: ask.phantom,
      number: ask.number,
      strict: ask.strict,
      encoding: ask.encoding ?? 'utf8',
    });
    const count = (key: string) => {
      const v = header[key];
      if (!Number.isSafeInteger(v) || (v as number) < 0)
        throw new ToolboxUnavailable(`toolbox reply without ${key}`);
      return v as number;
    };
    // the toolbox cut the text; more than asked is a toolbox not to be trusted
    if (payload.length > ask.maxBytes || count('sent') > ask.maxLines)
      throw new ToolboxUnavailable('toolbox reply past the bounds asked');
    return {
      path: str(header, 'path'),
      text: payload.toString('utf8'),
      lines: count('lines'),
      sent: count('sent'),
      cut: header.cut === true,
    };
  }

  /** Start writing `path` in chunks: nothing appears there before `commit`. */
  async openUpload(path: string): Promise<UploadSink> {
    const reply = await this.toolbox.request('open', { path });
    return new UploadSink(
      this.toolbox,
      reply.generation,
      reply.header.handle,
      str(reply.header, 'path'),
      str(reply.header, 'tmp'),
    );
  }
}

/**
 * An upload in progress: a temp file beside its target, filled chunk by chunk, fsynced and
 * renamed into place by `commit`, removed by `abort` (also after the toolbox restarted).
 */
export class UploadSink {
  #done = false;

  constructor(
    readonly toolbox: Toolbox,
    readonly generation: number,
    readonly handle: unknown,
    /** Canonical sandbox path of the target. */
    readonly path: string,
    /** Canonical sandbox path of the temp file. */
    readonly tmp: string,
  ) {}

  async write(chunk: Uint8Array): Promise<void> {
    await this.toolbox.request(
      'chunk',
      { handle: this.handle },
      { payload: chunk, generation: this.generation },
    );
  }

  async commit(): Promise<void> {
    await this.toolbox.request('commit', { handle: this.handle }, { generation: this.generation });
    this.#done = true;
  }

  /** Remove the temp file. Never throws. */
  async abort(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    try {
      await this.toolbox.request('abort', { handle: this.handle }, { generation: this.generation });
    } catch {
      // the process that held it is gone: remove the temp file with the next one
      await this.toolbox.request('remove', { path: this.tmp }).catch(() => undefined);
    }
  }
}
