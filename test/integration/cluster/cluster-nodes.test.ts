/**
 * Two burrow nodes on one real PostgreSQL (cluster mode): an instance started on node 1 is
 * listed, driven and stopped through node 2 — HTTP operations with bodies both ways, and a
 * Playwright `connectOverCDP` through node 2's port — an auth state saved through node 1 is
 * read on node 2, the database holds it sealed, and a forged id is refused by node 2 without
 * reaching node 1.
 *
 * The nodes run in this process on loopback ports; cluster-netns.test.ts runs them as separate
 * processes in network namespaces of their own.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../../src/client/index.js';
import { Database } from '../../../src/server/cluster/database.js';
import { type TestPostgres } from '../../helpers/postgres.js';
import { handshakeStatus } from '../../helpers/handshake.js';
import { eventually, type TestServer } from '../../helpers/server.js';
import { useCluster } from '../../helpers/use-cluster.js';

const cluster = useCluster(2, { timeout: 60_000 });
let pg: TestPostgres;
let one: TestServer;
let two: TestServer;
let viaOne: Burrow;
let viaTwo: Burrow;

beforeAll(() => {
  pg = cluster.pg;
  [one, two] = cluster.nodes as [TestServer, TestServer];
  viaOne = new Burrow({ baseUrl: one.url, apiKey: one.apiKey });
  viaTwo = new Burrow({ baseUrl: two.url, apiKey: two.apiKey });
}, 60_000);

afterAll(async () => {
  await viaOne?.close();
  await viaTwo?.close();
});

describe('a cluster of two nodes', () => {
  it('drives node 1’s browser instance through node 2: HTTP and cdp_url', async () => {
    const { id } = await viaOne.instances.start({ instance_type: 'browser' });
    expect(id).toMatch(/^inst_c001[0-9a-f]{32}$/); // node 1's slot in the id
    try {
      const listed = await viaTwo.instances.list();
      expect(listed.find((i) => i.id === id)).toMatchObject({ status: 'running' });

      const shot = await viaTwo.instance.screenshot(id);
      expect(Buffer.from(shot.base64_image, 'base64').subarray(1, 4).toString()).toBe('PNG');

      // the cdp_url through node 2's port reaches node 1's browser
      const { cdp_url } = await viaTwo.browser.cdpUrl(id);
      const through = cdp_url.replace(new URL(one.url).host, new URL(two.url).host);
      expect(through).toContain(new URL(two.url).host);
      const browser = await chromium.connectOverCDP(through);
      try {
        const page = browser.contexts()[0]!.pages()[0] ?? (await browser.contexts()[0]!.newPage());
        await page.goto('data:text/html,<title>through node 2</title><p id=x>42</p>');
        expect(await page.title()).toBe('through node 2');
        expect(await page.textContent('#x')).toBe('42');
      } finally {
        await browser.close();
      }

      await viaTwo.instances.stop(id);
      await eventually(
        async () =>
          (await viaOne.instances.list()).find((i) => i.id === id)?.status === 'terminated',
        'node 1 to see the stop made through node 2',
        15_000,
      );
    } finally {
      await viaOne.instances.stop(id).catch(() => {});
    }
  }, 120_000);

  it('runs bash and moves files of node 1’s ubuntu instance through node 2', async () => {
    const { id } = await viaOne.instances.start({ instance_type: 'ubuntu' });
    try {
      const r = await viaTwo.instance.bash(id, { command: 'echo "from $(hostname)"; id -u' });
      expect(r.output).toContain('from burrow');
      const content = randomBytes(256 * 1024); // streamed through node 2 to the owner
      const up = await viaTwo.instance.upload(id, {
        file: content,
        filename: 'blob.bin',
        path: 'blob.bin',
      });
      const sum = await viaOne.instance.bash(id, { command: `sha256sum ${up.path}` });
      const { createHash } = await import('node:crypto');
      expect(sum.output).toContain(createHash('sha256').update(content).digest('hex'));
    } finally {
      await viaTwo.instances.stop(id).catch(() => {});
    }
  }, 120_000);

  it('an instance reaches neither the database nor any node, even where host ports are open', async () => {
    // the test servers let instances reach every loopback port (tests serve pages there)
    const site = createServer((_q, s) => s.end('<title>site</title>'));
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    const sitePort = (site.address() as AddressInfo).port;
    const { id } = await viaOne.instances.start({ instance_type: 'browser' });
    try {
      const { cdp_url } = await viaOne.browser.cdpUrl(id);
      const browser = await chromium.connectOverCDP(cdp_url);
      try {
        const page = await browser.contexts()[0]!.newPage();
        await page.goto(`http://127.0.0.1:${sitePort}/`);
        expect(await page.title()).toBe('site');
        for (const url of [
          `${two.url}/v1/instances`, // another node
          `http://127.0.0.1:${pg.port}/`, // the cluster's database
        ]) {
          const failed = await page.goto(url).then(
            () => 'loaded',
            (err: Error) => err.message.split('\n')[0]!,
          );
          expect(failed, url).toContain('net::ERR_CONNECTION_REFUSED');
        }
      } finally {
        await browser.close();
      }
    } finally {
      await viaOne.instances.stop(id).catch(() => {});
      site.close();
    }
  }, 120_000);

  it('refuses a forged or foreign id on node 2 with a 404, and never forwards it', async () => {
    const forged = `inst_c001${randomBytes(16).toString('hex')}`;
    const res = await two.api(`/v1/instance/${forged}/screenshot`, { method: 'POST', json: {} });
    expect(res.status).toBe(404);
    expect(res.headers.get('x-burrow-error')).toBe('instance_not_found');
    // a single-node id is the answering node's own: 404 there, not forwarded
    const single = await two.api('/v1/instance/inst_0123456789abcdef', {});
    expect(single.status).toBe(404);
    // the routes that need no key answer an id nobody has as a wrong token: they do not say
    // which ids exist (a live one answers the same without its token)
    const live = (await (
      await one.api('/v1/start', { json: { instance_type: 'ubuntu' } })
    ).json()) as {
      id: string;
    };
    try {
      for (const id of [forged, 'inst_0123456789abcdef', live.id]) {
        for (const node of [one, two]) {
          const page = await fetch(`${node.url}/stream/${id}/?token=guess`);
          expect([page.status, page.headers.get('x-burrow-error')], id).toEqual([
            401,
            'token_invalid',
          ]);
          const ws = `${node.url.replace(/^http/, 'ws')}/cdp/${id}/devtools/browser/x?token=guess`;
          expect(await handshakeStatus(ws), id).toBe(401);
        }
      }
    } finally {
      await one.api(`/v1/instance/${live.id}/stop`, { method: 'POST' });
    }
  });

  it('reads an auth state saved through node 1 on node 2; the database holds it sealed', async () => {
    const state = {
      cookies: [{ name: 'sid', value: 'cluster-secret-cookie', domain: '127.0.0.1', path: '/' }],
      origins: [],
    };
    const res = await one.api('/v1/auth_states/import?name=shared', { json: state });
    expect(res.status).toBe(200);
    const { auth_state_id } = (await res.json()) as { auth_state_id: string };
    await eventually(
      async () =>
        ((await (await two.api('/v1/auth_states')).json()) as { id: string }[]).some(
          (s) => s.id === auth_state_id,
        ),
      'node 2 to list the state node 1 saved',
      10_000,
    );
    const back = await two.api(`/v1/auth_states/${auth_state_id}/storage_state`);
    expect(((await back.json()) as typeof state).cookies[0]?.value).toBe('cluster-secret-cookie');
    const db = await Database.open({ url: pg.url });
    try {
      const rows = await db.query<{ sealed: string }>('SELECT sealed FROM auth_states');
      expect(rows.rows.length).toBeGreaterThan(0);
      for (const r of rows.rows) expect(r.sealed).not.toContain('cluster-secret-cookie');
    } finally {
      await db.close();
    }
  });
  // last: it restarts the database under the nodes (cluster-placement.test.ts checks that
  // NOTIFY works again after a restart)
  it('with the database stopped, running instances go on and starts answer 503; then starts work again', async () => {
    const { id } = await viaOne.instances.start({ instance_type: 'ubuntu' });
    const { id: stopped } = await viaOne.instances.start({ instance_type: 'ubuntu' });
    const unavailable = (res: Response) => {
      expect(res.status).toBe(503);
      expect(res.headers.get('x-burrow-error')).toBe('cluster_database_unavailable');
      expect(res.headers.get('retry-after')).toBe('5');
    };
    pg.pause();
    try {
      const r = await viaOne.instance.bash(id, { command: 'echo still-running' });
      expect(r.output).toContain('still-running');
      unavailable(await one.api('/v1/start', { json: { instance_type: 'browser' } }));
      // an instance that exists is never a 404: its node answers for it, through either node
      for (const node of [one, two]) {
        const res = await node.api(`/v1/instance/${id}`);
        expect(res.status, `GET through ${node.url}`).toBe(200);
        expect(((await res.json()) as { status: string }).status).toBe('running');
      }
      // what no node can know without the database is a 503 to retry, not a 404 nor a 500
      unavailable(await one.api('/v1/instance/inst_0123456789abcdef'));
      unavailable(await one.api('/v1/instances'));
      // a stop is the node's own business; the row it leaves waits for the database
      expect((await one.api(`/v1/instance/${stopped}/stop`, { method: 'POST' })).status).toBe(200);
      const after = await two.api(`/v1/instance/${stopped}`);
      expect(((await after.json()) as { status: string }).status).toBe('terminated');
    } finally {
      pg.resume();
    }
    // the database back: the row the stop left is written, and every node reads it there
    await eventually(
      async () =>
        (await viaTwo.instances.list()).find((i) => i.id === stopped)?.status === 'terminated',
      'the stopped instance listed as terminated once the database is back',
      60_000,
    );
    // the database back: starts work again
    await eventually(
      async () =>
        (await one.api('/v1/start', { json: { instance_type: 'browser' } })).status === 200,
      'a start once the database is back',
      30_000,
    );
    for (const i of await viaOne.instances.list()) {
      if (i.status === 'running') await viaOne.instances.stop(i.id).catch(() => {});
    }
  }, 180_000);
});
