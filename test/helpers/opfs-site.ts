/**
 * A page on the host's loopback whose worker makes a file of a given size in its origin's private
 * file system (OPFS), written nowhere (sparse), or says how large one is: what a page of an
 * instance started with a saved profile can leave in it for the server to read back at the stop.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { expect } from 'vitest';
import type { Burrow } from '../../src/client/index.js';

const WORKER = `onmessage = async ({ data: { op, name, size } }) => {
  try {
    const root = await navigator.storage.getDirectory();
    if (op === 'size') {
      const file = await root.getFileHandle(name);
      postMessage('size ' + (await file.getFile()).size);
      return;
    }
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
w.postMessage({ op: q.get('op'), name: q.get('name'), size: Number(q.get('size')) });
</script>`;

export interface OpfsSite {
  /**
   * In instance `id`: makes `/<name>` of `size` bytes (`op` make), or reads its size (`op`
   * size); what the page said (`made N`, `size N`, `failed ...`).
   */
  run(id: string, op: 'make' | 'size', name: string, size?: number): Promise<string>;
  close(): Promise<void>;
}

export async function opfsSite(client: Burrow): Promise<OpfsSite> {
  const site: Server = createServer((req, res) => {
    const worker = req.url === '/worker.js';
    res.writeHead(200, { 'content-type': worker ? 'text/javascript' : 'text/html' });
    res.end(worker ? WORKER : PAGE);
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  return {
    run: async (id, op, name, size = 0) => {
      const browser = await chromium.connectOverCDP((await client.browser.cdpUrl(id)).cdp_url);
      try {
        const page = await browser.contexts()[0]!.newPage();
        await page.goto(`${origin}/?op=${op}&name=${name}&size=${size}`);
        await expect
          .poll(() => page.textContent('#status'), { timeout: 60_000 })
          .toMatch(/^(made|size|failed)/);
        const status = (await page.textContent('#status')) ?? '';
        await page.close();
        return status;
      } finally {
        await browser.close().catch(() => {});
      }
    },
    close: () => new Promise((r) => site.close(() => r())),
  };
}
