/**
 * The cluster's PostgreSQL storage against a real PostgreSQL 15: the instance rows and the sealed
 * auth states keep the same contracts as the one-machine stores, migrations raced by three
 * nodes apply once, a schema newer than the code is refused, and a record written through one
 * node is announced to the others. Faults are real database errors (a trigger that refuses).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresAuthStateBackend } from '../../../src/server/cluster/auth-state-backend.js';
import { Database } from '../../../src/server/cluster/database.js';
import { PostgresInstanceStore } from '../../../src/server/cluster/instance-store.js';
import { MIGRATIONS } from '../../../src/server/cluster/migrations.js';
import { listNodes, NodeLease } from '../../../src/server/cluster/nodes.js';
import { describeAuthStateBackend } from '../../helpers/auth-state-backend-contract.js';
import { describeInstanceStore, row } from '../../helpers/instance-store-contract.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { eventually } from '../../helpers/server.js';

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

describe('nodes and their leases', () => {
  const advert = { url: 'http://10.0.0.1:8787', capacity: 8, freeSlots: 8, warm: {} };

  it('gives each node a slot of its own, kept for its name across restarts', async () => {
    const db = await open(freshSchema());
    const a = await NodeLease.join(db, { ...advert, name: 'node-a', run: run() });
    const b = await NodeLease.join(db, { ...advert, name: 'node-b', run: run() });
    expect([a.slot, b.slot]).toEqual([1, 2]);
    await a.leave();
    await a.leave(); // idempotent
    const again = await NodeLease.join(db, { ...advert, name: 'node-a', run: run() });
    expect(again.slot).toBe(1);
    const c = await NodeLease.join(db, { ...advert, name: 'node-c', run: run() });
    expect(c.slot).toBe(3);
    await Promise.all([again.leave(), b.leave(), c.leave()]);
  });

  it('refuses a second live node under the same name, naming the lease', async () => {
    const db = await open(freshSchema());
    const a = await NodeLease.join(db, { ...advert, name: 'twin', run: run() });
    await expect(NodeLease.join(db, { ...advert, name: 'twin', run: run() })).rejects.toThrow(
      /node name twin is held by a running node until/,
    );
    await expect(NodeLease.join(db, { ...advert, name: '-bad name', run: run() })).rejects.toThrow(
      /a node name is/,
    );
    await a.leave();
  });

  it('renews its lease and advertises; a lease not renewed runs out by the database clock', async () => {
    const db = await open(freshSchema());
    const a = await NodeLease.join(db, { ...advert, name: 'renewing', run: run(), leaseMs: 600 });
    const quiet = await NodeLease.join(db, { ...advert, name: 'quiet', run: run(), leaseMs: 600 });
    await quiet.leave(); // stops renewing; its lease ends now
    a.advertise({ freeSlots: 5, warm: { browser: 2 } });
    await new Promise((r) => setTimeout(r, 1500)); // over two leases: only renewals keep it
    const nodes = await listNodes(db);
    expect(nodes.find((n) => n.name === 'renewing')).toMatchObject({
      leased: true,
      state: 'up',
      freeSlots: 5,
      warm: { browser: 2 },
    });
    expect(nodes.find((n) => n.name === 'quiet')).toMatchObject({ leased: false, state: 'left' });
    // another run takes the name over once the lease ran out: the first run hears it lost
    const b = await NodeLease.join(db, { ...advert, name: 'quiet', run: run(), leaseMs: 600 });
    expect(b.slot).toBe(quiet.slot);
    await expect(quiet.renew()).rejects.toThrow(/taken by another run/);
    await Promise.all([a.leave(), b.leave()]);
  });

  it('a node whose lease another run took hears it at its next renewal', async () => {
    const db = await open(freshSchema());
    const lost: string[] = [];
    const a = await NodeLease.join(db, {
      ...advert,
      name: 'usurped',
      run: run(),
      leaseMs: 300,
      onLost: (why) => lost.push(why),
    });
    await db.query(`UPDATE nodes SET run = 'someone-else' WHERE name = 'usurped'`);
    await eventually(() => lost.length === 1, 'the lost lease reported', 5_000);
    expect(lost[0]).toMatch(/taken by another run/);
    await a.leave();
  });

  it('a draining node says so to every node', async () => {
    const schema = freshSchema();
    const [dbA, dbB] = await Promise.all([open(schema), open(schema)]);
    const heard: string[] = [];
    await dbB.listen('burrow_nodes', (name) => heard.push(name));
    const a = await NodeLease.join(dbA, { ...advert, name: 'drainer', run: run() });
    await a.drain();
    await eventually(() => heard.length >= 2, 'the join and the drain announced', 5_000);
    expect((await listNodes(dbB)).find((n) => n.name === 'drainer')?.state).toBe('draining');
    await a.leave();
  });
});
