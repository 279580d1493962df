/**
 * openSession against a real server and real Chromium: what a session hands back, what stop()
 * leaves behind (nothing), and how failures after the instance exists stop it again.
 */
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthStateNotFoundError,
  Burrow,
  ConfigurationError,
  openSession,
  SessionStartError,
  SessionStoppedError,
  type Instance,
} from 'burrow-sandbox';
import { serveDemoSite, type DemoSite } from '../../../src/cli/demo-site.js';
import { sessionServer } from '../../e2e/fixtures/session-server.js';
import { eventually, instancePids, pngSize, type TestServer } from '../../helpers/server.js';
import { startSite } from '../../helpers/site.js';

const env = sessionServer('bso-');
const { dataDir } = env;
let server: TestServer;
let site: DemoSite;
let remote: { baseUrl: string; apiKey: string };
beforeAll(async () => {
  ({ server, remote } = env);
  site = await serveDemoSite();
});
afterAll(() => site?.close());

const ledgerFiles = () => {
  try {
    return readdirSync(join(dataDir, 'sessions')).filter((f) => f.endsWith('.json'));
  } catch {
    return [];
  }
};

async function instance(id: string): Promise<Instance> {
  return (await (await server.api(`/v1/instance/${id}`)).json()) as Instance;
}

async function liveInstances(): Promise<Instance[]> {
  const all = (await (await server.api('/v1/instances')).json()) as Instance[];
  return all.filter((i) => i.status !== 'terminated' && i.status !== 'error');
}

describe('openSession (Playwright)', () => {
  it('hands back the running instance, its default context and first page; stop() leaves nothing', async () => {
    const session = await openSession(remote);
    const id = session.instance.id;
    expect(session.driver).toBe('playwright');
    expect(session.instance).toMatchObject({ instance_type: 'browser', status: 'running' });
    expect(session.cdpUrl).toMatch(new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/cdp/${id}/`));
    expect(session.context).toBe(session.browser.contexts()[0]);
    expect(session.context.pages()).toContain(session.page);
    expect(session.connected).toBe(true);

    await session.page.goto(`${site.url}/login`);
    expect(await session.page.title()).toBe('Sign in');
    expect(await session.currentUrl()).toBe(`${site.url}/login`);
    expect(pngSize(await session.screenshot())).toEqual([1024, 768]);

    // the ledger names the instance, this process and the server, never the key
    const [file] = ledgerFiles();
    const entry = JSON.parse(readFileSync(join(dataDir, 'sessions', file!), 'utf8')) as object;
    expect(entry).toMatchObject({ instanceId: id, pid: process.pid, baseUrl: server.url });
    expect(JSON.stringify(entry)).not.toContain(server.apiKey);

    const [a, b] = await Promise.all([session.stop(), session.stop()]);
    expect(a).toEqual({ instanceId: id, status: 'terminated' });
    expect(b).toEqual(a);
    expect(await session.stop()).toEqual(a);
    expect((await instance(id)).status).toBe('terminated');
    await eventually(() => instancePids(id).length === 0, 'the instance processes to exit');
    expect(ledgerFiles()).toEqual([]);
    expect(session.connected).toBe(false);
    expect(() => session.page).toThrow(SessionStoppedError);
    await expect(session.screenshot()).rejects.toThrow(SessionStoppedError);
  });

  it('stops the instance when the body of `await using` throws', async () => {
    let id = '';
    await expect(
      (async () => {
        await using session = await openSession(remote);
        id = session.instance.id;
        throw new Error('boom');
      })(),
    ).rejects.toThrow('boom');
    expect((await instance(id)).status).toBe('terminated');
  });

  it('passes instance options through: resolution and blocked domains', async () => {
    const names = await startSite(); // records the Host of every request it receives
    try {
      await using session = await openSession({
        ...remote,
        resolution: [800, 600],
        blockedDomains: ['blocked.localhost'],
        timeoutHours: 0.5,
      });
      expect(session.instance.resolution).toEqual([800, 600]);
      expect(pngSize(await session.screenshot())).toEqual([800, 600]);
      // *.localhost is the host's loopback, where the site listens: only the blocked domain
      // keeps the request away from it. The instance's egress refuses it, and the navigation
      // fails as blocked (net::ERR_BLOCKED_BY_CLIENT, issue 20); the site never hears of it.
      const blocked = `http://www.blocked.localhost:${names.port}/`;
      await expect(session.page.goto(blocked)).rejects.toThrow(
        `net::ERR_BLOCKED_BY_CLIENT at ${blocked}`,
      );
      const tab = await session.context.newPage(); // the error page may still be committing
      const allowed = await tab.goto(`http://allowed.localhost:${names.port}/`);
      expect(allowed?.status()).toBe(200);
      // every request the site got (the page, its favicon) named the allowed host
      expect(new Set(names.hosts)).toEqual(new Set([`allowed.localhost:${names.port}`]));
    } finally {
      await names.close();
    }
  });
});

