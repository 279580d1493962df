/**
 * Where sealed profiles live, and who holds each. The profile store (store.ts) seals, opens and
 * checks names; a backend keeps the sealed bytes by (project, name) and the holds, and knows
 * nothing of keys or of what a profile holds.
 *
 * - `FileProfileBackend`, without a cluster: one file `<name>.profile` per profile under
 *   `<dataDir>/profiles/`, replaced by a rename; holds in this process's memory. There are no
 *   projects on a single server (its one key is the admin's), so every profile is the admin's.
 * - `PostgresProfileBackend` (../cluster/profile-backend.ts), with one: a table every node
 *   reads, the hold a column set in a transaction, so a profile is held once in the cluster.
 *
 * The project is `null` for the admin's profiles (the server's own key), else the project of
 * the key that created the profile; a project never sees another's (store.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { serverError } from '../errors.js';

/** A saved profile as a list shows it. */
export interface ProfileRow {
  project: string | null;
  name: string;
  /** Size of the sealed bytes. */
  size_bytes: number;
  updated_at: string;
  in_use_by: string | null;
}

/** A profile held for one instance, from its start until it stopped and saved. */
export interface ProfileHold {
  /** The holder's id, once its start gave it one. */
  setHolder(id: string): void;
  /** Lets another instance take the profile (idempotent). */
  release(): void;
}

export interface ProfileBackend {
  /** The saved profiles of `project`, by name; every project's when `project` is undefined. */
  list(project?: string | null): Promise<ProfileRow[]>;
  /** The sealed bytes of a saved profile, or undefined when there is none. */
  read(project: string | null, name: string): Promise<Buffer | undefined>;
  /**
   * Replace the sealed bytes whole, for `hold`'s holder: a reader sees the old or the new. A
   * hold that is no longer this profile's (its node was declared lost and another took it)
   * rejects, changing nothing. `sealed` comes in pieces, in order: a file is written from them
   * as they are (joined, a profile of hundreds of MB held the main thread for a copy of it).
   */
  write(
    project: string | null,
    name: string,
    sealed: readonly Buffer[],
    hold: ProfileHold,
  ): Promise<void>;
  /** Remove a saved profile: 404 when there is none, 409 naming the holder while held. */
  delete(project: string | null, name: string): Promise<void>;
  /**
   * Hold the profile (saved or not yet) for a start, or 409 naming its holder. Of two starts at
   * once, one wins.
   */
  acquire(project: string | null, name: string): Promise<ProfileHold>;
}

const SUFFIX = '.profile';
const TMP_PREFIX = '.tmp-';

export const inUse = (name: string, holder: string | null | undefined) =>
  serverError('profile_in_use', {
    name: JSON.stringify(name),
    holder: holder || 'an instance still starting',
  });

interface Held {
  /** The holder's id; undefined while its start has not named it yet. */
  holder: string | undefined;
}

/** The single server's profiles: files under `<dataDir>/profiles`, holds in memory. */
export class FileProfileBackend implements ProfileBackend {
  readonly #root: string;
  readonly #held = new Map<string, Held & ProfileHold>();
  readonly ready: Promise<void>;

  constructor(dataDir: string) {
    const root = join(dataDir, 'profiles');
    this.#root = root;
    // saves a server died in the middle of are removed; their profiles keep the old version
    this.ready = (async () => {
      await mkdir(root, { recursive: true, mode: 0o700 });
      for (const name of await readdir(root)) {
        if (name.startsWith(TMP_PREFIX)) await rm(join(root, name), { force: true });
      }
    })();
  }

  #file(name: string): string {
    return join(this.#root, `${name}${SUFFIX}`);
  }

  /** A single server has no projects: a project's name matches nothing here. */
  #mine(project: string | null | undefined): boolean {
    return project === null || project === undefined;
  }

  async list(project?: string | null): Promise<ProfileRow[]> {
    await this.ready;
    if (!this.#mine(project)) return [];
    const out: ProfileRow[] = [];
    for (const file of (await readdir(this.#root)).sort()) {
      if (!file.endsWith(SUFFIX) || file.startsWith(TMP_PREFIX)) continue;
      const name = file.slice(0, -SUFFIX.length);
      const st = await stat(join(this.#root, file)).catch(() => undefined);
      if (!st) continue;
      out.push({
        project: null,
        name,
        size_bytes: st.size,
        updated_at: st.mtime.toISOString(),
        in_use_by: this.#held.get(name)?.holder ?? null,
      });
    }
    return out;
  }

  async read(project: string | null, name: string): Promise<Buffer | undefined> {
    await this.ready;
    if (!this.#mine(project)) return undefined;
    try {
      return await readFile(this.#file(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async write(project: string | null, name: string, sealed: readonly Buffer[]): Promise<void> {
    await this.ready;
    if (!this.#mine(project)) throw new Error('a single server keeps no profiles of projects');
    const tmp = join(this.#root, `${TMP_PREFIX}${name}-${randomBytes(4).toString('hex')}`);
    try {
      await writeFile(tmp, sealed, { mode: 0o600, flag: 'wx' });
      await rename(tmp, this.#file(name));
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async delete(project: string | null, name: string): Promise<void> {
    await this.ready;
    const held = this.#mine(project) ? this.#held.get(name) : undefined;
    if (held) throw inUse(name, held.holder);
    try {
      if (!this.#mine(project)) throw Object.assign(new Error(), { code: 'ENOENT' });
      await rm(this.#file(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        throw serverError('profile_not_found', { name: JSON.stringify(name) });
      }
      throw err;
    }
  }

  /** Synchronous up to its answer: of two starts at once, one wins. */
  acquire(project: string | null, name: string): Promise<ProfileHold> {
    if (!this.#mine(project)) {
      return Promise.reject(new Error('a single server keeps no profiles of projects'));
    }
    const held = this.#held.get(name);
    if (held) return Promise.reject(inUse(name, held.holder));
    const mine: Held & ProfileHold = {
      holder: undefined,
      setHolder: (id) => {
        mine.holder = id;
      },
      release: () => {
        if (this.#held.get(name) === mine) this.#held.delete(name);
      },
    };
    this.#held.set(name, mine);
    return Promise.resolve(mine);
  }
}
