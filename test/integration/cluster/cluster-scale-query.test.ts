/**
 * The query KEDA sizes a Kubernetes cluster by (scripts/deploy.ts, deploy/kubernetes/keda/), run
 * on a real PostgreSQL 15 with the cluster's schema as the nodes make it: it counts the live
 * instances of every node (ended ones do not count) and the starts refused in the current minute
 * and the one before, as the nodes count them (src/server/cluster/refusals.ts), which keep an
 * hour of them. A full cluster refusing starts through real nodes: cluster-starts.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../../src/server/cluster/database.js';
import { PostgresInstanceStore } from '../../../src/server/cluster/instance-store.js';
import { NodeLease } from '../../../src/server/cluster/nodes.js';
import { StartRefusals } from '../../../src/server/cluster/refusals.js';
import { SCALE_QUERY } from '../../../scripts/deploy.js';
import { row } from '../../helpers/instance-store-contract.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';

let pg: TestPostgres;
let db: Database;
const leases: NodeLease[] = [];

beforeAll(async () => {
  pg = await startPostgres();
  // the default schema, `burrow`: the one the query names, as a node that was given no other
  db = await Database.open({ url: pg.url });
}, 60_000);
afterAll(async () => {
  for (const l of leases) await l.leave();
  await db?.close();
  pg?.stop();
});

const demand = async () =>
  Number((await db.query<{ n: string }>(`${SCALE_QUERY} AS n`)).rows[0]!.n);

describe('the KEDA ScaledObject’s query', () => {
  it('counts live instances, on the schema the nodes make; a full node asks nothing by itself', async () => {
    expect(await demand()).toBe(0);

    const a = new PostgresInstanceStore(db, { node: 'node-a', run: 'r1' });
    const b = new PostgresInstanceStore(db, { node: 'node-b', run: 'r1' });
    await a.put(row({ status: 'running' }));
    await a.put(row({ status: 'paused' }));
    await b.put(row({ status: 'deploying' }));
    await b.put(row({ status: 'terminated', end_reason: 'stopped' }));
    expect(await demand()).toBe(3);

    // a full node is not a refused start: until a start is refused, nothing more is wanted
    leases.push(
      await NodeLease.join(db, {
        capacity: 2,
        warm: {},
        name: 'node-a',
        run: 'r1',
        url: 'http://node-a:8787',
        freeSlots: 0,
      }),
    );
    expect(await demand()).toBe(3);
  }, 30_000);

  it('adds the starts refused in this minute and the one before, and keeps an hour of them', async () => {
    // the minutes below are read on the database's clock: not across the turn of a minute
    const { s } = (await db.query<{ s: number }>(`SELECT extract(second FROM now())::float8 AS s`))
      .rows[0]!;
    if (s > 55) await new Promise((r) => setTimeout(r, (61 - s) * 1000));
    const live = await demand();
    const a = new StartRefusals(db, 'node-a');
    const b = new StartRefusals(db, 'node-b');
    for (let i = 0; i < 4; i++) a.count(429);
    a.count(503);
    a.count(200); // not a refusal
    b.count(429);
    await a.flush();
    await b.flush();
    expect(await demand()).toBe(live + 6);
    const rows = await db.query<{ node: string; status: number; refused: number }>(
      'SELECT node, status, refused FROM start_refusals ORDER BY node, status',
    );
    expect(rows.rows).toEqual([
      { node: 'node-a', status: 429, refused: 4 },
      { node: 'node-a', status: 503, refused: 1 },
      { node: 'node-b', status: 429, refused: 1 },
    ]);

    // older refusals: the minute before this one counts, two minutes ago does not
    await db.query(
      `INSERT INTO start_refusals (node, minute, status, refused) VALUES
         ('node-c', date_trunc('minute', now()) - interval '1 minute', 429, 10),
         ('node-c', date_trunc('minute', now()) - interval '2 minutes', 429, 100),
         ('node-c', date_trunc('minute', now()) - interval '61 minutes', 429, 1000)`,
    );
    expect(await demand()).toBe(live + 6 + 10);

    // a node's writes delete what is older than an hour
    const c = new StartRefusals(db, 'node-c');
    c.count(429);
    await c.close();
    const kept = await db.query<{ refused: number }>(
      `SELECT refused FROM start_refusals WHERE node = 'node-c' ORDER BY minute`,
    );
    expect(kept.rows.map((r) => r.refused)).toEqual([100, 10, 1]);
    expect(await demand()).toBe(live + 6 + 10 + 1);
    await a.close();
    await b.close();
  }, 30_000);

  it('keeps a refusal counted while the database does not answer, and writes it after', async () => {
    const before = await demand();
    const refusals = new StartRefusals(db, 'node-d');
    pg.pause();
    try {
      refusals.count(503);
      await expect(refusals.flush()).rejects.toThrow();
    } finally {
      pg.resume();
    }
    await refusals.flush();
    expect(await demand()).toBe(before + 1);
    await refusals.close();
  }, 60_000);
});
