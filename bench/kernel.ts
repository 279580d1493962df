/**
 * Kernel latency: `code/execute` of `1+1` on a warm kernel (median of N) and the time to the
 * first result on a fresh instance, each next to a baseline measured in the same run:
 *
 * - spawn: `/usr/bin/python3 -c "print(1+1)"` as a fresh process (what a stateless runner pays);
 * - bare jupyter_client: a blocking client's `execute('1+1', reply=True)` round trip, in one
 *   Python process with no bridge, Node or HTTP (the floor for a stateful kernel).
 *
 * `node --import tsx bench/kernel.ts [N]` (default N = 50).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Supervised } from '../src/internal/process.js';
import { startServer } from '../src/server/index.js';
import { createKernels } from '../src/server/ubuntu/kernels/index.js';
import { median } from './stats.js';

const N = Number(process.argv[2] ?? 50);
const PY = '/usr/bin/python3';

const ms = (x: number) => `${x.toFixed(2)} ms`;
async function time<T>(f: () => Promise<T> | T): Promise<[number, T]> {
  const t = performance.now();
  const v = await f();
  return [performance.now() - t, v];
}

/** Baseline 1: a fresh interpreter per evaluation. */
async function spawnBaseline(): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < Math.min(N, 20); i++) {
    xs.push((await time(() => execFileSync(PY, ['-c', 'print(1+1)'])))[0]);
  }
  return median(xs);
}

