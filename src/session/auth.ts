/** `session.auth`: save, update, apply and list auth states by id or name. */
import type { AuthState } from '../api/index.js';
import type { Burrow, RequestOptions } from '../client/index.js';
import { AmbiguousAuthStateError, AuthStateNotFoundError } from './errors.js';

/** A saved auth state. */
export interface SavedAuthState {
  readonly id: string;
  /** `null` when the server keeps none. */
  readonly name: string | null;
}

export interface SessionAuth {
  /**
   * Saves the browser's cookies (HttpOnly too), localStorage and sessionStorage as a new state.
   * The server names it `"default"` when `name` is omitted; names need not be unique.
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
  const named = states.filter((s) => s.name === idOrName);
  if (named.length > 1) {
    throw new AmbiguousAuthStateError(
      idOrName,
      named.map((s) => s.id),
    );
  }
  if (!named[0]) throw new AuthStateNotFoundError(idOrName);
  return { id: named[0].id, name: named[0].name ?? null };
}

/** `session.auth` for one instance. `ready` throws when the session is stopped. */
export function sessionAuth(
  client: Burrow,
  instanceId: string,
  ready: (what: string) => void,
): SessionAuth {
  return {
    async save(name) {
      ready('auth.save');
      const saved = await client.browser.saveAuth(instanceId, name === undefined ? {} : { name });
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
  };
}
