/**
 * The warm pool (src/server/instances/pool.ts) and the instant stop: `start` hands over an instance that
 * was started ahead of demand, with the caller's resolution and blocked domains applied; pooled
 * instances are never listed, share the instance cap, refill in the background, and die with the
 * server. `stop` answers once the instance is unusable; its processes follow.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import {
  eventually,
  instanceChromium,
  instancePids,
  instanceProcesses,
  pngSize,
  testServer,
  type TestServer,
} from '../../helpers/server.js';
import { startSite } from '../../helpers/site.js';

/** The command line of `pid`, spaces for NULs ('' once it is gone). */
function readProc(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/** The ids of the server's pooled instances, once the pool is full, each with a Chromium. */
async function pooledIds(server: TestServer): Promise<string[]> {
  await server.warmPool.ready();
  return server.warmPool.ids().filter((id) => instanceChromium(id) !== undefined);
}

/** Ids of live instances of `server`: listed ones and pooled ones. */
async function serverInstanceIds(server: TestServer): Promise<string[]> {
  const listed = (await (await server.api('/v1/instances')).json()) as {
    id: string;
    status: string;
  }[];
  return [
    ...listed.filter((i) => i.status !== 'terminated').map((i) => i.id),
    ...server.warmPool.ids(),
  ];
}

async function start(server: TestServer, body: Record<string, unknown>) {
  const res = await server.api('/v1/start', { json: { instance_type: 'browser', ...body } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/**
 * Waits for the pool of a new server to hold one instance with its Chromium, and answers how long
 * that took (ms): the pool's pace on this machine now, which the waits below are scaled by.
 */
async function firstFill(server: TestServer): Promise<number> {
  const began = performance.now();
  await eventually(
    async () => (await pooledIds(server)).length === 1,
    'a pooled instance',
    120_000,
  );
  return performance.now() - began;
}

/** How long to wait for the pool to refill: its first fill's time, many times over. */
const refillMs = (fillMs: number) => 30_000 + 5 * fillMs;

const servers: TestServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  expect(instanceProcesses()).toEqual([]);
});

describe('warm pool', { timeout: 300_000 }, () => {
  /** The first server's first fill (ms), measured by the first case. */
  let fill = 30_000;
  it('hands a pooled instance over with the caller’s options, unlisted before, refilled after', async () => {
    const server = await testServer({ warmPool: { browser: 1 }, maxInstances: 4 });
    servers.push(server);
    const site = await startSite();
    try {
      fill = await firstFill(server);
      const [pooled] = await pooledIds(server);
      expect((await server.api('/v1/instances').then((r) => r.json())) as unknown[]).toEqual([]);
      expect((await server.api(`/v1/instance/${pooled}`)).status).toBe(404);

      const claimed = await start(server, {
        resolution: [800, 600],
        blocked_domains: ['blocked.example'],
        timeout_hours: 0.5,
      });
      expect(claimed.status).toBe(200);
      expect(claimed.body).toMatchObject({ id: pooled, status: 'running', resolution: [800, 600] });
      const listed = (await (await server.api('/v1/instances')).json()) as { id: string }[];
      expect(listed.map((i) => i.id)).toEqual([pooled]);

      // its screen has the caller's size
      const shot = Buffer.from(
        (
          (await (
            await server.api(`/v1/instance/${pooled}/screenshot`, { method: 'POST' })
          ).json()) as { base64_image: string }
        ).base64_image,
        'base64',
      );
      expect(pngSize(shot)).toEqual([800, 600]);

      // the caller's blocked domains hold, other names go on to the network as usual
      const { cdp_url } = (await (
        await server.api(`/v1/instance/${pooled}/browser/cdp_url`)
      ).json()) as { cdp_url: string };
      const browser = await chromium.connectOverCDP(cdp_url);
      const page = browser.contexts()[0]!.pages()[0]!;
      expect(await page.evaluate(() => [innerWidth, innerHeight])).toEqual([800, 600]);
      // each in a tab of its own: a failed navigation's error page commits after goto threw
      const status = async (url: string) => {
        const tab = await page.context().newPage();
        return tab.goto(url).then(
          (r) => r?.status() ?? 0,
          (e: Error) => e.message.split('\n')[0]!,
        );
      };
      // refused as blocked (issue 20), not with the egress's 403 page
      expect(await status('http://blocked.example/')).toBe(
        'page.goto: net::ERR_BLOCKED_BY_CLIENT at http://blocked.example/',
      );
      expect(await status('http://sub.blocked.example/')).toBe(
        'page.goto: net::ERR_BLOCKED_BY_CLIENT at http://sub.blocked.example/',
      );
      expect(await status('http://other.example/')).not.toMatch(/ERR_BLOCKED_BY_CLIENT|^403$/);
      expect(await status(`${site.origin}/hello`)).toBe(200);
      await browser.close();

      // the pool refills with a new instance, unlisted again
      await eventually(
        async () => (await pooledIds(server)).some((id) => id !== pooled),
        'the pool refilled',
        refillMs(fill),
      );
      const [next] = (await pooledIds(server)).filter((id) => id !== pooled);
      expect(next).toBeDefined();
      expect((await server.api(`/v1/instance/${next}`)).status).toBe(404);
    } finally {
      await site.close();
    }
  });

  it('gives every user a fresh instance: nothing the previous user left is there', async () => {
    const server = servers[0]!;
    const site = await startSite();
    try {
      const first = await start(server, {});
      const firstId = first.body.id as string;
      const cdp = async (id: string) =>
        (
          (await (await server.api(`/v1/instance/${id}/browser/cdp_url`)).json()) as {
            cdp_url: string;
          }
        ).cdp_url;
      let browser = await chromium.connectOverCDP(await cdp(firstId));
      let page = browser.contexts()[0]!.pages()[0]!;
      await page.goto(`${site.origin}/hello`);
      await page.evaluate(() => {
        document.cookie = 'left=behind; max-age=3600';
        localStorage.setItem('left', 'behind');
      });
      await browser.close();
      await server.api(`/v1/instance/${firstId}/stop`, { method: 'POST' });

      await eventually(
        async () => (await pooledIds(server)).length >= 1,
        'a pooled instance',
        refillMs(fill),
      );
      const second = await start(server, {});
      expect(second.body.id).not.toBe(firstId);
      browser = await chromium.connectOverCDP(await cdp(second.body.id as string));
      page = browser.contexts()[0]!.pages()[0]!;
      await page.goto(`${site.origin}/hello`);
      expect(await page.evaluate(() => [document.cookie, localStorage.getItem('left')])).toEqual([
        '',
        null,
      ]);
      await browser.close();
      await server.api(`/v1/instance/${second.body.id as string}/stop`, { method: 'POST' });
    } finally {
      await site.close();
      await server.close(); // the next tests count this process's instances afresh
    }
  });

  it('shares the cap: the pool gives way to a cold start and never causes a 429', async () => {
    const server = await testServer({ warmPool: { browser: 1 }, maxInstances: 2 });
    servers.push(server);
    const fill = await firstFill(server);
    // a request the pool cannot serve (a loopback name to block) starts cold; the pool makes room
    const [pooled] = await pooledIds(server);
    const cold = await start(server, { blocked_domains: ['localhost'] });
    expect(cold.status).toBe(200);
    expect(cold.body.id).not.toBe(pooled);
    const second = await start(server, {});
    expect(second.status).toBe(200);
    const third = await start(server, {});
    expect(third.status).toBe(429);
    // the pooled instance was handed to the second start, or stopped to make room for it (its
    // processes go right after the answer, so on a busy machine a moment later)
    if (second.body.id !== pooled) {
      await eventually(
        async () => instancePids(pooled!).length === 0,
        'the pooled one gone',
        10_000,
      );
    }
    // two live instances fill the cap: nothing is started for the pool meanwhile (for as long as
    // it took to fill, in which it would have started one)
    await sleep(Math.max(1_500, fill));
    const ids = await serverInstanceIds(server);
    expect(ids.filter((id) => id !== cold.body.id && id !== second.body.id)).toEqual([]);
    for (const id of [cold.body.id, second.body.id] as string[]) {
      await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    }
    await eventually(
      async () => (await pooledIds(server)).length === 1,
      'refilled',
      refillMs(fill),
    );
  });
});

describe('warm pool of ubuntu instances', { timeout: 300_000 }, () => {
  it('hands over a desktop with bash and a started kernel; another size starts fresh', async () => {
    const server = await testServer({ warmPool: { ubuntu: 1 }, maxInstances: 3 });
    servers.push(server);
    try {
      await server.warmPool.ready();
      expect(server.warmPool.counts()).toEqual({ browser: 0, ubuntu: 1 });
      const [pooled] = server.warmPool.ids();
      // the pooled instance already runs its shell and its kernel
      const names = instancePids(pooled!).map((pid) => readProc(pid));
      expect(names.some((c) => c.startsWith('/bin/bash'))).toBe(true);
      expect(names.some((c) => c.includes('ipykernel'))).toBe(true);

      const claimed = await server.api('/v1/start', {
        json: { instance_type: 'ubuntu', blocked_domains: ['blocked.example'] },
      });
      const body = (await claimed.json()) as { id: string; status: string };
      expect(body).toMatchObject({ id: pooled, status: 'running' });
      const run = async (path: string, json: unknown) =>
        (await server.api(`/v1/instance/${body.id}/${path}`, { json })).json() as Promise<
          Record<string, unknown>
        >;
      expect(await run('bash', { command: 'echo hi' })).toMatchObject({ output: 'hi\n' });
      const code = await run('code/execute', { code: '1+1' });
      expect(code).toMatchObject({ status: 'ok', execution_count: 1 });
      expect(JSON.stringify(code.outputs)).toContain('2');
      // the egress enforces the claimer's blocked domains
      const curl = await run('bash', {
        command: 'curl -s -o /dev/null -w "%{http_code}" http://blocked.example/',
      });
      expect(curl.output).toBe('403');

      // a size the pooled desktop does not have: a fresh instance of that size
      await server.warmPool.ready();
      const other = await server.api('/v1/start', {
        json: { instance_type: 'ubuntu', resolution: [800, 600] },
      });
      const otherBody = (await other.json()) as { id: string; resolution: number[] };
      expect(other.status).toBe(200);
      expect(otherBody.resolution).toEqual([800, 600]);
      expect(server.warmPool.counts().ubuntu).toBe(1); // the pooled one is still there
    } finally {
      await server.close();
    }
  });
});

describe('stop', () => {
  it('answers at once: the instance is unusable, its processes go right after', async () => {
    const server = await testServer();
    servers.push(server);
    const began = performance.now();
    const { body } = await start(server, {});
    const startMs = performance.now() - began; // the pace of this machine now
    const id = body.id as string;
    const { cdp_url } = (await (await server.api(`/v1/instance/${id}/browser/cdp_url`)).json()) as {
      cdp_url: string;
    };
    const browser = await chromium.connectOverCDP(cdp_url);
    const disconnected = new Promise<void>((r) => browser.on('disconnected', () => r()));
    expect(instancePids(id).length).toBeGreaterThan(0);

    const res = await server.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    expect(await res.json()).toEqual({ status: 'terminated' });
    // unusable as soon as it answered
    expect(
      ((await (await server.api(`/v1/instance/${id}`)).json()) as { status: string }).status,
    ).toBe('terminated');
    expect((await server.api(`/v1/instance/${id}/screenshot`)).status).toBeGreaterThanOrEqual(400);
    await expect(chromium.connectOverCDP(cdp_url, { timeout: 5_000 })).rejects.toThrow();
    await disconnected;
    await eventually(() => instancePids(id).length === 0, 'no process left', 15_000 + 3 * startMs);
  });
});
