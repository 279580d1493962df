/**
 * Placement in a cluster of three real nodes on one real PostgreSQL (in this process, on
 * loopback ports): `POST /v1/start` through node 1 claims a warm instance of node 3 first, lands
 * on the least-loaded node once node 1 is full (forwarded in one hop), never on a draining or
 * unleased node, and a full cluster (no room, or the cluster-wide cap) answers 429 with a
 * Retry-After computed from the load. `cdp_url` and live-view URLs carry the cluster's public
 * URL (node 2's, standing for a load balancer) whichever node answers, and work through it.
 * NOTIFY keeps working after PostgreSQL restarts: the listening connection comes back, and an
 * auth state saved on node 1 afterwards is seen by node 2.
 *
 * Node 1 takes 1 instance, node 2 takes 2, node 3 takes 3 and keeps one browser warm; the
 * cluster takes 5. The cases run in order, each on the instances the earlier ones left.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Database } from '../../../src/server/cluster/database.js';
import { NODES_CHANNEL } from '../../../src/server/cluster/nodes.js';
import { freePort } from '../../helpers/ports.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { eventually, testServer, type TestServer } from '../../helpers/server.js';

let pg: TestPostgres;
let dir: string;
let db: Database;
let one: TestServer;
let two: TestServer;
let three: TestServer;
let publicUrl: string;
/** A node that is up but whose lease ran out: it must never be sent a start. */
let ghost: Server;
let ghostHits = 0;

/** A browser start the warm pool cannot serve (an identity), so it goes by load. */
const COLD = { instance_type: 'browser', locale: 'de-DE' } as const;

async function start(via: TestServer, body: object, headers: Record<string, string> = {}) {
  const res = await via.api('/v1/start', { json: body, headers });
  const json = (await res.json()) as { id?: string; detail?: string };
  return { status: res.status, headers: res.headers, id: json.id ?? '', json };
}

/** Set a node's state as a drain does (NodeLease.drain), and tell the nodes. */
async function setState(name: string, state: 'up' | 'draining') {
  await db.query('UPDATE nodes SET state = $2 WHERE name = $1', [name, state]);
  await db.notify(NODES_CHANNEL, name);
}

/** Time for every node to read the nodes again after a notification (a local round trip or two). */
const settle = () => new Promise((r) => setTimeout(r, 1000));

