/**
 * The cluster's PostgreSQL database: one connection pool per node, the schema brought up to date
 * under an advisory lock, and LISTEN/NOTIFY on a connection of its own.
 *
 * - **Migrations.** `migrate()` takes a transaction-scoped advisory lock before it reads the
 *   schema's version, so nodes that start together apply each step once, one after the other;
 *   a node that finds the schema newer than it knows refuses to start (it would misread rows).
 * - **Clock.** Every time the cluster compares (leases, deadlines) is the database's `now()`,
 *   never a node's clock.
 * - **Schema.** Everything lives in one schema (default `burrow`), named in the connection's
 *   `search_path`, so one database can hold several clusters (and the tests one per case).
 */
import pg from 'pg';
import { RetryBackoff } from '../../internal/backoff.js';
import { serverError } from '../errors.js';
import { MIGRATIONS } from './migrations.js';

/**
 * Whether `err`, from a query, means the database could not be reached or could not serve it
 * (connection refused, reset or timed out, the server shutting down or out of resources: SQLSTATE
 * classes 08, 53, 57 and 58), so that the same query may succeed later; false for an error the
 * database gave about the query itself.
 */
export function unreachable(err: unknown): boolean {
  if (!(err instanceof pg.DatabaseError)) return true;
  return /^(08|53|57|58)/.test(err.code ?? '');
}

/**
 * What to throw for `err`, a failed query: the 503 a client retries when the database could not
 * be reached (`unreachable`), never a 404 nor a 500 for it; `err` itself when it is about the
 * query (a fault of ours).
 */
export function unavailable(err: unknown): unknown {
  if (!unreachable(err)) return err;
  return serverError('cluster_database_unavailable', { reason: (err as Error).message });
}

/** The advisory-lock key of migrations: "burrow" as ASCII in a 64-bit integer. */
const MIGRATION_LOCK = 0x6275_7272_6f77n;

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface DatabaseOptions {
  /** `postgres://user:password@host:port/database` (or a `?host=/socket/dir` form). */
  url: string;
  /** The schema the cluster's tables live in; default `burrow`. */
  schema?: string;
  /** Connections of the pool; default 10. */
  maxConnections?: number;
  /** Milliseconds a connection attempt may take; default 5000. */
  connectTimeoutMs?: number;
}

export type Notify = (payload: string) => void;

/** What a query returns, typed by its caller. */
export type Rows<T> = { rows: T[]; rowCount: number };

export class Database {
  readonly schema: string;
  readonly #pool: pg.Pool;
  readonly #config: pg.ClientConfig;
  /** The connection every channel is listened on, while it is up. */
  #listener: pg.Client | undefined;
  /** The connection being made (first or again), while it is. */
  #connecting: Promise<pg.Client> | undefined;
  /** The one timer of the next attempt to listen again: 100 ms, doubling up to 5 s. */
  readonly #retry = new RetryBackoff(100, 5000);
  readonly #channels = new Map<string, Set<Notify>>();
  readonly #relistened = new Set<() => void>();
  #closed = false;

  private constructor(config: pg.ClientConfig, schema: string, max: number) {
    this.schema = schema;
    this.#config = config;
    this.#pool = new pg.Pool({ ...config, max });
    // an idle connection the server closed (a restart, a fail-over) must not crash the node
    this.#pool.on('error', () => {});
  }

  /** Connect (one round trip proves the database answers) and bring the schema up to date. */
  static async open(opts: DatabaseOptions): Promise<Database> {
    const schema = opts.schema ?? 'burrow';
    if (!SCHEMA_NAME.test(schema)) {
      throw new Error(
        `the cluster schema must be a lower-case SQL name, not ${JSON.stringify(schema)}`,
      );
    }
    const config: pg.ClientConfig = {
      connectionString: opts.url,
      connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
      options: `-c search_path=${schema}`,
      application_name: 'burrow',
    };
    const db = new Database(config, schema, opts.maxConnections ?? 10);
    try {
      await db.migrate();
    } catch (err) {
      await db.close();
      throw err;
    }
    return db;
  }

  /** One statement with its parameters ($1, $2, …). */
  async query<T extends object = Record<string, unknown>>(
    text: string,
    params: readonly unknown[] = [],
  ): Promise<Rows<T>> {
    const r = await this.#pool.query(text, params as unknown[]);
    return { rows: r.rows as T[], rowCount: r.rowCount ?? 0 };
  }

