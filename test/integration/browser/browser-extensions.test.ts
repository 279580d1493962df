/**
 * Browser extensions end to end: uploaded through the typed client, loaded by a real Chromium in
 * its sandbox, working in the instance's default context and in a context the client creates
 * (`browser.newContext()`), seen by a site on 127.0.0.1 (the request header the extension's
 * `declarativeNetRequest` rule adds) and in the page (what its content script rewrites). The copy
 * inside the instance is read-only to it; bad uploads and unknown ids are refused by name.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BadRequestError,
  Burrow,
  NotFoundError,
  ValidationError,
} from '../../../src/client/index.js';
import { openSession } from '../../../src/index.js';
import { instanceProcesses, testServer } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';
import { makeZip, testExtension } from '../../helpers/zip.js';

let client: Burrow;
let site: Server;
let origin = '';
/** path → the `x-burrow-ext` header its request carried (or `-`). */
const seen = new Map<string, string>();

beforeAll(async () => {
  site = createServer((req, res) => {
    const header = req.headers['x-burrow-ext'];
    seen.set(req.url ?? '', typeof header === 'string' ? header : '-');
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><html><head><title>site</title></head><body>plain</body></html>');
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

/** The instance's copy of an extension, on the host (the instance's disk, mounted there). */
function instanceCopy(instanceId: string, extensionId: string): string {
  const root = '/var/lib/burrow/sandboxes';
  for (const run of readdirSync(root)) {
    const dir = join(root, run, instanceId, 'disk', 'home', '.burrow-extensions', extensionId);
    if (existsSync(dir)) return dir;
  }
  throw new Error(`no copy of ${extensionId} in ${instanceId}`);
}

describe('extensions', () => {
  it('load in the default context and in contexts the client creates', async () => {
    const info = await client.extensions.upload(makeZip(testExtension('one')), {
      filename: 'test-ext.zip',
    });
    expect(info).toMatchObject({ name: 'burrow test extension', version: '1.2.3' });
    expect((await client.extensions.list()).map((e) => e.id)).toContain(info.id);

    const inst = await client.instances.start({ instance_type: 'browser', extensions: [info.id] });
    let browser: Browser | undefined;
    try {
      const { cdp_url } = await client.browser.cdpUrl(inst.id);
      browser = await chromium.connectOverCDP(cdp_url);
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(`${origin}/default`);
      await expect.poll(() => page.getAttribute('body', 'data-burrow-ext')).toBe('one');
      expect(await page.title()).toBe('ext:site');
      expect(seen.get('/default')).toBe('one');

      const context = await browser.newContext();
      const other = await context.newPage();
      await other.goto(`${origin}/new-context`);
      await expect.poll(() => other.getAttribute('body', 'data-burrow-ext')).toBe('one');
      expect(seen.get('/new-context')).toBe('one');
      await context.close();

      // the instance's copy is root's and read-only to its user, but for `_metadata`, where
      // Chromium wrote the indexed rules of declarativeNetRequest
      const copy = instanceCopy(inst.id, info.id);
      const manifest = statSync(join(copy, 'manifest.json'));
      expect([manifest.uid, manifest.mode & 0o777]).toEqual([0, 0o644]);
      const folder = statSync(copy);
      expect([folder.uid, folder.mode & 0o777]).toEqual([0, 0o755]);
      expect(statSync(join(copy, '_metadata')).uid).not.toBe(0);
      expect(readdirSync(join(copy, '_metadata'))).toContain('generated_indexed_rulesets');
    } finally {
      await browser?.close().catch(() => {});
      await client.instances.stop(inst.id);
    }

    // deleted, it is gone from the list and a start naming it is refused by id
    await client.extensions.delete(info.id);
    expect((await client.extensions.list()).map((e) => e.id)).not.toContain(info.id);
    const err = await client.instances
      .start({ instance_type: 'browser', extensions: [info.id] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as Error).message).toContain(`Extension "${info.id}" not found`);
  }, 180_000);

  it('load through the bridge, Playwright and Puppeteer, in the contexts they create', async () => {
    const { id } = await client.extensions.upload(makeZip(testExtension('bridge')));
    {
      await using session = await openSession({ client, extensions: [id] });
      const context = await session.browser.newContext();
      const page = await context.newPage();
      await page.goto(`${origin}/playwright`);
      await expect.poll(() => page.getAttribute('body', 'data-burrow-ext')).toBe('bridge');
      expect(seen.get('/playwright')).toBe('bridge');
    }
    {
      await using session = await openSession({ client, extensions: [id], driver: 'puppeteer' });
      const context = await session.browser.createBrowserContext();
      const page = await context.newPage();
      await page.goto(`${origin}/puppeteer`);
      await expect
        .poll(() => page.evaluate(() => document.body.getAttribute('data-burrow-ext')))
        .toBe('bridge');
      expect(seen.get('/puppeteer')).toBe('bridge');
      await context.close();
    }
    await client.extensions.delete(id);
  }, 180_000);

  it('without extensions, the site sees no header and the page is untouched', async () => {
    const inst = await client.instances.start({ instance_type: 'browser' });
    let browser: Browser | undefined;
    try {
      browser = await chromium.connectOverCDP((await client.browser.cdpUrl(inst.id)).cdp_url);
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(`${origin}/plain`);
      expect(await page.getAttribute('body', 'data-burrow-ext')).toBeNull();
      expect(seen.get('/plain')).toBe('-');
    } finally {
      await browser?.close().catch(() => {});
      await client.instances.stop(inst.id);
    }
  }, 180_000);

  it('refuses bad uploads and starts by name', async () => {
    const bad = await client.extensions
      .upload(makeZip([...testExtension(), { name: '../../evil.js', data: 'x' }]))
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(ValidationError);
    expect((bad as Error).message).toContain('leaves its folder');
    const notZip = await client.extensions.upload(Buffer.from('hello')).catch((e: unknown) => e);
    expect((notZip as Error).message).toContain('not a zip archive');

    const ubuntu = await client.instances
      .start({ instance_type: 'ubuntu', extensions: ['ext_0000000000000000'] })
      .catch((e: unknown) => e);
    expect(ubuntu).toBeInstanceOf(BadRequestError);
    const missing = await server.api('/v1/start', {
      json: { instance_type: 'browser', extensions: ['ext_0123456789abcdef'] },
    });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ detail: 'Extension "ext_0123456789abcdef" not found' });
    expect((await client.instances.list()).filter((i) => i.status === 'running')).toEqual([]);
  }, 60_000);
});

describe('extensions and the warm pool', () => {
  it('a start with extensions is never served by a pooled instance', async () => {
    await using pooled = await testServer({ warmPool: { browser: 1 }, maxInstances: 3 });
    const api = new Burrow({ baseUrl: pooled.url, apiKey: pooled.apiKey, maxRetries: 0 });
    try {
      await pooled.warmPool.ready();
      const waiting = pooled.warmPool.ids();
      expect(waiting).toHaveLength(1);
      const { id } = await api.extensions.upload(makeZip(testExtension('pool')));
      const inst = await api.instances.start({ instance_type: 'browser', extensions: [id] });
      expect(waiting).not.toContain(inst.id);
      expect(pooled.warmPool.ids()).toEqual(waiting); // still waiting for a start without any
      const browser = await chromium.connectOverCDP((await api.browser.cdpUrl(inst.id)).cdp_url);
      try {
        const page = await browser.contexts()[0]!.newPage();
        await page.goto(`${origin}/pool`);
        await expect.poll(() => page.getAttribute('body', 'data-burrow-ext')).toBe('pool');
      } finally {
        await browser.close().catch(() => {});
      }
      await api.instances.stop(inst.id);
    } finally {
      await api.close();
    }
  }, 180_000);
});
