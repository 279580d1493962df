/**
 * Three burrow nodes as if on three machines (issue #22, "Tested for real, on one machine"):
 * each a `burrow serve --cluster` process in a network namespace of its own, PostgreSQL in
 * another, a client in a fifth, all on one bridge (test/helpers/netns-cluster.ts). The client's
 * requests, `cdp_url` and live-view sockets leave from the client's namespace.
 *
 * - the three nodes start at the same moment on an empty database and race its migrations;
 * - an instance is driven through the nodes that do not own it: HTTP with bodies both ways,
 *   Playwright over `cdp_url`, the live view's WebSocket; every node lists every instance;
 * - an auth state saved through one node applies to an instance on another, sealed in the
 *   database;
 * - forged ids and another cluster's answer 404 while the database cannot answer at all;
 * - after the harness's teardown no process it started and no namespace it made is left.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdSigner } from '../../../src/server/cluster/ids.js';
import { MIGRATIONS } from '../../../src/server/cluster/migrations.js';
import { netnsCluster, netnsPids, type NetnsCluster } from '../../helpers/netns-cluster.js';
import { instanceProcesses } from '../../helpers/server.js';

/** The advisory lock migrations take (database.ts): "burrow" in ASCII. */
const MIGRATION_LOCK = 0x6275_7272_6f77n;
/**
 * A start that carries the hop's mark is started by the node it reached, not placed again
 * (http/start-placement.ts): the cases that need an instance on a given node send it.
 */
const PINNED = { 'x-burrow-forwarded-by': 'test' };

let cluster: NetnsCluster;
/** How many nodes were seen waiting for the migration lock at once. */
let racers = 0;

