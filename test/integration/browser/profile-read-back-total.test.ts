/**
 * Profiles read back at once share one budget (issue 35, item 2): each stopping instance started
 * with a saved profile reads its profile into the server's memory, charged per profile at up to
 * `maxProfileBytes` × 4, so several stopping at once each held that much. Three instances whose
 * pages each leave a 250 MB OPFS file (sparse, its zeros are read whole) are stopped at once,
 * with the read-back total (`maxProfileBytesReadBack`) at 300 MiB: the saves take turns, the
 * server's RSS grows by less than that total and a margin, and every profile is saved whole.
 * Started again, all three at once, their restores take turns within the same total.
 * The bounds are scaled down from the defaults (1 GiB, 200 MiB × 4) to spare this shared machine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Burrow } from '../../../src/client/index.js';
import { opfsSite, type OpfsSite } from '../../helpers/opfs-site.js';
import { instanceProcesses, testServer, type TestServer } from '../../helpers/server.js';

const READ_BACK = 300 * 2 ** 20;
const FILE = 250_000_000;
/** What the server may hold besides the profiles' files (their sealed copies are ~250 KB each). */
const MARGIN = 150 * 2 ** 20;
const NAMES = ['rb-a', 'rb-b', 'rb-c'];

let server: TestServer;
let client: Burrow;
let site: OpfsSite;

beforeAll(async () => {
  server = await testServer({ maxProfileBytes: 100 * 2 ** 20, maxProfileBytesReadBack: READ_BACK });
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey, maxRetries: 0 });
  site = await opfsSite(client);
}, 60_000);

afterAll(async () => {
  await client?.close();
  await server?.close();
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});

describe('profiles read back at once', () => {
  it('take turns within the total: the server holds less than it, every profile is saved', async () => {
    const ids: string[] = [];
    for (const name of NAMES) {
      const res = await server.api('/v1/start', {
        json: { instance_type: 'browser', profile: { name, save_changes: true } },
      });
      expect(res.status).toBe(200);
      const { id } = (await res.json()) as { id: string };
      ids.push(id);
      expect(await site.run(id, 'make', 'big', FILE)).toBe(`made ${FILE}`);
    }
    const base = process.memoryUsage().rss;
    let peak = base;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 10);
    try {
      await Promise.all(ids.map((id) => client.instances.stop(id)));
      await expect
        .poll(
          async () => {
            const rows = await client.profiles.list();
            return NAMES.every((n) => {
              const row = rows.find((r) => r.name === n);
              return row !== undefined && row.in_use_by === null && row.size_bytes > 0;
            });
          },
          { timeout: 180_000, interval: 200 },
        )
        .toBe(true);
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, process.memoryUsage().rss);
    expect(peak - base, `RSS ${base} → peak ${peak}`).toBeLessThan(READ_BACK + MARGIN);
    for (const id of ids) {
      const events = (await client.instances.get(id)).events ?? [];
      expect(events.filter((e) => e.type === 'profile_not_saved')).toEqual([]);
    }
    // nothing lost, and restored within the same total: three instances started at once with
    // them (each profile opens into 250 MB the server holds until the instance's disk has it)
    // take turns too, and each finds its page's file whole
    const before = process.memoryUsage().rss;
    let top = before;
    const restoring = setInterval(() => {
      top = Math.max(top, process.memoryUsage().rss);
    }, 10);
    let started: string[];
    try {
      started = await Promise.all(
        NAMES.map(async (name) => {
          const res = await server.api('/v1/start', {
            json: { instance_type: 'browser', profile: { name, save_changes: false } },
          });
          expect(res.status).toBe(200);
          return ((await res.json()) as { id: string }).id;
        }),
      );
    } finally {
      clearInterval(restoring);
    }
    expect(top - before, `RSS ${before} → peak ${top}`).toBeLessThan(READ_BACK + MARGIN);
    for (const id of started) expect(await site.run(id, 'size', 'big')).toBe(`size ${FILE}`);
    await Promise.all(started.map((id) => client.instances.stop(id)));
    await expect
      .poll(async () => (await client.profiles.list()).every((r) => r.in_use_by === null), {
        timeout: 60_000,
      })
      .toBe(true);
    for (const name of NAMES)
      expect(await client.profiles.delete(name)).toEqual({ status: 'success' });
  }, 600_000);
});
