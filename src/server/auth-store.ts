/**
 * Saved browser auth states: one JSON file per state under `<dataDir>/auth-states/`, written
 * atomically with mode 0600, so they survive server restarts. Opening the store sweeps the temp
 * files of writes a killed server never committed; states are loaded lazily on first use. The
 * store assumes one server process owns the data dir.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sweepAtomicTempsSync, writeFileAtomic } from '../internal/fs.js';
import { serverError } from './errors.js';
import type { BrowserAuthData } from './runtime.js';

export interface StoredAuthState {
  id: string;
  name: string;
  /** ISO 8601 */
  created_at: string;
  /** ISO 8601 */
  updated_at: string;
  data: BrowserAuthData;
}

const ID = /^auth_[0-9a-f]{16}$/;

export class AuthStore {
  readonly #dir: string;
  #states: Map<string, StoredAuthState> | undefined;

  constructor(dataDir: string) {
    this.#dir = join(dataDir, 'auth-states');
    sweepAtomicTempsSync(this.#dir); // no write of this store can be in flight yet
  }

  /** `{id, name}` of every saved state, oldest first. */
  list(): { id: string; name: string }[] {
    return [...this.#loaded().values()]
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id))
      .map(({ id, name }) => ({ id, name }));
  }

  /** The saved state `id`; 404 when there is none. */
  get(id: string): StoredAuthState {
    const state = this.#loaded().get(id);
    if (!state) throw serverError('auth_state_not_found', { id: JSON.stringify(id) });
    return state;
  }

  /** Save a new state under a fresh id; `name` defaults to "default". */
  async save(
    name: string | undefined,
    data: BrowserAuthData,
  ): Promise<{ id: string; name: string }> {
    const now = new Date().toISOString();
    const state: StoredAuthState = {
      id: `auth_${randomBytes(8).toString('hex')}`,
      name: name ?? 'default',
      created_at: now,
      updated_at: now,
      data,
    };
    await this.#write(state);
    return { id: state.id, name: state.name };
  }

  /** Replace the data of state `id` (404 if unknown), renaming it when `name` is given. */
  async overwrite(
    id: string,
    data: BrowserAuthData,
    name?: string,
  ): Promise<{ id: string; name: string }> {
    const old = this.get(id);
    const state = { ...old, name: name ?? old.name, updated_at: new Date().toISOString(), data };
    await this.#write(state);
    return { id, name: state.name };
  }

  async #write(state: StoredAuthState): Promise<void> {
    const states = this.#loaded();
    await writeFileAtomic(join(this.#dir, `${state.id}.json`), JSON.stringify(state), 0o600);
    states.set(state.id, state);
  }

  #loaded(): Map<string, StoredAuthState> {
    if (this.#states) return this.#states;
    mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    const states = new Map<string, StoredAuthState>();
    for (const file of readdirSync(this.#dir)) {
      const id = file.replace(/\.json$/, '');
      if (!ID.test(id) || file === id) continue;
      const state = JSON.parse(readFileSync(join(this.#dir, file), 'utf8')) as StoredAuthState;
      if (state.id === id) states.set(id, state);
    }
    return (this.#states = states);
  }
}
