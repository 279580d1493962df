/**
 * Persistent profiles end to end, against a real server and a real Chromium: a site on 127.0.0.1
 * that keeps its login in IndexedDB and in a service worker's cache is still signed in on the
 * next instance started with the profile; without `save_changes` nothing is written back; one
 * live instance per profile (two starts at once: exactly one 409, naming the holder); a damaged
 * file is refused by name.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../../src/client/index.js';
import { openSession } from '../../../src/index.js';
import { instanceProcesses, testServer } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';

let client: Burrow;
let site: Server;
let origin = '';

const APP = `<!doctype html><title>app</title><p id="status">checking</p><script>
const idb = () => new Promise((ok, no) => {
  const r = indexedDB.open('auth', 1);
  r.onupgradeneeded = () => r.result.createObjectStore('kv');
  r.onsuccess = () => ok(r.result); r.onerror = () => no(r.error);
});
const get = (db, k) => new Promise((ok) => {
  const q = db.transaction('kv').objectStore('kv').get(k); q.onsuccess = () => ok(q.result); q.onerror = () => ok(undefined);
});
const put = (db, k, v) => new Promise((ok) => {
  const t = db.transaction('kv', 'readwrite'); t.objectStore('kv').put(v, k); t.oncomplete = ok;
});
(async () => {
  await navigator.serviceWorker.register('/sw.js');
  await navigator.serviceWorker.ready;
  const db = await idb();
  const cache = await caches.open('auth');
  if (location.pathname === '/login') {
    const token = crypto.randomUUID();
    await put(db, 'token', token);
    await cache.put('/session', new Response(token));
    document.getElementById('status').textContent = 'stored';
    return;
  }
  if (location.pathname === '/logout') {
    await put(db, 'token', 'gone');
    document.getElementById('status').textContent = 'logged out';
    return;
  }
  const token = await get(db, 'token');
  const hit = await cache.match('/session');
  const body = hit ? await hit.text() : null;
  const workers = (await navigator.serviceWorker.getRegistrations()).length;
  document.getElementById('status').textContent =
    (token && body === token ? 'signed in' : 'signed out') + ' / workers ' + workers;
})();
</script>`;

beforeAll(async () => {
  site = createServer((req, res) => {
    if (req.url === '/set-cookie') {
      res.writeHead(200, {
        'content-type': 'text/html',
        'set-cookie': `sid=${Date.now()}; Max-Age=86400; Path=/; HttpOnly`,
      });
      res.end('<title>cookie</title><p id="status">cookie set</p>');
      return;
    }
    if (req.url === '/sw.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      res.end("self.addEventListener('fetch', () => {});");
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(APP);
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await new Promise((r) => site?.close(r));
  expect(instanceProcesses()).toEqual([]);
});

const server = useServer({}, { timeout: 60_000, client: { maxRetries: 0 } });
beforeAll(() => {
  client = server.client;
});

/** The profile's row once no instance holds it (a stop saves and releases it in the background). */
async function released(name: string) {
  await expect
    .poll(async () => (await client.profiles.list()).find((p) => p.name === name)?.in_use_by, {
      timeout: 60_000,
    })
    .toBeNull();
  return (await client.profiles.list()).find((p) => p.name === name)!;
}

async function start(profile: { name: string; save_changes?: boolean }) {
  return server.api('/v1/start', { json: { instance_type: 'browser', profile } });
}

/** Opens `path` in the instance's default context; the page's `#status` once it settles. */
async function visit(id: string, path: string, until: RegExp): Promise<string> {
  const browser = await chromium.connectOverCDP((await client.browser.cdpUrl(id)).cdp_url);
  try {
    const page: Page = await browser.contexts()[0]!.newPage();
    await page.goto(`${origin}${path}`);
    await expect.poll(() => page.textContent('#status'), { timeout: 30_000 }).toMatch(until);
    const status = (await page.textContent('#status')) ?? '';
    await page.close();
    return status;
  } finally {
    await browser.close().catch(() => {});
  }
}

