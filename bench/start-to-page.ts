/**
 * Start to page: the time from `POST /v1/start` of a browser instance, through `cdp_url`,
 * Playwright `connectOverCDP` and a `goto` of a local page on the instance's first tab, next to
 * two baselines in the same run, each `chromium.launch` → `newPage` → `goto` of the same Chromium
 * by playwright-core itself:
 *
 * - **raw**: `chromium.launch({ executablePath })` and nothing else, what a script or a test
 *   suite running Chromium locally does (Playwright's own switches, `--no-sandbox` among them);
 * - **same flags**: the launch given burrow's Chromium flags too (`BASE_FLAGS`), stricter: those
 *   flags spare Chromium work at start (e.g. the address bar popup's renderer), so this baseline
 *   leaves what the server, the sandbox, the relay and Chromium's own sandbox cost (Playwright
 *   launches Chromium with `--no-sandbox` unless told; burrow's instances keep Chromium's sandbox);
 * - **same flags, sandboxed** (only as a normal user: Chromium refuses its sandbox as root): that
 *   launch with `chromiumSandbox: true`, the local launch that runs Chromium as burrow does, so
 *   what is left is the server, burrow's sandbox and the relay.
 *
 * Teardown (instance stop, `browser.close()`) is not timed, but each run waits for the other's to
 * end: an instance's stop answers at once and its processes and disk go in the background (~50
 * ms, at times 1-3 s), which otherwise ran beside the baseline's launch and made the baseline
 * ~25% slower and the ratio look that much better. Runs take turns (burrow, raw, same flags),
 * after one untimed warm-up of each. Each phase is printed too: for burrow the start
 * (`POST /v1/start`), `GET cdp_url`, `connectOverCDP` and the `goto`; for the baselines
 * `chromium.launch`, `newPage` and the `goto`.
 *
 * Where the server runs: by default in the bench's own process, as the embedded default runs it
 * (`openSession()` with no server named), so its relay, DevTools mux and egress share one event
 * loop with the client's Playwright; with `--server=process`, as `burrow serve` in a process of its
 * own, as a server a suite or a container names is run. Then the stocks' refill is waited for by
 * time (4 s: the refill waits 1.5 s after a start, the disk stock 1.5 s after the refill).
 *
 * `--idle=MS` lets both sides sit idle that long before each timed run (after the stocks'
 * refill): a start after a pause, as a script's first, is slower than one right after the refill
 * (against the same-flags launch 1.00–1.09× with 4 s, 0.94–1.05× without, since the stock holds a
 * profile skeleton; 1.10–1.15× and 0.94–1.07× before; the cause was not found).
 *
 * `node --import tsx bench/start-to-page.ts [N] [--server=process] [--idle=MS]` (default
 * N = 10). The privilege level is the one the bench runs at: as root the server is root; run as a
 * normal user (e.g. `runuser -u <user> -- env HOME=<a home of its own> node --import tsx
 * bench/start-to-page.ts`), the server builds its sandboxes through user namespaces
 * (src/server/sandbox/sandbox.ts). `BURROW_LOG_LEVEL=debug` logs each start's stages
 * (src/internal/stages.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium, type Browser, type Page } from 'playwright-core';
import { BASE_FLAGS } from '../src/server/chromium/index.js';
import { freePort } from '../test/helpers/ports.js';
import { eventually } from '../test/helpers/server.js';
import { startServer } from '../src/server/index.js';
import { median, phaseMedians, serverApi, startToPage, timed, type Run } from './stats.js';

const args = process.argv.slice(2);
const N = Number(args.find((a) => /^\d+$/.test(a)) ?? 10);
const ownProcess = args.includes('--server=process');
const idleMs = Number(args.find((a) => a.startsWith('--idle='))?.slice('--idle='.length) ?? 0);
const CHROMIUM = '/usr/lib/chromium/chromium';

const site = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<!doctype html><title>bench</title><p>hello</p>');
});
await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
const pageUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;

const dataDir = mkdtempSync(join(tmpdir(), 'burrow-bench-'));
const sitePort = (site.address() as AddressInfo).port;
const server = ownProcess
  ? await serveInProcessOfItsOwn()
  : await startServer({ port: 0, dataDir, isolation: { allowHostPorts: [sitePort] } });
const api = serverApi(server);

/** `burrow serve` in a child process, on a free port, answering once its API does. */
async function serveInProcessOfItsOwn(): Promise<{
  url: string;
  apiKey: string;
  close(): Promise<void>;
  sandboxStock: { ready(): Promise<void> };
}> {
  const port = await freePort();
  const apiKey = randomBytes(16).toString('hex');
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(import.meta.dirname, '../src/cli/main.ts'),
      'serve',
      '--port',
      String(port),
      '--data-dir',
      dataDir,
      '--allow-host-port',
      String(sitePort),
      // run as a normal user there are no limits; the bench times starts, as the embedded one does
      '--allow-unlimited',
    ],
    {
      env: { ...process.env, BURROW_API_KEY: apiKey },
      stdio: ['ignore', process.env.BURROW_LOG_LEVEL ? 'inherit' : 'ignore', 'inherit'],
    },
  );
  const url = `http://127.0.0.1:${port}`;
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`burrow serve exited (${child.exitCode})`);
      return (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200;
    },
    'burrow serve to be ready',
    30_000,
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    url,
    apiKey,
    async close() {
      child.kill('SIGTERM');
      await exited;
    },
    sandboxStock: { ready: () => sleep(4000) },
  };
}

