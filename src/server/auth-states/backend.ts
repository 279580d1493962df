/**
 * Where sealed auth states live. A backend keeps opaque text records by id and knows nothing of
 * keys, names or the state format: the auth-state store (store.ts) seals, opens, validates and
 * names, and talks to its backend only. The interface is what a table shared by several machines
 * would need, so every method is async.
 *
 * `FileAuthStateBackend`, the default, keeps one file `<id>.json` per record in one directory,
 * mode 0600, written atomically (src/internal/fs.ts): a process killed mid-write leaves a temp
 * file that the next open sweeps, and what was committed before stays.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { open, readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { sweepAtomicTempsSync, writeFileAtomic } from '../../internal/fs.js';

/** One record: an id and the sealed text stored under it. */
export interface SealedRecord {
  id: string;
  sealed: string;
}

export interface AuthStateBackend {
  /** The ids of every record, sorted (code-unit order). */
  list(): Promise<string[]>;
  /** The text stored under `id`, or undefined when there is none. */
  read(id: string): Promise<string | undefined>;
  /**
   * Store `sealed` under `id`, replacing what was there whole: a reader sees the old text or the
   * new, never a mix or a part. Durable once it resolves. When it rejects, what was stored under
   * `id` is unchanged and nothing else is left behind. Concurrent writes of one id end with one
   * of them whole.
   */
  write(id: string, sealed: string): Promise<void>;
  /** Remove record `id`, durably once it resolves; false, changing nothing, when there is none. */
  delete(id: string): Promise<boolean>;
}

/** A backend that can also be read at once, for stores opened synchronously (the CLI, tests). */
export interface SyncLoadable {
  /** Every record, sorted by id, read now. */
  loadSync(): SealedRecord[];
}

export interface FileAuthStateBackendOptions {
  /**
   * Only read: the directory is neither created nor swept, and every write or delete rejects.
   * Default false.
   */
  readOnly?: boolean;
}

/** Ids are file names here: letters, digits, `_` and `-` only (no path can be made of one). */
const SAFE_ID = /^[A-Za-z0-9_-]+$/;
const FILE = /^([A-Za-z0-9_-]+)\.json$/;

function checkId(id: string): string {
  if (!SAFE_ID.test(id)) throw new Error(`not a valid auth-state record id: ${JSON.stringify(id)}`);
  return id;
}

/** One file per record in `dir`; see the module comment. One server process owns the dir. */
export class FileAuthStateBackend implements AuthStateBackend, SyncLoadable {
  readonly #dir: string;
  readonly #readOnly: boolean;

  /** Creates `dir` (0700) and sweeps the temp files of writes a killed process left, unless read-only. */
  constructor(dir: string, options: FileAuthStateBackendOptions = {}) {
    this.#dir = dir;
    this.#readOnly = options.readOnly ?? false;
    if (!this.#readOnly) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      sweepAtomicTempsSync(dir); // no write of this backend can be in flight yet
    }
  }

  get dir(): string {
    return this.#dir;
  }

  #path(id: string): string {
    return join(this.#dir, `${checkId(id)}.json`);
  }

  #writable(): void {
    if (this.#readOnly) throw new Error('this auth-state backend was opened read-only');
  }

  static #ids(names: readonly string[]): string[] {
    return names
      .map((n) => FILE.exec(n)?.[1])
      .filter((id): id is string => id !== undefined)
      .sort();
  }

  async list(): Promise<string[]> {
    try {
      return FileAuthStateBackend.#ids(await readdir(this.#dir));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }

  loadSync(): SealedRecord[] {
    if (!existsSync(this.#dir)) return [];
    return FileAuthStateBackend.#ids(readdirSync(this.#dir)).map((id) => ({
      id,
      sealed: readFileSync(this.#path(id), 'utf8'),
    }));
  }

  async read(id: string): Promise<string | undefined> {
    try {
      return await readFile(this.#path(id), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async write(id: string, sealed: string): Promise<void> {
    this.#writable();
    await writeFileAtomic(this.#path(id), sealed, 0o600);
  }

  async delete(id: string): Promise<boolean> {
    this.#writable();
    try {
      await rm(this.#path(id));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    await syncDir(this.#dir);
    return true;
  }
}

async function syncDir(dir: string): Promise<void> {
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}
