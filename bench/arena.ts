/**
 * A lifecycle benchmark in the shape of the public "BrowserArena" one, so the figures compare
 * with published ones: create an instance → Playwright `connectOverCDP` → `goto` waiting for
 * `domcontentloaded` → release, each phase timed.
 *
 * `node --import tsx bench/arena.ts [N]` (default 10) runs, in the same process and run:
 *
 *   cold      a server without a pool (every create starts a sandbox and a Chromium)
 *   pool      a server with a warm pool of 10 browser instances
 *   local     playwright-core `chromium.launch()` → `newPage` → `goto` → `close`, no server
 *
 * each N times one after the other, then (cold and pool) 10 lifecycles at once. The page is
 * served on 127.0.0.1. Prints p50/p95 per phase and the totals' ratio to the local launch.
 * Between measured runs the pool is refilled, untimed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { Burrow } from 'burrow-sandbox';
import { startServer, type RunningServer } from 'burrow-sandbox/server';
import { median, percentile } from './stats.js';

const n = Number(process.argv[2] ?? 10);
if (!Number.isInteger(n) || n < 1) throw new Error('usage: bench/arena.ts [N ≥ 1]');
const CONCURRENT = 10;

const dataDir = mkdtempSync(join(tmpdir(), 'barena-'));
const site = createServer((_req, res) =>
  res
    .writeHead(200, { 'content-type': 'text/html' })
    .end('<!doctype html><title>arena</title><h1>arena</h1><p>a page served on loopback</p>'),
);
await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
const pageUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;

const serve = (name: string, warmPool: number) =>
  startServer({
    port: 0,
    dataDir: join(dataDir, name),
    maxInstances: CONCURRENT + 2,
    warmPool: { browser: warmPool },
    isolation: { allowHostLoopback: true },
  });
const cold = await serve('cold', 0);
const pool = await serve('pool', CONCURRENT);

type Phases = Record<string, number>;
/** `POST /v1/start` and `POST /v1/instance/{id}/stop` alone, per remote lifecycle. */
const http = new WeakMap<Phases, { start: number; stop: number }>();

/** One lifecycle against `server`, timed per phase. */
async function remote(server: RunningServer, client: Burrow): Promise<Phases> {
  const t: Phases = {};
  let t0 = performance.now();
  const instance = await client.instances.start({ instance_type: 'browser' });
  const started = performance.now();
  const { cdp_url } = await client.browser.cdpUrl(instance.id);
  t.create = performance.now() - t0;
  const httpStart = started - t0;
  t0 = performance.now();
  const browser = await chromium.connectOverCDP(cdp_url);
  const page = browser.contexts()[0]!.pages()[0]!;
  t.connect = performance.now() - t0;
  t0 = performance.now();
  await page.goto(pageUrl, { waitUntil: 'domcontentloaded' });
  t.goto = performance.now() - t0;
  t0 = performance.now();
  await browser.close();
  const stopping = performance.now();
  await client.instances.stop(instance.id);
  t.release = performance.now() - t0;
  http.set(t, { start: httpStart, stop: performance.now() - stopping });
  void server;
  return t;
}

async function local(): Promise<Phases> {
  const t: Phases = {};
  let t0 = performance.now();
  const browser = await chromium.launch({
    executablePath: process.env.BURROW_CHROMIUM ?? '/usr/lib/chromium/chromium',
    args: [
      '--no-sandbox', // this process is root here; burrow's instances keep Chromium's sandbox
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
  const page = await browser.newPage();
  t.create = performance.now() - t0; // launch + newPage: what "create + connect" buys remotely
  t.connect = 0;
  t0 = performance.now();
  await page.goto(pageUrl, { waitUntil: 'domcontentloaded' });
  t.goto = performance.now() - t0;
  t0 = performance.now();
  await browser.close();
  t.release = performance.now() - t0;
  return t;
}

const clients = new Map<RunningServer, Burrow>(
  [cold, pool].map((s) => [s, new Burrow({ baseUrl: s.url, apiKey: s.apiKey })]),
);
const settle = async () => {
  await Promise.all([cold.warmPool.ready(), pool.warmPool.ready()]);
  await sleep(300); // the last instance's teardown
};

const kinds = {
  cold: () => remote(cold, clients.get(cold)!),
  pool: () => remote(pool, clients.get(pool)!),
  local,
};
type Kind = keyof typeof kinds;
const sequential: Record<Kind, Phases[]> = { cold: [], pool: [], local: [] };
const concurrent: Partial<Record<Kind, { each: Phases[]; wall: number }>> = {};

try {
  for (const k of Object.keys(kinds) as Kind[]) {
    await settle();
    await kinds[k](); // warm-up, not counted
  }
  for (let i = 0; i < n; i++) {
    for (const k of Object.keys(kinds) as Kind[]) {
      await settle();
      sequential[k].push(await kinds[k]());
    }
    process.stderr.write(`\rsequential ${i + 1}/${n}`);
  }
  process.stderr.write('\n');
  for (const k of ['cold', 'pool', 'local'] as const) {
    await settle();
    const t0 = performance.now();
    const each = await Promise.all(Array.from({ length: CONCURRENT }, () => kinds[k]()));
    concurrent[k] = { each, wall: performance.now() - t0 };
  }
} finally {
  for (const c of clients.values()) await c.close();
  await Promise.all([cold.close(), pool.close()]);
  site.close();
  rmSync(dataDir, { recursive: true, force: true });
}

const total = (p: Phases) => Object.values(p).reduce((a, b) => a + b, 0);
const ms = (x: number) => `${x.toFixed(0)}`.padStart(6);
const PHASES = ['create', 'connect', 'goto', 'release'] as const;
function table(title: string, rows: Record<string, Phases[]>): void {
  console.log(title);
  console.log(
    `  ${'run'.padEnd(8)}${PHASES.map((p) => `${p} p50/p95`.padStart(18)).join('')}${'total p50/p95'.padStart(18)}`,
  );
  for (const [name, list] of Object.entries(rows)) {
    const cells = PHASES.map((p) => {
      const xs = list.map((x) => x[p]!);
      return `${ms(median(xs))} /${ms(percentile(xs, 95))}`.padStart(18);
    });
    const totals = list.map(total);
    console.log(
      `  ${name.padEnd(8)}${cells.join('')}${`${ms(median(totals))} /${ms(percentile(totals, 95))}`.padStart(18)}`,
    );
  }
}

table(`sequential lifecycles, ${n} each (ms)`, sequential);
for (const k of ['cold', 'pool'] as const) {
  const xs = sequential[k].map((p) => http.get(p)!);
  console.log(
    `  ${k}: POST /v1/start p50 ${median(xs.map((x) => x.start)).toFixed(1)} ms, POST …/stop p50 ${median(xs.map((x) => x.stop)).toFixed(1)} ms (HTTP round trips as the client sees them)`,
  );
}
const med = (k: Kind) => median(sequential[k].map(total));
console.log(
  `  cold ÷ local ${(med('cold') / med('local')).toFixed(2)}×   pool ÷ local ${(med('pool') / med('local')).toFixed(2)}×`,
);
table(
  `${CONCURRENT} lifecycles at once (ms)`,
  Object.fromEntries(Object.entries(concurrent).map(([k, v]) => [k, v.each])),
);
console.log(
  `  wall clock for all ${CONCURRENT}: ${Object.entries(concurrent)
    .map(([k, v]) => `${k} ${v.wall.toFixed(0)} ms`)
    .join(', ')}`,
);
console.log(
  '  (local: create = chromium.launch + newPage, connect = 0; remote: create = POST /v1/start + cdp_url)',
);