  /** Run `work` in one transaction on one connection: committed when it resolves, else rolled back. */
  async transaction<T>(work: (q: Database['query']) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    try {
      await client.query('BEGIN');
      const q = async <R extends object>(text: string, params: readonly unknown[] = []) => {
        const r = await client.query(text, params as unknown[]);
        return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
      };
      const out = await work(q as Database['query']);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /** The schema's version and the version this code brings it to. */
  async version(): Promise<{ current: number; known: number }> {
    const r = await this.query<{ version: number }>(
      'SELECT max(version)::int AS version FROM schema_version',
    );
    return { current: r.rows[0]?.version ?? 0, known: MIGRATIONS.length };
  }

  /**
   * Apply the migrations this schema lacks, in one transaction under the migration lock: a node
   * that waits for the lock finds them applied. Refuses a schema newer than this code.
   */
  async migrate(): Promise<void> {
    await this.transaction(async (q) => {
      await q('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK.toString()]);
      await q(`CREATE SCHEMA IF NOT EXISTS ${this.schema}`);
      await q(
        'CREATE TABLE IF NOT EXISTS schema_version (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      const r = await q<{ version: number | null }>(
        'SELECT max(version)::int AS version FROM schema_version',
      );
      const current = r.rows[0]?.version ?? 0;
      if (current > MIGRATIONS.length) {
        throw new Error(
          `the cluster database is at schema version ${current}, newer than this burrow knows (${MIGRATIONS.length}): upgrade this node`,
        );
      }
      for (let v = current + 1; v <= MIGRATIONS.length; v++) {
        for (const statement of MIGRATIONS[v - 1]!) await q(statement);
        await q('INSERT INTO schema_version (version) VALUES ($1)', [v]);
      }
    });
  }

  /**
   * Call `fn` with the payload of every notification on `channel` (a SQL name) until the returned
   * function is called. One connection of its own carries every channel; the first call rejects
   * when the database does not answer.
   *
   * That connection ends when the database restarts or fails over. It is then made again by
   * one timer at a time (after 100 ms, doubling up to 5 s while the database does not answer;
   * never two attempts at once, and a failed attempt's client is ended), every channel is
   * listened on again, and the `onRelisten` callbacks run: what was notified while nobody
   * listened is lost, so they re-read what they keep.
   */
  async listen(channel: string, fn: Notify): Promise<() => void> {
    if (!SCHEMA_NAME.test(channel)) throw new Error(`not a channel name: ${channel}`);
    if (this.#closed) throw new Error('the cluster database is closed');
    let fns = this.#channels.get(channel);
    if (!fns) {
      this.#channels.set(channel, (fns = new Set()));
      // a connection being made listens on every channel, this one included, before it is up
      if (this.#listener) await this.#listener.query(`LISTEN ${channel}`);
      else if (!this.#retry.pending) await (this.#connecting ??= this.#connect());
    }
    fns.add(fn);
    return () => {
      fns.delete(fn);
    };
  }

  /**
   * Call `fn` each time the listening connection is up again after it was lost (not on the
   * first connection), until the returned function is called.
   */
  onRelisten(fn: () => void): () => void {
    this.#relistened.add(fn);
    return () => {
      this.#relistened.delete(fn);
    };
  }

  /** Whether notifications are being listened for now (false while the connection is down). */
  get listening(): boolean {
    return this.#listener !== undefined;
  }

  /** Send `payload` to every listener of `channel`, in the cluster, when the caller's transaction commits. */
  async notify(channel: string, payload: string): Promise<void> {
    await this.query('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  /** A new listening connection with every channel listened on; `#listener` once it is. */
  async #connect(): Promise<pg.Client> {
    const client = new pg.Client(this.#config);
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    client.on('notification', (n) => {
      for (const fn of this.#channels.get(n.channel) ?? []) fn(n.payload ?? '');
    });
    try {
      await client.connect();
      // a channel added meanwhile is in the map's iteration too
      for (const channel of this.#channels.keys()) await client.query(`LISTEN ${channel}`);
      if (this.#closed) throw new Error('the cluster database is closed');
    } catch (err) {
      this.#connecting = undefined;
      await client.end().catch(() => {});
      throw err;
    }
    this.#connecting = undefined;
    this.#listener = client;
    return client;
  }

  /** `client`'s connection ended or failed: when it was the listener, listen again later. */
  #lost(client: pg.Client): void {
    if (this.#listener !== client) return; // an attempt's client, or one already replaced
    this.#listener = undefined;
    client.end().catch(() => {});
    this.#retry.succeeded(); // the first attempt comes soon again
    this.#relisten();
  }

  /** Schedule the one attempt to listen again (no-op while one waits or runs). */
  #relisten(): void {
    if (this.#closed || this.#retry.pending || this.#connecting) return;
    this.#retry.schedule(() => {
      if (this.#closed) return;
      const attempt = (this.#connecting = this.#connect());
      attempt.then(
        () => {
          this.#retry.succeeded();
          for (const fn of this.#relistened) fn();
        },
        () => this.#relisten(),
      );
    });
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Close the pool and the listening connection. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#retry.cancel();
    const listener = this.#listener;
    this.#listener = undefined;
    await this.#connecting?.catch(() => {}); // an attempt under way ends its own client
    await listener?.end().catch(() => {});
    await this.#pool.end().catch(() => {});
  }
}
