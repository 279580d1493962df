/**
 * The cost of isolation, measured in one run on the same code: every figure with the sandbox
 * (own uid, namespaces, seccomp, cgroups, disk image, egress proxy) and without it
 * (`disableIsolation`, plain child processes as before the sandbox layer), plus a raw
 * playwright-core `chromium.launch` as the outside baseline.
 *
 * - browser: `POST /v1/start` → `connectOverCDP` → `goto` of a loopback page (through the egress)
 * - ubuntu: `POST /v1/start` → first bash output
 * - memory per idle instance (PSS of every process of the instance), both types
 *
 * `node --import tsx bench/isolation.ts [N]` (default N = 5).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { startServer } from '../src/server/index.js';
import { median, pssKiB, serverApi } from './stats.js';

const N = Number(process.argv[2] ?? 5);
const IDLE = 4;

const site = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<!doctype html><title>bench</title><p>hello</p>');
});
await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
const port = (site.address() as AddressInfo).port;
const pageUrl = `http://127.0.0.1:${port}/`;

/** Every process of instance `id`: the processes whose command line names it, and their trees. */
function instancePids(id: string): number[] {
  let out = '';
  try {
    out = execFileSync(
      'sh',
      ['-c', `cat /sys/fs/cgroup/pids/burrow/*.${id}/cgroup.procs 2>/dev/null`],
      {
        encoding: 'utf8',
      },
    );
  } catch {
    /* no cgroup: unisolated */
  }
  if (out.trim()) return out.split('\n').filter(Boolean).map(Number);
  const roots = execFileSync('sh', ['-c', `pgrep -f '${id}' || true`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
  const all = new Set<number>();
  for (const r of roots) {
    all.add(Number(r));
    const tree = execFileSync(
      'sh',
      ['-c', `pstree -pT ${r} | grep -o '([0-9]*)' | tr -d '()' || true`],
      {
        encoding: 'utf8',
      },
    );
    for (const p of tree.split('\n').filter(Boolean)) all.add(Number(p));
  }
  return [...all];
}

async function measure(isolated: boolean) {
  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-bench-iso-'));
  const server = await startServer({
    port: 0,
    dataDir,
    maxInstances: IDLE + 2,
    isolation: isolated ? { allowHostPorts: [port] } : { disable: true },
  });
  const api = serverApi(server);
  const browserTimes: number[] = [];
  const ubuntuTimes: number[] = [];
  try {
    for (let i = 0; i <= N; i++) {
      let t = performance.now();
      const { id } = await api('/v1/start', { instance_type: 'browser' });
      const { cdp_url } = await api(`/v1/instance/${String(id)}/browser/cdp_url`);
      const browser = await chromium.connectOverCDP(String(cdp_url));
      await browser.contexts()[0]!.pages()[0]!.goto(pageUrl);
      if (i > 0) browserTimes.push(performance.now() - t); // the first run warms up
      await browser.close();
      await api(`/v1/instance/${String(id)}/stop`, {});

      t = performance.now();
      const u = await api('/v1/start', { instance_type: 'ubuntu' });
      const out = await api(`/v1/instance/${String(u.id)}/bash`, { command: 'echo ready' });
      if (!String(out.output).includes('ready')) throw new Error('no bash output');
      if (i > 0) ubuntuTimes.push(performance.now() - t);
      await api(`/v1/instance/${String(u.id)}/stop`, {});
    }
    const mem: Record<string, number> = {};
    for (const type of ['browser', 'ubuntu'] as const) {
      const ids: string[] = [];
      for (let i = 0; i < IDLE; i++)
        ids.push(String((await api('/v1/start', { instance_type: type })).id));
      await new Promise((r) => setTimeout(r, 3000)); // let start-up work settle
      const per = ids.map((id) => pssKiB(instancePids(id)));
      mem[type] = median(per) / 1024;
      for (const id of ids) await api(`/v1/instance/${id}/stop`, {});
    }
    return { browser: median(browserTimes), ubuntu: median(ubuntuTimes), mem };
  } finally {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function rawLaunch(): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i <= N; i++) {
    const t = performance.now();
    const browser = await chromium.launch({ executablePath: '/usr/lib/chromium/chromium' });
    const page = await browser.newPage();
    await page.goto(pageUrl);
    if (i > 0) times.push(performance.now() - t);
    await browser.close();
  }
  return median(times);
}

const raw = await rawLaunch();
const iso = await measure(true);
const plain = await measure(false);
site.close();

const ms = (x: number) => `${x.toFixed(0)} ms`;
console.log(
  `isolation cost (median of ${N}, same run; load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')})`,
);
console.log(
  `browser start → page:   isolated ${ms(iso.browser)}   unisolated ${ms(plain.browser)}   ratio ${(iso.browser / plain.browser).toFixed(2)}×   raw chromium.launch → page ${ms(raw)} (isolated/raw ${(iso.browser / raw).toFixed(2)}×)`,
);
console.log(
  `ubuntu start → bash:    isolated ${ms(iso.ubuntu)}   unisolated ${ms(plain.ubuntu)}   ratio ${(iso.ubuntu / plain.ubuntu).toFixed(2)}×`,
);
console.log(
  `memory per idle browser instance (PSS): isolated ${iso.mem.browser!.toFixed(0)} MiB   unisolated ${plain.mem.browser!.toFixed(0)} MiB`,
);
console.log(
  `memory per idle ubuntu instance (PSS):  isolated ${iso.mem.ubuntu!.toFixed(0)} MiB   unisolated ${plain.mem.ubuntu!.toFixed(0)} MiB`,
);
