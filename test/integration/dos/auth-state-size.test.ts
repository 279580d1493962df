/**
 * What a page can make the server hold through save_auth: a page fills its origin's IndexedDB
 * (and localStorage) and its `cdp_url` holder, or anyone with the API key, saves the browser's
 * auth state. The state is measured in the browser, piece by piece, against `maxAuthStateBytes`
 * (8 MiB): a piece that does not fit never reaches the server, so the answer is a 413 naming the
 * limit, nothing is kept, the server's memory does not grow by the state's size and another
 * client's `/livez` stays fast. A state under the limit still saves.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { livezBound, said, watchLivez } from '../../helpers/livez-beside.js';
import { useInstance, useServer } from '../../helpers/use-server.js';

const MiB = 2 ** 20;

let site: Server;
let origin: string;
beforeAll(async () => {
  site = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>storage</title>');
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => site.close(() => r())));

const server = useServer({}, { timeout: 60_000 });
const browser = useInstance(server, 'browser');

/** In the instance's page of `origin`: `idbMiB` MiB in IndexedDB, `localMiB` in localStorage. */
async function fill(idbMiB: number, localMiB: number): Promise<void> {
  const pw = await chromium.connectOverCDP(browser.cdpUrl);
  try {
    const page = pw.contexts()[0]!.pages()[0]!;
    await page.goto(`${origin}/`);
    await page.evaluate(
      async ({ idb, local }) => {
        localStorage.clear();
        for (let i = 0; i < local; i++) localStorage.setItem(`k${i}`, 'l'.repeat(2 ** 20 - 8));
        await new Promise((ok, fail) => {
          const del = indexedDB.deleteDatabase('big');
          del.onsuccess = ok;
          del.onerror = () => fail(del.error);
        });
        if (idb === 0) return;
        const db = await new Promise<IDBDatabase>((ok, fail) => {
          const open = indexedDB.open('big', 1);
          open.onupgradeneeded = () => open.result.createObjectStore('s');
          open.onsuccess = () => ok(open.result);
          open.onerror = () => fail(open.error);
        });
        const chunk = 'x'.repeat(2 ** 20);
        await new Promise((ok, fail) => {
          const tx = db.transaction('s', 'readwrite');
          for (let i = 0; i < idb; i++) tx.objectStore('s').put(chunk + i, i);
          tx.oncomplete = ok;
          tx.onerror = () => fail(tx.error);
        });
        db.close();
      },
      { idb: idbMiB, local: localMiB },
    );
  } finally {
    await pw.close();
  }
}

const listed = async () =>
  ((await (await server.api('/v1/auth_states')).json()) as { id: string }[]).length;

const saveAuth = async (name: string) => {
  const res = await server.api(`/v1/instance/${browser.id}/browser/save_auth?name=${name}`, {
    method: 'POST',
  });
  return { status: res.status, body: (await res.json()) as { detail?: string } };
};

describe('a page that makes its auth state large', () => {
  it(
    '96 MiB of IndexedDB: 413 naming the limit, nothing kept, the server holds none of it',
    { retry: 1, timeout: 180_000 },
    async () => {
      await fill(96, 0);
      const count = await listed();
      const watch = await watchLivez(server.url);
      const rss0 = process.memoryUsage().rss;
      const saving = saveAuth('big');
      const seen = await watch.until(saving);
      const peak = seen.peakRss;
      const saved = await saving;
      console.log('auth-state-size, 96 MiB IndexedDB:', said(seen), {
        grewMiB: Math.round((peak - rss0) / MiB),
      });

      expect(saved.status, JSON.stringify(saved.body)).toBe(413);
      expect(saved.body.detail).toContain(`larger than ${8 * MiB} bytes`);
      expect(saved.body.detail).toContain(`IndexedDB of ${origin}`);
      expect(saved.body.detail).toContain('BURROW_MAX_AUTH_STATE_BYTES');
      expect(await listed()).toBe(count);
      // the state never came to the server: parsing and sealing it would take several times 96 MiB
      expect(peak - rss0).toBeLessThan(48 * MiB);
      expect(seen.server.p99).toBeLessThan(livezBound(seen));
    },
  );

  it('pieces that fit one by one but not together: 413 at the piece that passes the total', async () => {
    await fill(5, 4);
    const count = await listed();
    const saved = await saveAuth('together');
    expect(saved.status, JSON.stringify(saved.body)).toBe(413);
    // localStorage (about 4 MiB) was taken first; the 5 MiB of IndexedDB did not fit after it
    expect(saved.body.detail).toMatch(
      new RegExp(`IndexedDB of ${origin.replace(/\./g, '\\.')} is \\d+ bytes, with \\d{7} bytes`),
    );
    expect(await listed()).toBe(count);
  }, 120_000);

  it('a state under the limit saves; modify_auth past it leaves that state as it was', async () => {
    await fill(2, 1);
    const saved = await saveAuth('fits');
    expect(saved.status, JSON.stringify(saved.body)).toBe(200);
    const id = (saved.body as { auth_state_id?: string }).auth_state_id!;
    const stored = async () => {
      const res = await server.api(`/v1/auth_states/${id}/storage_state`);
      return (await res.json()) as {
        origins: { origin: string; localStorage: unknown[]; indexedDB?: unknown[] }[];
      };
    };
    const kept = await stored();
    const mine = kept.origins.find((o) => o.origin === origin);
    expect(mine?.localStorage).toHaveLength(1);
    expect(mine?.indexedDB).toHaveLength(1);

    await fill(12, 0);
    const res = await server.api(
      `/v1/instance/${browser.id}/browser/modify_auth?auth_state_id=${id}`,
      { method: 'POST' },
    );
    expect(res.status, await res.clone().text()).toBe(413);
    expect(await stored()).toEqual(kept);
  }, 120_000);
});
