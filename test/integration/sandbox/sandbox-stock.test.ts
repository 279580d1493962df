/**
 * Sandboxes made ahead (src/server/sandbox/stock.ts): a start the warm pool does not serve takes
 * a complete sandbox built for the id it then has, its egress works and enforces the start's
 * blocked domains, the stock refills with new ids, a stocked sandbox that dies is replaced
 * without a trace, a burst larger than the stock still starts every instance, and nothing of
 * the stock outlives the server.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, instancePids, instanceProcesses, testServer } from '../../helpers/server.js';
import { useServer } from '../../helpers/use-server.js';
import { startSite, type TestSite } from '../../helpers/site.js';

let site: TestSite;

beforeAll(async () => {
  site = await startSite();
});

afterAll(async () => {
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
  expect(
    readdirSync('/var/lib/burrow/sandboxes').filter((r) => r.includes(`-${process.pid}-`)),
  ).toEqual([]);
});
const server = useServer({ sandboxStock: 2 });

/** Ids named by the pid 1 (`burrow-init-<id>`) of each sandbox of this test process's servers. */
function anchored(): Map<string, number> {
  const ids = new Map<string, number>();
  for (const pid of instanceProcesses()) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const name = argv.find((a) => a.startsWith('burrow-init-'));
      // pid 1 itself: the shell whose own argv[0] names it (not bubblewrap's command line)
      if (name && argv[0] === '/bin/sh') ids.set(name.slice('burrow-init-'.length), pid);
    } catch {
      /* gone */
    }
  }
  return ids;
}

/** The launch steps waiting in this test process's sandboxes (`Sandbox.prepareSpawn`), by id. */
function waitingLaunchers(): Map<string, number> {
  const found = new Map<string, number>();
  for (const pid of instanceProcesses()) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[0] !== '/usr/bin/perl' || !argv[2]?.includes('BURROW_INSTANCE')) continue;
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      const id = env
        .find((e) => e.startsWith('BURROW_INSTANCE='))
        ?.slice('BURROW_INSTANCE='.length);
      if (id) found.set(id, pid);
    } catch {
      /* gone */
    }
  }
  return found;
}

/** Ids of the listed instances. */
async function listed(): Promise<string[]> {
  const rows = (await (await server.api('/v1/instances')).json()) as { id: string }[];
  return rows.map((r) => r.id);
}

