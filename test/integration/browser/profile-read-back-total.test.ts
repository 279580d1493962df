/**
 * Profiles read back at once share one budget (issue 35, item 2): each stopping instance started
 * with a saved profile reads its profile into the server's memory, charged per profile at up to
 * `maxProfileBytes` × 4, so several stopping at once each held that much. Three instances whose
 * pages each leave a 250 MB OPFS file (sparse, its zeros are read whole) are stopped at once,
 * with the read-back total (`maxProfileBytesReadBack`) at 300 MiB: the saves take turns, the
 * server's RSS grows by less than that total and a margin, and every profile is saved whole.
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
    // nothing lost: a new instance with one of them finds the page's file whole
    const res = await server.api('/v1/start', {
      json: { instance_type: 'browser', profile: { name: NAMES[2], save_changes: false } },
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    expect(await site.run(id, 'size', 'big')).toBe(`size ${FILE}`);
    await client.instances.stop(id);
    await expect
      .poll(
        async () => (await client.profiles.list()).find((r) => r.name === NAMES[2])?.in_use_by,
        {
          timeout: 60_000,
        },
      )
      .toBeNull();
    for (const name of NAMES)
      expect(await client.profiles.delete(name)).toEqual({ status: 'success' });
  }, 600_000);
});
