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
import { MIGRATIONS } from './migrations.js';

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
  #listener: pg.Client | undefined;
  #listening: Promise<pg.Client> | undefined;
  readonly #channels = new Map<string, Set<Notify>>();
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
   * function is called. One connection of its own carries every channel.
   */
  async listen(channel: string, fn: Notify): Promise<() => void> {
    if (!SCHEMA_NAME.test(channel)) throw new Error(`not a channel name: ${channel}`);
    const client = await this.#listenerClient();
    let fns = this.#channels.get(channel);
    if (!fns) {
      this.#channels.set(channel, (fns = new Set()));
      await client.query(`LISTEN ${channel}`);
    }
    fns.add(fn);
    return () => {
      fns.delete(fn);
    };
  }

  /** Send `payload` to every listener of `channel`, in the cluster, when the caller's transaction commits. */
  async notify(channel: string, payload: string): Promise<void> {
    await this.query('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  #listenerClient(): Promise<pg.Client> {
    return (this.#listening ??= (async () => {
      const client = new pg.Client(this.#config);
      client.on('error', () => {});
      client.on('notification', (n) => {
        for (const fn of this.#channels.get(n.channel) ?? []) fn(n.payload ?? '');
      });
      await client.connect();
      this.#listener = client;
      return client;
    })());
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Close the pool and the listening connection. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#listener?.end().catch(() => {});
    await this.#pool.end().catch(() => {});
  }
}
