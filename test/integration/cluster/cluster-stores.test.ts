/**
 * Extensions and persistent profiles shared by the nodes of a cluster, on two real nodes (in this
 * process, on loopback ports) on one real PostgreSQL, with a real Chromium:
 *
 * - an extension uploaded through node 1 is listed by node 2, and an instance started on node 2
 *   runs it (its content script in the page, its header at the site); node 2 unpacked it into
 *   its cache on demand; a delete through node 1 empties node 2's cache and its starts are 404
 *   (and so does a delete node 2 did not hear of, at its next start naming the extension);
 *   an archive whose bytes no longer match their digest is not unpacked;
 * - a profile saved by an instance on node 1 (its page's localStorage) is restored on node 2;
 *   the table holds sealed bytes only; while held, a start or a delete through the other node is
 *   the same 409 naming the holder; two starts at once through the two nodes: exactly one wins;
 *   a hold of a node declared lost (death.ts) no longer counts;
 * - a project's key sees and uses its project's profiles only: another project's answers the
 *   unknown name's 404, and its name is a new profile for the other project; the admin sees all.
 *
 * Instances are kept on a given node by the hop's mark (PINNED): the cases are about which node
 * holds what.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../../src/client/index.js';
import { Database } from '../../../src/server/cluster/database.js';
import { declareLost } from '../../../src/server/cluster/death.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { instanceProcesses, testServer, type TestServer } from '../../helpers/server.js';
import { makeZip, testExtension } from '../../helpers/zip.js';

/** A start carrying the hop's mark is started by the node it reached (start-placement.ts). */
const PINNED = { 'x-burrow-forwarded-by': 'test' };

let pg: TestPostgres;
let db: Database;
let dir: string;
let one: TestServer;
let two: TestServer;
let admin: Burrow;
let site: Server;
let origin = '';
/** path → the `x-burrow-ext` header its request carried (or `-`). */
const seen = new Map<string, string>();

/** Sets a cookie and localStorage on /login; / shows both. */
const PAGE = `<!doctype html><title>site</title><body><p id="status">checking</p><script>
if (location.pathname === '/login') {
  const token = new URLSearchParams(location.search).get('t');
  document.cookie = 'session=' + token + '; max-age=86400; path=/';
  localStorage.setItem('token', token);
  document.getElementById('status').textContent = 'stored';
} else {
  const cookie = (document.cookie.match(/session=([^;]+)/) || [])[1] || 'none';
  document.getElementById('status').textContent =
    'cookie ' + cookie + ' / local ' + (localStorage.getItem('token') || 'none');
}
</script></body>`;