/** How long each instance's teardown went on after its stop answered, in ms. */
const teardowns: number[] = [];
/** The directory the server keeps its instances' directories in (found at the first start). */
let instancesDir: string | undefined;

/**
 * Wait for the end of instance `id`'s teardown: the registry removes its directory last, once
 * its processes are gone and its disk released.
 */
async function tornDown(id: string): Promise<void> {
  instancesDir ??= readdirSync(dataDir, { recursive: true })
    .map(String)
    .filter((p) => p === id || p.endsWith(`/${id}`))
    .map((p) => join(dataDir, p, '..'))[0];
  if (!instancesDir) throw new Error(`no directory of ${id} under ${dataDir}`);
  const t = performance.now();
  while (existsSync(join(instancesDir, id))) {
    if (performance.now() - t > 30_000) throw new Error(`${id} still torn down after 30 s`);
    await sleep(2);
  }
  teardowns.push(performance.now() - t);
}

/** burrow: start → cdp_url → connectOverCDP → goto. */
async function viaBurrow(): Promise<Run> {
  const { run, id } = await startToPage(api, { instance_type: 'browser' }, pageUrl);
  await api(`/v1/instance/${id}/stop`, {});
  await tornDown(id);
  return run;
}

/** Baseline: playwright-core launches Chromium (with `args`) → newPage → goto. */
async function viaLaunch(args: readonly string[], chromiumSandbox = false): Promise<Run> {
  let browser: Browser | undefined;
  let page: Page | undefined;
  const run = await timed([
    async () =>
      (browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [...args],
        chromiumSandbox,
      })),
    async () => (page = await browser!.newPage()),
    () => page!.goto(pageUrl),
  ]);
  await browser!.close();
  return run;
}

/**
 * Before each timed run of either side: the server's stocks of sandboxes and disks made ahead
 * are full again, so that neither side runs beside their refill.
 */
const quiet = async () => {
  await server.sandboxStock.ready();
  if (idleMs > 0) await sleep(idleMs);
};

/** Chromium refuses to run its own sandbox as root: that baseline exists only for a normal user. */
const asRoot = process.getuid?.() === 0;

try {
  await viaBurrow();
  await viaLaunch([]);
  await viaLaunch(BASE_FLAGS);
  if (!asRoot) await viaLaunch(BASE_FLAGS, true);
  const burrow: Run[] = [];
  const raw: Run[] = [];
  const flagged: Run[] = [];
  const sandboxed: Run[] = [];
  for (let i = 0; i < N; i++) {
    await quiet();
    burrow.push(await viaBurrow());
    await quiet();
    raw.push(await viaLaunch([]));
    await quiet();
    flagged.push(await viaLaunch(BASE_FLAGS));
    if (asRoot) continue;
    await quiet();
    sandboxed.push(await viaLaunch(BASE_FLAGS, true));
  }
  const total = (runs: Run[]) => median(runs.map((r) => r.total));
  const b = total(burrow);
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const user = asRoot ? 'root' : 'a normal user';
  const where =
    (ownProcess ? 'server in a process of its own' : 'server in this process') +
    (idleMs > 0 ? `, ${idleMs} ms idle before each run` : '');
  console.log(`start-to-page, median of ${N} (as ${user}, ${where}; load ${load}):`);
  console.log(`  burrow (POST /v1/start → connectOverCDP → goto): ${b.toFixed(1)} ms`);
  console.log(`    ${phaseMedians(burrow, ['start', 'cdp_url', 'connectOverCDP', 'goto'])}`);
  const td = [...teardowns].sort((x, y) => x - y);
  console.log(
    `    (untimed: teardown after stop, median ${median(td).toFixed(0)} ms, max ${td.at(-1)!.toFixed(0)} ms)`,
  );
  const baselines: [string, Run[]][] = [
    ['raw chromium.launch()', raw],
    ["chromium.launch with burrow's flags", flagged],
  ];
  if (!asRoot)
    baselines.push(["chromium.launch with burrow's flags and Chromium's sandbox", sandboxed]);
  for (const [name, runs] of baselines) {
    console.log(`  playwright-core ${name} → newPage → goto: ${total(runs).toFixed(1)} ms`);
    console.log(`    ${phaseMedians(runs, ['launch', 'newPage', 'goto'])}`);
  }
  console.log(`  ratio burrow / raw launch: ${(b / total(raw)).toFixed(2)}`);
  console.log(`  ratio burrow / launch with the same flags: ${(b / total(flagged)).toFixed(2)}`);
  if (asRoot) console.log('  (no sandboxed baseline: Chromium refuses its own sandbox as root)');
  else
    console.log(
      `  ratio burrow / launch with the same flags, sandboxed: ${(b / total(sandboxed)).toFixed(2)}`,
    );
} finally {
  await server.close();
  site.close();
  rmSync(dataDir, { recursive: true, force: true });
}
