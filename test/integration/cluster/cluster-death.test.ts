/**
 * Node death, drain, readiness and liveness, with cluster nodes as real processes on loopback
 * (test/helpers/cluster.ts) and a real PostgreSQL:
 *
 * - liveness and readiness answer without the key, say nothing, and the API still needs it;
 * - a node is declared lost by exactly one of several racing calls, only while its lease is
 *   expired, and only its current run's live instances become `error` / `node_lost`;
 * - PostgreSQL stopped for longer than the lease: once it is back no node is declared dead (the
 *   probes find them alive) and the instances ran on;
 * - `kill -9` of node 2 under a loop of requests: node 1's instance sees no failure; a `cdp_url`
 *   socket through node 1 to node 2's instance closes with 4001 `node_lost`, Playwright sees the
 *   disconnect, the bridge's `disconnected` event names the lost node; node 2's instance reads
 *   `error` / `node_lost` from node 1 within lease + probes, and the bridge's reconnect is told
 *   it is gone (410); node 2 restarted under its name resurrects nothing;
 * - `burrow drain` of node 2 with an open CDP socket: readiness false at once, starts through it
 *   503 with Retry-After (they work through node 1), the socket keeps working, and the process
 *   exits 0 once its instance stopped;
 * - a node declared lost while it still runs (cut off) learns it at its next renewal: its
 *   instances stop `node_lost` and its liveness answers 503 (only a restart brings it back);
 * - SIGTERM on node 1 with a running instance: after the (short) drain deadline the instance
 *   ended `node_drained` and the process exited 0.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { declareLost } from '../../../src/server/cluster/death.js';
import { Database } from '../../../src/server/cluster/database.js';
import { openSession, type DisconnectedEvent } from '../../../src/session/index.js';
import { freePort, killNode, startNode, type NodeProcess } from '../../helpers/cluster.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { eventually } from '../../helpers/server.js';

const root = resolve(import.meta.dirname, '../../..');
const API_KEY = 'cluster-death-key-0123456789';
const LEASE_SECONDS = 3;

let pg: TestPostgres;
let db: Database;
let dir: string;
let keyFile: string;
let one: NodeProcess;
let two: NodeProcess | undefined;
let lb: Server;
let lbUrl: string;
const nodes: NodeProcess[] = [];

const node = async (name: string, extra: Partial<Parameters<typeof startNode>[0]> = {}) => {
  const n = await startNode({
    name,
    databaseUrl: pg.url,
    dir,
    secretKeyFile: keyFile,
    apiKey: API_KEY,
    leaseSeconds: LEASE_SECONDS,
    ...extra,
  });
  nodes.push(n);
  return n;
};

/**
 * A start that carries the hop's mark is started by the node it reached, not placed again
 * (http/start-placement.ts): the cases here need their instances on given nodes.
 */
const PINNED = { 'x-burrow-forwarded-by': 'test' };

async function startOn(n: NodeProcess): Promise<string> {
  const r = await n.api('/v1/start', { json: { instance_type: 'browser' }, headers: PINNED });
  expect(r.status, await r.clone().text()).toBe(200);
  return ((await r.json()) as { id: string }).id;
}

async function row(n: NodeProcess, id: string): Promise<{ status: string; end_reason?: string }> {
  const r = await n.api(`/v1/instance/${id}`);
  if (r.status !== 200) throw new Error(`GET ${id} through ${n.name}: ${r.status}`);
  return (await r.json()) as { status: string; end_reason?: string };
}

/**
 * A stand-in for a load balancer in front of the cluster: starts go to node 2 (so an instance
 * lands there), everything else to node 1. The bridge talks to it as to a Service.
 */