beforeAll(async () => {
  cluster = await netnsCluster({ nodes: 3, leaseSeconds: 10, start: false });
  // the three nodes meet at the migration lock: held here until all three wait for it, so they
  // migrate an empty database at the same moment, not one after the other's start
  const holder = new pg.Client({ connectionString: cluster.pg.socketUrl });
  await holder.connect();
  try {
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK.toString()]);
    const started = Promise.all(cluster.nodes.map((n) => cluster.start(n)));
    started.catch(() => {}); // awaited below, after the lock is released
    const deadline = Date.now() + 90_000;
    while (racers < 3 && Date.now() < deadline) {
      const r = await holder.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`,
      );
      racers = r.rows[0]!.n;
      if (racers < 3) await new Promise((r) => setTimeout(r, 100));
    }
    await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK.toString()]);
    await started;
  } finally {
    await holder.end();
  }
}, 180_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

const nodeUrls = () => cluster.nodes.map((n) => n.url);

describe('a cluster of three nodes in network namespaces of their own', () => {
  it('three nodes raced the migrations of an empty database: all came up, each step applied once, no error', async () => {
    expect(racers).toBe(3);
    const versions = await cluster.query<{ version: number }>(
      'SELECT version FROM schema_version ORDER BY version',
    );
    expect(versions.map((v) => v.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
    const nodes = await cluster.query<{ name: string; url: string; state: string }>(
      'SELECT name, url, state FROM nodes ORDER BY name',
    );
    expect(nodes).toEqual(cluster.nodes.map((n) => ({ name: n.name, url: n.url, state: 'up' })));
    for (const n of cluster.nodes) {
      expect(n.log(), n.name).not.toMatch(/"level":(50|60)|^burrow: (?!warning)|Error:/m);
    }
    // each node answers at its own address, from the client's namespace
    const answers = await cluster.client(
      async (_lib, a: { urls: string[]; key: string }) =>
        Promise.all(
          a.urls.map(
            async (u) =>
              (await fetch(`${u}/v1/instances`, { headers: { 'x-api-key': a.key } })).status,
          ),
        ),
      { urls: nodeUrls(), key: cluster.apiKey },
    );
    expect(answers).toEqual([200, 200, 200]);
  });

  it('drives an ubuntu instance started on node 1 through the other two: get, bash, upload, download, stop', async () => {
    const key = cluster.apiKey;
    const id = await cluster.client(
      async ({ Burrow }, a: { url: string; key: string; pin: Record<string, string> }) => {
        // kept on node 1 (see PINNED)
        void Burrow;
        const res = await fetch(`${a.url}/v1/start`, {
          method: 'POST',
          headers: { 'x-api-key': a.key, 'content-type': 'application/json', ...a.pin },
          body: JSON.stringify({ instance_type: 'ubuntu' }),
        });
        return ((await res.json()) as { id: string }).id;
      },
      { url: cluster.nodes[0]!.url, key, pin: PINNED },
    );
    const owner = await cluster.ownerOf(id);
    expect(owner.name).toBe('node-1');
    const others = cluster.nodes.filter((n) => n !== owner).map((n) => n.url);
    expect(others).toHaveLength(2);

    const seen = await cluster.client(
      async ({ Burrow }, a: { id: string; others: string[]; all: string[]; key: string }) => {
        const [two, three] = a.others.map((u) => new Burrow({ baseUrl: u, apiKey: a.key }));
        try {
          const got = await two!.instances.get(a.id);
          const bash = await three!.instance.bash(a.id, {
            command: 'echo "on $(hostname)"; id -u',
          });
          const bytes = new Uint8Array(256 * 1024);
          for (let i = 0; i < bytes.length; i += 65536) {
            crypto.getRandomValues(bytes.subarray(i, i + 65536));
          }
          const up = await two!.instance.upload(a.id, {
            file: Buffer.from(bytes),
            filename: 'blob.bin',
            path: 'blob.bin',
          });
          const down = await three!.instance.file(a.id, {
            command: 'read',
            path: up.path,
            mode: 'binary',
          });
          const lists = await Promise.all(
            a.all.map(async (u) => {
              const b = new Burrow({ baseUrl: u, apiKey: a.key });
              try {
                return (await b.instances.list()).find((i) => i.id === a.id)?.status ?? null;
              } finally {
                await b.close();
              }
            }),
          );
          await three!.instances.stop(a.id);
          const after = await two!.instances.get(a.id);
          return {
            status: got.status,
            bash: bash.output,
            same: down.output === Buffer.from(bytes).toString('base64'),
            downloaded: down.output?.length ?? 0,
            lists,
            after: after.status,
          };
        } finally {
          await two!.close();
          await three!.close();
        }
      },
      { id, others, all: nodeUrls(), key },
    );
    expect(seen.status).toBe('running');
    expect(seen.bash).toMatch(/on burrow\s+1000/);
    expect(seen.downloaded).toBeGreaterThan(256 * 1024);
    expect(seen.same).toBe(true);
    expect(seen.lists).toEqual(['running', 'running', 'running']);
    expect(seen.after).toBe('terminated');
  }, 120_000);

  it('Playwright over cdp_url and the live view reach node 1’s browser through another node, from the client namespace', async () => {
    const key = cluster.apiKey;
    const id = await cluster.client(
      async ({ Burrow }, a: { url: string; key: string }) => {
        const b = new Burrow({ baseUrl: a.url, apiKey: a.key });
        try {
          return (await b.instances.start({ instance_type: 'browser' })).id;
        } finally {
          await b.close();
        }
      },
      { url: cluster.nodes[0]!.url, key },
    );
    const owner = await cluster.ownerOf(id);
    const [two, three] = cluster.nodes.filter((n) => n !== owner);
    // the cluster's public address leads to a node that does not own the instance
    await cluster.front(two!);
    try {
      const seen = await cluster.client(
        async ({ Burrow, chromium, WebSocket }, a: { id: string; via: string; key: string }) => {
          const b = new Burrow({ baseUrl: a.via, apiKey: a.key });
          try {
            const { cdp_url } = await b.browser.cdpUrl(a.id);
            const browser = await chromium.connectOverCDP(cdp_url);
            let title: string;
            let text: string | null;
            try {
              const context = browser.contexts()[0]!;
              const page = context.pages()[0] ?? (await context.newPage());
              await page.goto('data:text/html,<title>across the bridge</title><p id=x>42</p>');
              title = await page.title();
              text = await page.textContent('#x');
            } finally {
              await browser.close();
            }
            const { stream_url } = await b.instance.streamUrl(a.id);
            const pageStatus = (await fetch(stream_url)).status;
            const wsUrl = new URL(`ws${new URL(stream_url).search}`, stream_url);
            wsUrl.protocol = 'ws:';
            const frame = await new Promise<string>((resolve, reject) => {
              const ws = new WebSocket(wsUrl);
              const timer = setTimeout(() => {
                ws.terminate();
                reject(new Error('no frame within 20 s'));
              }, 20_000);
              ws.on('message', (data: Buffer, binary: boolean) => {
                if (!binary) return;
                clearTimeout(timer);
                ws.close();
                resolve(data.subarray(0, 2).toString('hex'));
              });
              ws.on('error', reject);
            });
            return { cdp_url, stream_url, title, text, pageStatus, frame };
          } finally {
            await b.close();
          }
        },
        { id, via: three!.url, key },
      );
      // the URLs carry the public address, never a node's
      expect(seen.cdp_url.startsWith(`${cluster.publicUrl.replace(/^http/, 'ws')}/`)).toBe(true);
      expect(seen.stream_url.startsWith(`${cluster.publicUrl}/`)).toBe(true);
      for (const n of cluster.nodes) expect(seen.cdp_url).not.toContain(n.address);
      expect(seen.title).toBe('across the bridge');
      expect(seen.text).toBe('42');
      expect(seen.pageStatus).toBe(200);
      expect(seen.frame).toBe('ffd8'); // a JPEG of the screencast
    } finally {
      await cluster.front(cluster.nodes[0]!);
      await cluster
        .client(
          async (_lib, a: { url: string; key: string; id: string }) => {
            await fetch(`${a.url}/v1/instance/${a.id}/stop`, {
              method: 'POST',
              headers: { 'x-api-key': a.key },
            });
          },
          { url: cluster.nodes[0]!.url, key, id },
        )
        .catch(() => {});
    }
  }, 120_000);

  it('an auth state saved through node 1 applies to an instance on node 2; the database holds no plaintext', async () => {
    const secret = `netns-cookie-${randomBytes(8).toString('hex')}`;
    const [one, two, three] = cluster.nodes;
    const seen = await cluster.client(
      async (
        { Burrow, chromium },
        a: {
          one: string;
          two: string;
          three: string;
          key: string;
          secret: string;
          pin: Record<string, string>;
        },
      ) => {
        const headers = { 'x-api-key': a.key, 'content-type': 'application/json' };
        const saved = await fetch(`${a.one}/v1/auth_states/import?name=netns`, {
          method: 'POST',
          headers,
          body: JSON.stringify({
            cookies: [{ name: 'sid', value: a.secret, domain: 'example.test', path: '/' }],
            origins: [],
          }),
        });
        const { auth_state_id } = (await saved.json()) as { auth_state_id: string };
        const b = new Burrow({ baseUrl: a.two, apiKey: a.key });
        try {
          // kept on node 2 (see PINNED)
          const started = await fetch(`${a.two}/v1/start`, {
            method: 'POST',
            headers: { ...headers, ...a.pin },
            body: JSON.stringify({ instance_type: 'browser' }),
          });
          const { id } = (await started.json()) as { id: string };
          // applied through the third node; node 2 learns of the state through NOTIFY
          let status = 0;
          for (let tries = 0; tries < 50 && status !== 200; tries++) {
            if (tries > 0) await new Promise((r) => setTimeout(r, 200));
            status = (
              await fetch(
                `${a.three}/v1/instance/${id}/browser/authenticate?auth_state_id=${auth_state_id}`,
                { method: 'POST', headers: { 'x-api-key': a.key } },
              )
            ).status;
          }
          const { cdp_url } = await b.browser.cdpUrl(id);
          const browser = await chromium.connectOverCDP(cdp_url);
          let cookies: { name: string; value: string; domain: string }[];
          try {
            cookies = await browser.contexts()[0]!.cookies();
          } finally {
            await browser.close();
          }
          await b.instances.stop(id);
          return { id, status, saved: saved.status, cookies };
        } finally {
          await b.close();
        }
      },
      { one: one!.url, two: two!.url, three: three!.url, key: cluster.apiKey, secret, pin: PINNED },
    );
    expect(seen.saved).toBe(200);
    expect((await cluster.ownerOf(seen.id)).name).toBe('node-2');
    expect(seen.status).toBe(200);
    expect(seen.cookies).toContainEqual(
      expect.objectContaining({ name: 'sid', value: secret, domain: 'example.test' }),
    );
    // every row of every table of the cluster, as text: the cookie is nowhere in it
    const tables = await cluster.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'burrow'`,
    );
    expect(tables.map((t) => t.table_name)).toContain('auth_states');
    let rows = 0;
    for (const { table_name } of tables) {
      for (const r of await cluster.query<{ t: string }>(
        `SELECT t::text AS t FROM burrow.${table_name} t`,
      )) {
        rows++;
        expect(r.t, table_name).not.toContain(secret);
      }
    }
    expect(rows).toBeGreaterThan(0);
  }, 120_000);

  it('forged ids and another cluster’s answer 404 at once while the database cannot answer; a real id still reaches its owner', async () => {
    const key = cluster.apiKey;
    const one = cluster.nodes[0]!;
    const id = await cluster.client(
      async (_lib, a: { url: string; key: string }) => {
        const res = await fetch(`${a.url}/v1/start`, {
          method: 'POST',
          headers: { 'x-api-key': a.key, 'content-type': 'application/json' },
          body: JSON.stringify({ instance_type: 'ubuntu' }),
        });
        return ((await res.json()) as { id: string }).id;
      },
      { url: one.url, key },
    );
    const owner = await cluster.ownerOf(id);
    const slot = parseInt(id.slice(6, 9), 16);
    // an id of the right shape for a real slot, with a made-up tag; and one another cluster
    // (another secret) made for the same slot
    const forged = `inst_c${id.slice(6, 9)}${randomBytes(16).toString('hex')}`;
    const foreign = new IdSigner(randomBytes(32)).mint(slot);
    // the database stops answering (its processes stopped: connections hang, nothing refused)
    cluster.pg.freeze();
    let seen;
    try {
      seen = await cluster.client(
        async (
          _lib,
          a: {
            urls: string[];
            key: string;
            forged: string;
            foreign: string;
            id: string;
            via: string;
          },
        ) => {
          const timed = async (url: string, init: RequestInit = {}) => {
            const t0 = performance.now();
            const res = await fetch(url, {
              ...init,
              headers: { 'x-api-key': a.key, 'content-type': 'application/json' },
            });
            const body = await res.text();
            return {
              status: res.status,
              error: res.headers.get('x-burrow-error'),
              ms: performance.now() - t0,
              body,
            };
          };
          const refused = [];
          for (const u of a.urls) {
            for (const bad of [a.forged, a.foreign]) {
              refused.push(await timed(`${u}/v1/instance/${bad}`));
              refused.push(
                await timed(`${u}/v1/instance/${bad}/bash`, {
                  method: 'POST',
                  body: JSON.stringify({ command: 'true' }),
                }),
              );
            }
          }
          // routing a real id needs no query either: it goes to its owner, which runs it
          const bash = await timed(`${a.via}/v1/instance/${a.id}/bash`, {
            method: 'POST',
            body: JSON.stringify({ command: 'echo routed' }),
          });
          // what does need the database waits for it: a start gives up after its 2 s
          const start = await timed(`${a.urls[0]}/v1/start`, {
            method: 'POST',
            body: JSON.stringify({ instance_type: 'browser' }),
          });
          return { refused, bash, start };
        },
        {
          urls: nodeUrls(),
          key,
          forged,
          foreign,
          id,
          via: cluster.nodes.find((n) => n !== owner)!.url,
        },
      );
    } finally {
      cluster.pg.thaw();
    }
    expect(seen.refused).toHaveLength(12);
    for (const r of seen.refused) {
      expect(r).toMatchObject({ status: 404, error: 'instance_not_found' });
      expect(r.ms).toBeLessThan(1000); // a query would have waited for the thaw
    }
    expect(seen.bash.status).toBe(200);
    expect(seen.bash.body).toContain('routed');
    expect(seen.start.status).toBe(503);
    expect(seen.start.ms).toBeGreaterThan(1500);
    await cluster.client(
      async (_lib, a: { url: string; key: string; id: string }) => {
        await fetch(`${a.url}/v1/instance/${a.id}/stop`, {
          method: 'POST',
          headers: { 'x-api-key': a.key },
        });
      },
      { url: one.url, key, id },
    );
  }, 120_000);

  it('every node lists every node’s instances', async () => {
    const seen = await cluster.client(
      async (_lib, a: { urls: string[]; key: string; pin: Record<string, string> }) => {
        // one kept on each node (see PINNED)
        const headers = { 'x-api-key': a.key, 'content-type': 'application/json', ...a.pin };
        const ids = await Promise.all(
          a.urls.map(async (u) => {
            const res = await fetch(`${u}/v1/start`, {
              method: 'POST',
              headers,
              body: JSON.stringify({ instance_type: 'browser' }),
            });
            return ((await res.json()) as { id: string }).id;
          }),
        );
        const lists = await Promise.all(
          a.urls.map(async (u) => {
            const res = await fetch(`${u}/v1/instances`, { headers });
            return ((await res.json()) as { id: string; status: string }[])
              .filter((i) => i.status === 'running')
              .map((i) => i.id)
              .sort();
          }),
        );
        return { ids, lists };
      },
      { urls: nodeUrls(), key: cluster.apiKey, pin: PINNED },
    );
    const owners = await Promise.all(seen.ids.map((id) => cluster.ownerOf(id)));
    expect(new Set(owners.map((o) => o.name)).size).toBe(3); // one on each node
    for (const list of seen.lists) expect(list).toEqual(expect.arrayContaining(seen.ids));
    // left running: the teardown below must end them
  }, 120_000);

  it('drain of node 3 with an open socket: the socket works on, readiness is false, starts go elsewhere, then it exits 0', async () => {
    const [one, , three] = cluster.nodes;
    await cluster.front(one!); // the public URL (cdp_url's) leads to node 1, which forwards
    const exited = new Promise<number | null>((ok) => three!.child!.once('exit', (c) => ok(c)));
    // what node 3 still runs from the cases above: a drain waits for those too
    const earlier = (
      await cluster.query<{ id: string }>(
        `SELECT id FROM instances WHERE node = 'node-3' AND row->>'status' IN ('running', 'deploying', 'paused')`,
      )
    ).map((r) => r.id);
    const seen = await cluster.client(
      async (
        { WebSocket },
        a: {
          one: string;
          three: string;
          key: string;
          pin: Record<string, string>;
          earlier: string[];
        },
      ) => {
        const headers = { 'x-api-key': a.key, 'content-type': 'application/json' };
        const start = async (url: string, pin: Record<string, string>) => {
          const res = await fetch(`${url}/v1/start`, {
            method: 'POST',
            headers: { ...headers, ...pin },
            body: JSON.stringify({ instance_type: 'browser' }),
          });
          return { status: res.status, id: ((await res.json()) as { id?: string }).id ?? '' };
        };
        const mine = await start(a.three, a.pin);
        const { cdp_url } = (await (
          await fetch(`${a.one}/v1/instance/${mine.id}/browser/cdp_url`, { headers })
        ).json()) as { cdp_url: string };
        const ws = new WebSocket(cdp_url);
        await new Promise((ok, fail) => ws.once('open', ok).once('error', fail));
        let seq = 0;
        const ask = (method: string) =>
          new Promise<string>((ok, fail) => {
            const id = ++seq;
            const timer = setTimeout(() => fail(new Error(`${method}: no answer`)), 10_000);
            const on = (data: Buffer) => {
              const m = JSON.parse(data.toString()) as { id?: number; result?: object };
              if (m.id !== id) return;
              clearTimeout(timer);
              ws.off('message', on);
              ok(JSON.stringify(m.result ?? m));
            };
            ws.on('message', on);
            ws.send(JSON.stringify({ id, method }));
          });
        const before = await ask('Browser.getVersion');
        const drain = await fetch(`${a.three}/v1/node/drain`, { method: 'POST', headers });
        const ready = (await fetch(`${a.three}/readyz`)).status;
        const live = (await fetch(`${a.three}/livez`)).status;
        // a start through the draining node is placed on another
        const placed = await start(a.three, {});
        const during = await ask('Browser.getVersion');
        await fetch(`${a.one}/v1/instance/${placed.id}/stop`, { method: 'POST', headers });
        // its last instances end: the node leaves and exits
        for (const id of [mine.id, ...a.earlier]) {
          await fetch(`${a.one}/v1/instance/${id}/stop`, { method: 'POST', headers });
        }
        ws.terminate();
        return {
          mine: mine.id,
          placed,
          drain: drain.status,
          ready,
          live,
          before: before.includes('Chrome'),
          during: during.includes('Chrome'),
        };
      },
      { one: one!.url, three: three!.url, key: cluster.apiKey, pin: PINNED, earlier },
    );
    expect((await cluster.ownerOf(seen.mine)).name).toBe('node-3');
    expect(seen.drain).toBe(202);
    expect(seen.ready).toBe(503);
    expect(seen.live).toBe(200);
    expect(seen.before).toBe(true);
    expect(seen.during).toBe(true); // the open socket works on while the node drains
    expect(seen.placed.status).toBe(200);
    expect((await cluster.ownerOf(seen.placed.id)).name).not.toBe('node-3');
    expect(await exited).toBe(0);
    const rows = await cluster.query<{ state: string }>(
      `SELECT state FROM nodes WHERE name = 'node-3'`,
    );
    expect(rows[0]?.state).toBe('left');
    await cluster.start(three!); // back for the cases below
  }, 120_000);

  it('PostgreSQL stopped for 20 s: running instances go on, starts answer 503 with Retry-After, no node is declared dead after', async () => {
    const [one, two, three] = cluster.nodes;
    const id = await cluster.client(
      async (_lib, a: { one: string; key: string; pin: Record<string, string> }) => {
        const res = await fetch(`${a.one}/v1/start`, {
          method: 'POST',
          headers: { 'x-api-key': a.key, 'content-type': 'application/json', ...a.pin },
          body: JSON.stringify({ instance_type: 'browser' }),
        });
        const body = (await res.json()) as { id?: string };
        if (!body.id) throw new Error(`start: ${res.status} ${JSON.stringify(body)}`);
        return body.id;
      },
      { one: one!.url, key: cluster.apiKey, pin: PINNED },
    );
    cluster.pg.pause();
    let seen: { gets: number[]; start: { status: number; retryAfter: string | null } };
    try {
      seen = await cluster.client(
        async (_lib, a: { urls: string[]; id: string; key: string }) => {
          const headers = { 'x-api-key': a.key, 'content-type': 'application/json' };
          const gets: number[] = [];
          const began = Date.now();
          let start = { status: 0, retryAfter: null as string | null };
          while (Date.now() - began < 20_000) {
            for (const u of a.urls) {
              const shot = await fetch(`${u}/v1/instance/${a.id}/screenshot`, {
                method: 'POST',
                headers: { 'x-api-key': a.key },
              });
              gets.push(shot.status);
            }
            if (!start.status) {
              const r = await fetch(`${a.urls[1]}/v1/start`, {
                method: 'POST',
                headers,
                body: JSON.stringify({ instance_type: 'browser' }),
              });
              start = { status: r.status, retryAfter: r.headers.get('retry-after') };
            }
            await new Promise((r) => setTimeout(r, 500));
          }
          return { gets, start };
        },
        { urls: [one!.url, two!.url, three!.url], id, key: cluster.apiKey },
      );
    } finally {
      cluster.pg.resume();
    }
    expect(seen.gets.length).toBeGreaterThan(10);
    expect(new Set(seen.gets)).toEqual(new Set([200]));
    expect(seen.start.status).toBe(503);
    expect(Number(seen.start.retryAfter)).toBeGreaterThan(0);
    // leases all ran out meanwhile: a look (a third of the lease) and the probes find them alive
    await new Promise((r) => setTimeout(r, 8_000));
    const states = await cluster.query<{ name: string; state: string }>(
      `SELECT name, state FROM nodes ORDER BY name`,
    );
    expect(states.map((r) => r.state)).toEqual(['up', 'up', 'up']);
    await cluster.client(
      async (_lib, a: { one: string; id: string; key: string }) => {
        await fetch(`${a.one}/v1/instance/${a.id}/stop`, {
          method: 'POST',
          headers: { 'x-api-key': a.key },
        });
      },
      { one: one!.url, id, key: cluster.apiKey },
    );
  }, 120_000);

  it('kill -9 of node 2 under load: the others answer every request, node 2’s instance reads node_lost on every node, its socket through node 1 closes with 4001', async () => {
    const [one, two, three] = cluster.nodes;
    await cluster.front(one!); // the public URL (cdp_url's) leads to node 1
    const ids = await cluster.client(
      async (_lib, a: { one: string; two: string; key: string; pin: Record<string, string> }) => {
        const start = async (url: string) => {
          const res = await fetch(`${url}/v1/start`, {
            method: 'POST',
            headers: { 'x-api-key': a.key, 'content-type': 'application/json', ...a.pin },
            body: JSON.stringify({ instance_type: 'browser' }),
          });
          return ((await res.json()) as { id: string }).id;
        };
        return { onOne: await start(a.one), onTwo: await start(a.two) };
      },
      { one: one!.url, two: two!.url, key: cluster.apiKey, pin: PINNED },
    );
    expect((await cluster.ownerOf(ids.onOne)).name).toBe('node-1');
    expect((await cluster.ownerOf(ids.onTwo)).name).toBe('node-2');

    // in the client: a CDP socket to node 2's browser through node 1, and a bounded loop of
    // requests for node 1's instance through nodes 1 and 3 until node 2's reads node_lost on both
    const load = cluster.client(
      async (
        { WebSocket },
        a: { ids: { onOne: string; onTwo: string }; via: string[]; key: string },
      ) => {
        const headers = { 'x-api-key': a.key };
        const res = await fetch(`${a.via[0]}/v1/instance/${a.ids.onTwo}/browser/cdp_url`, {
          headers,
        });
        const { cdp_url } = (await res.json()) as { cdp_url: string };
        const ws = new WebSocket(cdp_url);
        await new Promise((ok, fail) => ws.once('open', ok).once('error', fail));
        const closed = new Promise<{ code: number; reason: string; at: number }>((ok) =>
          ws.once('close', (code: number, reason: Buffer) =>
            ok({ code, reason: reason.toString(), at: Date.now() }),
          ),
        );
        const began = Date.now();
        let total = 0;
        const failures: string[] = [];
        const lost: Record<string, { status: string; end_reason?: string; at: number }> = {};
        while (Date.now() - began < 45_000 && Object.keys(lost).length < a.via.length) {
          for (const via of a.via) {
            total++;
            try {
              const r = await fetch(`${via}/v1/instance/${a.ids.onOne}`, { headers });
              if (r.status !== 200) failures.push(`${via}: ${r.status}`);
            } catch (err) {
              failures.push(`${via}: ${(err as Error).message}`);
            }
            if (!lost[via]) {
              const r = await fetch(`${via}/v1/instance/${a.ids.onTwo}`, { headers }).catch(
                () => undefined,
              );
              const row = r?.status === 200 ? ((await r.json()) as { status: string }) : undefined;
              if (row?.status === 'error') lost[via] = { ...row, at: Date.now() };
            }
          }
          await new Promise((r) => setTimeout(r, 50));
        }
        const close = await Promise.race([
          closed,
          new Promise((r) => setTimeout(() => r(undefined), 5_000)),
        ]);
        ws.terminate();
        return { total, failures, lost, close, began };
      },
      { ids, via: [one!.url, three!.url], key: cluster.apiKey },
    );
    await new Promise((r) => setTimeout(r, 3_000)); // the loop runs against a healthy cluster first
    const killedAt = Date.now();
    await cluster.kill(two!, 'SIGKILL');
    const seen = await load;

    expect(seen.failures).toEqual([]);
    expect(seen.total).toBeGreaterThan(20);
    for (const via of [one!.url, three!.url]) {
      expect(seen.lost[via]).toMatchObject({ status: 'error', end_reason: 'node_lost' });
    }
    // within the lease (10 s), a third of it for the next look, and the probes
    const lostAfter = Math.max(...Object.values(seen.lost).map((l) => l.at)) - killedAt;
    expect(lostAfter).toBeLessThan(25_000);
    console.log(
      `kill -9 of node 2: node_lost seen on both other nodes after ${lostAfter} ms; ${seen.total} requests to node 1's instance, ${seen.failures.length} failed`,
    );
    expect(seen.close).toMatchObject({ code: 4001, reason: 'node_lost' });
    // node 1's instance is left running: the teardown below must end it
  }, 120_000);

  it('after teardown no process the harness started and no namespace it made is left', async () => {
    const nodePids = cluster.nodes.map((n) => n.child!.pid!);
    const instances = nodePids.flatMap((pid) => instanceProcesses(undefined, pid));
    const inNamespaces = cluster.namespaces.flatMap(netnsPids);
    expect(instances.length).toBeGreaterThan(0); // the browsers just started
    // nodes, client, front, PostgreSQL and its backends
    expect(inNamespaces.length).toBeGreaterThan(cluster.nodes.length + 2);
    const all = [...new Set([...nodePids, ...instances, ...inNamespaces])];

    await cluster.close();

    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    // an instance's processes go with their pid namespace's init: give the kernel a moment
    const deadline = Date.now() + 10_000;
    while (all.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(all.filter(alive)).toEqual([]);
    for (const pid of nodePids) expect(instanceProcesses(undefined, pid)).toEqual([]);
    for (const ns of cluster.namespaces) expect(existsSync(`/run/netns/${ns}`), ns).toBe(false);
    expect(existsSync(cluster.pg.dir)).toBe(false);
  }, 60_000);
});