beforeAll(async () => {
  pg = await startPostgres();
  dir = mkdtempSync(join(tmpdir(), 'burrow-stores-'));
  const secret = join(dir, 'secret.key');
  writeFileSync(secret, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  const node = (name: string) =>
    testServer({
      dataDir: join(dir, name),
      secretKeyFile: secret,
      warmPool: 0,
      cluster: { databaseUrl: pg.url, nodeName: name, leaseSeconds: 5 },
    });
  one = await node('node-1');
  two = await node('node-2');
  db = await Database.open({ url: pg.url });
  admin = new Burrow({ baseUrl: one.url, apiKey: one.apiKey, maxRetries: 0 });
  site = createServer((req, res) => {
    const header = req.headers['x-burrow-ext'];
    seen.set(req.url ?? '', typeof header === 'string' ? header : '-');
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(PAGE);
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
}, 90_000);

afterAll(async () => {
  await admin?.close();
  for (const n of [one, two]) await n?.close();
  await db?.close();
  pg?.stop();
  if (site) await new Promise((r) => site.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
  expect(instanceProcesses()).toEqual([]);
});

/** Starts a browser on `node` itself, with `key` (default the admin's); the raw answer. */
function startOn(node: TestServer, body: object, key?: string): Promise<Response> {
  return node.api('/v1/start', {
    json: { instance_type: 'browser', ...body },
    headers: { ...PINNED, ...(key && { 'x-api-key': key }) },
  });
}

async function started(res: Response): Promise<string> {
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

async function nodeOf(id: string): Promise<string> {
  const r = await db.query<{ node: string }>('SELECT node FROM instances WHERE id = $1', [id]);
  return r.rows[0]!.node;
}

async function stop(node: TestServer, id: string): Promise<void> {
  const r = await node.api(`/v1/instance/${id}/stop`, { method: 'POST' });
  expect(r.status, await r.clone().text()).toBe(200);
}

/** Opens `path` in instance `id` (through `node`); the page's `#status` once it is set. */
async function visit(node: TestServer, id: string, path: string): Promise<string> {
  const cdp = await node.api(`/v1/instance/${id}/browser/cdp_url`);
  const { cdp_url } = (await cdp.json()) as { cdp_url: string };
  const browser = await chromium.connectOverCDP(cdp_url);
  try {
    const page = await browser.contexts()[0]!.newPage();
    const began = performance.now();
    await page.goto(`${origin}${path}`);
    // its script runs at the pace the page loaded at (was: vitest's default second)
    const loadMs = performance.now() - began;
    await expect
      .poll(() => page.textContent('#status'), { timeout: 1_000 + 10 * loadMs })
      .not.toBe('checking');
    const status = (await page.textContent('#status')) ?? '';
    const ext = await page.getAttribute('body', 'data-burrow-ext');
    await page.close();
    return ext ? `${status} [ext ${ext}]` : status;
  } finally {
    await browser.close().catch(() => {});
  }
}

type Listed = { name: string; in_use_by: string | null; project?: string; updated_at: string };

async function profiles(node: TestServer, key?: string): Promise<Listed[]> {
  const r = await node.api('/v1/profiles', { ...(key && { headers: { 'x-api-key': key } }) });
  expect(r.status).toBe(200);
  return (await r.json()) as Listed[];
}

/** The admin's profile `name` once no instance holds it (a stop saves and releases it). */
async function released(node: TestServer, name: string): Promise<Listed> {
  await expect
    .poll(
      async () => (await profiles(node)).find((p) => p.name === name && !p.project)?.in_use_by,
      { timeout: 60_000 },
    )
    .toBeNull();
  return (await profiles(node)).find((p) => p.name === name && !p.project)!;
}

describe('extensions across the cluster', () => {
  it('uploaded through node 1, run by an instance on node 2, deleted everywhere', async () => {
    const info = await admin.extensions.upload(makeZip(testExtension('shared')), {
      filename: 'shared.zip',
    });
    const listed = await two.api('/v1/extensions');
    expect(((await listed.json()) as { id: string }[]).map((e) => e.id)).toEqual([info.id]);
    const cache = join(two.dataDir, 'extensions', info.id);
    expect(existsSync(cache)).toBe(false); // node 2 has not needed it yet

    const id = await started(await startOn(two, { extensions: [info.id] }));
    try {
      expect(await nodeOf(id)).toBe('node-2');
      expect(existsSync(join(cache, 'files', 'manifest.json'))).toBe(true);
      expect(await visit(two, id, '/ext')).toBe('cookie none / local none [ext shared]');
      expect(seen.get('/ext')).toBe('shared');
    } finally {
      await stop(two, id);
    }

    // placed like any other start: node 1 runs one instance, so a start through it goes to
    // node 2, which loads the extension from its cache
    const busy = await started(await startOn(one, {}));
    try {
      const placed = await started(
        await one.api('/v1/start', { json: { instance_type: 'browser', extensions: [info.id] } }),
      );
      expect(await nodeOf(placed)).toBe('node-2');
      expect(await visit(one, placed, '/placed')).toBe('cookie none / local none [ext shared]');
      await stop(one, placed);
    } finally {
      await stop(one, busy);
    }

    // deleted through node 1: node 2's copy goes, and its starts name an unknown id
    await admin.extensions.delete(info.id);
    await expect.poll(() => existsSync(cache), { timeout: 10_000 }).toBe(false);
    const gone = await startOn(two, { extensions: [info.id] });
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { detail: string }).detail).toContain(
      `Extension "${info.id}" not found`,
    );
    expect((await (await two.api('/v1/extensions')).json()) as unknown[]).toEqual([]);
  }, 180_000);

  it('drops a copy whose delete a node did not hear of, at its next start', async () => {
    const info = await admin.extensions.upload(makeZip(testExtension('unheard')));
    const id = await started(await startOn(two, { extensions: [info.id] }));
    await stop(two, id);
    const cache = join(two.dataDir, 'extensions', info.id);
    expect(existsSync(cache)).toBe(true);
    // removed behind the nodes' backs: no NOTIFY
    await db.query('DELETE FROM extensions WHERE id = $1', [info.id]);
    const gone = await startOn(two, { extensions: [info.id] });
    expect(gone.status).toBe(404);
    expect(gone.headers.get('x-burrow-error')).toBe('extension_not_found');
    expect(existsSync(cache)).toBe(false);
  }, 60_000);

  it('does not unpack an archive that no longer matches its digest', async () => {
    const info = await admin.extensions.upload(makeZip(testExtension('tampered')));
    const other = makeZip(testExtension('evil'));
    await db.query('UPDATE extensions SET archive = $2 WHERE id = $1', [info.id, other]);
    const res = await startOn(two, { extensions: [info.id] });
    expect(res.status).toBe(500);
    expect(existsSync(join(two.dataDir, 'extensions', info.id))).toBe(false);
    await admin.extensions.delete(info.id);
  }, 60_000);
});

describe('profiles across the cluster', () => {
  it('saved on node 1, restored on node 2, sealed in the table, held once', async () => {
    const token = `t${randomBytes(8).toString('hex')}`;
    const a = await started(await startOn(one, { profile: { name: 'shop', save_changes: true } }));
    expect(await nodeOf(a)).toBe('node-1');
    expect(await visit(one, a, `/login?t=${token}`)).toBe('stored');
    expect(await visit(one, a, '/')).toBe(`cookie ${token} / local ${token}`);

    // held by node 1's instance: node 2 answers the 409 naming it, for a start and a delete
    const second = await startOn(two, { profile: { name: 'shop' } });
    expect(second.status).toBe(409);
    expect(await second.json()).toEqual({
      detail: `Profile "shop" is in use by ${a}; stop that instance first`,
    });
    const del = await two.api('/v1/profiles/shop', { method: 'DELETE' });
    expect(del.status).toBe(409);
    // and a start naming a profile is placed like any other: node 1 is the busier one
    const placed = await started(
      await one.api('/v1/start', {
        json: { instance_type: 'browser', profile: { name: 'other' } },
      }),
    );
    expect(await nodeOf(placed)).toBe('node-2');
    await stop(one, placed);
    await stop(one, a);
    const saved = await released(two, 'shop');

    // the table holds the sealed bytes only
    const row = await db.query<{ sealed: Buffer }>(
      "SELECT sealed FROM profiles WHERE project = '' AND name = 'shop'",
    );
    const sealed = row.rows[0]!.sealed;
    expect(sealed.length).toBeGreaterThan(1000);
    expect(sealed.subarray(0, 20).toString()).toBe('{"burrow_profile":1,');
    expect(sealed.includes(token)).toBe(false);
    expect(sealed.includes('session')).toBe(false);
    expect(sealed.includes('Cookies')).toBe(false);

    // restored on node 2, without save_changes: nothing written back
    const b = await started(await startOn(two, { profile: { name: 'shop' } }));
    expect(await nodeOf(b)).toBe('node-2');
    expect((await profiles(one)).find((p) => p.name === 'shop')?.in_use_by).toBe(b);
    // (a cookie set less than Chromium's commit interval, 30 s, before the stop is not on disk
    // yet, on a single server too: the page's localStorage is what travels here)
    expect(await visit(two, b, '/')).toMatch(new RegExp(` / local ${token}$`));
    await stop(two, b);
    expect((await released(one, 'shop')).updated_at).toBe(saved.updated_at);
  }, 300_000);

  it('two starts at once through two nodes: exactly one wins', async () => {
    const answers = await Promise.all([
      startOn(one, { profile: { name: 'race', save_changes: true } }),
      startOn(two, { profile: { name: 'race', save_changes: true } }),
    ]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409]);
    const winner = answers.find((r) => r.status === 200)!;
    const loser = answers.find((r) => r.status === 409)!;
    const id = ((await winner.json()) as { id: string }).id;
    expect(loser.headers.get('x-burrow-error')).toBe('profile_in_use');
    expect(((await loser.json()) as { detail: string }).detail).toMatch(
      new RegExp(`^Profile "race" is in use by (${id}|an instance still starting)`),
    );
    await stop(answers[0] === winner ? one : two, id);
    await released(one, 'race');
    const next = await startOn(two, { profile: { name: 'race' } });
    await stop(two, await started(next));
    await released(one, 'race');
  }, 180_000);

  it('a hold of a node declared lost no longer counts', async () => {
    // a node that held "orphan" and stopped renewing (its lease long gone)
    await db.query(
      `INSERT INTO nodes (name, run, slot, url, capacity, free_slots, state, lease_until)
       VALUES ('ghost', 'run-g', 900, 'http://127.0.0.1:9', 1, 0, 'up', now() - interval '1 minute')`,
    );
    await db.query(
      `INSERT INTO profiles (project, name, sealed, size_bytes, hold, holder, holder_node, holder_run)
       VALUES ('', 'orphan', NULL, 0, 'tok', 'inst_ghost', 'ghost', 'run-g')`,
    );
    const held = await startOn(one, { profile: { name: 'orphan' } });
    expect(held.status).toBe(409);
    expect(((await held.json()) as { detail: string }).detail).toContain('in use by inst_ghost');
    expect(await declareLost(db, 'ghost', 'run-g')).toEqual([]);
    const id = await started(await startOn(one, { profile: { name: 'orphan' } }));
    await stop(one, id);
  }, 120_000);
});

describe('profiles of projects', () => {
  it('a project key sees and uses its own profiles only; the admin sees all', async () => {
    const keyA = (await admin.keys.create({ project: 'alpha' })).key;
    const keyB = (await admin.keys.create({ project: 'beta' })).key;
    const token = `a${randomBytes(6).toString('hex')}`;
    // project A saves "work" through node 1
    const a = await started(
      await startOn(one, { profile: { name: 'work', save_changes: true } }, keyA),
    );
    expect(await visit(one, a, `/login?t=${token}`)).toBe('stored');
    await one.api(`/v1/instance/${a}/stop`, { method: 'POST', headers: { 'x-api-key': keyA } });
    await expect
      .poll(async () => (await profiles(two, keyA)).map((p) => [p.name, p.in_use_by]), {
        timeout: 60_000,
      })
      .toEqual([['work', null]]);

    // project B: not in its list, and its delete is the unknown name's 404, same body
    expect(await profiles(two, keyB)).toEqual([]);
    const delB = await two.api('/v1/profiles/work', {
      method: 'DELETE',
      headers: { 'x-api-key': keyB },
    });
    const unknown = await two.api('/v1/profiles/never-was', {
      method: 'DELETE',
      headers: { 'x-api-key': keyB },
    });
    expect(delB.status).toBe(404);
    expect(await delB.json()).toEqual({ detail: 'Profile "work" not found' });
    expect(unknown.status).toBe(404);
    expect(delB.headers.get('x-burrow-error')).toBe(unknown.headers.get('x-burrow-error'));

    // B's "work" is a profile of its own: empty, and it does not hold A's
    const b = await started(await startOn(two, { profile: { name: 'work' } }, keyB));
    const a2 = await started(await startOn(one, { profile: { name: 'work' } }, keyA));
    expect(await visit(two, b, '/')).toBe('cookie none / local none');
    expect(await visit(one, a2, '/')).toMatch(new RegExp(` / local ${token}$`));
    await two.api(`/v1/instance/${b}/stop`, { method: 'POST', headers: { 'x-api-key': keyB } });
    await one.api(`/v1/instance/${a2}/stop`, { method: 'POST', headers: { 'x-api-key': keyA } });

    // the admin's list shows A's, by project; the admin's own "work" is another name space
    await expect
      .poll(async () =>
        (await profiles(one)).filter((p) => p.name === 'work').map((p) => [p.project, p.in_use_by]),
      )
      .toEqual([['alpha', null]]);
    expect((await one.api('/v1/profiles/work', { method: 'DELETE' })).status).toBe(404);
    // and `burrow profiles list` says whose each is
    const listed = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'profiles', 'list'],
      {
        cwd: resolve(import.meta.dirname, '../../..'),
        env: { ...process.env, BURROW_BASE_URL: two.url, BURROW_API_KEY: two.apiKey },
      },
    );
    expect(listed.stdout).toMatch(/^NAME\s+PROJECT\s+SIZE\s+UPDATED\s+IN USE BY$/m);
    expect(listed.stdout).toMatch(/^work\s+alpha\s+\d+\s+\S+\s+-$/m);

    // A deletes its own
    const delA = await one.api('/v1/profiles/work', {
      method: 'DELETE',
      headers: { 'x-api-key': keyA },
    });
    expect(delA.status).toBe(200);
    expect(await profiles(one, keyA)).toEqual([]);
  }, 300_000);
});
