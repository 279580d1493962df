/**
 * `session.auth`: save, update, apply, list, delete auth states by id or name, and move them to
 * and from Playwright's `storageState` JSON (what `context.storageState({ indexedDB: true })`
 * writes and `browser.newContext({ storageState })` reads).
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { AuthState, StorageState, StorageStateInput } from '../api/index.js';
import type { Burrow, RequestOptions } from '../client/index.js';
import { writeFileAtomic } from '../internal/fs.js';
import { AmbiguousAuthStateError, AuthStateNotFoundError } from './errors.js';

/** A saved auth state. */
export interface SavedAuthState {
  readonly id: string;
  /** `null` when the server keeps none. */
  readonly name: string | null;
}

export interface SessionAuth {
  /**
   * Saves the browser's cookies (HttpOnly too), localStorage, sessionStorage and IndexedDB under
   * `name` (default `"default"`): the one state of that name is updated in place (its id stays),
   * or a new one is made when none has it. When several states already share the name it throws
   * `AmbiguousAuthStateError` listing their ids (delete all but one, or save under another name).
   */
  save(name?: string): Promise<SavedAuthState>;
  /** Overwrites a saved state with the browser's current data (`modify_auth`), maybe renaming it. */
  update(idOrName: string, changes?: { name?: string }): Promise<SavedAuthState>;
  /**
   * Loads a saved state into the browser (`authenticate`). Pages already open keep what they
   * rendered: navigate or reload to use it.
   */
  apply(idOrName: string): Promise<SavedAuthState>;
  /** Every saved state of the account. */
  list(): Promise<AuthState[]>;
  /** Deletes a saved state. */
  delete(idOrName: string): Promise<void>;
  /**
   * A saved state (or, without `idOrName`, the browser's current one) as Playwright's
   * `storageState`; `path` also writes it there as JSON, mode 0600 (it holds live sessions).
   */
  export(idOrName?: string, opts?: { path?: string }): Promise<StorageState>;
  /**
   * Saves a Playwright `storageState` (the object, or the path of its JSON file) on the server,
   * under `name` (default `"default"`) as `save` does: the one state of that name is replaced,
   * several are an error (409 from the server); `apply: true` then
   * loads it into this session's browser.
   */
  import(
    storageState: StorageStateInput | string,
    opts?: { name?: string; apply?: boolean },
  ): Promise<SavedAuthState>;
}

/**
 * The state with this id, else the one state with this name. Throws `AuthStateNotFoundError`, or
 * `AmbiguousAuthStateError` (listing the ids) when several share the name.
 */
export async function findAuthState(
  client: Burrow,
  idOrName: string,
  opts?: RequestOptions,
): Promise<SavedAuthState> {
  const states = await client.authStates.list(opts);
  const match = states.find((s) => s.id === idOrName);
  if (match) return { id: match.id, name: match.name ?? null };
  const named = namedStates(states, idOrName);
  if (!named[0]) throw new AuthStateNotFoundError(idOrName);
  return named[0];
}

/** The states named `name`: at most one, else `AmbiguousAuthStateError`. */
function namedStates(states: AuthState[], name: string): SavedAuthState[] {
  const named = states.filter((s) => s.name === name);
  if (named.length > 1) {
    throw new AmbiguousAuthStateError(
      name,
      named.map((s) => s.id),
    );
  }
  return named.map((s) => ({ id: s.id, name: s.name ?? null }));
}

/** Reads a `storageState` JSON file (as Playwright's `storageState: path` does). */
async function readStorageState(path: string): Promise<StorageStateInput> {
  return JSON.parse(await readFile(path, 'utf8')) as StorageStateInput;
}

/** Writes a `storageState` as JSON, mode 0600, atomically. */
async function writeStorageState(path: string, state: StorageState): Promise<void> {
  await writeFileAtomic(path, `${JSON.stringify(state, null, 2)}\n`, 0o600);
}

/** `session.auth` for one instance. `ready` throws when the session is stopped. */
export function sessionAuth(
  client: Burrow,
  instanceId: string,
  ready: (what: string) => void,
): SessionAuth {
  const auth: SessionAuth = {
    async save(name = 'default') {
      ready('auth.save');
      const [existing] = namedStates(await client.authStates.list(), name);
      const saved = existing
        ? await client.browser.modifyAuth(instanceId, { auth_state_id: existing.id })
        : await client.browser.saveAuth(instanceId, { name });
      return { id: saved.auth_state_id, name: saved.name ?? null };
    },
    async update(idOrName, changes = {}) {
      ready('auth.update');
      const { id } = await findAuthState(client, idOrName);
      const saved = await client.browser.modifyAuth(instanceId, {
        auth_state_id: id,
        ...(changes.name !== undefined && { name: changes.name }),
      });
      return { id: saved.auth_state_id, name: saved.name ?? null };
    },
    async apply(idOrName) {
      ready('auth.apply');
      const state = await findAuthState(client, idOrName);
      await client.browser.authenticate(instanceId, { auth_state_id: state.id });
      return state;
    },
    list: () => client.authStates.list(),
    async delete(idOrName) {
      const { id } = await findAuthState(client, idOrName);
      await client.authStates.delete(id);
    },
    async export(idOrName, opts = {}) {
      let state: StorageState;
      if (idOrName !== undefined) {
        state = await client.authStates.storageState((await findAuthState(client, idOrName)).id);
      } else {
        // the browser's state now: saved under a throwaway name, read, then deleted
        ready('auth.export');
        const name = `burrow-export-${randomBytes(6).toString('hex')}`;
        const saved = await client.browser.saveAuth(instanceId, { name });
        try {
          state = await client.authStates.storageState(saved.auth_state_id);
        } finally {
          await client.authStates.delete(saved.auth_state_id);
        }
      }
      if (opts.path !== undefined) await writeStorageState(opts.path, state);
      return state;
    },
    async import(storageState, opts = {}) {
      const body =
        typeof storageState === 'string' ? await readStorageState(storageState) : storageState;
      const saved = await client.authStates.import(body, { name: opts.name ?? 'default' });
      const result = { id: saved.auth_state_id, name: saved.name };
      if (opts.apply) {
        ready('auth.import');
        await client.browser.authenticate(instanceId, { auth_state_id: result.id });
      }
      return result;
    },
  };
  return auth;
}
