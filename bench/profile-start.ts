/**
 * Start from a saved profile: a browser instance started with a profile saved by an earlier one
 * (`profile: { name }`), through `cdp_url`, `connectOverCDP` and a `goto` of a page the profile
 * has visited, next to the same with no profile (what the profile costs on top) and to the local
 * equivalent measured in the same run: playwright-core `chromium.launchPersistentContext` on a
 * copy of a profile its own Chromium made by visiting the same pages (`goto` on its first page).
 *
 * Both profiles come from visiting 20 local pages that each set a cookie and a localStorage item
 * and send a cacheable body, so they hold cookies, storage and an HTTP cache. Untimed: the
 * instance's stop and the profile's release (a start waits for its profile to be free), the
 * local copy of the profile and `close()`. Runs take turns after one untimed warm-up of each, each
 * after the server's stocks are full again. The baseline's Chromium gets burrow's flags, as in
 * bench/start-to-page.ts's same-flags baseline.
 *
 * `node --import tsx bench/profile-start.ts [N]` (default N = 8). `BURROW_LOG_LEVEL=debug` logs
 * each start's stages, among them `profile.seed` (writing the profile onto the instance's disk).
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { BASE_FLAGS } from '../src/server/chromium/index.js';
import { startServer } from '../src/server/index.js';
import { eventually } from '../test/helpers/server.js';
import { median, phaseMedians, serverApi, startToPage, timed, type Run } from './stats.js';

const N = Number(process.argv[2] ?? 8);
if (!Number.isInteger(N) || N < 1) throw new Error('usage: bench/profile-start.ts [N ≥ 1]');
const CHROMIUM = '/usr/lib/chromium/chromium';
const PAGES = 20;

const site = createServer((req, res) => {
  res.writeHead(200, {
    'content-type': 'text/html',
    'cache-control': 'max-age=3600',
    'set-cookie': `visit${req.url!.replace(/\W/g, '')}=1; Max-Age=86400; Path=/`,
  });
  res.end(
    `<!doctype html><title>bench</title>` +
      `<script>localStorage.setItem(location.pathname, 'x'.repeat(2000))</script>` +
      '<p>hello</p>'.repeat(500),
  );
});
await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
const port = (site.address() as AddressInfo).port;
const page = (i: number) => `http://127.0.0.1:${port}/page${i}`;

const work = mkdtempSync(join(tmpdir(), 'burrow-bench-profile-'));
const server = await startServer({
  port: 0,
  dataDir: join(work, 'data'),
  isolation: { allowHostPorts: [port] },
});
const api = serverApi(server);
const localProfile = join(work, 'local-profile');

/** Wait until no instance holds profile `name` (its stop saves and releases it). */
async function released(name: string): Promise<void> {
  await eventually(
    async () => {
      const rows = (await api('/v1/profiles')) as unknown as {
        name: string;
        in_use_by: string | null;
      }[];
      return rows.find((p) => p.name === name)?.in_use_by === null;
    },
    `profile ${name} to be released`,
    60_000,
  );
}

/** burrow: start (with the profile, or none) → cdp_url → connectOverCDP → goto. */
async function viaBurrow(profile: boolean): Promise<Run> {
  const body = { instance_type: 'browser', ...(profile && { profile: { name: 'bench' } }) };
  const { run, id } = await startToPage(api, body, page(0));
  await api(`/v1/instance/${id}/stop`, {});
  if (profile) await released('bench');
  return run;
}

/** Baseline: a copy of the local profile, launchPersistentContext → goto on its first page. */
async function viaLaunch(): Promise<Run> {
  const dir = join(work, `copy-${performance.now().toFixed(0)}`);
  cpSync(localProfile, dir, { recursive: true });
  let context: Awaited<ReturnType<typeof chromium.launchPersistentContext>> | undefined;
  const run = await timed([
    async () =>
      (context = await chromium.launchPersistentContext(dir, {
        executablePath: CHROMIUM,
        args: [...BASE_FLAGS],
      })),
    async () => (context!.pages()[0] ?? (await context!.newPage())).goto(page(0)),
  ]);
  await context!.close();
  rmSync(dir, { recursive: true, force: true });
  return run;
}

const quiet = () => server.sandboxStock.ready();

try {
  // the two profiles, made the same way
  const made = await api('/v1/start', {
    instance_type: 'browser',
    profile: { name: 'bench', save_changes: true },
  });
  {
    const { cdp_url } = await api(`/v1/instance/${String(made.id)}/browser/cdp_url`);
    const browser = await chromium.connectOverCDP(String(cdp_url));
    const tab = browser.contexts()[0]!.pages()[0]!;
    for (let i = 0; i < PAGES; i++) await tab.goto(page(i));
    await browser.close();
    await api(`/v1/instance/${String(made.id)}/stop`, {});
    await released('bench');
  }
  {
    const context = await chromium.launchPersistentContext(localProfile, {
      executablePath: CHROMIUM,
      args: [...BASE_FLAGS],
    });
    const tab = context.pages()[0] ?? (await context.newPage());
    for (let i = 0; i < PAGES; i++) await tab.goto(page(i));
    await context.close();
  }

  await quiet();
  await viaBurrow(true);
  await quiet();
  await viaBurrow(false);
  await viaLaunch();
  const withProfile: Run[] = [];
  const plain: Run[] = [];
  const local: Run[] = [];
  for (let i = 0; i < N; i++) {
    await quiet();
    withProfile.push(await viaBurrow(true));
    await quiet();
    plain.push(await viaBurrow(false));
    await quiet();
    local.push(await viaLaunch());
  }
  const [p, b, l] = [withProfile, plain, local].map((runs) => median(runs.map((r) => r.total))) as [
    number,
    number,
    number,
  ];
  const user = process.getuid?.() === 0 ? 'root' : 'a normal user';
  console.log(`start from a saved profile → page, median of ${N} (as ${user}):`);
  console.log(`  burrow, with the saved profile: ${p.toFixed(1)} ms`);
  console.log(`    ${phaseMedians(withProfile, ['start', 'cdp_url', 'connectOverCDP', 'goto'])}`);
  console.log(
    `  burrow, no profile: ${b.toFixed(1)} ms (the profile costs ${(p - b).toFixed(1)} ms)`,
  );
  console.log(
    `  playwright-core launchPersistentContext on a profile copy → goto: ${l.toFixed(1)} ms`,
  );
  console.log(`    ${phaseMedians(local, ['launchPersistentContext', 'goto'])}`);
  console.log(`  ratio burrow with the profile / local persistent launch: ${(p / l).toFixed(2)}`);
} finally {
  await server.close();
  site.close();
  rmSync(work, { recursive: true, force: true });
}
