/**
 * The cluster's PostgreSQL storage against a real PostgreSQL 15: the instance rows and the sealed
 * auth states keep the same contracts as the one-machine stores, migrations raced by three
 * nodes apply once, a schema newer than the code is refused, and a record written through one
 * node is announced to the others. Faults are real database errors (a trigger that refuses).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresAuthStateBackend } from '../../src/server/cluster/auth-state-backend.js';
import { Database } from '../../src/server/cluster/database.js';
import { PostgresInstanceStore } from '../../src/server/cluster/instance-store.js';
import { MIGRATIONS } from '../../src/server/cluster/migrations.js';
import { describeAuthStateBackend } from '../helpers/auth-state-backend-contract.js';
import { describeInstanceStore, row } from '../helpers/instance-store-contract.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { eventually } from '../helpers/server.js';

let pg: TestPostgres;
const opened: Database[] = [];
let schemas = 0;

beforeAll(async () => {
  pg = await startPostgres();
}, 60_000);
afterAll(async () => {
  await Promise.all(opened.map((db) => db.close()));
  pg?.stop();
});

const freshSchema = () => `t${process.pid}_${++schemas}`;
async function open(schema: string): Promise<Database> {
  const db = await Database.open({ url: pg.url, schema, maxConnections: 4 });
  opened.push(db);
  return db;
}
const run = () => randomBytes(6).toString('hex');

/** A trigger that refuses every change of `table` (of rows matching `when`), until undone. */
async function refuse(db: Database, table: string, when = 'true'): Promise<() => Promise<void>> {
  const name = `refuse_${table}`;
  await db.query(`CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger AS $$
    BEGIN IF ${when} THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN coalesce(NEW, OLD); END
    $$ LANGUAGE plpgsql`);
  await db.query(
    `CREATE TRIGGER ${name} BEFORE INSERT OR UPDATE OR DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${name}()`,
  );
  return async () => {
    await db.query(`DROP TRIGGER ${name} ON ${table}`);
  };
}

describeInstanceStore('PostgresInstanceStore', async () => {
  const schema = freshSchema();
  const db = await open(schema);
  return {
    store: new PostgresInstanceStore(db, { node: 'node-a', run: run() }),
    reopen: async () =>
      new PostgresInstanceStore(await open(schema), { node: 'node-a', run: run() }),
    breakWrites: () => refuse(db, 'instances'),
  };
});

describeAuthStateBackend('PostgresAuthStateBackend', async () => {
  const schema = freshSchema();
  const db = await open(schema);
  return {
    backend: new PostgresAuthStateBackend(db),
    reopen: async () => new PostgresAuthStateBackend(await open(schema)),
    breakWrite: (id) => refuse(db, 'auth_states', `NEW.id = '${id}'`),
    debris: async () => [],
  };
});

describe('the cluster database', () => {
  it('applies the migrations once when three nodes start at the same moment', async () => {
    const schema = freshSchema();
    const dbs = await Promise.all([open(schema), open(schema), open(schema)]);
    const versions = await dbs[0]!.query<{ version: number }>(
      'SELECT version FROM schema_version ORDER BY version',
    );
    expect(versions.rows.map((r) => r.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    for (const db of dbs)
      expect(await db.version()).toEqual({ current: MIGRATIONS.length, known: MIGRATIONS.length });
  });

  it('refuses a schema newer than this code, naming both versions', async () => {
    const schema = freshSchema();
    const db = await open(schema);
    await db.query('INSERT INTO schema_version (version) VALUES ($1)', [MIGRATIONS.length + 1]);
    await expect(open(schema)).rejects.toThrow(
      new RegExp(
        `schema version ${MIGRATIONS.length + 1}, newer than this burrow knows \\(${MIGRATIONS.length}\\)`,
      ),
    );
  });

  it('refuses a schema name that is not a plain SQL name', async () => {
    await expect(Database.open({ url: pg.url, schema: 'x; DROP TABLE y' })).rejects.toThrow(
      /lower-case SQL name/,
    );
  });

  it('lists every node’s instances on every node; a node adopts only its own earlier rows', async () => {
    const schema = freshSchema();
    const [dbA, dbB] = await Promise.all([open(schema), open(schema)]);
    const a = new PostgresInstanceStore(dbA, { node: 'node-a', run: run() });
    const b = new PostgresInstanceStore(dbB, { node: 'node-b', run: run() });
    const [ra, rb] = [row(), row({ instance_type: 'ubuntu' })];
    await a.put({ ...ra, status: 'running' });
    await b.put({ ...rb, status: 'running' });
    expect((await a.list()).map((r) => r.id)).toEqual([ra.id, rb.id]);
    expect(await b.get(ra.id)).toMatchObject({ id: ra.id, status: 'running' });
    // node A restarts: its row is terminated, node B's stays running
    const a2 = new PostgresInstanceStore(await open(schema), { node: 'node-a', run: run() });
    expect((await a2.adopt()).map((r) => [r.id, r.status, r.end_reason])).toEqual([
      [ra.id, 'terminated', 'server_restart'],
    ]);
    expect(await b.get(rb.id)).toMatchObject({ status: 'running' });
    expect(await b.get(ra.id)).toMatchObject({
      status: 'terminated',
      end_reason: 'server_restart',
    });
  });

  it('announces an auth state written through one node to the others, sealed text only', async () => {
    const schema = freshSchema();
    const [dbA, dbB] = await Promise.all([open(schema), open(schema)]);
    const seen: string[] = [];
    const stop = await new PostgresAuthStateBackend(dbB).watch((id) => seen.push(id));
    const a = new PostgresAuthStateBackend(dbA);
    await a.write('auth_one', '{"sealed":"AAAA"}');
    await a.delete('auth_one');
    expect(await a.delete('auth_one')).toBe(false);
    await eventually(() => seen.length === 2, 'two notifications', 5_000);
    expect(seen).toEqual(['auth_one', 'auth_one']);
    stop();
  });
});
