/**
 * Issue 20, item 2: a navigation the instance's egress refuses fails in the driver the way a
 * local Chromium's network stack fails for the same cause — `net::ERR_NAME_NOT_RESOLVED` for a
 * name that does not resolve, `net::ERR_CONNECTION_REFUSED` for a host port the operator did not
 * open (and for an opened one nothing listens on), `net::ERR_BLOCKED_BY_CLIENT` for a blocked domain — over http and https, for Playwright
 * and Puppeteer, and on a warm-pool instance whose blocked domains came with the claim. The
 * server's log names the switch that opens a refused port.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { openSession } from 'burrow-sandbox';
import { sessionServer } from '../../e2e/fixtures/session-server.js';
import { startSite, type TestSite } from '../../helpers/site.js';

/** Log lines of the server, as written. */
const lines: string[] = [];
let site: TestSite;
/** A host loopback port that listens but that the operator did not open. */
let closedToInstances: Server;
let refusedPort = 0;
/** A port nothing listens on, for the local browser's side. */
let freePort = 0;

const listen = async (handler: RequestListener = (_q, s) => s.end('x')) => {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
};

let seenByRefused = 0;
/** The host ports the server opens to instances: the site's, known once it listens. */
const allowHostPorts: number[] = [];
// registered before the server's own beforeAll, which reads the ports
beforeAll(async () => {
  site = await startSite();
  allowHostPorts.push(site.port);
  closedToInstances = await listen((_q, s) => {
    seenByRefused++;
    s.end('should not be reached');
  });
  refusedPort = (closedToInstances.address() as AddressInfo).port;
  const probe = await listen();
  freePort = (probe.address() as AddressInfo).port;
  await new Promise((r) => probe.close(r));
  // opened by the operator, but nothing listens there: refused by the target itself
  allowHostPorts.push(freePort);
}, 30_000);
const env = sessionServer('bnav-', {
  logLevel: 'warn',
  logDestination: { write: (line) => void lines.push(line) },
  warmPool: { browser: 1 },
  maxInstances: 3,
  isolation: { allowHostPorts },
});
afterAll(async () => {
  await site?.close();
  closedToInstances?.close();
});

let local: Browser;
beforeAll(async () => {
  local = await chromium.launch({ executablePath: '/usr/lib/chromium/chromium' });
}, 30_000);
afterAll(() => local?.close());

/*
 * A `goto` right after a failed one can be interrupted by the failure's error page, which
 * commits a moment after `goto` threw (a local Chromium does the same): the pages that must load
 * after failures load in a new tab.
 */

/** The first line of what `goto` threw, or `loaded` when it did not throw. */
async function failure(goto: () => Promise<unknown>): Promise<string> {
  try {
    await goto();
    return 'loaded';
  } catch (err) {
    return (err as Error).message.split('\n')[0]!;
  }
}

