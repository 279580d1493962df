/**
 * Uploaded browser extensions in PostgreSQL (`SharedExtensions`, ../extensions/store.ts): the
 * checked archive of each upload (bounded by `maxExtensionBytes`), its SHA-256 and what the API
 * lists, in a table every node reads. A node unpacks an extension into its own cache when a start
 * names it; the digest tells it whether its copy is the one stored.
 *
 * A delete is announced (NOTIFY `burrow_extensions`, the id) so that every node drops its copy;
 * a node that missed it (its listening connection was down) finds the row gone at the next start
 * naming the extension, which every start asks.
 */
import type { ExtensionInfo } from '../../api/index.js';
import { serverError } from '../errors.js';
import type { SharedExtensions } from '../extensions/store.js';
import type { Database, Rows } from './database.js';

/** The channel a deleted extension's id is announced on. */
export const EXTENSIONS_CHANNEL = 'burrow_extensions';

export class PostgresExtensions implements SharedExtensions {
  readonly #db: Database;

  constructor(db: Database) {
    this.#db = db;
  }

  async insert(info: ExtensionInfo, archive: Buffer, digest: string): Promise<void> {
    await this.#query(
      'INSERT INTO extensions (id, info, archive, digest, created_at) VALUES ($1, $2, $3, $4, $5)',
      [info.id, JSON.stringify(info), archive, digest, info.created_at],
    );
  }

  async list(): Promise<ExtensionInfo[]> {
    const r = await this.#query<{ info: ExtensionInfo }>(
      'SELECT info FROM extensions ORDER BY created_at, id COLLATE "C"',
    );
    return r.rows.map((x) => x.info);
  }

  async digests(ids: readonly string[]): Promise<Map<string, string>> {
    const r = await this.#query<{ id: string; digest: string }>(
      'SELECT id, digest FROM extensions WHERE id = ANY($1::text[])',
      [ids],
    );
    return new Map(r.rows.map((x) => [x.id, x.digest]));
  }

  async archive(
    id: string,
  ): Promise<{ info: ExtensionInfo; archive: Buffer; digest: string } | undefined> {
    const r = await this.#query<{ info: ExtensionInfo; archive: Buffer; digest: string }>(
      'SELECT info, archive, digest FROM extensions WHERE id = $1',
      [id],
    );
    return r.rows[0];
  }

  async delete(id: string): Promise<boolean> {
    try {
      return await this.#db.transaction(async (q) => {
        const r = await q('DELETE FROM extensions WHERE id = $1', [id]);
        if (r.rowCount === 0) return false;
        await q('SELECT pg_notify($1, $2)', [EXTENSIONS_CHANNEL, id]);
        return true;
      });
    } catch (err) {
      throw serverError('cluster_database_unavailable', { reason: (err as Error).message });
    }
  }

  /** Call `fn` with the id of every extension deleted through any node, until the returned stop. */
  watch(fn: (id: string) => void): Promise<() => void> {
    return this.#db.listen(EXTENSIONS_CHANNEL, fn);
  }

  /** A query whose failure (the database away) is the 503 a client can retry, not a 500. */
  async #query<T extends object>(text: string, params: readonly unknown[] = []): Promise<Rows<T>> {
    try {
      return await this.#db.query<T>(text, params);
    } catch (err) {
      throw serverError('cluster_database_unavailable', { reason: (err as Error).message });
    }
  }
}
