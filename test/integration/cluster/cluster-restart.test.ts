/**
 * A node restarted under its name, and the cluster's one clock, on real nodes (processes on
 * loopback) and one real PostgreSQL:
 *
 * - a node killed with `kill -9` and started again at once under the same name and URL (a pod's
 *   container restarted) joins without waiting for its old lease: its old run's URL answers
 *   `/livez` as the new run, so the old run is declared lost and its instance reads `node_lost`;
 * - a second process given a name a live node holds is refused, and the live node keeps it;
 * - the time a forwarding node signs a client's address with is the database's as the node
 *   reckons it, so a node whose machine clock is ten minutes off still has its signature
 *   believed. The skewed clock is the one thing faked here (`Date.now` of this process), as a
 *   real clock cannot be moved on demand.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../../src/server/cluster/database.js';
import { ClientSigner } from '../../../src/server/cluster/forwarded-client.js';
import { NodeLease } from '../../../src/server/cluster/nodes.js';
import { freePort, killNode } from '../../helpers/cluster.js';
import { useCluster } from '../../helpers/use-cluster.js';

const API_KEY = 'cluster-restart-key-0123456789';
/** Long enough that a join which waited for the old lease would be seen to. */
const LEASE_SECONDS = 20;
const PINNED = { 'x-burrow-forwarded-by': 'test' };

const cluster = useCluster(0, { prefix: 'burrow-restart-', database: true, timeout: 60_000 });
let db: Database;

const node = (name: string, port?: number) =>
  cluster.processNode(name, {
    apiKey: API_KEY,
    leaseSeconds: LEASE_SECONDS,
    ...(port !== undefined && { port }),
  });

beforeAll(() => {
  db = cluster.db;
});

afterAll(() => {
  vi.restoreAllMocks();
});

const nodeRow = async (name: string) =>
  (
    await db.query<{ run: string; state: string; lease_until: Date; started_at: Date }>(
      'SELECT run, state, lease_until, started_at FROM nodes WHERE name = $1',
      [name],
    )
  ).rows[0]!;

describe('a node restarted under its name', () => {
  it('kill -9 and a start at once at the same URL: it joins before the old lease ends, and the old run’s instance reads node_lost', async () => {
    const port = await freePort();
    const first = await node('node-r', port);
    const r = await first.api('/v1/start', {
      json: { instance_type: 'ubuntu' },
      headers: PINNED,
    });
    expect(r.status, await r.clone().text()).toBe(200);
    const id = ((await r.json()) as { id: string }).id;
    const before = await nodeRow('node-r');

    await killNode(first);
    const again = await node('node-r', port);
    const after = await nodeRow('node-r');
    expect(after.run).not.toBe(before.run);
    expect(after.state).toBe('up');
    // joined while the old run's lease still ran (by the database's clock)
    expect(after.started_at.getTime()).toBeLessThan(before.lease_until.getTime());
    const res = await again.api(`/v1/instance/${id}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; end_reason?: string };
    expect(body).toMatchObject({ status: 'error', end_reason: 'node_lost' });
    // the new run answers /livez as itself
    const live = await fetch(`${again.url}/livez`);
    expect(live.headers.get('x-burrow-run')).toBe(after.run);
  }, 120_000);

  it('a second process given a live node’s name is refused; the live node keeps it', async () => {
    const held = await node('node-h');
    const r = await held.api('/v1/start', { json: { instance_type: 'ubuntu' }, headers: PINNED });
    expect(r.status, await r.clone().text()).toBe(200);
    const id = ((await r.json()) as { id: string }).id;
    const run = (await nodeRow('node-h')).run;
    // the second process listens, asks for the name, is refused and exits: never ready
    const second = await node('node-h').then(
      (n) => n,
      (err: Error) => err,
    );
    expect(second).toBeInstanceOf(Error);
    expect((second as Error).message).toMatch(/node name node-h is held by a running node/);
    const row = await nodeRow('node-h');
    expect(row).toMatchObject({ run, state: 'up' });
    // and the live node's instance is untouched, in the database and on the node
    const res = await held.api(`/v1/instance/${id}`);
    expect(((await res.json()) as { status: string }).status).toBe('running');
    const stored = await db.query<{ ended_reason: string | null; row: { status: string } }>(
      'SELECT ended_reason, row FROM instances WHERE id = $1',
      [id],
    );
    expect(stored.rows[0]).toMatchObject({ ended_reason: null, row: { status: 'running' } });
  }, 120_000);
});

describe('the cluster’s clock', () => {
  it('a node whose machine clock is 10 minutes fast signs with the database’s time, and the other node believes it', async () => {
    const skewMs = 10 * 60_000;
    const real = Date.now.bind(Date);
    const leases: NodeLease[] = [];
    try {
      // node A's machine runs fast while it joins and signs
      const spy = vi.spyOn(Date, 'now').mockImplementation(() => real() + skewMs);
      const a = await NodeLease.join(db, {
        name: 'clock-a',
        run: randomBytes(6).toString('hex'),
        url: 'http://127.0.0.1:9',
        capacity: 1,
        freeSlots: 1,
        warm: {},
      });
      leases.push(a);
      const [{ db_now: dbNow }] = (
        await db.query<{ db_now: Date }>('SELECT clock_timestamp() AS db_now')
      ).rows as [{ db_now: Date }];
      expect(Math.abs(a.dbNow() - dbNow.getTime())).toBeLessThan(2_000);
      const secret = randomBytes(32);
      const header = new ClientSigner(secret, () => a.dbNow()).sign('10.9.8.7', 'GET', '/x');
      // what the same signature would have said with the machine's clock: ten minutes ahead
      const naive = new ClientSigner(secret).sign('10.9.8.7', 'GET', '/x');
      spy.mockRestore();

      // node B's machine clock is right
      const b = await NodeLease.join(db, {
        name: 'clock-b',
        run: randomBytes(6).toString('hex'),
        url: 'http://127.0.0.1:9',
        capacity: 1,
        freeSlots: 1,
        warm: {},
      });
      leases.push(b);
      const verifier = new ClientSigner(secret, () => b.dbNow());
      expect(verifier.verify(header, 'GET', '/x')).toBe('10.9.8.7');
      expect(verifier.verify(naive, 'GET', '/x')).toBeUndefined();
    } finally {
      vi.restoreAllMocks();
      await Promise.all(leases.map((l) => l.leave()));
    }
  });
});
