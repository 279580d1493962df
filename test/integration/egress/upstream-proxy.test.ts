/**
 * Issue 23, item 1: an instance's egress chains to an upstream proxy given at start. Real
 * proxies from Debian on the host's loopback, started here: tinyproxy (HTTP, basic auth) and
 * microsocks (SOCKS5, username/password). Asserted: pages load and the upstream's own log shows
 * the traffic; blocked domains and host ports the operator did not open are still refused before
 * anything reaches the upstream; wrong credentials fail the navigation at once (HTTP) or the
 * start (SOCKS5) with a clear error; the credentials are in no answer and no log line; a bad
 * `proxy` is a 422 or a 400 naming the problem; a browser context cannot bring a proxy of its own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSession } from 'burrow-sandbox';
import { sessionServer } from '../../e2e/fixtures/session-server.js';
import { eventually } from '../../helpers/server.js';
import { startSite, type TestSite } from '../../helpers/site.js';

const HTTP_USER = 'alice';
const HTTP_PASSWORD = 'tp-secret-7Qx9';
const SOCKS_USER = 'bob';
const SOCKS_PASSWORD = 'ms-secret-4Kz2';

const lines: string[] = [];
let site: TestSite;
let work: string;
let tinyproxy: ChildProcess;
let microsocks: ChildProcess;
let httpPort = 0;
let socksPort = 0;
/** An allowed host port nothing listens on: an unreachable upstream. */
let deadPort = 0;
/** A host port that listens but that the operator did not open. */
let closedToInstances: Server;
let refusedPort = 0;
let seenByRefused = 0;
let microsocksLog = '';

const freePort = async () => {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
};
const tinyproxyLog = () => readFileSync(join(work, 'tinyproxy.log'), 'utf8');

const allowHostPorts: number[] = [];
beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'burrow-upstream-'));
  site = await startSite();
  [httpPort, socksPort, deadPort] = [await freePort(), await freePort(), await freePort()];
  allowHostPorts.push(site.port, httpPort, socksPort, deadPort);
  closedToInstances = createServer((_q, s) => {
    seenByRefused++;
    s.end('should not be reached');
  });
  await new Promise<void>((resolve) => closedToInstances.listen(0, '127.0.0.1', resolve));
  refusedPort = (closedToInstances.address() as AddressInfo).port;

  writeFileSync(
    join(work, 'tinyproxy.conf'),
    [
      `Port ${httpPort}`,
      'Listen 127.0.0.1',
      'Timeout 30',
      'LogLevel Connect',
      `LogFile "${join(work, 'tinyproxy.log')}"`,
      'MaxClients 64',
      'Allow 127.0.0.1',
      `BasicAuth ${HTTP_USER} ${HTTP_PASSWORD}`,
      '',
    ].join('\n'),
  );
  writeFileSync(join(work, 'tinyproxy.log'), '');
  tinyproxy = spawn('tinyproxy', ['-d', '-c', join(work, 'tinyproxy.conf')], { stdio: 'ignore' });
  microsocks = spawn(
    'microsocks',
    ['-i', '127.0.0.1', '-p', String(socksPort), '-u', SOCKS_USER, '-P', SOCKS_PASSWORD],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  microsocks.stdout!.on('data', (d: Buffer) => (microsocksLog += d.toString()));
  microsocks.stderr!.on('data', (d: Buffer) => (microsocksLog += d.toString()));
  await eventually(
    () => /Initializing tinyproxy|Setting the various/.test(tinyproxyLog()),
    'tinyproxy',
  );
  await new Promise((r) => setTimeout(r, 300));
}, 30_000);

const env = sessionServer('bups-', {
  logLevel: 'debug',
  logDestination: { write: (line) => void lines.push(line) },
  maxInstances: 3,
  // the first session takes the pooled instance: its egress gets the upstream at the claim
  warmPool: { browser: 1 },
  isolation: { allowHostPorts },
});

