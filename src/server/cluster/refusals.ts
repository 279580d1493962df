/**
 * Refused starts, counted in the cluster's database: each node adds the starts it answered 429
 * (no room: `cluster_at_capacity`, `server_at_capacity`) or 503 (`node_draining`,
 * `cluster_database_unavailable`) to a row per node, minute (the database's clock) and status.
 * A refused start leaves no instance row, so without these the autoscaler's query (KEDA's,
 * scripts/deploy.ts) would see only the demand that was met.
 *
 * - **Counted once**, by the node that answered the client: a start forwarded by placement and
 *   refused by its target is placed again, and only the final answer counts (the HTTP side
 *   counts answers to starts that were not forwarded; the MCP tool counts its own).
 * - **Never in the way.** A count is written after the answer, a few at a time; while the
 *   database does not answer (the 503s of that time among them), counts wait in memory and go
 *   in with the next write that succeeds.
 * - **An hour** of rows is kept: older ones are deleted by the writes, at most once a minute.
 */
import type { Database } from './database.js';

/** How soon after a refusal its count is written (refusals meanwhile go in the same write). */
const WRITE_DELAY_MS = 200;
/** How soon a write that failed is tried again. */
const RETRY_MS = 5_000;
/** How long rows are kept. */
export const REFUSALS_KEPT_MINUTES = 60;

export type RefusedStatus = 429 | 503;

export class StartRefusals {
  readonly #db: Pick<Database, 'query'>;
  readonly #node: string;
  /** Counts not yet written, by status. */
  #pending = new Map<RefusedStatus, number>();
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #prunedAt = 0;
  #closed = false;

  constructor(db: Pick<Database, 'query'>, node: string) {
    this.#db = db;
    this.#node = node;
  }

  /** A start answered `status` (429 or 503; others are not refusals and are ignored). */
  count(status: number): void {
    if ((status !== 429 && status !== 503) || this.#closed) return;
    this.#pending.set(status, (this.#pending.get(status) ?? 0) + 1);
    this.#schedule(WRITE_DELAY_MS);
  }

  /** Write what is pending now (tests; `close`). */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    return (this.#writing ??= this.#write().finally(() => (this.#writing = undefined)));
  }

  /** Write what is pending (once) and count no more. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#writing;
    await this.flush().catch(() => {});
    clearTimeout(this.#timer);
  }

  #schedule(ms: number): void {
    if (this.#timer || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.flush().catch(() => {});
    }, ms);
    this.#timer.unref();
  }

  async #write(): Promise<void> {
    const batch = [...this.#pending];
    this.#pending.clear();
    if (batch.length === 0) return;
    try {
      while (batch.length > 0) {
        const [status, n] = batch[0]!;
        await this.#db.query(
          `INSERT INTO start_refusals (node, minute, status, refused)
           VALUES ($1, date_trunc('minute', now()), $2, $3)
           ON CONFLICT (node, minute, status)
             DO UPDATE SET refused = start_refusals.refused + EXCLUDED.refused`,
          [this.#node, status, n],
        );
        batch.shift();
      }
      if (Date.now() - this.#prunedAt > 60_000) {
        this.#prunedAt = Date.now();
        await this.#db.query(
          `DELETE FROM start_refusals WHERE minute < now() - $1 * interval '1 minute'`,
          [REFUSALS_KEPT_MINUTES],
        );
      }
    } catch (err) {
      // not written: counted again with the next write
      for (const [status, n] of batch) {
        this.#pending.set(status, (this.#pending.get(status) ?? 0) + n);
      }
      this.#schedule(RETRY_MS);
      throw err;
    }
  }
}