/** Baseline 2: jupyter_client's own round trip, and its kernel start, measured in Python. */
function jupyterClientBaseline(home: string): { start: number; execute: number } {
  const script = `
import json, statistics, time
from jupyter_client.manager import KernelManager
t = time.perf_counter()
km = KernelManager(kernel_name="python3"); km.start_kernel()
kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=60)
kc.execute("1+1", reply=True, timeout=60)
start = (time.perf_counter() - t) * 1000
xs = []
for _ in range(${N}):
    t = time.perf_counter()
    kc.execute("1+1", reply=True, timeout=60)
    xs.append((time.perf_counter() - t) * 1000)
kc.stop_channels(); km.shutdown_kernel(now=True)
print(json.dumps({"start": start, "execute": statistics.median(xs)}))
`;
  const out = execFileSync(PY, ['-c', script], {
    env: { PATH: '/usr/bin:/bin', HOME: home, PYDEVD_DISABLE_FILE_VALIDATION: '1' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return JSON.parse(out.trim().split('\n').at(-1)!) as { start: number; execute: number };
}

/** The kernel layer alone (bridge + Node, no sandbox, no HTTP). */
async function layer(home: string): Promise<{ first: number; warm: number }> {
  const k = createKernels({
    spawn: (argv, o) =>
      new Supervised(argv[0]!, argv.slice(1), { env: o.env, stdio: o.stdio, cwd: o.cwd }),
    sandboxHome: home,
    env: () => ({ PATH: '/usr/bin:/bin', HOME: home }),
  });
  try {
    const [first] = await time(() => k.execute('1+1', 'python3', 60));
    const xs: number[] = [];
    for (let i = 0; i < N; i++) xs.push((await time(() => k.execute('1+1', 'python3', 60)))[0]);
    return { first, warm: median(xs) };
  } finally {
    await k.stop();
  }
}

/** `POST path` with `body` on `server`, the JSON answer; throws unless 200. */
function poster(server: { url: string; apiKey: string }) {
  return async (path: string, body: unknown): Promise<Record<string, unknown>> => {
    const res = await fetch(server.url + path, {
      method: 'POST',
      headers: { 'x-api-key': server.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/** Through HTTP on a real ubuntu instance (sandbox, display …): the user-visible figures. */
async function http(dataDir: string): Promise<{ start: number; first: number; warm: number }> {
  const server = await startServer({ port: 0, apiKey: 'bench-key-0123456789', dataDir });
  const call = poster(server);
  try {
    const [start, inst] = await time(() => call('/v1/start', { instance_type: 'ubuntu' }));
    const exec = `/v1/instance/${String(inst.id)}/code/execute`;
    const [first] = await time(() => call(exec, { code: '1+1' }));
    const xs: number[] = [];
    for (let i = 0; i < N; i++) xs.push((await time(() => call(exec, { code: '1+1' })))[0]);
    return { start, first, warm: median(xs) };
  } finally {
    await server.close();
  }
}

/**
 * The same from a warm pool (`--warm-pool ubuntu=1`): start → first bash output, and start →
 * first `code/execute` result, 5 of each (the pool refilled before each, untimed).
 */
async function pooled(dataDir: string): Promise<{ bash: number; code: number }> {
  const server = await startServer({
    port: 0,
    apiKey: 'bench-key-0123456789',
    dataDir,
    warmPool: { ubuntu: 1 },
  });
  const call = poster(server);
  const first = async (path: string, body: unknown): Promise<number> => {
    await server.warmPool.ready();
    await sleep(300); // the last instance's teardown
    const [t, inst] = await time(async () => {
      const inst = await call('/v1/start', { instance_type: 'ubuntu' });
      await call(`/v1/instance/${String(inst.id)}/${path}`, body);
      return inst;
    });
    await call(`/v1/instance/${String(inst.id)}/stop`, {});
    return t;
  };
  try {
    const bash: number[] = [];
    const code: number[] = [];
    for (let i = 0; i < 5; i++) {
      bash.push(await first('bash', { command: 'echo ready' }));
      code.push(await first('code/execute', { code: '1+1' }));
    }
    return { bash: median(bash), code: median(code) };
  } finally {
    await server.close();
  }
}

const home = mkdtempSync(join(tmpdir(), 'burrow-bench-kernel-'));
try {
  const spawnMs = await spawnBaseline();
  const jc = jupyterClientBaseline(home);
  const l = await layer(home);
  let h: { start: number; first: number; warm: number } | string;
  try {
    h = await http(join(home, 'data'));
  } catch (err) {
    h = (err as Error).message;
  }
  const p = await pooled(join(home, 'pooled'));
  console.log(`kernel bench (N = ${N}, medians)`);
  console.log('baselines');
  console.log(`  python3 -c "print(1+1)" spawn          ${ms(spawnMs)}`);
  console.log(`  bare jupyter_client execute 1+1        ${ms(jc.execute)}`);
  console.log(`  bare jupyter_client kernel start+1st   ${ms(jc.start)}`);
  console.log('kernel layer (bridge + Node, no sandbox)');
  console.log(
    `  warm code/execute 1+1                  ${ms(l.warm)}  (${(l.warm / jc.execute).toFixed(1)}× bare jupyter_client, ${(spawnMs / l.warm).toFixed(1)}× faster than a spawn)`,
  );
  console.log(
    `  first result, cold bridge + kernel     ${ms(l.first)}  (${(l.first / jc.start).toFixed(2)}× bare start)`,
  );
  if (typeof h === 'string') {
    console.log(`HTTP on an ubuntu instance: unavailable (${h})`);
  } else {
    console.log('HTTP on a fresh ubuntu instance');
    console.log(`  POST /v1/start                         ${ms(h.start)}`);
    console.log(`  first code/execute (bridge + kernel)   ${ms(h.first)}`);
    console.log(`  start + first result                   ${ms(h.start + h.first)}`);
    console.log(
      `  warm code/execute 1+1                  ${ms(h.warm)}  (${(h.warm / jc.execute).toFixed(1)}× bare jupyter_client)`,
    );
  }
  console.log('HTTP on an ubuntu instance from the warm pool (median of 5)');
  console.log(`  start → first bash output              ${ms(p.bash)}`);
  console.log(
    `  start → first code/execute result      ${ms(p.code)}  (${(p.code / jc.start).toFixed(2)}× bare jupyter_client start+1st)`,
  );
} finally {
  rmSync(home, { recursive: true, force: true });
}
