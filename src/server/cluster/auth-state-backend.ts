/**
 * Sealed auth states in PostgreSQL: the `AuthStateBackend` seam (../auth-states/backend.ts) on
 * a table every node reads. The records are the store's sealed text (AES-GCM under the
 * cluster's auth-state key): the database never holds a cookie or a token in the clear.
 *
 * Every write and delete tells the other nodes (NOTIFY `auth_states`, the record's id), so a
 * state saved through one node applies on an instance placed on another.
 */
import type { AuthStateBackend } from '../auth-states/backend.js';
import type { Database } from './database.js';

/** The channel a write or delete of a record is announced on; the payload is its id. */
export const AUTH_STATES_CHANNEL = 'burrow_auth_states';

export class PostgresAuthStateBackend implements AuthStateBackend {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  async list(): Promise<string[]> {
    const r = await this.#db.query<{ id: string }>(
      'SELECT id FROM auth_states ORDER BY id COLLATE "C"',
    );
    return r.rows.map((x) => x.id);
  }

  async read(id: string): Promise<string | undefined> {
    const r = await this.#db.query<{ sealed: string }>(
      'SELECT sealed FROM auth_states WHERE id = $1',
      [id],
    );
    return r.rows[0]?.sealed;
  }

  async write(id: string, sealed: string): Promise<void> {
    await this.#db.transaction(async (q) => {
      await q(
        `INSERT INTO auth_states (id, sealed) VALUES ($1, $2)
         ON CONFLICT (id) DO UPDATE SET sealed = EXCLUDED.sealed, updated_at = now()`,
        [id, sealed],
      );
      await q('SELECT pg_notify($1, $2)', [AUTH_STATES_CHANNEL, id]);
    });
  }

  async delete(id: string): Promise<boolean> {
    return this.#db.transaction(async (q) => {
      const r = await q('DELETE FROM auth_states WHERE id = $1', [id]);
      if (r.rowCount === 0) return false;
      await q('SELECT pg_notify($1, $2)', [AUTH_STATES_CHANNEL, id]);
      return true;
    });
  }

  /** Call `fn` with the id of every record written or deleted by any node, until the returned stop. */
  watch(fn: (id: string) => void): Promise<() => void> {
    return this.#db.listen(AUTH_STATES_CHANNEL, fn);
  }
}
