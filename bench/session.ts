/**
 * What the bridge costs. `node --import tsx bench/session.ts [N]` (default 7) measures, N times
 * each and interleaved, on the warm embedded server:
 *
 *   bridge   openSession() → page.goto(local page) → dispose
 *   pool     the same against a server with a warm pool (`--warm-pool 2`); the pool is refilled
 *            before each measured run, untimed (back to back, a refill takes a pool start's time)
 *   bare     the same by hand with the client: instances.start + browser.cdpUrl +
 *            chromium.connectOverCDP + goto + browser.close + instances.stop
 *   local    playwright-core chromium.launch() → newPage() → goto() → close(), no server at all
 *
 * and prints the medians, bridge ÷ local, and the bridge's own overhead over the bare calls.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { Burrow, embeddedServer, openSession } from 'burrow-sandbox';
import { startServer } from 'burrow-sandbox/server';
import { median } from './stats.js';

const n = Number(process.argv[2] ?? 7);
if (!Number.isInteger(n) || n < 1) throw new Error('usage: bench/session.ts [N ≥ 1]');

const dataDir = mkdtempSync(join(tmpdir(), 'bbench-'));
process.env.BURROW_DATA_DIR = dataDir;
delete process.env.BURROW_BASE_URL;

const site = createServer((_req, res) =>
  res.writeHead(200, { 'content-type': 'text/html' }).end('<title>bench</title><h1>bench</h1>'),
);
await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
const pageUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;

const server = await embeddedServer(); // held for the whole run: the server stays warm
const client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey });
const pooled = await startServer({
  port: 0,
  dataDir: join(dataDir, 'pooled'),
  warmPool: { browser: 2 },
  isolation: { allowHostLoopback: true },
});
const settle = () => Promise.all([pooled.warmPool.ready(), server.warmPool.ready()]);

const runs = {
  bridge: async () => {
    await using session = await openSession();
    await session.page.goto(pageUrl);
  },
  pool: async () => {
    await using session = await openSession({ baseUrl: pooled.url, apiKey: pooled.apiKey });
    await session.page.goto(pageUrl);
  },
  bare: async () => {
    const instance = await client.instances.start({ instance_type: 'browser' });
    const { cdp_url } = await client.browser.cdpUrl(instance.id);
    const browser = await chromium.connectOverCDP(cdp_url);
    await browser.contexts()[0]!.pages()[0]!.goto(pageUrl);
    await browser.close();
    await client.instances.stop(instance.id);
  },
  local: async () => {
    const browser = await chromium.launch({
      executablePath: process.env.BURROW_CHROMIUM ?? '/usr/lib/chromium/chromium',
      args: [
        '--no-sandbox',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        '--disable-quic',
        '--headless',
      ],
    });
    const page = await browser.newPage();
    await page.goto(pageUrl);
    await browser.close();
  },
};
type Name = keyof typeof runs;

const times: Record<Name, number[]> = { bridge: [], pool: [], bare: [], local: [] };
const names = Object.keys(runs) as Name[];
try {
  for (const name of names) await runs[name](); // warm-up, not counted
  for (let i = 0; i < n; i++) {
    for (const name of names) {
      await settle(); // no pool refill runs beside a measured run
      await sleep(300); // nor the last instance's teardown
      const t0 = performance.now();
      await runs[name]();
      times[name].push(performance.now() - t0);
    }
    process.stderr.write(`\rrun ${i + 1}/${n}`);
  }
} finally {
  process.stderr.write('\n');
  await client.close();
  await server.release();
  await pooled.close();
  site.close();
  rmSync(dataDir, { recursive: true, force: true });
}

const m = Object.fromEntries(names.map((k) => [k, median(times[k])])) as Record<Name, number>;
const ms = (x: number) => `${x.toFixed(0)} ms`.padStart(8);

console.log(`session open → goto → dispose, median of ${n} (warm embedded server)`);
console.log(`  bridge (openSession)                ${ms(m.bridge)}`);
console.log(`  bridge with a warm pool             ${ms(m.pool)}`);
console.log(`  bare client calls + connectOverCDP  ${ms(m.bare)}`);
console.log(`  local chromium.launch (no server)   ${ms(m.local)}`);
console.log(`  bridge ÷ local launch               ${(m.bridge / m.local).toFixed(2)}×`);
console.log(`  bridge with pool ÷ local launch     ${(m.pool / m.local).toFixed(2)}×`);
console.log(
  `  bridge overhead over bare calls     ${ms(m.bridge - m.bare)} (${(((m.bridge - m.bare) / m.bare) * 100).toFixed(1)} %)`,
);