function balancer(): Promise<Server> {
  const server = createServer((req, res) => {
    const start = req.method === 'POST' && req.url === '/v1/start';
    const target = start ? two! : one;
    const out = request(
      `${target.url}${req.url}`,
      { method: req.method, headers: { ...req.headers, ...(start && PINNED) } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

beforeAll(async () => {
  pg = await startPostgres();
  dir = mkdtempSync(join(tmpdir(), 'burrow-death-'));
  keyFile = join(dir, 'secret.key');
  writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  const port1 = await freePort();
  const publicUrl = `http://127.0.0.1:${port1}`;
  // node 1 drains fast at SIGTERM (the last case); every cdp_url names node 1 (the public URL)
  // one after the other: slots go by order of joining (node-1's ids start inst_c001)
  one = await node('node-1', { port: port1, drainSeconds: 3 });
  two = await node('node-2', { publicUrl });
  lb = await balancer();
  lbUrl = `http://127.0.0.1:${(lb.address() as AddressInfo).port}`;
  db = await Database.open({ url: pg.url });
}, 90_000);

afterAll(async () => {
  await Promise.all(nodes.map((n) => killNode(n)));
  lb?.close();
  await db?.close();
  pg?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * A node's round trip as the machine answers it now, in milliseconds (the slowest of three
 * `/livez`): the margin of a bound on how soon a node acts, measured in the same run.
 */
async function roundTrip(n: NodeProcess): Promise<number> {
  const trips: number[] = [];
  for (let i = 0; i < 3; i++) {
    const began = performance.now();
    await (await fetch(`${n.url}/livez`)).text();
    trips.push(performance.now() - began);
  }
  return Math.max(...trips);
}

const states = async () =>
  Object.fromEntries(
    (await db.query<{ name: string; state: string }>('SELECT name, state FROM nodes')).rows.map(
      (r) => [r.name, r.state],
    ),
  );

describe('cluster nodes dying and draining', () => {
  let a1: string; // node 1's instance, driven throughout

  it('answers liveness and readiness without the key, and nothing else', async () => {
    for (const n of [one, two!]) {
      const live = await fetch(`${n.url}/livez`);
      expect([live.status, await live.text()]).toEqual([200, 'ok\n']);
      const ready = await fetch(`${n.url}/readyz`);
      expect([ready.status, await ready.text()]).toEqual([200, 'ok\n']);
      expect((await fetch(`${n.url}/v1/instances`)).status).toBe(401);
      expect((await fetch(`${n.url}/v1/node/drain`, { method: 'POST' })).status).toBe(401);
    }
    a1 = await startOn(one);
  });

  it('declares no node dead after PostgreSQL was away for longer than the lease', async () => {
    pg.pause();
    await sleep((LEASE_SECONDS * 2 + 1) * 1000);
    pg.resume();
    await db.query('SELECT 1').catch(() => {}); // the pool reconnects
    const trip = await roundTrip(one);
    // every lease looks expired now; the watches probe and find the nodes alive
    await sleep(LEASE_SECONDS * 2 * 1000);
    expect(await states()).toEqual({ 'node-1': 'up', 'node-2': 'up' });
    await eventually(
      async () => (await db.query('SELECT 1 FROM nodes WHERE lease_until < now()')).rowCount === 0,
      'every lease renewed',
      LEASE_SECONDS * 1000 + 10 * trip,
    );
    expect((await row(one, a1)).status).toBe('running');
  }, 40_000);

  it('declares a node lost exactly once, and only while its lease is expired', async () => {
    // a "node" that accepts connections and never answers: the running nodes' probes hang on it
    // (3 × 1 s), so the calls below race each other, not the watches
    const held: Socket[] = [];
    const silent = createTcpServer((sock) => held.push(sock));
    await new Promise<void>((ok) => silent.listen(0, '127.0.0.1', ok));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      await db.query(
        `INSERT INTO nodes (name, run, slot, url, capacity, free_slots, lease_until)
         VALUES ('ghost', 'r1', 99, $1, 4, 4, now() + interval '1 hour')`,
        [url],
      );
      const rowOf = (status: string) =>
        JSON.stringify({
          id: 'x',
          instance_type: 'browser',
          status,
          launch_time: '',
          resolution: [1, 1],
        });
      await db.query(
        `INSERT INTO instances (id, node, run, row) VALUES
           ('inst_ghost_live', 'ghost', 'r1', $1), ('inst_ghost_done', 'ghost', 'r1', $2),
           ('inst_ghost_old', 'ghost', 'r0', $1)`,
        [rowOf('running'), rowOf('terminated')],
      );
      // the lease still runs: nobody may declare it
      expect(await declareLost(db, 'ghost', 'r1')).toBeUndefined();
      await db.query(
        `UPDATE nodes SET lease_until = now() - interval '1 second' WHERE name = 'ghost'`,
      );
      const results = await Promise.all(
        Array.from({ length: 5 }, () => declareLost(db, 'ghost', 'r1')),
      );
      const acted = results.filter((r) => r !== undefined);
      expect(acted).toEqual([['inst_ghost_live']]);
      const rows = await db.query<{ id: string; status: string; end_reason: string | null }>(
        `SELECT id, row->>'status' AS status, row->>'end_reason' AS end_reason
         FROM instances WHERE node = 'ghost' ORDER BY id`,
      );
      expect(rows.rows).toEqual([
        { id: 'inst_ghost_done', status: 'terminated', end_reason: null },
        { id: 'inst_ghost_live', status: 'error', end_reason: 'node_lost' },
        { id: 'inst_ghost_old', status: 'running', end_reason: null }, // another run's
      ]);
      expect((await states()).ghost).toBe('lost');
    } finally {
      silent.close();
      for (const s of held) s.destroy();
      await db.query(`DELETE FROM instances WHERE node = 'ghost'`);
      await db.query(`DELETE FROM nodes WHERE name = 'ghost'`);
    }
  });

  it('kill -9 of node 2: node 1 goes on, node 2’s instance ends node_lost everywhere', async () => {
    // an instance on node 2, driven by the bridge through the "load balancer" and node 1
    const session = await openSession({ baseUrl: lbUrl, apiKey: API_KEY });
    const b1 = session.instance.id;
    expect(b1).toMatch(/^inst_c002/); // node 2's slot
    expect(session.cdpUrl).toContain(`127.0.0.1:${one.port}/cdp/`); // the public URL: through node 1
    const disconnected = new Promise<DisconnectedEvent>((ok) => session.once('disconnected', ok));
    expect(await session.page.evaluate(() => 6 * 7)).toBe(42);
    // a raw socket too: its close code and reason are what Playwright does not expose
    const raw = new WebSocket(session.cdpUrl);
    await new Promise((ok, fail) => raw.once('open', ok).once('error', fail));
    const rawClosed = new Promise<{ code: number; reason: string }>((ok) =>
      raw.once('close', (code, reason) => ok({ code, reason: reason.toString() })),
    );
    const pw = await chromium.connectOverCDP(session.cdpUrl);
    const pwClosed = new Promise<void>((ok) => pw.once('disconnected', () => ok()));

    // a bounded loop of requests to both instances, through node 1 and the balancer
    let failures = 0;
    let served = 0;
    let lostAfterMs: number | undefined;
    // the slowest round of requests in the same window is the margin of the bound below
    let slowest = 0;
    const killedAt = Date.now();
    two!.child.kill('SIGKILL');
    await two!.exited;
    while (Date.now() - killedAt < 60_000) {
      const began = performance.now();
      const [a, b, c] = await Promise.all([
        one.api(`/v1/instance/${a1}`),
        one.api(`/v1/instance/${a1}/screenshot`, { method: 'POST', json: {} }),
        one.api(`/v1/instance/${b1}`),
      ]);
      slowest = Math.max(slowest, performance.now() - began);
      for (const r of [a, b]) {
        if (r.status === 200) served++;
        else failures++;
      }
      await a.body?.cancel();
      await b.body?.cancel();
      if (c.status === 200) {
        const r = (await c.json()) as { status: string; end_reason?: string };
        if (r.status === 'error' && r.end_reason === 'node_lost') {
          lostAfterMs = Date.now() - killedAt;
          break;
        }
      } else {
        await c.body?.cancel();
      }
    }
    expect(failures).toBe(0);
    expect(served).toBeGreaterThan(4);
    // lease (3 s) + a third of it between looks + probes (refused at once here), and the
    // watch's own queries and this loop's look, each within three of its slowest rounds
    expect(lostAfterMs).toBeDefined();
    expect(lostAfterMs!, `slowest round ${slowest} ms`).toBeLessThan(
      (LEASE_SECONDS * 2 + 5) * 1000 + 3 * slowest,
    );

    expect(await rawClosed).toEqual({ code: 4001, reason: 'node_lost' });
    await pwClosed;
    const event = await disconnected;
    expect(event.reason).toMatch(
      new RegExp(`the node instance ${b1} (runs on does not answer|ran on was lost)`),
    );
    expect(event.willReconnect).toBe(false);
    // the bridge's reconnect is told the instance is gone, and why
    const failed = await session.reconnect().then(
      () => undefined,
      (err: Error) => err,
    );
    expect(failed?.message).toMatch(/gone: its node node-2 was lost/);
    // a new socket to it is refused with the same 410
    const again = new WebSocket(session.cdpUrl);
    const refusedWith = await new Promise<number | undefined>((ok) => {
      again.once('unexpected-response', (_req, res) => ok(res.statusCode));
      again.once('open', () => ok(undefined));
      again.once('error', () => {});
    });
    again.terminate();
    expect(refusedWith).toBe(410);
    // the operations of a lost instance answer 410, its row stays readable
    const shot = await one.api(`/v1/instance/${b1}/screenshot`, { method: 'POST', json: {} });
    expect(shot.status).toBe(410);
    expect(shot.headers.get('x-burrow-error')).toBe('instance_node_lost');
    const list = (await (await one.api('/v1/instances')).json()) as { id: string }[];
    expect(list.find((i) => i.id === b1)).toMatchObject({
      status: 'error',
      end_reason: 'node_lost',
    });
    expect((await states())['node-2']).toBe('lost');
    await session.stop().catch(() => {});

    // node 2 comes back under its name: a new run, nothing of the old one resurrected
    two = await node('node-2', { publicUrl: one.url });
    expect((await states())['node-2']).toBe('up');
    expect(await row(two, b1)).toMatchObject({ status: 'error', end_reason: 'node_lost' });
    expect(await row(one, b1)).toMatchObject({ status: 'error', end_reason: 'node_lost' });
    const owned = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM instances WHERE id = $1`,
      [b1],
    );
    expect(owned.rows[0]!.n).toBe(1);
  }, 90_000);

  it('burrow drain: readiness false at once, starts placed elsewhere, the open socket works on', async () => {
    const n2 = two!;
    const c1 = await startOn(n2);
    const { cdp_url } = (await (await n2.api(`/v1/instance/${c1}/browser/cdp_url`)).json()) as {
      cdp_url: string;
    };
    const browser = await chromium.connectOverCDP(cdp_url);
    const page = browser.contexts()[0]!.pages()[0] ?? (await browser.contexts()[0]!.newPage());
    expect(await page.evaluate(() => 1 + 1)).toBe(2);

    const cli = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'drain', '--base-url', n2.url],
      { cwd: root, env: { ...process.env, BURROW_API_KEY: API_KEY }, stdio: 'pipe' },
    );
    let said = '';
    cli.stdout.on('data', (d: Buffer) => (said += d.toString()));
    cli.stderr.on('data', (d: Buffer) => (said += d.toString()));
    expect(await new Promise((ok) => cli.once('exit', ok))).toBe(0);
    expect(said).toContain('is draining');

    expect((await fetch(`${n2.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${n2.url}/livez`)).status).toBe(200);
    // its row says `draining` once the drain's write landed: the CLI returns when the drain began,
    // and that write follows the pool's close (a read right away raced it on a slow machine)
    await eventually(
      async () => (await states())['node-2'] === 'draining',
      "node 2's row draining",
      30_000,
    );
    // a start through it is placed on another node; one that must stay there is refused
    const placed = await n2.api('/v1/start', { json: { instance_type: 'browser' } });
    expect(placed.status, await placed.clone().text()).toBe(200);
    const placedId = ((await placed.json()) as { id: string }).id;
    expect(placedId).toMatch(/^inst_c001/);
    await one.api(`/v1/instance/${placedId}/stop`, { method: 'POST', json: {} });
    const refused = await n2.api('/v1/start', {
      json: { instance_type: 'browser' },
      headers: PINNED,
    });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(refused.headers.get('x-burrow-error')).toBe('node_draining');
    expect((await states())['node-2']).toBe('draining');
    // starts go elsewhere: node 1 takes them
    const elsewhere = await startOn(one);
    expect(elsewhere).toMatch(/^inst_c001/);
    await one.api(`/v1/instance/${elsewhere}/stop`, { method: 'POST', json: {} });

    // the open socket keeps working while the node drains
    await page.goto('data:text/html,<title>still here</title>');
    expect(await page.title()).toBe('still here');
    expect(n2.child.exitCode).toBeNull();

    // its last instance stops (through node 1): the node leaves and exits 0
    expect((await one.api(`/v1/instance/${c1}/stop`, { method: 'POST', json: {} })).status).toBe(
      200,
    );
    await browser.close().catch(() => {});
    expect(await n2.exited).toBe(0);
    expect((await states())['node-2']).toBe('left');
    expect(await row(one, c1)).toMatchObject({ status: 'terminated', end_reason: 'stopped' });
  }, 60_000);

  it('a node declared lost while it runs stops its instances and fails liveness', async () => {
    const three = await node('node-3');
    const id = await startOn(three);
    const trip = await roundTrip(three);
    // what the others would have done while it was cut off from them and from the database
    await declareLost(db, 'node-3', 'none'); // another run's: no effect
    expect((await states())['node-3']).toBe('up');
    await db.query(`UPDATE nodes SET state = 'lost' WHERE name = 'node-3'`);
    // its next renewal (a third of the lease) is refused: it learns it, and a restart is the cure
    await eventually(
      async () => (await fetch(`${three.url}/livez`)).status === 503,
      'liveness 503',
      LEASE_SECONDS * 1000 + 2_000 + 10 * trip,
    );
    expect((await fetch(`${three.url}/readyz`)).status).toBe(503);
    await eventually(
      async () => (await row(three, id)).end_reason === 'node_lost',
      'its instance stopped',
      5_000 + 10 * trip,
    );
    expect((await row(three, id)).status).toBe('terminated');
    await killNode(three);
  }, 60_000);

  it('SIGTERM drains: past the deadline the instance ends node_drained, exit 0', async () => {
    expect((await row(one, a1)).status).toBe('running');
    const trip = await roundTrip(one);
    const began = Date.now();
    one.child.kill('SIGTERM');
    await eventually(
      async () => (await fetch(`${one.url}/readyz`).catch(() => undefined))?.status !== 200,
      'readiness false',
      2_000 + 10 * trip,
    );
    expect(await one.exited).toBe(0);
    expect(Date.now() - began).toBeGreaterThanOrEqual(3_000); // its drain deadline
    const r = await db.query<{ row: { status: string; end_reason: string } }>(
      'SELECT row FROM instances WHERE id = $1',
      [a1],
    );
    expect(r.rows[0]!.row).toMatchObject({ status: 'terminated', end_reason: 'node_drained' });
  }, 30_000);
});
