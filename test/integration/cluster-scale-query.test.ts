/**
 * The query KEDA sizes a Kubernetes cluster by (scripts/deploy.ts, deploy/kubernetes/keda/), run
 * on a real PostgreSQL 15 with the cluster's schema as the nodes make it: it counts the live
 * instances of every node, and one more for each node that is up with no free slot; ended
 * instances and draining nodes do not count.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../src/server/cluster/database.js';
import { PostgresInstanceStore } from '../../src/server/cluster/instance-store.js';
import { NodeLease } from '../../src/server/cluster/nodes.js';
import { SCALE_QUERY } from '../../scripts/deploy.js';
import { row } from '../helpers/instance-store-contract.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

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
  it('counts live instances and full nodes, on the schema the nodes make', async () => {
    expect(await demand()).toBe(0);

    const a = new PostgresInstanceStore(db, { node: 'node-a', run: 'r1' });
    const b = new PostgresInstanceStore(db, { node: 'node-b', run: 'r1' });
    await a.put(row({ status: 'running' }));
    await a.put(row({ status: 'paused' }));
    await b.put(row({ status: 'deploying' }));
    await b.put(row({ status: 'terminated', end_reason: 'stopped' }));
    expect(await demand()).toBe(3);

    const advert = { capacity: 2, warm: {} };
    const full = await NodeLease.join(db, {
      ...advert,
      name: 'node-a',
      run: 'r1',
      url: 'http://node-a:8787',
      freeSlots: 0,
    });
    leases.push(full);
    leases.push(
      await NodeLease.join(db, {
        ...advert,
        name: 'node-b',
        run: 'r1',
        url: 'http://node-b:8787',
        freeSlots: 1,
      }),
    );
    expect(await demand()).toBe(4); // node-a is full: one node more is wanted

    await full.drain(); // a draining node takes nothing new: its being full asks for nothing
    expect(await demand()).toBe(3);
  }, 30_000);
});
