/**
 * Downloads kept by the server (src/server/artifacts/store.ts, src/server/chromium/downloads.ts), with
 * real Chromium in real sandboxes: a page on 127.0.0.1 downloads through a link with a `download`
 * attribute and through a `Content-Disposition` response, on a browser instance (Playwright over
 * `cdp_url`, whose own download path is rewritten to the instance) and on the ubuntu desktop
 * Chromium. Listing, bytes equal to what the site served, the client's CDP download events with
 * the same GUID, names from the page made harmless, a planted link refused, kept after stop and
 * gone after the retention time.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import puppeteer from 'puppeteer-core';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APIError, Burrow, NotFoundError } from '../../../src/client/index.js';
import {
  eventually,
  instanceProcesses,
  testServer,
  type TestServer,
} from '../../helpers/server.js';

/** What the site serves, by path. */
const files = {
  report: randomBytes(150_000),
  evil: Buffer.from(`evil ${randomBytes(8).toString('hex')}\n`),
  slow: randomBytes(64 * 1024),
};

let server: TestServer;
let client: Burrow;
let site: Server;
let origin = '';
let releaseSlow: (() => void) | undefined;

beforeAll(async () => {
  site = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://site');
    if (url.pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><title>downloads</title>
        <a id="attr" href="/files/report.bin" download="quarterly report.pdf">report</a>
        <a id="evil" href="/evil">evil</a>
        <a id="slow" href="/slow">slow</a>
        <a id="empty" href="/empty">empty</a>`);
      return;
    }
    if (url.pathname === '/files/report.bin') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(files.report);
      return;
    }
    if (url.pathname === '/slow') {
      // half now, the rest when the test says so: the download stays in progress meanwhile
      res.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': String(files.slow.length),
        'content-disposition': 'attachment; filename="slow.bin"',
      });
      res.write(files.slow.subarray(0, files.slow.length / 2));
      releaseSlow = () => res.end(files.slow.subarray(files.slow.length / 2));
      return;
    }
    if (url.pathname === '/empty') {
      res.writeHead(200, { 'content-disposition': 'attachment; filename="empty.txt"' });
      res.end();
      return;
    }
    if (url.pathname === '/evil') {
      // a name that tries to leave the download directory
      res.writeHead(200, {
        'content-type': 'text/plain',
        'content-disposition': 'attachment; filename="../../../../../../tmp/burrow-escape.txt"',
      });
      res.end(files.evil);
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  server = await testServer({ artifactRetentionSeconds: 4 });
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
}, 60_000);

afterAll(async () => {
  await client?.close();
  await server?.close();
  await new Promise((r) => site?.close(r));
  expect(instanceProcesses()).toEqual([]);
});

async function bytesOf(instanceId: string, downloadId: string) {
  const res = await client.downloads.get(instanceId, downloadId);
  const chunks: Buffer[] = [];
  for await (const c of res.body) chunks.push(c as Buffer);
  return { headers: res.headers, bytes: Buffer.concat(chunks) };
}

async function completed(instanceId: string, n: number) {
  await eventually(async () => {
    const list = await client.downloads.list(instanceId);
    return list.filter((d) => d.state === 'completed').length >= n;
  }, `${n} completed downloads`);
  return client.downloads.list(instanceId);
}

describe('browser instance', () => {
  let id = '';
  const guids: string[] = [];
  /** Ids listed so far. */
  const seen: string[] = [];

  it('keeps downloads made over cdp_url in the instance and lists them', async () => {
    id = (await client.instances.start({ instance_type: 'browser' })).id;
    const { cdp_url } = await client.browser.cdpUrl(id);
    const browser = await chromium.connectOverCDP(cdp_url);
    try {
      const context = browser.contexts()[0]!;
      const page = context.pages()[0] ?? (await context.newPage());
      // a raw CDP client that asks for its own (client-side) path and for events
      const cdp = await browser.newBrowserCDPSession();
      cdp.on('Browser.downloadWillBegin', (e) => guids.push(e.guid));
      await cdp.send('Browser.setDownloadBehavior', {
        behavior: 'allow',
        downloadPath: '/nonexistent/on/the/client',
        eventsEnabled: true,
      });
      await page.goto(`${origin}/`);
      const [download] = await Promise.all([page.waitForEvent('download'), page.click('#attr')]);
      expect(download.suggestedFilename()).toBe('quarterly report.pdf');
      await page.click('#evil');
      const list = await completed(id, 2);
      expect(list).toHaveLength(2);
      const report = list.find((d) => d.filename === 'quarterly report.pdf')!;
      expect(report).toMatchObject({ size: files.report.length, state: 'completed' });
      expect(report.mime_type).toBe('application/pdf');
      expect(Date.parse(report.created_at)).not.toBeNaN();
      // the client got its events, with the GUID that is the download's id on the wire
      await eventually(() => guids.length === 2, 'download events on the client');
      expect(list.map((d) => d.id).sort()).toEqual([...guids].sort());
    } finally {
      await browser.close();
    }
  }, 90_000);

  it('still keeps them after the clients that set a behaviour left (Chromium reset it)', async () => {
    // a bare CDP client that never sets a download behaviour clicks the link
    const { cdp_url } = await client.browser.cdpUrl(id);
    const ws = new WebSocket(cdp_url);
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    let next = 0;
    const send = (method: string, params: object, sessionId?: string) =>
      new Promise<Record<string, unknown>>((resolve) => {
        const msgId = ++next;
        const onMessage = (data: Buffer) => {
          const msg = JSON.parse(data.toString()) as { id?: number; result?: object };
          if (msg.id !== msgId) return;
          ws.off('message', onMessage);
          resolve((msg.result ?? {}) as Record<string, unknown>);
        };
        ws.on('message', onMessage);
        ws.send(JSON.stringify({ id: msgId, method, params, ...(sessionId && { sessionId }) }));
      });
    const { targetInfos } = (await send('Target.getTargets', {})) as {
      targetInfos: { targetId: string; type: string }[];
    };
    const target = targetInfos.find((t) => t.type === 'page')!;
    const { sessionId } = (await send('Target.attachToTarget', {
      targetId: target.targetId,
      flatten: true,
    })) as { sessionId: string };
    await send(
      'Runtime.evaluate',
      { expression: "document.querySelector('#attr').click()" },
      sessionId,
    );
    const list = await completed(id, 3);
    ws.close();
    expect(list).toHaveLength(3);
    const third = list.find((d) => !guids.includes(d.id))!;
    seen.push(...list.map((d) => d.id));
    expect(third.filename).toBe('quarterly report.pdf');
    expect((await bytesOf(id, third.id)).bytes.equals(files.report)).toBe(true);
  }, 60_000);

  it('keeps downloads of a context a client creates (Puppeteer sets no behaviour there)', async () => {
    const { cdp_url } = await client.browser.cdpUrl(id);
    const browser = await puppeteer.connect({ browserWSEndpoint: cdp_url, defaultViewport: null });
    try {
      const context = await browser.createBrowserContext();
      const page = await context.newPage();
      await page.goto(`${origin}/`);
      await page.click('#evil');
      const list = await completed(id, 4);
      const fourth = list.find((d) => !seen.includes(d.id))!;
      expect((await bytesOf(id, fourth.id)).bytes.equals(files.evil)).toBe(true);
      await context.close();
    } finally {
      await browser.disconnect();
    }
  }, 60_000);

  it('answers 409 for a download in progress, then the bytes once it completed', async () => {
    const { cdp_url } = await client.browser.cdpUrl(id);
    const browser = await chromium.connectOverCDP(cdp_url);
    try {
      const page = browser.contexts()[0]!.pages()[0]!;
      await page.click('#slow');
      let slow: Awaited<ReturnType<typeof client.downloads.list>>[number] | undefined;
      await eventually(async () => {
        slow = (await client.downloads.list(id)).find((d) => d.filename === 'slow.bin');
        return slow?.state === 'in_progress' && slow.size > 0 && releaseSlow !== undefined;
      }, 'a download in progress');
      const early = await client.downloads.get(id, slow!.id).catch((e: unknown) => e);
      expect(early).toBeInstanceOf(APIError);
      expect((early as APIError).status).toBe(409);
      expect((early as APIError).serverCode).toBe('artifact_in_progress');
      releaseSlow!();
      await eventually(
        async () =>
          (await client.downloads.list(id)).find((d) => d.id === slow!.id)?.state === 'completed',
        'the slow download completed',
      );
      expect((await bytesOf(id, slow!.id)).bytes.equals(files.slow)).toBe(true);
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('serves an empty download as zero bytes', async () => {
    const { cdp_url } = await client.browser.cdpUrl(id);
    const browser = await chromium.connectOverCDP(cdp_url);
    try {
      await browser.contexts()[0]!.pages()[0]!.click('#empty');
      let empty: { id: string; state: string } | undefined;
      await eventually(async () => {
        empty = (await client.downloads.list(id)).find((d) => d.filename === 'empty.txt');
        return empty?.state === 'completed';
      }, 'the empty download');
      const got = await bytesOf(id, empty!.id);
      expect(got.bytes.length).toBe(0);
      expect(got.headers['content-length']).toBe('0');
    } finally {
      await browser.close();
    }
  }, 60_000);

  it('serves the bytes with content-disposition, and names from the page are harmless', async () => {
    const list = await client.downloads.list(id);
    const report = list.find((d) => guids.includes(d.id) && d.filename === 'quarterly report.pdf')!;
    expect(report).toBeDefined();
    const got = await bytesOf(id, report.id);
    expect(got.bytes.equals(files.report)).toBe(true);
    expect(got.headers['content-disposition']).toContain('quarterly report.pdf');
    expect(got.headers['content-type']).toBe('application/pdf');

    const evil = list.find((d) => d.filename !== 'quarterly report.pdf')!;
    expect(evil.filename).not.toMatch(/[/\\]/);
    expect(evil.filename.startsWith('.')).toBe(false);
    const e = await bytesOf(id, evil.id);
    expect(e.bytes.equals(files.evil)).toBe(true);
    expect(e.headers['content-disposition']).not.toMatch(/\.\.\//);
    expect(existsSync('/tmp/burrow-escape.txt')).toBe(false);
  });

  it('answers 404 for unknown ids and 422 for empty ones', async () => {
    await expect(client.downloads.get(id, 'nope')).rejects.toBeInstanceOf(NotFoundError);
    const res = await server.api(`/v1/instance/${id}/downloads/..%2F..%2Fetc%2Fpasswd`);
    expect(res.status).toBe(404);
    expect(res.headers.get('x-burrow-error')).toBe('download_not_found');
    const unknown = await server.api('/v1/instance/inst_missing/downloads');
    expect(unknown.status).toBe(404);
    const noKey = await fetch(`${server.url}/v1/instance/${id}/downloads`);
    expect(noKey.status).toBe(401);
  });

  it('keeps them fetchable after the instance stopped, then drops them', async () => {
    const before = await client.downloads.list(id);
    await client.instances.stop(id);
    const after = await client.downloads.list(id);
    expect(after.map((d) => [d.id, d.size])).toEqual(before.map((d) => [d.id, d.size]));
    const report = after.find((d) => d.filename === 'quarterly report.pdf')!;
    expect((await bytesOf(id, report.id)).bytes.equals(files.report)).toBe(true);
    // retention is 4 s in this server
    await eventually(
      async () => (await client.downloads.list(id)).length === 0,
      'downloads dropped after the retention time',
      20_000,
    );
    await expect(client.downloads.get(id, report.id)).rejects.toBeInstanceOf(NotFoundError);
  }, 40_000);
});

describe('ubuntu desktop browser', () => {
  it('keeps its downloads, refuses a planted link, and keeps them after stop', async () => {
    const id = (await client.instances.start({ instance_type: 'ubuntu' })).id;
    const { cdp_url } = await client.browser.start(id);
    const browser = await chromium.connectOverCDP(cdp_url);
    let list;
    try {
      const context = browser.contexts()[0]!;
      const page = context.pages()[0] ?? (await context.newPage());
      await page.goto(`${origin}/`);
      await Promise.all([page.waitForEvent('download'), page.click('#attr')]);
      await page.click('#evil');
      list = await completed(id, 2);
    } finally {
      await browser.close();
    }
    const report = list.find((d) => d.filename === 'quarterly report.pdf')!;
    const evil = list.find((d) => d.id !== report.id)!;
    // the files are in the instance's ~/Downloads, named by GUID
    const ls = await client.instance.bash(id, { command: 'ls ~/Downloads' });
    expect(ls.output).toContain(report.id);
    expect((await bytesOf(id, report.id)).bytes.equals(files.report)).toBe(true);

    // the instance replaces a download by a link to a host-looking path: the server refuses it
    await client.instance.bash(id, { command: `ln -sf /etc/shadow ~/Downloads/${evil.id}` });
    await expect(client.downloads.get(id, evil.id)).rejects.toBeInstanceOf(NotFoundError);
    const entry = (await client.downloads.list(id)).find((d) => d.id === evil.id)!;
    expect(entry.size).toBe(0);

    await client.instances.stop(id);
    const kept = await client.downloads.list(id);
    expect(kept.map((d) => d.id)).toEqual([report.id]); // the link was not copied out
    expect((await bytesOf(id, report.id)).bytes.equals(files.report)).toBe(true);
  }, 120_000);
});
