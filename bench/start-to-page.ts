/**
 * Start to page: the time from `POST /v1/start` of a browser instance, through `cdp_url`,
 * Playwright `connectOverCDP` and a `goto` of a local page on the instance's first tab, next to
 * the baseline of playwright-core launching the same Chromium with the same flags itself
 * (`chromium.launch` → `newPage` → `goto`). Teardown (instance stop, `browser.close()`) is not
 * timed. Runs alternate between the two, after one untimed warm-up of each.
 *
 * `node --import tsx bench/start-to-page.ts [N]` (default N = 10).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { BASE_FLAGS } from '../src/server/chromium/index.js';
import { startServer } from '../src/server/index.js';
import { median, serverApi } from './stats.js';

const N = Number(process.argv[2] ?? 10);
const CHROMIUM = '/usr/lib/chromium/chromium';

const site = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<!doctype html><title>bench</title><p>hello</p>');
});
await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
const pageUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;

const dataDir = mkdtempSync(join(tmpdir(), 'burrow-bench-'));
const server = await startServer({
  port: 0,
  dataDir,
  isolation: { allowHostPorts: [(site.address() as AddressInfo).port] },
});
const api = serverApi(server);

/** burrow: start → cdp_url → connectOverCDP → goto; returns ms. */
async function viaBurrow(): Promise<number> {
  const t = performance.now();
  const { id } = await api('/v1/start', { instance_type: 'browser' });
  const { cdp_url } = await api(`/v1/instance/${String(id)}/browser/cdp_url`);
  const browser = await chromium.connectOverCDP(String(cdp_url));
  await browser.contexts()[0]!.pages()[0]!.goto(pageUrl);
  const elapsed = performance.now() - t;
  await browser.close();
  await api(`/v1/instance/${String(id)}/stop`, {});
  return elapsed;
}

/** Baseline: playwright-core launches Chromium → newPage → goto; returns ms. */
async function viaLaunch(): Promise<number> {
  const t = performance.now();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: [...BASE_FLAGS] });
  const page = await browser.newPage();
  await page.goto(pageUrl);
  const elapsed = performance.now() - t;
  await browser.close();
  return elapsed;
}

try {
  await viaBurrow();
  await viaLaunch();
  const burrow: number[] = [];
  const launch: number[] = [];
  for (let i = 0; i < N; i++) {
    burrow.push(await viaBurrow());
    launch.push(await viaLaunch());
  }
  const [b, l] = [median(burrow), median(launch)];
  console.log(`start-to-page, median of ${N}:`);
  console.log(`  burrow (POST /v1/start → connectOverCDP → goto): ${b.toFixed(1)} ms`);
  console.log(`  playwright-core chromium.launch → newPage → goto: ${l.toFixed(1)} ms`);
  console.log(`  ratio burrow / launch: ${(b / l).toFixed(2)}`);
} finally {
  await server.close();
  site.close();
  rmSync(dataDir, { recursive: true, force: true });
}