describe('profiles', () => {
  it('keep a login in IndexedDB and a service worker cache across instances', async () => {
    const first = await start({ name: 'shop', save_changes: true });
    expect(first.status).toBe(200);
    const a = (await first.json()) as { id: string };
    expect(await visit(a.id, '/login', /stored/)).toBe('stored');
    expect(await visit(a.id, '/', /signed/)).toBe('signed in / workers 1');

    // held while it runs: another start and a delete are refused, naming the holder
    const second = await start({ name: 'shop' });
    expect(second.status).toBe(409);
    expect(await second.json()).toEqual({
      detail: `Profile "shop" is in use by ${a.id}; stop that instance first`,
    });
    const del = await server.api('/v1/profiles/shop', { method: 'DELETE' });
    expect(del.status).toBe(409);
    await client.instances.stop(a.id);

    const saved = await released('shop');
    expect(saved.size_bytes).toBeGreaterThan(1000);

    // restored without save_changes: signed in; a logout there is not written back
    const b = (await (await start({ name: 'shop' })).json()) as { id: string };
    expect(await visit(b.id, '/', /signed/)).toBe('signed in / workers 1');
    expect(await visit(b.id, '/logout', /logged out/)).toBe('logged out');
    expect(await visit(b.id, '/', /signed/)).toBe('signed out / workers 1');
    await client.instances.stop(b.id);
    expect((await released('shop')).updated_at).toBe(saved.updated_at);

    // through the bridge, still signed in
    {
      await using session = await openSession({ client, profile: { name: 'shop' } });
      await session.page.goto(`${origin}/`);
      await expect
        .poll(() => session.page.textContent('#status'), { timeout: 30_000 })
        .toBe('signed in / workers 1');
    }
    await released('shop');

    expect(await client.profiles.delete('shop')).toEqual({ status: 'success' });
    expect((await client.profiles.list()).map((p) => p.name)).not.toContain('shop');
    expect((await server.api('/v1/profiles/shop', { method: 'DELETE' })).status).toBe(404);
  }, 300_000);

  it('keep a cookie set the moment before the stop (Chromium writes its cookies at a clean exit)', async () => {
    const a = (await (await start({ name: 'jar', save_changes: true })).json()) as { id: string };
    expect(await visit(a.id, '/set-cookie', /cookie set/)).toBe('cookie set');
    // at once: Chromium's own cookie writes come every 30 s
    await client.instances.stop(a.id);
    await released('jar');

    const b = (await (await start({ name: 'jar' })).json()) as { id: string };
    const browser = await chromium.connectOverCDP((await client.browser.cdpUrl(b.id)).cdp_url);
    try {
      const cookies = await browser.contexts()[0]!.cookies(origin);
      expect(cookies.map((c) => c.name)).toEqual(['sid']);
      expect(cookies[0]!.httpOnly).toBe(true);
    } finally {
      await browser.close().catch(() => {});
    }
    await client.instances.stop(b.id);
    await released('jar');
    expect(await client.profiles.delete('jar')).toEqual({ status: 'success' });
  }, 180_000);

  it('two starts at once on one profile: exactly one 409', async () => {
    const answers = await Promise.all([
      start({ name: 'race', save_changes: true }),
      start({ name: 'race', save_changes: true }),
    ]);
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 409]);
    const winner = answers.find((r) => r.status === 200)!;
    const loser = answers.find((r) => r.status === 409)!;
    const { id } = (await winner.json()) as { id: string };
    expect(((await loser.json()) as { detail: string }).detail).toMatch(
      new RegExp(`^Profile "race" is in use by (${id}|an instance still starting)`),
    );
    expect(loser.headers.get('x-burrow-error')).toBe('profile_in_use');
    await client.instances.stop(id);
    await released('race'); // saved and released once the instance is gone
    const next = await start({ name: 'race' });
    expect(next.status).toBe(200);
    await client.instances.stop(((await next.json()) as { id: string }).id);
    await released('race');
  }, 300_000);

  it('a profile over the limit is not saved and nothing of it is written', async () => {
    await using small = await testServer({ maxProfileBytes: 20_000 });
    const api = new Burrow({ baseUrl: small.url, apiKey: small.apiKey, maxRetries: 0 });
    try {
      const inst = await api.instances.start({
        instance_type: 'browser',
        profile: { name: 'big', save_changes: true },
      });
      await api.instances.stop(inst.id);
      // the instance says why its profile was not saved
      await expect
        .poll(
          async () =>
            ((await api.instances.get(inst.id)).events ?? []).find(
              (e) => e.type === 'profile_not_saved',
            )?.message ?? '',
          { timeout: 60_000, interval: 500 },
        )
        .toMatch(/profile big not saved, its previous version is kept/);
      // released once the stop tried to save it; nothing was written
      await expect
        .poll(
          async () => {
            const res = await small.api('/v1/start', {
              json: { instance_type: 'browser', profile: { name: 'big' } },
            });
            if (res.status === 200)
              await api.instances.stop(((await res.json()) as { id: string }).id);
            return res.status;
          },
          { timeout: 60_000, interval: 1000 },
        )
        .toBe(200);
      expect(await api.profiles.list()).toEqual([]);
      expect(readdirSync(join(small.dataDir, 'profiles'))).toEqual([]); // no temporary file left
    } finally {
      await api.close();
    }
  }, 180_000);

  it('refuses a damaged profile, an ubuntu instance and a bad name', async () => {
    writeFileSync(join(server.dataDir, 'profiles', 'broken.profile'), 'not sealed at all');
    const broken = await start({ name: 'broken' });
    expect(broken.status).toBe(409);
    expect(((await broken.json()) as { detail: string }).detail).toMatch(
      /^Profile "broken" cannot be restored: not a profile file/,
    );
    // refused before anything started, and the profile is not left held
    expect((await client.profiles.list()).find((p) => p.name === 'broken')?.in_use_by).toBeNull();
    const ubuntu = await server.api('/v1/start', {
      json: { instance_type: 'ubuntu', profile: { name: 'x' } },
    });
    expect(ubuntu.status).toBe(400);
    expect((await start({ name: '../etc' })).status).toBe(422);
  }, 60_000);
});
