/**
 * A server SIGKILLed with instances running, one of them paused: nothing of it may outlive the
 * next server's start. Its paused instance's processes are frozen (a frozen process cannot act on
 * SIGKILL, and its pid 1 holds the rest), so they outlive the server; its instances' disks stay
 * mounted under its sandbox root; its cgroups stay, in every controller. The next server, before
 * it serves, kills what is left, unmounts and removes the sandbox root, and removes the cgroups.
 *
 * A server can also die between removing an instance's cgroup in one controller and in the next
 * (v1 has one directory per controller): an empty memory cgroup of a dead run, with no pids
 * cgroup of the same name beside it, is removed as well.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { until } from '../../../src/internal/deadline.js';
import { eventually, instanceFrozen, testServer, type TestServer } from '../../helpers/server.js';

const root = resolve(import.meta.dirname, '../../..');
const SANDBOXES = '/var/lib/burrow/sandboxes';
const KEY = 'sweep-test-key-0123456789';
const V1 = existsSync('/sys/fs/cgroup/memory/cgroup.procs');

const dirs: string[] = [];
let child: ChildProcess | undefined;
let next: TestServer | undefined;
afterAll(async () => {
  child?.kill('SIGKILL');
  await next?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Every instance cgroup directory of server process `pid`, in every controller. */
function cgroupsOf(pid: number): string[] {
  const out = execFileSync(
    'sh',
    [
      '-c',
      `ls -d /sys/fs/cgroup/*/burrow/${pid}.* /sys/fs/cgroup/*/*/burrow/${pid}.* /sys/fs/cgroup/burrow/${pid}.* 2>/dev/null; true`,
    ],
    { encoding: 'utf8' },
  );
  const own = memoryParent();
  const extra =
    own && existsSync(own)
      ? readdirSync(own)
          .filter((n) => n.startsWith(`${pid}.`))
          .map((n) => join(own, n))
      : [];
  return [...new Set([...out.split('\n').filter(Boolean), ...extra])];
}

/** This process's v1 memory cgroup's instance parent (the server's is the same: it is our child). */
function memoryParent(): string | undefined {
  const line = readFileSync('/proc/self/cgroup', 'utf8')
    .split('\n')
    .find((l) => /^\d+:memory:/.test(l));
  return line ? join('/sys/fs/cgroup/memory', line.split(':')[2]!, 'burrow') : undefined;
}

/** Processes in the cgroups `dirs`. */
function processesIn(dirs: string[]): number[] {
  return dirs.flatMap((d) => {
    try {
      return readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

async function api(url: string, path: string, json?: unknown) {
  return fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    body: JSON.stringify(json ?? {}),
  });
}

describe('a server started after one that was SIGKILLed', () => {
  it('kills, unmounts and removes what the dead run left: paused instances, disks, cgroups', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'burrow-killed-'));
    dirs.push(dataDir);
    child = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0', '--data-dir', dataDir],
      {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, BURROW_API_KEY: KEY },
      },
    );
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(() => /listening on http:\/\/127\.0\.0\.1:\d+/.test(out), 'listening', 30_000);
    const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)![1]!;
    const pid = child.pid!;

    const ids: string[] = [];
    for (const type of ['ubuntu', 'ubuntu']) {
      const res = await api(url, '/v1/start', { instance_type: type });
      expect(res.status, await res.clone().text()).toBe(200);
      ids.push(((await res.json()) as { id: string }).id);
    }
    // a process of its own in each, then one instance paused
    for (const id of ids) {
      const res = await api(url, `/v1/instance/${id}/bash`, {
        command: 'setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo started',
      });
      expect(await res.text()).toContain('started');
    }
    expect((await api(url, `/v1/instance/${ids[0]}/pause`)).status).toBe(200);
    expect(instanceFrozen(ids[0]!)).toBe(true);

    const runs = readdirSync(SANDBOXES).filter((r) => r.startsWith(`run-${pid}-`));
    expect(runs).toHaveLength(1);
    const runRoot = join(SANDBOXES, runs[0]!);
    const cgroups = cgroupsOf(pid);
    expect(cgroups.length).toBeGreaterThan(0);

    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    child = undefined;
    // what the dead run left: the paused instance's processes, its sandbox root, its cgroups
    const survivors = processesIn(cgroups);
    expect(survivors.length, 'frozen processes outlive the server').toBeGreaterThan(0);
    expect(existsSync(runRoot)).toBe(true);

    // and a run that died halfway through removing an instance's cgroups: memory left, pids gone
    const leftover = V1 ? join(memoryParent()!, `${pid}.inst_halfremoved`) : undefined;
    if (leftover) mkdirSync(leftover);

    next = await testServer();
    expect(processesIn(cgroups)).toEqual([]);
    expect(
      await until(() => survivors.every((p) => !existsSync(`/proc/${p}`)), {
        timeoutMs: 5_000,
        intervalMs: 50,
      }),
      "the dead run's processes killed",
    ).toBe(true);
    expect(cgroups.filter((d) => existsSync(d))).toEqual([]);
    expect(cgroupsOf(pid)).toEqual([]);
    expect(existsSync(runRoot)).toBe(false);
    expect(readFileSync('/proc/self/mounts', 'utf8')).not.toContain(runRoot);
    if (leftover) expect(existsSync(leftover)).toBe(false);
  }, 180_000);
});
