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

/** Deadline of operations that walk trees (copy, move across file systems, recursive delete). */
const TREE_TIMEOUT_MS = 300_000;

const str = (h: FrameHeader, key: string): string => {
  const v = h[key];
  if (typeof v !== 'string') throw new ToolboxUnavailable(`toolbox reply without ${key}`);
  return v;
};

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

  /** A directory's names, each with whether it is a directory (symlinks followed). */
  async list(path: string): Promise<{ path: string; entries: { name: string; dir: boolean }[] }> {
    const { header } = await this.toolbox.request('list', { path });
    const raw = Array.isArray(header.entries) ? (header.entries as unknown[]) : [];
    const entries = raw.map((e) => {
      const [name, dir] = e as [unknown, unknown];
      return { name: String(name), dir: dir === true };
    });
    return { path: str(header, 'path'), entries };
  }

  /** `find <path> -maxdepth <depth> -not -path '*\/.*'` as relative paths (links not followed). */
  async tree(path: string, depth: number): Promise<{ path: string; entries: string[] }> {
    const { header } = await this.toolbox.request('tree', { path, depth });
    const raw = Array.isArray(header.entries) ? (header.entries as unknown[]) : [];
    return { path: str(header, 'path'), entries: raw.map(String) };
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
