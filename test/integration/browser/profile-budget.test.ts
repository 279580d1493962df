/**
 * A saved profile's budget is charged before the server reads a byte of it (issue 35): a page of
 * an instance started with a profile makes a sparse 1.9 GB file in its origin's private file
 * system (OPFS), which costs the instance's disk nothing; at the stop the server used to read it
 * whole before comparing it with the 800 MiB budget (+1.9 GB of server memory per stopping
 * instance). Now the file is charged at its apparent size and refused unread: the server's RSS
 * stays within a bound, another client's `/livez` stays prompt (livez-beside.ts), the profile
 * keeps its previous version and the instance's events say why.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../../src/client/index.js';
import { livezBound, said, watchLivez } from '../../helpers/livez-beside.js';
import { instanceProcesses, testServer, type TestServer } from '../../helpers/server.js';

let server: TestServer;
let client: Burrow;
let site: Server;
let origin = '';

/** The worker makes `/<name>` in OPFS, `size` bytes long, written nowhere (sparse). */
const WORKER = `onmessage = async ({ data: { name, size } }) => {
  try {
    const root = await navigator.storage.getDirectory();
    const file = await root.getFileHandle(name, { create: true });
    const handle = await file.createSyncAccessHandle();
    handle.truncate(size);
    handle.flush();
    const made = handle.getSize();
    handle.close();
    postMessage('made ' + made);
  } catch (err) { postMessage('failed ' + err); }
};`;

const PAGE = `<!doctype html><title>opfs</title><p id="status">working</p><script>
const q = new URLSearchParams(location.search);
const w = new Worker('/worker.js');
w.onmessage = (e) => { document.getElementById('status').textContent = e.data; };
w.postMessage({ name: q.get('name'), size: Number(q.get('size')) });
</script>`;

/** RSS growth of the process the server runs in that the stop may cause at most. */
const RSS_BOUND = 256 * 2 ** 20;

beforeAll(async () => {
  server = await testServer();
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
  site = createServer((req, res) => {
    const worker = req.url === '/worker.js';
    res.writeHead(200, { 'content-type': worker ? 'text/javascript' : 'text/html' });
    res.end(worker ? WORKER : PAGE);
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await client?.close();
  await server?.close();
  await new Promise((r) => site?.close(r));
  expect(instanceProcesses()).toEqual([]);
});

async function released(name: string) {
  await expect
    .poll(async () => (await client.profiles.list()).find((p) => p.name === name)?.in_use_by, {
      timeout: 60_000,
    })
    .toBeNull();
  return (await client.profiles.list()).find((p) => p.name === name)!;
}

/** Makes an OPFS file of `size` bytes in instance `id`; what the page said. */
async function makeFile(id: string, name: string, size: number): Promise<string> {
  const browser = await chromium.connectOverCDP((await client.browser.cdpUrl(id)).cdp_url);
  try {
    const page = await browser.contexts()[0]!.newPage();
    await page.goto(`${origin}/?name=${name}&size=${size}`);
    await expect
      .poll(() => page.textContent('#status'), { timeout: 30_000 })
      .toMatch(/^(made|failed)/);
    const status = (await page.textContent('#status')) ?? '';
    await page.close();
    return status;
  } finally {
    await browser.close().catch(() => {});
  }
}

describe('a saved profile past its budget', () => {
  it(
    'is refused unread: the server does not grow, the previous version is kept',
    { retry: 1, timeout: 300_000 },
    async () => {
      const start = async () => {
        const res = await server.api('/v1/start', {
          json: { instance_type: 'browser', profile: { name: 'opfs', save_changes: true } },
        });
        expect(res.status).toBe(200);
        return ((await res.json()) as { id: string }).id;
      };
      // a first version, small
      const a = await start();
      expect(await makeFile(a, 'small', 1000)).toBe('made 1000');
      await client.instances.stop(a);
      const before = await released('opfs');

      const b = await start();
      expect(await makeFile(b, 'big', 1.9e9)).toBe('made 1900000000');
      global.gc?.();
      const base = process.memoryUsage().rss;
      const watch = await watchLivez(server.url);
      const stopping = (async () => {
        await client.instances.stop(b);
        await expect
          .poll(
            async () =>
              ((await client.instances.get(b)).events ?? []).find(
                (e) => e.type === 'profile_not_saved',
              )?.message ?? '',
            { timeout: 120_000, interval: 200 },
          )
          .toMatch(/^profile opfs not saved, its previous version is kept: .*more than \d+ bytes/);
      })();
      const seen = await watch.until(stopping);
      await stopping;
      expect(seen.peakRss - base, `RSS ${base} → peak ${seen.peakRss}`).toBeLessThan(RSS_BOUND);
      // another client is not held up
      expect(seen.server.p99, said(seen)).toBeLessThan(livezBound(seen));
      // the previous version, untouched
      const after = await released('opfs');
      expect(after.updated_at).toBe(before.updated_at);
      expect(after.size_bytes).toBe(before.size_bytes);
      expect(await client.profiles.delete('opfs')).toEqual({ status: 'success' });
    },
  );
});
