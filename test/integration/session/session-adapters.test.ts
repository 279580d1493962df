/**
 * burrow-sandbox/playwright and burrow-sandbox/puppeteer on their own, with a cdp_url from the client: connect,
 * use the default context's first page, dispose, and connect again to the same browser.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from 'burrow-sandbox';
import { connect as playwright } from 'burrow-sandbox/playwright';
import { connect as puppeteer } from 'burrow-sandbox/puppeteer';
import { testServer, type TestServer } from '../../helpers/server.js';

const dataDir = mkdtempSync(join(tmpdir(), 'bsd-'));
let server: TestServer;
let client: Burrow;
beforeAll(async () => {
  server = await testServer({ dataDir });
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey });
});
afterAll(async () => {
  await client?.close();
  await server?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function browserInstance() {
  const instance = await client.instances.start({ instance_type: 'browser' });
  const { cdp_url } = await client.browser.cdpUrl(instance.id);
  return {
    cdpUrl: cdp_url,
    [Symbol.asyncDispose]: async () => void (await client.instances.stop(instance.id)),
  };
}

describe('burrow-sandbox/playwright', () => {
  it('default context and its first page; disposing leaves the remote browser running', async () => {
    await using instance = await browserInstance();
    {
      await using conn = await playwright(instance.cdpUrl);
      expect(conn.context).toBe(conn.browser.contexts()[0]);
      expect(conn.page).toBe(conn.context.pages()[0]);
      await conn.page.goto('data:text/html,<title>kept</title>');
    }
    await using again = await playwright(instance.cdpUrl);
    expect(await again.page.title()).toBe('kept');
    let closedWith = '';
    void again.closed.then((reason) => (closedWith = reason));
    await again.disconnect();
    await again.disconnect(); // idempotent
    await expect(again.closed).resolves.toBe('disconnect() was called');
    expect(closedWith).toBe('disconnect() was called');
  });

  it('opens a page in the default context when it has none', async () => {
    await using instance = await browserInstance();
    {
      await using conn = await playwright(instance.cdpUrl);
      await conn.page.close();
      expect(conn.context.pages()).toEqual([]);
    }
    await using conn = await playwright(instance.cdpUrl);
    expect(conn.context.pages()).toEqual([conn.page]);
  });
});

describe('burrow-sandbox/puppeteer', () => {
  it('first page of the default context; dispose disconnects and never closes the browser', async () => {
    await using instance = await browserInstance();
    {
      await using conn = await puppeteer(instance.cdpUrl);
      expect((await conn.browser.defaultBrowserContext().pages())[0]).toBe(conn.page);
      await conn.page.goto('data:text/html,<title>kept</title>');
    }
    await using again = await puppeteer(instance.cdpUrl);
    expect(await again.page.title()).toBe('kept');
    await again.disconnect();
    expect(again.browser.connected).toBe(false);
    await expect(again.closed).resolves.toBe('disconnect() was called');
  });
});
