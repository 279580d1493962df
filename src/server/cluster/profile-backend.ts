/**
 * Persistent profiles in PostgreSQL: the `ProfileBackend` seam (../profiles/backend.ts) on a
 * table every node reads, so a profile saved by an instance on one node is started from on any
 * other. The table holds the store's sealed bytes only (AES-GCM under the cluster's shared key,
 * the name and project bound in): never a cookie or a file of a profile in the clear.
 *
 * - **One holder in the cluster.** A start holds its profile with one conditional upsert: the
 *   row's `hold` (a random token of this start) is set only when it is free, or when its holder
 *   is gone: the node that held it is no longer that run in state `up` or `draining` (declared
 *   lost by death.ts, or restarted, which is a new run). Of two starts at once on two nodes, one
 *   commits first and the other's upsert matches nothing: it reads the holder and answers 409.
 * - **A hold is a token.** Saves and releases name the token, so a holder whose node was
 *   declared lost (and whose profile another start took) can neither overwrite the new holder's
 *   version nor release its hold.
 * - **A profile not saved yet** is a row with no `sealed` bytes while it is held (so that two
 *   new profiles of one name are not started at once): lists leave it out, and its release
 *   removes it.
 * - **Projects.** Rows are keyed by (project, name), the admin's project being `''`.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { raceDeadline } from '../../internal/deadline.js';
import { serverError } from '../errors.js';
import type { Database, Rows } from './database.js';

// The seam's types, as profiles/backend.ts has them: the profiles' room is beside this one on
// the floor plan (docs/architecture.md), so the shapes are repeated here, and index.ts, which
// joins the two, checks that they fit.

/** A saved profile as a list shows it (`ProfileRow`). */
export interface ProfileRow {
  project: string | null;
  name: string;
  size_bytes: number;
  updated_at: string;
  in_use_by: string | null;
}

/** A profile held for one instance (`ProfileHold`). */
export interface ProfileHold {
  setHolder(id: string): void;
  release(): void;
}

const inUse = (name: string, holder: string | null | undefined) =>
  serverError('profile_in_use', {
    name: JSON.stringify(name),
    holder: holder || 'an instance still starting',
  });

/** A row's hold is live: set, by a run of a node that is still up (or draining) as that run. */
const LIVE_HOLD = `(p.hold IS NOT NULL AND EXISTS (
  SELECT 1 FROM nodes n
  WHERE n.name = p.holder_node AND n.run = p.holder_run AND n.state IN ('up', 'draining')))`;

const key = (project: string | null) => project ?? '';

export class PostgresProfileBackend {
  readonly #db: Database;
  readonly #node: string;
  readonly #run: string;
  /** Releases under way (tests and close wait for them). */
  readonly #releasing = new Set<Promise<void>>();

  constructor(db: Database, opts: { node: string; run: string }) {
    this.#db = db;
    this.#node = opts.node;
    this.#run = opts.run;
  }