afterAll(async () => {
  tinyproxy?.kill();
  microsocks?.kill();
  closedToInstances?.close();
  await site?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

const httpProxy = (password = HTTP_PASSWORD) => ({
  server: `http://127.0.0.1:${httpPort}`,
  username: HTTP_USER,
  password,
});
const socksProxy = (password = SOCKS_PASSWORD) => ({
  server: `socks5://127.0.0.1:${socksPort}`,
  username: SOCKS_USER,
  password,
});

/** The first line of what `goto` threw, or `loaded`. */
async function failure(goto: () => Promise<unknown>): Promise<string> {
  try {
    await goto();
    return 'loaded';
  } catch (err) {
    return (err as Error).message.split('\n')[0]!;
  }
}

describe('upstream proxy', () => {
  it('HTTP upstream with basic auth: traffic goes through it, policy still holds, no credentials out (Playwright)', async () => {
    await env.server.warmPool.ready();
    const pooled = env.server.warmPool.ids();
    expect(pooled.length).toBeGreaterThan(0);
    await using session = await openSession({
      ...env.remote,
      proxy: { ...httpProxy(), bypass: 'direct.localhost' },
      // a loopback name would need a fresh instance (browser/index.ts adopt())
      blockedDomains: ['blocked.test'],
    });
    expect(pooled).toContain(session.instance.id);
    const page = session.page;
    const res = await page.goto(`${site.origin}/through-http-upstream`);
    expect(res?.status()).toBe(200);
    expect(await page.textContent('body')).toContain(`127.0.0.1:${site.port}`);
    // the upstream's own log has the tunnel to the site, and one more for a request of the page
    // (not a navigation: nothing checked it ahead)
    const tunnels = () => tinyproxyLog().split(`CONNECT 127.0.0.1:${site.port}`).length - 1;
    await eventually(() => tunnels() > 0, 'the tunnel in tinyproxy log');
    const seen = tunnels();
    const sub = await page.evaluate(
      async () => (await fetch('/sub-request', { cache: 'no-store' })).status,
    );
    expect(sub).toBe(200);
    await eventually(() => tunnels() > seen, 'the page request in tinyproxy log');

    // a blocked domain and a host port the operator did not open: refused before the upstream
    const before = tinyproxyLog();
    const blocked = `http://www.blocked.test/`;
    expect(await failure(() => page.goto(blocked))).toContain(
      `net::ERR_BLOCKED_BY_CLIENT at ${blocked}`,
    );
    const hostLocal = `http://127.0.0.1:${refusedPort}/`;
    expect(await failure(() => page.goto(hostLocal))).toContain(
      `net::ERR_CONNECTION_REFUSED at ${hostLocal}`,
    );
    const after = tinyproxyLog().slice(before.length);
    expect(after).not.toContain('blocked.test');
    expect(after).not.toContain(String(refusedPort));
    expect(seenByRefused).toBe(0);

    // a bypassed host goes direct: the upstream never hears of it
    const tab = await session.context.newPage();
    expect((await tab.goto(`http://direct.localhost:${site.port}/bypassed`))?.status()).toBe(200);
    expect(tinyproxyLog()).not.toContain('direct.localhost');

    // the API answers the upstream's address, never its credentials
    const got = await env.server.api(`/v1/instance/${session.instance.id}`);
    const body = await got.text();
    expect(JSON.parse(body).proxy).toEqual({ server: `http://127.0.0.1:${httpPort}` });
    const list = await (await env.server.api('/v1/instances')).text();
    for (const text of [body, list]) {
      expect(text).not.toContain(HTTP_PASSWORD);
      expect(text).not.toContain(HTTP_USER);
    }
  }, 180_000);

  it('wrong HTTP credentials: the navigation fails at once with a clear error, logged', async () => {
    await using session = await openSession({ ...env.remote, proxy: httpProxy('wrong-pw') });
    const url = `${site.origin}/wrong-credentials`;
    const started = Date.now();
    expect(await failure(() => session.page.goto(url, { timeout: 30_000 }))).toContain(
      `net::ERR_ACCESS_DENIED at ${url}`,
    );
    expect(Date.now() - started).toBeLessThan(15_000);
    await eventually(
      () =>
        lines.some((l) => l.includes('proxy_auth_failed') && l.includes('refused the credentials')),
      'the upstream failure in the log',
    );
    // and among the instance's events, without the credentials
    const row = (await (await env.server.api(`/v1/instance/${session.instance.id}`)).json()) as {
      events?: { type: string; message: string }[];
    };
    const event = row.events?.find((e) => e.type === 'proxy_auth_failed');
    expect(event?.message).toMatch(/refused the credentials/);
    expect(JSON.stringify(row)).not.toContain('wrong-pw');
  }, 120_000);

  it('SOCKS5 upstream with username/password (Puppeteer), and its wrong password refused at start', async () => {
    await using session = await openSession({
      ...env.remote,
      driver: 'puppeteer',
      proxy: socksProxy(),
    });
    const res = await session.page.goto(`${site.origin}/through-socks`);
    expect(res?.status()).toBe(200);
    await eventually(
      () => microsocksLog.includes(`connected to 127.0.0.1:${site.port}`),
      'the connection in microsocks log',
    );

    const wrong = await env.server.api('/v1/start', {
      json: { instance_type: 'browser', proxy: socksProxy('wrong-pw') },
    });
    expect(wrong.status).toBe(400);
    expect(wrong.headers.get('x-burrow-error')).toBe('proxy_auth_failed');
    expect(((await wrong.json()) as { detail: string }).detail).toContain(
      `socks5://127.0.0.1:${socksPort}`,
    );
  }, 120_000);

  it('a bad proxy is refused at start, naming the problem', async () => {
    const start = (proxy: unknown) =>
      env.server.api('/v1/start', { json: { instance_type: 'browser', proxy } });
    for (const proxy of [
      { server: 'ftp://127.0.0.1:21' },
      { server: 'http://' },
      { server: 'http://user:pw@127.0.0.1:3128' },
      { server: `http://127.0.0.1:${httpPort}`, password: 'no-user' },
    ]) {
      const res = await start(proxy);
      expect(res.status, JSON.stringify(proxy)).toBe(422);
      expect(JSON.stringify(await res.json())).toContain('proxy');
    }
    const refused = await start({ server: `http://127.0.0.1:${refusedPort}` });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('x-burrow-error')).toBe('proxy_refused');
    expect(((await refused.json()) as { detail: string }).detail).toContain(
      `--allow-host-port ${refusedPort}`,
    );
    const dead = await start({ server: `socks5://127.0.0.1:${deadPort}` });
    expect(dead.status).toBe(400);
    expect(dead.headers.get('x-burrow-error')).toBe('proxy_unreachable');
    expect(((await dead.json()) as { detail: string }).detail).toContain(
      `socks5://127.0.0.1:${deadPort}`,
    );
    // nothing of those starts is listed
    const listed = (await (await env.server.api('/v1/instances')).json()) as unknown[];
    expect(listed.filter((i) => (i as { status: string }).status === 'running')).toHaveLength(0);
  }, 60_000);

  it("a context's own proxy is refused with a clear error; no credentials in any log line", async () => {
    await using session = await openSession({ ...env.remote, proxy: httpProxy() });
    const err = await session.browser
      .newContext({ proxy: { server: 'http://10.1.2.3:8080' } })
      .then(() => undefined)
      .catch((e: Error) => e);
    expect(err?.message).toContain('cannot have a proxy of its own');
    // the session's own contexts go through the instance's upstream
    const ctx = await session.browser.newContext();
    const page = await ctx.newPage();
    expect((await page.goto(`${site.origin}/fresh-context`))?.status()).toBe(200);
    await eventually(
      () => tinyproxyLog().includes(`CONNECT 127.0.0.1:${site.port}`),
      'tinyproxy saw the context',
    );
    const all = lines.join('');
    for (const secret of [HTTP_PASSWORD, SOCKS_PASSWORD]) expect(all).not.toContain(secret);
    expect(all).toContain('egress');
  }, 120_000);

  it('the MCP instance_start takes proxy; a refused one is a tool error naming it', async () => {
    const client = new Client({ name: 'burrow-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${env.server.url}/mcp`), {
        requestInit: { headers: { 'x-api-key': env.server.apiKey } },
      }),
    );
    const texts = (r: CallToolResult) =>
      r.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join('\n');
    try {
      const bad = (await client.callTool({
        name: 'instance_start',
        arguments: {
          instance_type: 'browser',
          proxy: { server: `http://127.0.0.1:${refusedPort}` },
        },
      })) as CallToolResult;
      expect(bad.isError).toBe(true);
      expect(texts(bad)).toContain(`http://127.0.0.1:${refusedPort}`);
      const started = (await client.callTool({
        name: 'instance_start',
        arguments: { instance_type: 'browser', proxy: socksProxy() },
      })) as CallToolResult;
      expect(started.isError, texts(started)).toBeFalsy();
      expect(texts(started)).not.toContain(SOCKS_PASSWORD);
      const nav = (await client.callTool({
        name: 'browser_navigate',
        arguments: { url: `${site.origin}/through-mcp` },
      })) as CallToolResult;
      expect(nav.isError, texts(nav)).toBeFalsy();
      await eventually(
        () =>
          (microsocksLog.match(new RegExp(`connected to 127\\.0\\.0\\.1:${site.port}`, 'g')) ?? [])
            .length >= 2,
        'the MCP browser through microsocks',
      );
    } finally {
      await client.close();
    }
  }, 120_000);

  it('every process of an ubuntu instance leaves through the upstream (curl in bash)', async () => {
    const started = await env.server.api('/v1/start', {
      json: {
        instance_type: 'ubuntu',
        proxy: socksProxy(),
        blocked_domains: ['blocked.localhost'],
      },
    });
    expect(started.status).toBe(200);
    const { id } = (await started.json()) as { id: string };
    try {
      await eventually(
        async () =>
          ((await (await env.server.api(`/v1/instance/${id}`)).json()) as { status: string })
            .status === 'running',
        'the ubuntu instance running',
        120_000,
      );
      const bash = async (command: string) => {
        const res = await env.server.api(`/v1/instance/${id}/bash`, { json: { command } });
        expect(res.status).toBe(200);
        return ((await res.json()) as { output?: string }).output ?? '';
      };
      // the instance's own loopback is direct (NO_PROXY): name the egress explicitly
      const via = `curl -s --noproxy '' -x "$HTTP_PROXY" -o /dev/null -w '%{http_code}'`;
      const before = microsocksLog.length;
      expect(await bash(`${via} http://127.0.0.1:${site.port}/from-bash`)).toContain('200');
      await eventually(
        () => microsocksLog.slice(before).includes(`connected to 127.0.0.1:${site.port}`),
        `curl through microsocks: ${microsocksLog.slice(before)} / ${lines
          .filter((l) => l.includes('egress'))
          .slice(-5)
          .join('')}`,
      );
      expect(await bash(`${via} http://blocked.localhost:${site.port}/`)).toContain('403');
      expect(microsocksLog).not.toContain('blocked.localhost');
    } finally {
      await env.server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    }
  }, 180_000);
});
