/**
 * API keys of a cluster, each of one project, in PostgreSQL. A project key sees and controls only
 * its project's instances and auth states; the server's own key (`--api-key`) is the admin key:
 * it sees every project and is the only one that manages keys. It never lives in the database.
 *
 * - **Stored as digests.** A key is 32 random bytes; the table holds its SHA-256 and its last
 *   four characters (to tell keys apart in a list), never the key. A digest of a key that
 *   random needs no salt or slow hash: nobody can guess a preimage, and a leaked table opens
 *   nothing. The row is found by its digest (an index lookup on a value an attacker cannot aim
 *   at), and the digests are then compared in constant time anyway.
 * - **Revocation everywhere at once.** A node remembers a key it has checked for `CACHE_MS` so
 *   that a busy client does not cost a query per request; a revoke announces the key's id
 *   (NOTIFY `burrow_keys`) and every node forgets it at once. The cache's own expiry only
 *   bounds how long a node that missed the notification (its listening connection was down)
 *   keeps a revoked key.
 * - **Projects of rows.** `instances.project` and `auth_states.project` say whose a row is; NULL
 *   is a row made with the admin key, which no project sees.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { KeyInfo } from '../../api/index.js';
import { serverError } from '../errors.js';
import type { Database, Rows } from './database.js';

/** The channel a revoked key's id is announced on. */
export const KEYS_CHANNEL = 'burrow_keys';

/** How long a node trusts a key it looked up, unless told sooner that it was revoked. */
export const CACHE_MS = 10_000;

/** Keys remembered at most (a flood of distinct keys cannot grow the cache past it). */
const CACHE_ENTRIES = 10_000;

/** Who a request is: the admin (the server's own key) or one project's key. */
export type Principal = { admin: true } | { admin: false; project: string; keyId: string };

export const ADMIN: Principal = { admin: true };

interface KeyRow {
  id: string;
  project: string;
  name: string | null;
  created_at: Date;
  last4: string;
  revoked_at: Date | null;
}

const info = (r: KeyRow): KeyInfo => ({
  id: r.id,
  project: r.project,
  name: r.name,
  created_at: r.created_at.toISOString(),
  last4: r.last4,
  revoked_at: r.revoked_at?.toISOString() ?? null,
});

const digestOf = (key: string) => createHash('sha256').update(key).digest();

export class ProjectKeys {
  readonly #db: Database;
  /** digest (hex) → the key's principal and when this node stops trusting it. */
  readonly #cache = new Map<string, { principal: Principal & { admin: false }; until: number }>();
  /** instance or auth-state id → its project (rows never change project once they have one). */
  readonly #owners = new Map<string, string>();
  #stop: (() => void) | undefined;

  private constructor(db: Database) {
    this.#db = db;
  }

  /** The keys of `db`, with revocations by any node heard from now on. */
  static async open(db: Database): Promise<ProjectKeys> {
    const keys = new ProjectKeys(db);
    keys.#stop = await db.listen(KEYS_CHANNEL, (id) => keys.#forget(id));
    return keys;
  }