  async list(project?: string | null): Promise<ProfileRow[]> {
    const all = project === undefined;
    const r = await this.#query<{
      project: string;
      name: string;
      size_bytes: number;
      updated_at: Date;
      in_use_by: string | null;
    }>(
      `SELECT p.project, p.name, p.size_bytes, p.updated_at,
              CASE WHEN ${LIVE_HOLD} THEN coalesce(p.holder, '') END AS in_use_by
       FROM profiles p
       WHERE p.sealed IS NOT NULL AND ($1 OR p.project = $2)
       ORDER BY p.name COLLATE "C", p.project COLLATE "C"`,
      [all, key(project ?? null)],
    );
    return r.rows.map((x) => ({
      project: x.project === '' ? null : x.project,
      name: x.name,
      size_bytes: x.size_bytes,
      updated_at: x.updated_at.toISOString(),
      // as on a single server: null while the holder's start has no id yet
      in_use_by: x.in_use_by || null,
    }));
  }

  async read(project: string | null, name: string): Promise<Buffer | undefined> {
    const r = await this.#query<{ sealed: Buffer | null }>(
      'SELECT sealed FROM profiles WHERE project = $1 AND name = $2',
      [key(project), name],
    );
    return r.rows[0]?.sealed ?? undefined;
  }

  async write(
    project: string | null,
    name: string,
    parts: readonly Buffer[],
    hold: ProfileHold,
  ): Promise<void> {
    const token = tokenOf(hold);
    const sealed = Buffer.concat(parts); // one value of the table's column
    const r = await this.#query(
      `UPDATE profiles SET sealed = $3, size_bytes = $4, updated_at = now()
       WHERE project = $1 AND name = $2 AND hold = $5`,
      [key(project), name, sealed, sealed.length, token],
    );
    if (r.rowCount === 0) {
      throw new Error(
        `profile ${JSON.stringify(name)} is no longer held by this instance (its node was declared lost): not saved`,
      );
    }
  }

  async delete(project: string | null, name: string): Promise<void> {
    const r = await this.#query<{ deleted: boolean; held: boolean; holder: string | null }>(
      `WITH target AS (
         SELECT p.project, p.name, p.sealed IS NOT NULL AS saved, ${LIVE_HOLD} AS held, p.holder
         FROM profiles p WHERE p.project = $1 AND p.name = $2 FOR UPDATE),
       gone AS (
         DELETE FROM profiles d USING target t
         WHERE d.project = t.project AND d.name = t.name AND t.saved AND NOT t.held
         RETURNING d.name)
       SELECT EXISTS (SELECT 1 FROM gone) AS deleted,
              coalesce((SELECT held FROM target), false) AS held,
              (SELECT holder FROM target) AS holder`,
      [key(project), name],
    );
    const row = r.rows[0]!;
    if (row.deleted) return;
    if (row.held) throw inUse(name, row.holder);
    throw serverError('profile_not_found', { name: JSON.stringify(name) });
  }

  async acquire(project: string | null, name: string): Promise<ProfileHold> {
    const token = randomBytes(12).toString('hex');
    const won = await this.#query(
      `INSERT INTO profiles AS p (project, name, hold, holder, holder_node, holder_run)
       VALUES ($1, $2, $3, NULL, $4, $5)
       ON CONFLICT (project, name) DO UPDATE SET
         hold = EXCLUDED.hold, holder = NULL,
         holder_node = EXCLUDED.holder_node, holder_run = EXCLUDED.holder_run
       WHERE NOT ${LIVE_HOLD}`,
      [key(project), name, token, this.#node, this.#run],
    );
    if (won.rowCount === 0) {
      const r = await this.#query<{ holder: string | null }>(
        'SELECT holder FROM profiles WHERE project = $1 AND name = $2',
        [key(project), name],
      );
      throw inUse(name, r.rows[0]?.holder);
    }
    let released = false;
    const hold: ProfileHold & { [TOKEN]: string } = {
      [TOKEN]: token,
      setHolder: (id) => {
        void this.#db
          .query('UPDATE profiles SET holder = $3 WHERE project = $1 AND name = $2 AND hold = $4', [
            key(project),
            name,
            id,
            token,
          ])
          .catch(() => {}); // the 409 of a second start then says "still starting"
      },
      release: () => {
        if (released) return;
        released = true;
        const done = this.#release(key(project), name, token).finally(() =>
          this.#releasing.delete(done),
        );
        this.#releasing.add(done);
      },
    };
    return hold;
  }

  /** Frees the hold `token` (and the row of a profile never saved), retried while the database is away. */
  async #release(project: string, name: string, token: string): Promise<void> {
    for (let wait = 100; ; wait = Math.min(wait * 2, 5000)) {
      try {
        await this.#db.transaction(async (q) => {
          await q(
            'DELETE FROM profiles WHERE project = $1 AND name = $2 AND hold = $3 AND sealed IS NULL',
            [project, name, token],
          );
          await q(
            `UPDATE profiles SET hold = NULL, holder = NULL, holder_node = NULL, holder_run = NULL
             WHERE project = $1 AND name = $2 AND hold = $3`,
            [project, name, token],
          );
        });
        return;
      } catch {
        // tried until the database answers; a node that closes or dies frees its holds anyway
        // (its run is no longer up: LIVE_HOLD)
        if (this.#db.closed) return;
        await sleep(wait, undefined, { ref: false });
      }
    }
  }

  /**
   * Resolves once the releases begun so far are done, or after `timeoutMs` (a node closing while
   * the database is away does not wait for it: its run's end frees them).
   */
  async settled(timeoutMs = 5000): Promise<void> {
    await raceDeadline(Promise.all([...this.#releasing]), timeoutMs);
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

const TOKEN = Symbol('profile hold token');

function tokenOf(hold: ProfileHold): string {
  const token = (hold as { [TOKEN]?: string })[TOKEN];
  if (token === undefined) throw new Error('not a hold of this backend');
  return token;
}