describe('navigation errors through the egress', () => {
  it('each cause fails with the net::ERR_* of a local Chromium, at once (Playwright)', async () => {
    await using session = await openSession({
      ...env.remote,
      blockedDomains: ['blocked.localhost'],
    });
    const page = session.page;
    const localPage = await local.newPage();
    const cases: [string, string, string | undefined][] = [
      ['http://nonexistent.invalid/', 'net::ERR_NAME_NOT_RESOLVED', 'http://nonexistent.invalid/'],
      [
        'https://nonexistent.invalid/',
        'net::ERR_NAME_NOT_RESOLVED',
        'https://nonexistent.invalid/',
      ],
      [
        `http://127.0.0.1:${refusedPort}/`,
        'net::ERR_CONNECTION_REFUSED',
        `http://127.0.0.1:${freePort}/`,
      ],
      [
        `http://localhost:${refusedPort}/page`,
        'net::ERR_CONNECTION_REFUSED',
        `http://localhost:${freePort}/page`,
      ],
      // a port the operator opened where nothing listens: the target refuses, as locally
      [
        `http://127.0.0.1:${freePort}/open`,
        'net::ERR_CONNECTION_REFUSED',
        `http://127.0.0.1:${freePort}/open`,
      ],
      [
        `https://127.0.0.1:${freePort}/open`,
        'net::ERR_CONNECTION_REFUSED',
        `https://127.0.0.1:${freePort}/open`,
      ],
      [`http://www.blocked.localhost:${site.port}/`, 'net::ERR_BLOCKED_BY_CLIENT', undefined],
      ['https://blocked.localhost/', 'net::ERR_BLOCKED_BY_CLIENT', undefined],
    ];
    for (const [url, expected, localUrl] of cases) {
      const started = Date.now();
      const remote = await failure(() => page.goto(url, { timeout: 20_000 }));
      expect(remote, url).toContain(`${expected} at ${url}`);
      expect(Date.now() - started, url).toBeLessThan(10_000);
      if (localUrl !== undefined) {
        // the same cause in a local browser: the same error
        const mine = await failure(() => localPage.goto(localUrl, { timeout: 20_000 }));
        expect(mine, localUrl).toContain(`${expected} at ${localUrl}`);
      }
    }
    // the instance never reached the port it was refused
    expect(seenByRefused).toBe(0);
    // pages still load where allowed
    const tab = await session.context.newPage();
    const ok = await tab.goto(`${site.origin}/hello`);
    expect(ok?.status()).toBe(200);
    expect(await tab.textContent('body')).toContain(`127.0.0.1:${site.port}`);
    // the log says how the operator opens the refused port
    expect(lines.join('')).toContain(`--allow-host-port ${refusedPort}`);
  }, 120_000);

  it('a user route still answers for a host that does not resolve', async () => {
    await using session = await openSession(env.remote);
    const page = session.page;
    await page.route('http://mocked.invalid/**', (route) =>
      route.fulfill({ contentType: 'text/html', body: '<p>mocked</p>' }),
    );
    const res = await page.goto('http://mocked.invalid/x');
    expect(res?.status()).toBe(200);
    expect(await page.textContent('p')).toBe('mocked');
  }, 60_000);

  it('Puppeteer gets the same errors', async () => {
    await using session = await openSession({
      ...env.remote,
      driver: 'puppeteer',
      blockedDomains: ['blocked.localhost'],
    });
    const page = session.page;
    for (const [url, expected] of [
      ['https://nonexistent.invalid/', 'net::ERR_NAME_NOT_RESOLVED'],
      [`http://127.0.0.1:${refusedPort}/`, 'net::ERR_CONNECTION_REFUSED'],
      [`http://blocked.localhost:${site.port}/`, 'net::ERR_BLOCKED_BY_CLIENT'],
    ] as const) {
      expect(await failure(() => page.goto(url)), url).toContain(`${expected} at ${url}`);
    }
  }, 60_000);

  it("an ubuntu instance's desktop browser fails the same way", async () => {
    await using session = await openSession({
      ...env.remote,
      instanceType: 'ubuntu',
      blockedDomains: ['blocked.test'],
    });
    const page = session.page;
    for (const [url, expected] of [
      ['https://nonexistent.invalid/', 'net::ERR_NAME_NOT_RESOLVED'],
      [`http://127.0.0.1:${refusedPort}/`, 'net::ERR_CONNECTION_REFUSED'],
      ['http://blocked.test/', 'net::ERR_BLOCKED_BY_CLIENT'],
    ] as const) {
      expect(await failure(() => page.goto(url)), url).toContain(`${expected} at ${url}`);
    }
    const ok = await (await session.context.newPage()).goto(`${site.origin}/hello`);
    expect(ok?.status()).toBe(200);
  }, 120_000);

  it('a warm-pool instance with blocked domains given at the claim fails the same way', async () => {
    const server = env.server;
    await server.warmPool.ready();
    const pooled = server.warmPool.ids();
    expect(pooled.length).toBeGreaterThan(0);
    await using session = await openSession({
      ...env.remote,
      // a loopback name among them would need a fresh instance (browser/index.ts claim())
      blockedDomains: ['claimed.test'],
    });
    expect(pooled).toContain(session.instance.id);
    const page = session.page;
    for (const url of ['http://claimed.test/', 'https://a.claimed.test:8443/']) {
      expect(await failure(() => page.goto(url)), url).toContain(
        `net::ERR_BLOCKED_BY_CLIENT at ${url}`,
      );
    }
    expect(await failure(() => page.goto('http://nonexistent.invalid/'))).toContain(
      'net::ERR_NAME_NOT_RESOLVED',
    );
    const ok = await (
      await session.context.newPage()
    ).goto(`http://allowed.localhost:${site.port}/`);
    expect(ok?.status()).toBe(200);
  }, 90_000);
});