  /** A new key of `project`; the only time the key itself is seen. */
  async create(project: string, name: string | null): Promise<KeyInfo & { key: string }> {
    const key = `bkp_${randomBytes(32).toString('base64url')}`;
    const id = `key_${randomBytes(8).toString('hex')}`;
    const r = await this.#query<KeyRow>(
      `INSERT INTO api_keys (id, project, name, digest, last4) VALUES ($1, $2, $3, $4, $5)
       RETURNING id, project, name, created_at, last4, revoked_at`,
      [id, project, name, digestOf(key), key.slice(-4)],
    );
    return { ...info(r.rows[0]!), key };
  }

  /** Every key, oldest first, revoked ones included. */
  async list(): Promise<KeyInfo[]> {
    const r = await this.#query<KeyRow>(
      'SELECT id, project, name, created_at, last4, revoked_at FROM api_keys ORDER BY created_at, id',
    );
    return r.rows.map(info);
  }

  /**
   * Revoke key `id` on every node: false when there is no such key. Revoking a revoked key
   * changes nothing and is not an error.
   */
  async revoke(id: string): Promise<boolean> {
    const found = await this.#db
      .transaction(async (q) => {
        const r = await q(
          'UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1',
          [id],
        );
        if (r.rowCount === 0) return false;
        await q('SELECT pg_notify($1, $2)', [KEYS_CHANNEL, id]);
        return true;
      })
      .catch((err: Error) => {
        throw serverError('cluster_database_unavailable', { reason: err.message });
      });
    this.#forget(id); // this node at once, before its own notification arrives
    return found;
  }

  /** The project key `key` is, or undefined for no live key. */
  async principal(key: string): Promise<Principal | undefined> {
    const digest = digestOf(key);
    const hex = digest.toString('hex');
    const now = Date.now();
    const cached = this.#cache.get(hex);
    if (cached && cached.until > now) return cached.principal;
    this.#cache.delete(hex);
    const r = await this.#query<{ id: string; project: string; digest: Buffer }>(
      'SELECT id, project, digest FROM api_keys WHERE digest = $1 AND revoked_at IS NULL',
      [digest],
    );
    const row = r.rows[0];
    if (!row || !timingSafeEqual(row.digest, digest)) return undefined;
    const principal = { admin: false as const, project: row.project, keyId: row.id };
    if (this.#cache.size >= CACHE_ENTRIES) this.#cache.clear();
    this.#cache.set(hex, { principal, until: now + CACHE_MS });
    return principal;
  }

  /** The project of instance `id`: null for the admin's, undefined when there is no such row. */
  instanceProject(id: string): Promise<string | null | undefined> {
    return this.#ownerOf('instances', id);
  }

  /** The project of auth state `id`, as `instanceProject`. */
  authStateProject(id: string): Promise<string | null | undefined> {
    return this.#ownerOf('auth_states', id);
  }

  /** Ids of `project`'s instances. */
  async instancesOf(project: string): Promise<Set<string>> {
    const r = await this.#query<{ id: string }>('SELECT id FROM instances WHERE project = $1', [
      project,
    ]);
    return new Set(r.rows.map((x) => x.id));
  }

  /** Ids of `project`'s auth states. */
  async authStatesOf(project: string): Promise<Set<string>> {
    const r = await this.#query<{ id: string }>('SELECT id FROM auth_states WHERE project = $1', [
      project,
    ]);
    return new Set(r.rows.map((x) => x.id));
  }

  /** Instance `id` (just started with a key of `project`) is that project's from now on. */
  async claimInstance(id: string, project: string): Promise<void> {
    await this.#query('UPDATE instances SET project = $2 WHERE id = $1 AND project IS NULL', [
      id,
      project,
    ]);
  }

  /** Auth state `id` (just saved with a key of `project`) is that project's from now on. */
  async claimAuthState(id: string, project: string): Promise<void> {
    await this.#query('UPDATE auth_states SET project = $2 WHERE id = $1 AND project IS NULL', [
      id,
      project,
    ]);
  }

  async #ownerOf(table: 'instances' | 'auth_states', id: string) {
    const known = this.#owners.get(id);
    if (known !== undefined) return known;
    const r = await this.#query<{ project: string | null }>(
      `SELECT project FROM ${table} WHERE id = $1`,
      [id],
    );
    const row = r.rows[0];
    if (!row) return undefined;
    if (row.project !== null) {
      if (this.#owners.size >= CACHE_ENTRIES) this.#owners.clear();
      this.#owners.set(id, row.project);
    }
    return row.project;
  }

  /** A query whose failure (the database away) is the 503 a client can retry, not a 500. */
  async #query<T extends object>(text: string, params: readonly unknown[] = []): Promise<Rows<T>> {
    try {
      return await this.#db.query<T>(text, params);
    } catch (err) {
      throw serverError('cluster_database_unavailable', { reason: (err as Error).message });
    }
  }

  #forget(keyId: string): void {
    for (const [hex, entry] of this.#cache) {
      if (entry.principal.keyId === keyId) this.#cache.delete(hex);
    }
  }

  /** Stop hearing revocations (the database closes with the node). */
  close(): void {
    this.#stop?.();
  }
}
