/**
 * The instance rows of a cluster, in PostgreSQL: the `InstanceStore` seam
 * (../instances/store.ts) on a table every node reads, so `GET /v1/instances` on any node lists
 * the whole cluster.
 *
 * Each row names the node that owns the instance and that node's run. A node that starts again
 * under the same name (a restarted pod keeps its name) adopts the rows its earlier runs left:
 * they become `terminated` with the reason recorded when they ended, else `server_restart`,
 * exactly as the one-machine journal does. Rows of other nodes are theirs to write.
 */
import type { EndReason } from '../../api/index.js';
import type { InstanceRow, InstanceStore } from '../instances/store.js';
import { unavailable, type Database } from './database.js';

export interface PostgresInstanceStoreOptions {
  /** This node's name: stable across its restarts. */
  node: string;
  /** This run of the node (a new one per process). */
  run: string;
}

interface Stored {
  row: InstanceRow;
}

export class PostgresInstanceStore implements InstanceStore {
  readonly #db: Database;
  readonly #node: string;
  readonly #run: string;

  constructor(db: Database, opts: PostgresInstanceStoreOptions) {
    this.#db = db;
    this.#node = opts.node;
    this.#run = opts.run;
  }

  async put(row: InstanceRow): Promise<void> {
    // the first put fixes the row's place (seq) and its owner; later puts replace the row only
    await this.#db.query(
      `INSERT INTO instances (id, node, run, row) VALUES ($1, $2, $3, $4)
       ON CONFLICT (id) DO UPDATE SET row = EXCLUDED.row, updated_at = now()`,
      [row.id, this.#node, this.#run, JSON.stringify(row)],
    );
  }

  async get(id: string): Promise<InstanceRow | undefined> {
    const r = await this.#read('SELECT row FROM instances WHERE id = $1', [id]);
    return r.rows[0]?.row;
  }

  async list(): Promise<InstanceRow[]> {
    const r = await this.#read('SELECT row FROM instances ORDER BY seq');
    return r.rows.map((s) => s.row);
  }

  /**
   * A read whose failure is the 503 a client retries: the database away is never "no such
   * instance" (a 404 told a client whose session was healthy that it was gone), nor a 500.
   */
  async #read(text: string, params: readonly unknown[] = []) {
    try {
      return await this.#db.query<Stored>(text, params);
    } catch (err) {
      throw unavailable(err);
    }
  }

  async delete(id: string): Promise<boolean> {
    const r = await this.#db.query('DELETE FROM instances WHERE id = $1', [id]);
    return r.rowCount > 0;
  }

  async ended(id: string, reason: EndReason): Promise<boolean> {
    const r = await this.#db.query(
      `UPDATE instances SET ended_reason = coalesce(ended_reason, $2), updated_at = now()
       WHERE id = $1`,
      [id, reason],
    );
    return r.rowCount > 0;
  }

  async adopt(): Promise<InstanceRow[]> {
    // one statement: the rows of this node's earlier runs become this run's, terminated
    const r = await this.#db.query<Stored>(
      `WITH taken AS (
         UPDATE instances SET
           run = $2,
           row = row || jsonb_build_object(
             -- an instance another node declared lost with this one stays 'error' (death.ts)
             'status', CASE WHEN ended_reason = 'node_lost' THEN 'error' ELSE 'terminated' END,
             'end_reason', coalesce(ended_reason, 'server_restart')),
           ended_reason = coalesce(ended_reason, 'server_restart'),
           updated_at = now()
         WHERE node = $1 AND run <> $2
         RETURNING seq, row)
       SELECT row FROM taken ORDER BY seq`,
      [this.#node, this.#run],
    );
    return r.rows.map((s) => s.row);
  }
}