describe('openSession (Puppeteer)', () => {
  it('hands back a Puppeteer browser and page, and stop() only disconnects before stopping', async () => {
    let id = '';
    {
      await using session = await openSession({ ...remote, driver: 'puppeteer' });
      id = session.instance.id;
      expect(session.driver).toBe('puppeteer');
      expect(session.browser.connected).toBe(true);
      const pages = await session.browser.defaultBrowserContext().pages();
      expect(pages[0]).toBe(session.page);
      await session.page.goto(`${site.url}/login`);
      expect(await session.page.title()).toBe('Sign in');
      expect(session.page.viewport()).toBeNull(); // defaultViewport: null, the instance's screen
    }
    expect((await instance(id)).status).toBe('terminated');
    await eventually(() => instancePids(id).length === 0, 'the instance processes to exit');
  });
});

describe('failures after the instance exists stop it again', () => {
  it('an unknown authState: AuthStateNotFoundError, no instance left', async () => {
    const before = new Set((await liveInstances()).map((i) => i.id));
    await expect(openSession({ ...remote, authState: 'no-such-state' })).rejects.toThrow(
      AuthStateNotFoundError,
    );
    expect((await liveInstances()).filter((i) => !before.has(i.id))).toEqual([]);
    expect(ledgerFiles()).toEqual([]);
  });

  it('a failing cleanup is attached to the original error as cleanupError', async () => {
    const client = new Burrow(remote);
    const realStop = client.instances.stop.bind(client.instances);
    let leaked = '';
    client.instances.stop = async (instanceId) => {
      leaked = instanceId;
      throw new Error('injected stop failure');
    };
    // a failure once the instance exists (an unknown auth state now fails before the start)
    client.browser.cdpUrl = async () => {
      throw new Error('injected cdp_url failure');
    };
    const error: unknown = await openSession({ client }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionStartError);
    expect(error).toMatchObject({ code: 'start_failed' });
    expect((error as Error).message).toContain('injected cdp_url failure');
    expect((error as { cleanupError?: Error }).cleanupError?.message).toBe('injected stop failure');
    // the ledger keeps the entry for the reaper; clean up by hand here
    expect(ledgerFiles()).toHaveLength(1);
    await realStop(leaked);
    rmSync(join(dataDir, 'sessions', ledgerFiles()[0]!));
    await client.close();
  });

  it('waits while the instance deploys, and gives up when it will never run', async () => {
    // fault injection: the real start, reported as still `deploying`, as a slower server would
    const deploying = (stopFirst: boolean) => {
      const client = new Burrow(remote);
      const start = client.instances.start.bind(client.instances);
      client.instances.start = async (body, opts) => {
        const instance = await start(body, opts);
        if (stopFirst) await client.instances.stop(instance.id);
        return { ...instance, status: 'deploying' };
      };
      return client;
    };
    {
      await using client = deploying(false);
      await using session = await openSession({ client });
      expect(session.instance.status).toBe('running'); // polled until running
    }
    await using client = deploying(true);
    const error: unknown = await openSession({ client }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionStartError);
    expect(error).toMatchObject({
      code: 'start_failed',
      message: expect.stringMatching(/^Instance inst_\w+ is terminated instead of running$/),
    });
  });

  it('startTimeoutMs: SessionStartError start_timeout, and the late instance is stopped', async () => {
    const listed = async () => (await (await server.api('/v1/instances')).json()) as Instance[];
    const before = new Set((await listed()).map((i) => i.id));
    // the start answers only after the deadline, so the instance exists but arrives late
    await using client = new Burrow(remote);
    const start = client.instances.start.bind(client.instances);
    client.instances.start = async (body, opts) => {
      const instance = await start(body, opts);
      await sleep(3000);
      return instance;
    };
    const error: unknown = await openSession({ client, startTimeoutMs: 1500 }).catch((e) => e);
    expect(error).toBeInstanceOf(SessionStartError);
    expect(error).toMatchObject({ code: 'start_timeout' });
    expect(String((error as Error).message)).toMatch(
      /did not open within 1500 ms \(while starting the instance\)/,
    );
    const fresh = (await listed()).filter((i) => !before.has(i.id));
    expect(fresh).toHaveLength(1); // started, then stopped once the start answered
    expect(fresh.every((i) => i.status === 'terminated')).toBe(true);
  });

  it('an aborted signal rejects and stops the instance', async () => {
    const controller = new AbortController();
    const opening = openSession({ ...remote, signal: controller.signal });
    setTimeout(() => controller.abort(new Error('user gave up')), 30);
    await expect(opening).rejects.toThrow();
    await eventually(async () => (await liveInstances()).length === 0, 'no live instance');
  });

  it('rejects invalid options before any request', async () => {
    const bad = [
      { driver: 'selenium' },
      { instanceType: 'windows' },
      { timeoutHours: 25 },
      { resolution: [0, 600] },
      { blockedDomains: ['http://x.test/'] },
      { startTimeoutMs: -1 },
      { baseUrl: 'ftp://host' },
      { client: new Burrow(remote), apiKey: 'k' },
      { typo: true },
    ];
    const before = ((await (await server.api('/v1/instances')).json()) as unknown[]).length;
    for (const options of bad) {
      await expect(openSession(options as never)).rejects.toThrow(ConfigurationError);
    }
    expect(((await (await server.api('/v1/instances')).json()) as unknown[]).length).toBe(before);
  });
});
