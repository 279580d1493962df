/**
 * What the bridge's transfer proxy (src/session/transfer.ts) costs. `node --import tsx
 * bench/transfer.ts [N]` (default 300) connects Playwright to one browser instance twice, straight
 * to its `cdp_url` and through the proxy, and measures, interleaved, on the warm embedded server:
 *
 *   evaluate     N round trips of `page.evaluate(() => 1)` (small messages)
 *   200 KB       N/10 `page.evaluate` answering a 200 KB string (a large reply)
 *   30 MiB file  3 × `setInputFiles` of a 30 MiB local file: through the proxy (streamed upload,
 *                then a path) vs straight (Playwright inlines the bytes as base64 in the page)
 *
 * and prints the medians and proxy ÷ direct.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Burrow, embeddedServer } from 'burrow-sandbox';
import { connect } from 'burrow-sandbox/playwright';
import { TransferProxy, transferSetup } from '../src/session/transfer.js';
import { median } from './stats.js';

const n = Number(process.argv[2] ?? 300);
if (!Number.isInteger(n) || n < 10) throw new Error('usage: bench/transfer.ts [N ≥ 10]');

const dataDir = mkdtempSync(join(tmpdir(), 'btbench-'));
process.env.BURROW_DATA_DIR = dataDir;
delete process.env.BURROW_BASE_URL;
const bigFile = join(dataDir, 'big.bin');
writeFileSync(bigFile, randomBytes(30 * 1024 * 1024));

const server = await embeddedServer();
const client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey });
const instance = await client.instances.start({ instance_type: 'browser' });
try {
  const { cdp_url } = await client.browser.cdpUrl(instance.id);
  const proxy = await TransferProxy.open({
    cdpUrl: cdp_url,
    ...transferSetup(client, instance.id),
  });
  const direct = await connect(cdp_url);
  const proxied = await connect(proxy.url, { local: true });
  // each connection on its own page, both with a file input
  const pages = {
    direct: await direct.context.newPage(),
    proxy: await proxied.context.newPage(),
  };
  for (const page of Object.values(pages)) {
    await page.setContent('<input type=file id=f><p>' + 'text '.repeat(2000) + '</p>');
  }
  type Name = keyof typeof pages;
  const names: Name[] = ['direct', 'proxy'];

  const measure = async (count: number, run: (name: Name) => Promise<unknown>) => {
    const times: Record<Name, number[]> = { direct: [], proxy: [] };
    for (const name of names) await run(name); // warm-up
    for (let i = 0; i < count; i++) {
      for (const name of names) {
        const t0 = performance.now();
        await run(name);
        times[name].push(performance.now() - t0);
      }
    }
    return { direct: median(times.direct), proxy: median(times.proxy) };
  };

  const rows: [string, { direct: number; proxy: number }][] = [
    ['evaluate', await measure(n, (name) => pages[name].evaluate(() => 1))],
    [
      '200 KB',
      await measure(Math.ceil(n / 10), (name) => pages[name].evaluate(() => 'x'.repeat(200_000))),
    ],
    [
      '30 MiB file',
      // a fresh modification time each run, so the proxy uploads every time (no cache hit)
      await measure(3, async (name) => {
        writeFileSync(bigFile, randomBytes(16), { flag: 'r+' });
        await pages[name].setInputFiles('#f', bigFile);
      }),
    ],
  ];
  console.log(`transfer proxy, medians (N=${n}):`);
  for (const [what, m] of rows) {
    const ratio = m.proxy / m.direct;
    console.log(
      `  ${what.padEnd(12)} direct ${m.direct.toFixed(2).padStart(8)} ms   proxy ${m.proxy
        .toFixed(2)
        .padStart(8)} ms   proxy ÷ direct ${ratio.toFixed(2)}`,
    );
  }
  await direct.disconnect();
  await proxied.disconnect();
  await proxy.close();
} finally {
  await client.instances.stop(instance.id).catch(() => undefined);
  await client.close();
  await server.release();
  rmSync(dataDir, { recursive: true, force: true });
}
