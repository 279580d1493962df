/**
 * Reconnecting. The fault is injected for real: the server's public URL (and so every cdp_url)
 * points at a TCP proxy that the test can cut, which drops the CDP socket while the instance
 * keeps running.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSession, type SessionBase, type SessionEvents } from 'burrow-sandbox';
import { testServer, type TestServer } from '../../helpers/server.js';

const dataDir = mkdtempSync(join(tmpdir(), 'bsr-'));
process.env.BURROW_DATA_DIR = dataDir;

/** A TCP proxy to `target` port; `cut()` drops every connection it carries. */
async function tcpProxy() {
  const sockets = new Set<Socket>();
  let target = 0;
  const proxy = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => s.destroy());
    }
    client.pipe(upstream).pipe(client);
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  const { port } = proxy.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    /** Sends new connections to this port. */
    to(port: number) {
      target = port;
    },
    cut() {
      for (const s of sockets) s.destroy();
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

let proxy: Awaited<ReturnType<typeof tcpProxy>>;
let server: TestServer;
let other: TestServer;
let remote: { baseUrl: string; apiKey: string };
beforeAll(async () => {
  proxy = await tcpProxy();
  server = await testServer({ dataDir: join(dataDir, 'a'), publicUrl: proxy.url });
  other = await testServer({ dataDir: join(dataDir, 'b'), apiKey: server.apiKey });
  proxy.to(server.port);
  remote = { baseUrl: server.url, apiKey: server.apiKey };
});
afterAll(async () => {
  await proxy?.close();
  await server?.close();
  await other?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const next = <E extends keyof SessionEvents>(session: SessionBase, event: E) =>
  new Promise<SessionEvents[E][0]>((resolve) => session.once(event, (...args) => resolve(args[0])));

describe('reconnect', () => {
  it('a dropped CDP socket emits disconnected with a reason; reconnect() re-binds browser, context and page', async () => {
    await using session = await openSession(remote);
    expect(session.cdpUrl).toContain(proxy.url.replace('http', 'ws'));
    await session.page.goto('data:text/html,<title>before</title>');
    const { browser, context, page } = session;

    const disconnected = next(session, 'disconnected');
    proxy.cut();
    const event = await disconnected;
    expect(event).toEqual({
      reason: expect.stringMatching(/closed while instance inst_\w+ is still running/),
      instanceStatus: 'running',
      willReconnect: false,
    });
    expect(session.connected).toBe(false);

    const reconnected = next(session, 'reconnected');
    await session.reconnect();
    expect(await reconnected).toEqual({ attempts: 1 });
    expect(session.connected).toBe(true);
    expect(session.browser).not.toBe(browser);
    expect(session.context).not.toBe(context);
    expect(session.page).not.toBe(page);
    expect(await session.page.title()).toBe('before'); // the same remote tab
    await session.page.goto('data:text/html,<title>after</title>');
    expect(await session.currentUrl()).toBe('data:text/html,<title>after</title>');
  });

  it('with the reconnect option it reconnects by itself, with backoff', async () => {
    await using session = await openSession({
      ...remote,
      driver: 'puppeteer',
      reconnect: { minDelayMs: 20, retries: 3 },
    });
    const disconnected = next(session, 'disconnected');
    const reconnected = next(session, 'reconnected');
    proxy.cut();
    expect(await disconnected).toMatchObject({ instanceStatus: 'running', willReconnect: true });
    expect(await reconnected).toEqual({ attempts: 1 });
    await session.page.goto('data:text/html,<title>again</title>');
    expect(await session.page.title()).toBe('again');
  });

  it('an instance stopped behind its back: disconnected says so and does not reconnect', async () => {
    await using session = await openSession({ ...remote, reconnect: true });
    const disconnected = next(session, 'disconnected');
    await server.api(`/v1/instance/${session.instance.id}/stop`, { method: 'POST' });
    expect(await disconnected).toEqual({
      reason: expect.stringMatching(/is terminated$/),
      instanceStatus: 'terminated',
      willReconnect: false,
    });
    expect(await session.stop()).toMatchObject({ status: 'terminated' });
  });

  it('stop() counts an instance the server no longer knows (404) as stopped', async () => {
    const session = await openSession({ baseUrl: proxy.url, apiKey: server.apiKey });
    proxy.to(other.port); // the API now answers from a server that never saw this instance
    proxy.cut();
    try {
      expect(await session.stop()).toEqual({ instanceId: session.instance.id, status: 'gone' });
    } finally {
      proxy.to(server.port);
      await server.api(`/v1/instance/${session.instance.id}/stop`, { method: 'POST' });
    }
  });
});
