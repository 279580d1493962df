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
 * The two servers run side by side and each round times every variant once, one after the other
 * (raw launch, browser isolated and not, ubuntu isolated and not), so that a load changing during
 * the run weighs on all of them alike.
 *
 * `node --import tsx bench/isolation.ts [N]` (default N = 5), as root or as a normal user (the
 * privilege level the sandbox is built at is the server's: see bench/start-to-page.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
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

/** A server with the sandbox (`isolated`) or without it, and its API. */
async function openServer(isolated: boolean) {
  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-bench-iso-'));
  const server = await startServer({
    port: 0,
    dataDir,
    maxInstances: IDLE + 2,
    isolation: isolated ? { allowHostPorts: [port] } : { disable: true },
  });
  return {
    api: serverApi(server),
    close: async () => {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
type Api = ReturnType<typeof serverApi>;

/** `POST /v1/start` of a browser → `connectOverCDP` → `goto`; returns ms (stop not timed). */
async function browserRun(api: Api): Promise<number> {
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

/** `POST /v1/start` of an ubuntu instance → first bash output; returns ms (stop not timed). */
async function ubuntuRun(api: Api): Promise<number> {
  const t = performance.now();
  const u = await api('/v1/start', { instance_type: 'ubuntu' });
  const out = await api(`/v1/instance/${String(u.id)}/bash`, { command: 'echo ready' });
  if (!String(out.output).includes('ready')) throw new Error('no bash output');
  const elapsed = performance.now() - t;
  await api(`/v1/instance/${String(u.id)}/stop`, {});
  return elapsed;
}

/** playwright-core `chromium.launch` → `newPage` → `goto`; returns ms (close not timed). */
async function rawRun(): Promise<number> {
  const t = performance.now();
  const browser = await chromium.launch({ executablePath: '/usr/lib/chromium/chromium' });
  const page = await browser.newPage();
  await page.goto(pageUrl);
  const elapsed = performance.now() - t;
  await browser.close();
  return elapsed;
}

/** Median PSS in MiB of `IDLE` idle instances of each type. */
async function idleMemory(api: Api): Promise<Record<string, number>> {
  const mem: Record<string, number> = {};
  for (const type of ['browser', 'ubuntu'] as const) {
    const ids: string[] = [];
    for (let i = 0; i < IDLE; i++)
      ids.push(String((await api('/v1/start', { instance_type: type })).id));
    await sleep(3000); // let start-up work settle
    const per = ids.map((id) => pssKiB(instancePids(id)));
    mem[type] = median(per) / 1024;
    for (const id of ids) await api(`/v1/instance/${id}/stop`, {});
  }
  return mem;
}

// Both servers run side by side and every round measures each variant once, one after the
// other: a load that changes during the run (a shared machine) weighs on all of them alike.
const isolated = await openServer(true);
const plain = await openServer(false);
const times = { raw: [] as number[], iso: [] as number[], plain: [] as number[] };
const ubuntu = { iso: [] as number[], plain: [] as number[] };
let memory: { iso: Record<string, number>; plain: Record<string, number> };
try {
  for (let i = 0; i <= N; i++) {
    const round = [
      await rawRun(),
      await browserRun(isolated.api),
      await browserRun(plain.api),
      await ubuntuRun(isolated.api),
      await ubuntuRun(plain.api),
    ];
    if (i === 0) continue; // the first round warms up
    times.raw.push(round[0]!);
    times.iso.push(round[1]!);
    times.plain.push(round[2]!);
    ubuntu.iso.push(round[3]!);
    ubuntu.plain.push(round[4]!);
  }
  memory = { iso: await idleMemory(isolated.api), plain: await idleMemory(plain.api) };
} finally {
  await isolated.close();
  await plain.close();
  site.close();
}
const raw = median(times.raw);
const iso = { browser: median(times.iso), ubuntu: median(ubuntu.iso), mem: memory.iso };
const unisolated = {
  browser: median(times.plain),
  ubuntu: median(ubuntu.plain),
  mem: memory.plain,
};

const ms = (x: number) => `${x.toFixed(0)} ms`;
console.log(
  `isolation cost (median of ${N}, same run; load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')})`,
);
console.log(
  `browser start → page:   isolated ${ms(iso.browser)}   unisolated ${ms(unisolated.browser)}   ratio ${(iso.browser / unisolated.browser).toFixed(2)}×   raw chromium.launch → page ${ms(raw)} (isolated/raw ${(iso.browser / raw).toFixed(2)}×)`,
);
console.log(
  `ubuntu start → bash:    isolated ${ms(iso.ubuntu)}   unisolated ${ms(unisolated.ubuntu)}   ratio ${(iso.ubuntu / unisolated.ubuntu).toFixed(2)}×`,
);
console.log(
  `memory per idle browser instance (PSS): isolated ${iso.mem.browser!.toFixed(0)} MiB   unisolated ${unisolated.mem.browser!.toFixed(0)} MiB`,
);
console.log(
  `memory per idle ubuntu instance (PSS):  isolated ${iso.mem.ubuntu!.toFixed(0)} MiB   unisolated ${unisolated.mem.ubuntu!.toFixed(0)} MiB`,
);