async function startBrowser(json: Record<string, unknown> = {}): Promise<string> {
  const res = await server.api('/v1/start', { json: { instance_type: 'browser', ...json } });
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

const stop = (id: string) => server.api(`/v1/instance/${id}/stop`, { method: 'POST' });

describe('sandboxes made ahead', () => {
  it('a start takes one under its id; its egress serves the start’s blocked domains; the stock refills', async () => {
    await server.sandboxStock.ready();
    expect(server.sandboxStock.ids().length).toBe(2);
    const before = anchored();
    expect([...before.keys()].sort()).toEqual(server.sandboxStock.ids().sort());
    // made ahead, not an instance of anyone's: not listed, and no instance is running
    const ids = [...before.keys()];
    expect((await listed()).filter((id) => ids.includes(id))).toEqual([]);

    // each also holds the chain of a browser's Chromium, waiting for its command line
    const launchers = waitingLaunchers();
    expect([...launchers.keys()].sort()).toEqual([...ids].sort());

    const id = await startBrowser({ blocked_domains: ['localhost'] });
    expect(ids).toContain(id);
    // the start's Chromium is that process: its command line was written to it
    const chromiumArgv = readFileSync(`/proc/${launchers.get(id)}/cmdline`, 'utf8').split('\0');
    expect(chromiumArgv[0]).toBe('/usr/lib/chromium/chromium');
    expect(chromiumArgv).toContain('--remote-debugging-pipe');
    // not refilled at once: the new instance's client connects and loads its first page now,
    // and the refill's process starts would take their CPU (REFILL_DELAY_MS, 1.5 s)
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(server.sandboxStock.ids()).toEqual(ids.filter((x) => x !== id));
    const { cdp_url } = (await (await server.api(`/v1/instance/${id}/browser/cdp_url`)).json()) as {
      cdp_url: string;
    };
    const browser = await chromium.connectOverCDP(cdp_url);
    try {
      const page = browser.contexts()[0]!.pages()[0]!;
      // through the listener opened ahead, to the host's loopback
      await page.goto(`http://127.0.0.1:${site.port}/`);
      expect(await page.textContent('#host')).toBe(`hello 127.0.0.1:${site.port}`);
      // the start's blocked domains hold in a sandbox made before the start was asked for
      const refused = await page.goto(`http://sub.localhost:${site.port}/`).then(
        () => 'loaded',
        (err: Error) => err.message,
      );
      expect(refused).toContain('net::ERR_BLOCKED_BY_CLIENT');
      expect(site.hosts.filter((h) => h.includes('localhost'))).toEqual([]);
    } finally {
      await browser.close();
    }

    // refilled after the start, with an id nobody had
    await eventually(() => server.sandboxStock.ids().length === 2, 'the stock to refill');
    const after = anchored();
    const other = ids.find((x) => x !== id)!;
    expect(after.has(other)).toBe(true);
    const fresh = [...after.keys()].filter((x) => x !== id && x !== other);
    expect(fresh).toHaveLength(1);
    await stop(id);
    await eventually(() => instancePids(id).length === 0, 'the instance’s processes to end');
  });

  it('a stocked sandbox whose pid 1 dies is replaced and leaves nothing', async () => {
    await server.sandboxStock.ready();
    const [id, init] = [...anchored()][0]!;
    process.kill(init, 'SIGKILL');
    // its cgroup, its disk directory and its instance directory go with it
    const left = () =>
      execFileSync(
        'sh',
        [
          '-c',
          `ls -d /sys/fs/cgroup/*/burrow/*.${id} /var/lib/burrow/sandboxes/*/${id} /tmp/burrow-test-*/instances/*/${id} 2>/dev/null || true`,
        ],
        { encoding: 'utf8' },
      ).trim();
    await eventually(
      () => instancePids(id).length === 0 && left() === '',
      'its processes and directories to go',
    );
    await server.sandboxStock.ready();
    expect(server.sandboxStock.ids().length).toBe(2);
    expect(anchored().size).toBe(2);
    expect(anchored().has(id)).toBe(false);
    // and nobody can start an instance with it: the next start takes a live one
    const next = await startBrowser();
    expect(next).not.toBe(id);
    expect(anchored().has(next)).toBe(true);
    await stop(next);
  });

  it('a burst larger than the stock starts every instance, each in a sandbox of its own', async () => {
    await server.sandboxStock.ready();
    const stocked = [...anchored().keys()];
    const ids = await Promise.all([startBrowser(), startBrowser(), startBrowser()]);
    expect(new Set(ids).size).toBe(3);
    // two came from the stock, the third built its own
    expect(ids.filter((id) => stocked.includes(id))).toHaveLength(2);
    const running = anchored();
    for (const id of ids) expect(running.has(id), id).toBe(true);
    await Promise.all(ids.map(stop));
    await server.sandboxStock.ready();
    expect(server.sandboxStock.ids().length).toBe(2);
  });
});

describe('without a stock', () => {
  it('sandboxStock 0 makes nothing ahead and starts as before', async () => {
    const bare = await testServer({ sandboxStock: 0 });
    try {
      await bare.sandboxStock.ready();
      expect(bare.sandboxStock.ids().length).toBe(0);
      const res = await bare.api('/v1/start', { json: { instance_type: 'browser' } });
      expect(res.status).toBe(200);
      const { id } = (await res.json()) as { id: string };
      expect(bare.sandboxStock.ids().length).toBe(0);
      await bare.api(`/v1/instance/${id}/stop`, { method: 'POST' });
    } finally {
      await bare.close();
    }
  });
});