beforeAll(async () => {
  pg = await startPostgres();
  dir = mkdtempSync(join(tmpdir(), 'burrow-placement-'));
  const key = join(dir, 'secret.key');
  writeFileSync(key, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  const port2 = await freePort();
  publicUrl = `http://127.0.0.1:${port2}`;
  const node = (name: string, extra: object) =>
    testServer({
      dataDir: join(dir, name),
      secretKeyFile: key,
      publicUrl,
      warmPool: 0, // the pools placement sees are the ones given here, whatever BURROW_WARM_POOL says
      cluster: { databaseUrl: pg.url, nodeName: name, leaseSeconds: 5, maxInstances: 5 },
      ...extra,
    });
  one = await node('node-1', { maxInstances: 1 });
  two = await node('node-2', { maxInstances: 2, port: port2 });
  three = await node('node-3', { maxInstances: 3, warmPool: { browser: 1 } });
  db = await Database.open({ url: pg.url });
  ghost = createServer((q, s) => {
    // the death watch probes an unleased node's liveness (cluster/death.ts): not a placement
    if (q.url !== '/livez') ghostHits++;
    s.writeHead(500).end();
  });
  await new Promise<void>((r) => ghost.listen(0, '127.0.0.1', r));
  const ghostUrl = `http://127.0.0.1:${(ghost.address() as AddressInfo).port}`;
  await db.query(
    `INSERT INTO nodes (name, run, slot, url, capacity, free_slots, warm, state, lease_until)
     VALUES ('ghost', 'gone', 99, $1, 10, 10, '{"browser": 5, "ubuntu": 5}', 'up',
       now() - interval '1 minute')`,
    [ghostUrl],
  );
  await db.notify(NODES_CHANNEL, 'ghost');
}, 90_000);

afterAll(async () => {
  await one?.close();
  await two?.close();
  await three?.close();
  await db?.close();
  ghost?.close();
  pg?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('placement of starts in a cluster of three nodes', () => {
  it('claims a warm instance first: a start through node 1 takes node 3’s pooled browser', async () => {
    await three.warmPool.ready();
    await eventually(
      async () =>
        (
          await db.query<{ n: number }>(
            `SELECT (warm->>'browser')::int AS n FROM nodes WHERE name = 'node-3'`,
          )
        ).rows[0]?.n === 1,
      'node 3 to advertise its warm browser',
    );
    await settle();
    const pooled = three.warmPool.ids();
    expect(pooled).toHaveLength(1);
    const r = await start(one, { instance_type: 'browser' });
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    expect(r.id).toBe(pooled[0]); // the very instance that waited in node 3's pool
    expect(r.id).toMatch(/^inst_c003/);
  }, 60_000);

  it('fills node 1, then places the next start through node 1 on the least-loaded node', async () => {
    // a forwarded start is started where it arrives: this fills node 1
    const local = await start(one, COLD, { 'x-burrow-forwarded-by': 'test' });
    expect(local.status, JSON.stringify(local.json)).toBe(200);
    expect(local.id).toMatch(/^inst_c001/);
    // node 1 is full; node 2 (0 of 2) is less loaded than node 3 (1 of 3)
    const placed = await start(one, COLD);
    expect(placed.status, JSON.stringify(placed.json)).toBe(200);
    expect(placed.id).toMatch(/^inst_c002/);
    const row = await two.api(`/v1/instance/${placed.id}`);
    expect(row.status).toBe(200);
  }, 60_000);

  it('sends nothing to a draining or unleased node; a full cluster answers 429 with Retry-After', async () => {
    await setState('node-3', 'draining');
    await settle();
    // node 1 full, node 3 draining, the ghost unleased: node 2 takes it
    const last = await start(one, COLD);
    expect(last.status, JSON.stringify(last.json)).toBe(200);
    expect(last.id).toMatch(/^inst_c002/);
    // now no node has room (right after: node 2's advert may still say 1 free, its 429 is retried)
    for (const via of [one, three]) {
      const full = await start(via, COLD);
      expect(full.status, JSON.stringify(full.json)).toBe(429);
      expect(full.headers.get('x-burrow-error')).toBe('cluster_at_capacity');
      const after = Number(full.headers.get('retry-after'));
      // every instance runs for an hour and none has ended: the upper bound
      expect(after).toBe(300);
    }
    expect(ghostHits).toBe(0);
    // nor was any instance started on the draining node 3
    const rows = (await (await one.api('/v1/instances')).json()) as {
      id: string;
      status: string;
    }[];
    const live = rows.filter((i) => i.status === 'running');
    expect(live.filter((i) => i.id.startsWith('inst_c003'))).toHaveLength(1);
    expect(live).toHaveLength(4);
  }, 60_000);

  it('computes Retry-After from the load: an instance about to end shortens it', async () => {
    const rows = (await (await one.api('/v1/instances')).json()) as {
      id: string;
      status: string;
    }[];
    const onTwo = rows.find((i) => i.status === 'running' && i.id.startsWith('inst_c002'))!;
    const ask = async () => {
      const full = await start(one, COLD);
      expect(full.status).toBe(429);
      return Number(full.headers.get('retry-after'));
    };
    const before = await ask();
    // its deadline 36 s away (through node 1, forwarded to node 2)
    const extend = await one.api(`/v1/instance/${onTwo.id}/extend`, {
      json: { timeout_hours: 0.01 },
    });
    expect(extend.status).toBe(200);
    const sooner = await ask();
    expect(sooner).toBeLessThan(before);
    expect(sooner).toBeGreaterThanOrEqual(30);
    expect(sooner).toBeLessThanOrEqual(37);
    await one.api(`/v1/instance/${onTwo.id}/extend`, { json: { timeout_hours: 1 } });
    expect(await ask()).toBe(300);
  }, 60_000);

  it('refuses at the cluster-wide cap even where a node has room', async () => {
    await setState('node-3', 'up');
    await settle();
    const placed = await start(one, COLD); // the 5th live instance: node 3 is the only one with room
    expect(placed.status, JSON.stringify(placed.json)).toBe(200);
    expect(placed.id).toMatch(/^inst_c003/);
    const capped = await start(two, COLD); // node 3 has 1 slot left, the cluster none
    expect(capped.status).toBe(429);
    expect(capped.headers.get('x-burrow-error')).toBe('cluster_at_capacity');
    expect(capped.json.detail).toContain('limit 5');
    expect(Number(capped.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('puts the public URL in cdp_url and the live view, whichever node answers, and they work', async () => {
    const rows = (await (await one.api('/v1/instances')).json()) as {
      id: string;
      status: string;
    }[];
    const onOne = rows.find((i) => i.status === 'running' && i.id.startsWith('inst_c001'))!;
    for (const via of [one, two, three]) {
      const r = await via.api(`/v1/instance/${onOne.id}/browser/cdp_url`);
      const { cdp_url } = (await r.json()) as { cdp_url: string };
      expect(cdp_url.startsWith(`${publicUrl.replace(/^http/, 'ws')}/cdp/${onOne.id}/`)).toBe(true);
    }
    // the public URL is node 2's: the CDP socket goes through it to node 1
    const { cdp_url } = (await (
      await three.api(`/v1/instance/${onOne.id}/browser/cdp_url`)
    ).json()) as {
      cdp_url: string;
    };
    const browser = await chromium.connectOverCDP(cdp_url);
    try {
      const page = await browser.contexts()[0]!.newPage();
      await page.goto('data:text/html,<title>through the public URL</title>');
      expect(await page.title()).toBe('through the public URL');
    } finally {
      await browser.close();
    }
    const stream = await three.api(`/v1/instance/${onOne.id}/stream_url`);
    const { stream_url } = (await stream.json()) as { stream_url: string };
    expect(stream_url.startsWith(`${publicUrl}/stream/${onOne.id}/`)).toBe(true);
    const page = await fetch(stream_url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
  }, 60_000);

  it('keeps NOTIFY working after PostgreSQL restarts: node 2 sees an auth state saved on node 1', async () => {
    const listeners = async () =>
      (
        await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE application_name = 'burrow' AND query LIKE 'LISTEN %'`,
        )
      ).rows[0]?.n;
    expect(await listeners()).toBe(3);
    await pg.restart(1500); // the nodes' reconnects fail for a while first
    await eventually(
      async () => (await listeners().catch(() => 0)) === 3,
      'the nodes to listen again',
      20_000,
    );
    // one listening connection per node: no parallel reconnects, none left over
    await new Promise((r) => setTimeout(r, 1000));
    expect(await listeners()).toBe(3);
    let id = '';
    await eventually(async () => {
      const res = await one.api('/v1/auth_states/import?name=after-restart', {
        json: { cookies: [], origins: [] },
      });
      if (res.status !== 200) return false;
      id = ((await res.json()) as { auth_state_id: string }).auth_state_id;
      return true;
    }, 'node 1 to save once the database is back');
    await eventually(
      async () =>
        ((await (await two.api('/v1/auth_states')).json()) as { id: string }[]).some(
          (s) => s.id === id,
        ),
      'node 2 to hear of the state saved after the restart',
      10_000,
    );
    // and node changes are heard again: node 3 draining keeps starts off it
    await setState('node-3', 'draining');
    await settle();
    await setState('node-3', 'up');
  }, 90_000);
});

describe('the listening connection', () => {
  it('comes back after each of five restarts, one connection at a time, and re-reads', async () => {
    const listener = await Database.open({ url: pg.url, schema: 'relisten' });
    const got: string[] = [];
    let relistened = 0;
    try {
      await listener.listen('burrow_test', (p) => got.push(p));
      listener.onRelisten(() => relistened++);
      for (let round = 1; round <= 5; round++) {
        await pg.restart(round * 200);
        await eventually(
          () => listener.listening,
          `listening again after restart ${round}`,
          20_000,
        );
        expect(relistened).toBe(round);
        await eventually(async () => {
          await db.notify('burrow_test', `after ${round}`).catch(() => {});
          await new Promise((r) => setTimeout(r, 100));
          return got.includes(`after ${round}`);
        }, `the notification after restart ${round}`);
        const conns = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE application_name = 'burrow' AND query = 'LISTEN burrow_test'`,
        );
        expect(conns.rows[0]?.n).toBe(1);
      }
    } finally {
      await listener.close();
    }
    expect(listener.listening).toBe(false);
    // closed, it leaves no connection behind
    await eventually(
      async () =>
        (
          await db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = 'LISTEN burrow_test'`,
          )
        ).rows[0]?.n === 0,
      'the listening connection to end',
    );
  }, 120_000);
});
