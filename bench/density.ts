/**
 * How many idle browser instances one machine holds. `node --import tsx bench/density.ts [N]`
 * (default 50) starts N sandboxed browser instances (4 at a time) on one server, lets them settle,
 * then measures while they all live:
 *
 *   - `GET /v1/instances` latency (200 calls; p50/p95), next to the same server answering it
 *     with no instance (measured first);
 *   - memory per idle instance: PSS of all its processes (shared pages split between the
 *     instances that map them), and the kernel's own count for its cgroup;
 *   - what the defaults allow (instance cap, memory limit) against this machine's memory.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { totalmem } from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startServer } from 'burrow-sandbox/server';
import { median, percentile, pssKiB, serverApi } from './stats.js';

const n = Number(process.argv[2] ?? 50);
if (!Number.isInteger(n) || n < 1) throw new Error('usage: bench/density.ts [N ≥ 1]');

const dataDir = mkdtempSync(join(tmpdir(), 'bdensity-'));
const server = await startServer({ port: 0, dataDir, maxInstances: n });
const api = serverApi(server);

const listLatency = async (): Promise<number[]> => {
  const xs: number[] = [];
  for (let i = 0; i < 200; i++) {
    const t0 = performance.now();
    await api('/v1/instances');
    xs.push(performance.now() - t0);
  }
  return xs;
};

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** PSS in KiB of every process of instance `id` (its cgroup's members). */
function pss(id: string): number {
  const procs = read(`/sys/fs/cgroup/pids/burrow/${process.pid}.${id}/cgroup.procs`) ?? '';
  return pssKiB(procs.split('\n').filter(Boolean));
}

/** The memory cgroup's own count (page cache included), in KiB. */
function cgroupMemory(id: string): number {
  const v = read(`/sys/fs/cgroup/memory/burrow/${process.pid}.${id}/memory.usage_in_bytes`);
  return v ? Number(v) / 1024 : NaN;
}

const ids: string[] = [];
try {
  const empty = await listLatency();
  const t0 = performance.now();
  for (let i = 0; i < n; i += 4) {
    const batch = Array.from({ length: Math.min(4, n - i) }, () =>
      api('/v1/start', { instance_type: 'browser' }).then((r) => (r as { id: string }).id),
    );
    ids.push(...(await Promise.all(batch)));
    process.stderr.write(`\rstarted ${ids.length}/${n}`);
  }
  const startAll = performance.now() - t0;
  process.stderr.write('\n');
  await sleep(5000); // start-up work settles
  const full = await listLatency();
  const per = ids.map(pss);
  const cg = ids.map(cgroupMemory);
  const mib = (kib: number) => `${(kib / 1024).toFixed(0)} MiB`;
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  console.log(
    `${n} idle browser instances on one server (${(totalmem() / 2 ** 30).toFixed(0)} GiB, started 4 at a time in ${(startAll / 1000).toFixed(1)} s)`,
  );
  console.log(
    `  GET /v1/instances  p50 ${ms(median(full))}  p95 ${ms(percentile(full, 95))}   (no instances: p50 ${ms(median(empty))}  p95 ${ms(percentile(empty, 95))})`,
  );
  console.log(
    `  memory per idle instance: PSS median ${mib(median(per))} (min ${mib(Math.min(...per))}, max ${mib(Math.max(...per))}); cgroup count median ${mib(median(cg))}`,
  );
  console.log(`  all ${n}: PSS ${mib(per.reduce((a, b) => a + b, 0))}`);
  const limit = 2 * 2 ** 30;
  console.log(
    `  defaults: --max-instances 8, --instance-memory 2g: 8 × 2 GiB = 16 GiB of limits; at the PSS measured here this machine holds about ${Math.floor((totalmem() * 0.8) / (median(per) * 1024))} idle instances in 80 % of its memory, ${Math.floor(totalmem() / limit)} if every one used its whole limit`,
  );
} finally {
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
