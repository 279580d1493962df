/** Starts a real burrow server on port 0 with a throwaway data dir, for tests. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer, type ServerOptions } from '../../src/server/index.js';

export interface TestServer extends RunningServer {
  /** `fetch` against the server with the API key set (override headers to drop it). */
  api(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
}

export async function testServer(options: ServerOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'burrow-test-'));
  const server = await startServer({
    port: 0,
    apiKey: 'test-key-0123456789',
    dataDir,
    // tests serve their pages on the host's loopback, as suites using burrow do
    isolation: { allowHostLoopback: true },
    ...options,
  });
  const api = (path: string, init: RequestInit & { json?: unknown } = {}) => {
    const { json, headers, ...rest } = init;
    return fetch(server.url + path, {
      method: json === undefined ? (rest.method ?? 'GET') : (rest.method ?? 'POST'),
      ...rest,
      headers: {
        'x-api-key': server.apiKey,
        ...(json !== undefined && { 'content-type': 'application/json' }),
        ...(headers as Record<string, string> | undefined),
      },
      ...(json !== undefined && { body: JSON.stringify(json) }),
    });
  };
  const close = async () => {
    await server.close();
    if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
  };
  return { ...server, api, close, [Symbol.asyncDispose]: close };
}

/** PIDs of live processes whose command line contains `needle` (never this process). */
export function pidsMatching(needle: string): number[] {
  try {
    return execFileSync('pgrep', ['-f', needle], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .filter((pid) => pid !== process.pid);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** Waits until `check` returns true, polling; throws with `what` after `ms`. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 10_000,
) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** `[width, height]` read from a PNG's IHDR chunk. */
export { pngSize } from '../../src/internal/png.js';

/**
 * Processes of instances this test process's servers started (or those of the server in process
 * `serverPid`, e.g. a child's embedded server), read from their cgroups (an instance's processes
 * cannot leave its cgroup; a cgroup is removed only once it is empty), plus every process whose
 * command line names `needle` when given.
 */
export function instanceProcesses(needle?: string, serverPid = process.pid): number[] {
  let out = '';
  try {
    out = execFileSync(
      'sh',
      ['-c', `cat /sys/fs/cgroup/pids/burrow/${serverPid}.*/cgroup.procs 2>/dev/null || true`],
      { encoding: 'utf8' },
    );
  } catch {
    /* no cgroups here */
  }
  const pids = out.split('\n').filter(Boolean).map(Number);
  return [...new Set([...pids, ...(needle ? pidsMatching(needle) : [])])];
}

/**
 * Every process of instance `id`: the members of its cgroup, and the host-side wrappers that name
 * it (`BURROW_INSTANCE=<id>` on bubblewrap's command line, pid 1 `burrow-init-<id>`).
 */
export function instancePids(id: string): number[] {
  let out = '';
  try {
    out = execFileSync(
      'sh',
      ['-c', `cat /sys/fs/cgroup/pids/burrow/*.${id}/cgroup.procs 2>/dev/null || true`],
      { encoding: 'utf8' },
    );
  } catch {
    /* no cgroups here */
  }
  const pids = out.split('\n').filter(Boolean).map(Number);
  return [...new Set([...pids, ...pidsMatching(id)])];
}

/** Whether the cgroup freezer holds instance `id` frozen. */
export function instanceFrozen(id: string): boolean {
  try {
    return (
      execFileSync('sh', ['-c', `cat /sys/fs/cgroup/freezer/burrow/*.${id}/freezer.state`], {
        encoding: 'utf8',
      }).trim() === 'FROZEN'
    );
  } catch {
    return false;
  }
}

/** The main Chromium process of instance `id` (its cgroup member that has no `--type=`). */
export function instanceChromium(id: string): number | undefined {
  return instancePids(id).find((pid) => {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return cmd.startsWith('/usr/lib/chromium/chromium\0') && !cmd.includes('--type=');
    } catch {
      return false;
    }
  });
}

/** Host paths of instance `id`'s disk (`home`, `tmp`), wherever this run's sandbox root is. */
export function instanceDisk(id: string): { home: string; tmp: string } {
  const disk = execFileSync('sh', ['-c', `ls -d /var/lib/burrow/sandboxes/*/${id}/disk`], {
    encoding: 'utf8',
  }).trim();
  return { home: join(disk, 'home'), tmp: join(disk, 'tmp') };
}

/** Start a browser instance on `server`; its id and `cdp_url`. */
export async function startBrowser(server: TestServer): Promise<{ id: string; cdpUrl: string }> {
  const res = await server.api('/v1/start', { json: { instance_type: 'browser' } });
  if (res.status !== 200) throw new Error(`start answered ${res.status}: ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  const url = await server.api(`/v1/instance/${id}/browser/cdp_url`);
  return { id, cdpUrl: ((await url.json()) as { cdp_url: string }).cdp_url };
}
